"""Device array views and host<->device transfers.

A :class:`DArray` is a strided view (shape, byte strides, byte offset) into an
OpenCL buffer; it is the value the VM keeps for every device variable. Views of a
variable (DimShuffle, Subtensor, Reshape of contiguous data) share their ``root``,
so when the root's buffer is swapped (a new zero-copy input, a re-allocated shared
variable) every view follows without re-planning.
"""
import numpy as np


class Root(object):
    """The owner of one buffer; views keep a reference to it, never to the buffer.

    A root may also be a region of a larger buffer (a frame's slab, see
    ``simulator.gather_into_slab``): ``buf`` is then the slab and ``origin`` the byte where
    the region starts. OpenCL sub-buffers are not used for this: NVIDIA's driver charges
    every launch that uses a parent buffer ~50 ns per live sub-buffer of it. Whatever
    hands a buffer to OpenCL adds ``origin`` (``DArray.boff``)."""
    __slots__ = ('_buf', 'nbytes', 'arena', '_origin', 'slab', '__weakref__')

    def __init__(self, buf, nbytes, arena=False):
        self._buf = buf
        self.nbytes = nbytes
        self.arena = arena    # owned by a frame: reusable once its values are dead
        self._origin = 0      # byte offset of this root's region in ``buf``
        self.slab = False     # True while ``buf`` is a slab shared with other roots

    # (every change of a root's place is counted in ``moves``: what bound roots to kernels
    # checks that they stay only when it moved, ``runtime.planner.BatchedPlan.valid``)
    @property
    def buf(self):
        return self._buf

    @buf.setter
    def buf(self, buf):
        if buf is not self._buf:
            moves.n += 1
            self._buf = buf

    @property
    def origin(self):
        return self._origin

    @origin.setter
    def origin(self, origin):
        if origin != self._origin:
            moves.n += 1
            self._origin = origin

    def move(self, buf, origin=0, slab=False):
        self.buf = buf
        self.origin = origin
        self.slab = slab


class _Moves(object):
    """How many times any :class:`Root` changed its buffer or origin (``n``)."""
    __slots__ = ('n',)

    def __init__(self):
        self.n = 0


moves = _Moves()


class Shaped(object):
    """What a value with ``shape`` and ``dtype`` answers (DArray, ops.fusion.Fused)."""

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def itemsize(self):
        return self.dtype.itemsize


class DArray(Shaped):
    __slots__ = ('root', 'offset', 'shape', 'strides', 'dtype')

    def __init__(self, root, shape, dtype, strides=None, offset=0):
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        if strides is None:
            strides = c_strides(shape, dtype.itemsize)
        self.root = root
        self.offset = int(offset)
        self.shape = shape
        self.strides = tuple(int(s) for s in strides)
        self.dtype = dtype

    @property
    def buf(self):
        return self.root.buf

    @property
    def boff(self):
        """Byte offset of the first element in ``buf`` (the root's origin + ``offset``)."""
        return self.root.origin + self.offset

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def is_c_contiguous(self):
        return self.size <= 1 or self.strides == c_strides(self.shape, self.dtype.itemsize) \
            or _contig_ignoring_unit_dims(self.shape, self.strides, self.dtype.itemsize)

    def view(self, shape, strides, offset=None, dtype=None):
        return DArray(self.root, shape, dtype or self.dtype, strides,
                      self.offset if offset is None else offset)

    def __repr__(self):
        return 'DArray(%s, %s, strides=%s, offset=%d)' % (self.shape, self.dtype, self.strides, self.offset)


def c_strides(shape, itemsize):
    strides = []
    acc = itemsize
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(strides))


def _contig_ignoring_unit_dims(shape, strides, itemsize):
    acc = itemsize
    for s, st in zip(reversed(shape), reversed(strides)):
        if s == 1:
            continue
        if st != acc:
            return False
        acc *= s
    return True


def span(darr):
    """(lowest byte, one past the highest byte) a view touches, relative to its root."""
    if darr.size == 0:
        return darr.offset, darr.offset
    lo = hi = darr.offset
    for s, st in zip(darr.shape, darr.strides):
        if st < 0:
            lo += (s - 1) * st
        else:
            hi += (s - 1) * st
    return lo, hi + darr.itemsize


#: views of up to this many elements are compared element by element (element_indices)
ELEMENTS_MAX = 1 << 18


def element_indices(d):
    """The positions of view ``d``'s elements in its buffer, in units of its itemsize from
    the buffer's start (its root's origin included), flat; None where an offset or a stride
    is not a multiple of the itemsize."""
    size = d.itemsize
    if d.boff % size or any(st % size for st in d.strides):
        return None
    idx = np.array(d.boff // size, np.int64)
    for k, (n, st) in enumerate(zip(d.shape, d.strides)):
        shape = [1] * d.ndim
        shape[k] = n
        idx = idx + (np.arange(n, dtype=np.int64) * (st // size)).reshape(shape)
    return idx.ravel()


def disjoint(a, b):
    """Whether views ``a`` and ``b`` of one buffer, whose spans overlap, provably touch no
    common byte: elements of one size, none of them shared (column slices of one matrix,
    the gates of an LSTM's gradient). Compared where both have at most ELEMENTS_MAX
    elements; False where not proven."""
    if a.itemsize != b.itemsize or a.size > ELEMENTS_MAX or b.size > ELEMENTS_MAX:
        return False
    ia, ib = element_indices(a), element_indices(b)
    if ia is None or ib is None:
        return False
    return not np.intersect1d(ia, ib).size


def layout(d):
    """A key equal for two views exactly when they are the same elements of one buffer in
    the same order and type (root, offset, shape, strides, dtype): where an elementwise
    kernel's work-item ``gi`` touches the same element through either."""
    return (id(d.root), d.offset, d.shape, d.strides, d.dtype.name)


def fills_root(d):
    """Whether ``d`` is all its root holds: a frame intermediate (an arena root) of its size,
    C-contiguous from its start, not empty (a loop may point such a root elsewhere without
    moving any other value: ``runtime/probe_places.py``, ``runtime/state_swap.py``,
    ``ops/scan_bind.py``)."""
    root = d.root
    return bool(getattr(root, 'arena', False) and not d.offset and d.nbytes and
                root.nbytes == d.nbytes and d.is_c_contiguous())


def overlaps(a, b):
    if a.root is not b.root or a.size == 0 or b.size == 0:
        return False
    alo, ahi = span(a)
    blo, bhi = span(b)
    return alo < bhi and blo < ahi


def to_pyopencl(darr, queue):
    """Wrap a DArray as a pyopencl.array.Array sharing its buffer (no copy)."""
    import pyopencl.array as cla
    return cla.Array(queue, darr.shape, darr.dtype, strides=darr.strides,
                     data=darr.root.buf, offset=darr.boff)


_fast_array = []     # [bool] once known: pyopencl's Array has the ``_fast`` constructor


def _has_fast_array():
    if not _fast_array:
        import inspect
        import pyopencl.array as cla
        try:
            _fast_array.append('_fast' in inspect.signature(cla.Array.__init__).parameters)
        except (TypeError, ValueError):  # pragma: no cover
            _fast_array.append(False)
    return _fast_array[0]


def array_factory(queue, shape, dtype, strides=None):
    """``make(buf, offset=0)``: a pyopencl Array of this layout over ``buf``, built without
    pyopencl's per-call validation (the layout is checked once, here). The VM hands device
    outputs back through it on every call.

    Each array is a copy of a template's attributes (one constructed here by pyopencl's
    ``_fast`` constructor) with its own buffer, offset and events list: ~0.2 us against
    ~0.6 us for the ``_fast`` constructor on the 2-core CPU. Where the copy would not be
    what the constructor makes (an Array class with ``__slots__`` or ``__new__``, other
    attributes), the ``_fast`` constructor is used on every call."""
    import pyopencl.array as cla
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    strides = tuple(int(s) for s in (c_strides(shape, dtype.itemsize) if strides is None
                                     else strides))
    size = 1
    for s in shape:
        size *= s
    context = queue.context
    Array = cla.Array

    if not _has_fast_array():  # pragma: no cover
        def make(buf, offset=0):
            return Array(queue, shape, dtype, data=buf, offset=offset, strides=strides)
        return make

    def make_fast(buf, offset=0):
        return Array(None, shape, dtype, data=buf, offset=offset, strides=strides,
                     _fast=True, _size=size, _context=context, _queue=queue)

    template = _template_attrs(make_fast)
    if template is None:  # pragma: no cover
        return make_fast
    new = object.__new__

    def make(buf, offset=0):
        a = new(Array)
        d = template.copy()
        d['base_data'] = buf
        d['offset'] = offset
        d['events'] = []          # never shared: add_event appends to it
        a.__dict__ = d
        return a
    return make


class _Placeholder(object):
    """Stands for a buffer while a template array is built (no allocation)."""


def _template_attrs(make_fast):
    """The attributes ``make_fast`` gives every array except buffer, offset and events, or
    None when an array is not a plain object whose ``__dict__`` holds all its state (then
    copying it would not make the same array)."""
    import pyopencl.array as cla
    Array = cla.Array
    if '__slots__' in vars(Array) or Array.__new__ is not object.__new__:
        return None
    try:
        proto = make_fast(_Placeholder(), 0)
    except Exception:  # pragma: no cover
        return None
    d = getattr(proto, '__dict__', None)
    if type(proto) is not Array or d is None or \
            not {'base_data', 'offset', 'events'} <= set(d) or d['events'] != []:
        return None
    template = dict(d)
    for name in ('base_data', 'offset', 'events'):
        del template[name]
    if any(isinstance(v, (list, dict, set)) for v in template.values()):
        return None           # a mutable attribute would be shared between arrays
    return template


_device_array_class = []     # [pyopencl.array.Array, or None without pyopencl] once known


def device_array_class():
    """``pyopencl.array.Array`` (None without pyopencl), imported once."""
    if not _device_array_class:
        try:
            import pyopencl.array as cla
            _device_array_class.append(cla.Array)
        except ImportError:  # pragma: no cover
            _device_array_class.append(None)
    return _device_array_class[0]


def is_device_array(value):
    # called on every call for each device input (frame key, input buffers): the class is
    # looked up once, not imported per call
    cls = _device_array_class[0] if _device_array_class else device_array_class()
    return cls is not None and isinstance(value, cls)


def from_pyopencl(arr):
    """View a pyopencl.array.Array as a DArray (no copy). An empty array has no buffer
    (pyopencl leaves ``base_data`` None): it gets a one-byte placeholder, never read."""
    buf = arr.base_data
    if buf is None:
        import pyopencl as cl
        buf = cl.Buffer(arr.context, cl.mem_flags.READ_WRITE, 1)
        return DArray(Root(buf, 1), arr.shape, arr.dtype, arr.strides, 0)
    nbytes = buf.int_size if hasattr(buf, 'int_size') else buf.size
    return DArray(Root(buf, nbytes), arr.shape, arr.dtype, arr.strides, arr.offset)
