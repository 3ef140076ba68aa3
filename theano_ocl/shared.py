"""Shared variables resident on a device, and the host view kept coherent.

A shared variable read or updated by an OCL function gets a :class:`Resident`:
its device copy lives in one buffer that stays on the device between calls;
updates are written there. The host cell (``SharedVariable.container.storage``)
is left stale until someone looks at it:

- ``get_value()`` / ``container.value`` (any borrow), pickling and ``deepcopy`` of
  the container, and a call of a non-OCL Theano function that has it as an input
  first download the device value into the host cell;
- ``set_value()`` (or any write of the container) marks the host value as the newer
  one; the next OCL call uploads it (into the same buffer when the size allows). A large
  value ``set_value`` copied (no ``borrow``) that fits its place is sent there at once,
  without waiting (:meth:`Resident.send_now`).

A host write that bypasses the container (``storage[0] = x``, as Scan does) is
seen too: the VM compares the cell's object with the one it last synchronised.

A frame's steady-state guard (``runtime.frames.make_guard``) checks its residents as
arrays (:class:`ResidentTable`): thousands of shared variables of a simulator cost ~10 us
each when checked and uploaded one by one on NVIDIA's host path. What it relies on:
every resident whose host value becomes the newer one goes through
:meth:`Resident.host_set` (counted in ``tally.writes``), and every change of where a
device copy lives (another buffer, shape, dtype or device; a slab gathering it) is
counted in ``tally.moves``.
"""
import itertools
import operator

import numpy as np

from .darray import DArray, Root
from .runtime import commit, uploads

_residents = {}          # id(storage cell) -> Resident

#: ``Resident.host_obj`` of a resident whose host value is newer than its device copy
#: (set on the host): never a cell's value
HOST_NEWER = type('HostNewer', (), {'__repr__': lambda self: 'HOST_NEWER'})()


class Tally(object):
    """Events that may end residents' steady state, counted over all of them: ``writes``,
    changes of a resident's ``host_obj`` (a host value set, uploaded, synced, marked newer);
    ``moves``, device copies placed anew (:class:`ResidentTable` looks at each resident
    again only when these changed); ``unmarks``, a resident's ``device_newer`` cleared (a
    commit plan sets the flags again only when this or the others changed,
    ``runtime.planner.CommitPlan``)."""
    __slots__ = ('writes', 'moves', 'unmarks')

    def __init__(self):
        self.writes = 0
        self.moves = 0
        self.unmarks = 0

    def now(self):
        """The three counts, compared to see whether any changed."""
        return (self.writes, self.moves, self.unmarks)


tally = Tally()


class Resident(object):
    __slots__ = ('cell', 'dev', 'root', 'darr', 'host_obj', 'newer', '__weakref__')

    def __init__(self, cell):
        self.cell = cell
        self.dev = None
        self.root = Root(None, 0)
        self.darr = None
        # the host object the device copy was last synced with; HOST_NEWER when the host
        # holds a value the device has not seen (host_dirty)
        self.host_obj = HOST_NEWER
        # device_newer's value: read it directly where every call reads it (the host tier's
        # loops, its guard); set it through device_newer, which counts the unmarks
        self.newer = False

    @property
    def device_newer(self):
        """The device copy holds the variable's value, newer than the host cell's."""
        return self.newer

    @device_newer.setter
    def device_newer(self, newer):
        if self.newer and not newer:
            tally.unmarks += 1
        self.newer = newer

    @property
    def host_dirty(self):
        """The host holds a value the device has not seen (set, or written in place)."""
        return self.host_obj is HOST_NEWER

    @host_dirty.setter
    def host_dirty(self, newer):
        if newer:
            self.host_set()
        elif self.host_obj is HOST_NEWER:
            self._synced(self.cell[0])

    def host_set(self):
        """The host value is the newer one (``set_value``, a host function's update): the
        next call that needs it on a device uploads it."""
        self.host_obj = HOST_NEWER
        if self.newer:                        # (the device_newer setter, inline: per call)
            self.newer = False
            tally.unmarks += 1
        tally.writes += 1

    def _synced(self, host_obj):
        """The device copy holds ``host_obj`` (as far as the host knows)."""
        if host_obj is not self.host_obj:
            self.host_obj = host_obj
            tally.writes += 1

    # -- queries the VM makes on every call (cheap) -----------------------------
    def host_changed(self):
        return self.cell[0] is not self.host_obj

    def current(self, dev):
        """The device copy (a DArray) when it holds the value on ``dev``, else None
        (also the steady-state test of runtime.frames.make_guard)."""
        d = self.darr
        if d is None or self.dev is not dev or self.cell[0] is not self.host_obj:
            return None
        return d

    def refillable(self, dev, shape, buf):
        """Whether the host value, newer than the device copy, fits that copy's place as
        it is (``shape``, the dtype, in ``buf`` on ``dev``): uploading it there is then all
        a call needs (``runtime.uploads.refill``), its frame's plans stay bound."""
        d = self.darr
        v = self.cell[0]
        return (d is not None and self.dev is dev and self.root.buf is buf and
                d.shape == shape and type(v) is np.ndarray and v.shape == shape and
                v.dtype == d.dtype)

    def send_now(self):
        """After ``set_value`` without ``borrow`` (the cell's value is the variable's own
        copy): a large value that fits its place on the device is sent there at once,
        without waiting, as Theano's GPU backend sets values in place: its transfer runs
        while the host goes on, where the next call would have started it and waited for it
        (on the H200, step 0 of a run after ``set_value`` on two 200 KB states: 226-260 ->
        177-247 us, set_value and the run together 274-303 -> 261-353 us, one process).
        Values up to ``uploads.VALUE_MAX`` wait for the next call, which packs them, as
        does every value while another thread's call holds the device (its ``call_lock``).
        (On the device's queue: a profiled function's call, on the profiling queue, first
        waits for it, ``OCLFunction._pass``.)"""
        v = self.cell[0]
        dev = self.dev
        if dev is None or type(v) is not np.ndarray or v.nbytes <= uploads.VALUE_MAX or \
                not v.flags.c_contiguous or self.root.buf is None or \
                not self.refillable(dev, v.shape, self.root.buf):
            return
        lock = dev.call_lock
        if not lock.acquire(blocking=False):
            return      # a call in another thread holds the queue: the next call sends it
        try:
            uploads.single(dev, dev.queue, self.root.buf, self.root.origin, v)
            self.uploaded(v)
        finally:
            lock.release()

    def device_shape(self, dev):
        d = self.current(dev)
        return np.shape(self.cell[0]) if d is None else d.shape

    def ensure_device(self, dev, queue, batch=None):
        """The current value as a DArray on ``dev`` (uploading the host value if newer;
        with ``batch``, a ``runtime.uploads.UploadBatch`` of ``queue``, added to it:
        current once the batch is flushed)."""
        d = self.current(dev)
        if d is not None:
            return d
        if self.dev is not None and self.dev is not dev:
            self.sync_to_host()
            self.dev = None
            self.darr = None
            tally.moves += 1
        # the host was written after the device value was last synced: the host wins
        value = np.require(self.cell[0], requirements="C")
        self._place(dev, value.shape, value.dtype)
        if value.size:
            # On the device's own queue the copy does not wait: a call that uploads many
            # shared variables (after set_value) waits once, at its end (settle_uploads)
            blocking = queue is not dev.queue
            if not blocking and batch is not None and \
                    batch.add(self.root.buf, self.root.origin, value, self.uploaded,
                              self.cell[0]):
                # sent with the others when the loop making them ends; current once it
                # is enqueued (an interrupt before: the next call uploads it again)
                return self.darr
            ev = dev.cl.enqueue_copy(queue, self.root.buf, value, dst_offset=self.root.origin,
                                     is_blocking=blocking)
            uploads.counted(dev, 1, value.nbytes, 1)
            if not blocking:
                dev.pending_upload(ev)
            elif dev.profiles(queue):     # profile hook (profiling.py)
                from .profiling import transfer
                transfer('upload', value.nbytes, ev)
        self.uploaded(self.cell[0])
        return self.darr

    def uploaded(self, host_obj):
        """The device copy holds ``host_obj`` (the cell's value when it was sent)."""
        if host_obj is not self.host_obj:      # (_synced, inline: a hot path)
            self.host_obj = host_obj
            tally.writes += 1
        self.device_newer = False

    def _place(self, dev, shape, dtype):
        place = None
        if self.darr is None or self.darr.shape != tuple(shape) or self.dev is not dev \
                or self.root.buf is None or self.darr.dtype != dtype:
            place = self._new_placement(dev, shape, dtype)
        if place is not None:
            self._install(dev, place)

    def _new_placement(self, dev, shape, dtype):
        """(buffer or None to keep the current one, nbytes, DArray): a placement for a value
        of ``shape``, not yet installed (the allocation is the part that may fail)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        buf = None
        if self.root.buf is None or self.dev is not dev or self.root.nbytes < nbytes \
                or self.root.nbytes > 2 * nbytes + 4096:
            buf = dev.alloc(nbytes)
        d = self.darr
        if d is None or d.shape != tuple(shape) or d.dtype != dtype:
            d = DArray(self.root, shape, dtype)   # else the same view: plans stay valid
        return buf, max(nbytes, 1), d

    def _install(self, dev, place):
        buf, nbytes, darr = place
        if buf is not None and self.root.buf is not buf:
            self.root.move(buf)
            self.root.nbytes = nbytes
        if self.dev is not dev or self.darr is not darr or buf is not None:
            tally.moves += 1
        self.dev = dev
        self.darr = darr

    # -- writes (see runtime/commit.py: prepare may fail, the action may not) ------
    def prepare_device_commit(self, dev, queue, d):
        """The action making the device value ``d`` (C-contiguous) the variable's new value.

        Whatever may fail (a new placement's allocation, when the shape changes) happens
        here; the action only installs, copies and sets flags, and gives the same result
        when it runs twice (runtime/commit.py)."""
        place = None
        if self.darr is None or self.darr.shape != d.shape or self.dev is not dev \
                or self.root.buf is None:
            place = self._new_placement(dev, d.shape, d.dtype)
        cl = dev.cl
        nbytes = d.nbytes
        root = self.root

        def action():
            if place is not None:
                self._install(dev, place)
            if nbytes and not (d.root is root and d.offset == 0):
                cl.enqueue_copy(queue, root.buf, d.root.buf, byte_count=nbytes,
                                src_offset=d.boff, dst_offset=root.origin)
            self.mark_device_newer()
        return action

    def mark_device_newer(self):
        """The device copy holds the variable's value (it was just written there)."""
        self.newer = True
        v = self.cell[0]
        if v is not self.host_obj:             # (_synced, inline: once per commit)
            self.host_obj = v
            tally.writes += 1

    def prepare_host_commit(self, value):
        """The action making the host ``value`` the variable's new value (uploaded when a
        device next needs it, as after ``set_value``)."""
        def action():
            self.cell[0] = value
            self.host_set()
        return action

    def sync_to_host(self):
        """Download the device value into the host cell if the device is newer."""
        if not self.device_newer:
            return
        if self.cell[0] is not self.host_obj:
            # the cell was written directly since the device's last update: that value
            # is the newer one (the next call uploads it)
            self.device_newer = False
            return
        d = self.darr
        host = np.empty(d.shape, d.dtype)
        if d.size:
            self.dev.cl.enqueue_copy(self.dev.queue, host, self.root.buf,
                                     src_offset=self.root.origin, is_blocking=True)
        self.cell[0] = host
        self._synced(host)
        self.device_newer = False


_first = operator.itemgetter(0)
_host_obj = operator.attrgetter('host_obj')
_cell = operator.attrgetter('cell')


def mark_device_newer(residents):
    """``Resident.mark_device_newer`` of every one of ``residents`` (a commit plan's: 1,500
    of a Nengo-like model), the flags set in one loop and the host objects compared in C."""
    for res in residents:
        res.newer = True
    if not all(map(operator.is_, map(_first, map(_cell, residents)),
                   map(_host_obj, residents))):
        for res in residents:
            res.mark_device_newer()
_shape = operator.attrgetter('shape')
_dtype = operator.attrgetter('dtype')


class ResidentTable(object):
    """The resident shared variables of one frame as arrays, for its steady-state guard
    (``runtime.frames.make_guard``): which of them hold a host value newer than their
    device copy (:meth:`changed`), found by C loops over all of them and Python work only
    for those, and the upload of those values packed per buffer (:meth:`refill`).

    The table holds while ``tally.moves`` is what :meth:`settle` saw: the device copies
    where the frame's kernels are bound, as it planned them. Until then (and where a
    value does not fit its place) the guard checks the residents one by one
    (``Resident.current``) and settles the table once they all hold."""

    def __init__(self, residents):
        self.residents = tuple(residents)
        self.cells = tuple(r.cell for r in self.residents)
        self.moves = None       # tally.moves when settled (None: not settled)
        self.writes = None      # tally.writes when settled
        self.objs = None        # the cells' values then

    def settle(self):
        """Every resident's device copy holds its host value, in the frame's places: take
        those places (bytes, offsets, buffers) and the cells' values."""
        rs = self.residents
        darrs = [r.darr for r in rs]
        self.shapes = list(map(_shape, darrs))
        self.dtypes = list(map(_dtype, darrs))
        self.sizes = np.array([d.nbytes for d in darrs], np.int64)
        self.origins = np.array([r.root.origin for r in rs], np.int64)
        groups, self.bufs = {}, []
        for r in rs:
            buf = r.root.buf
            if id(buf) not in groups:
                groups[id(buf)] = len(self.bufs)
                self.bufs.append(buf)
        self.groups = np.array([groups[id(r.root.buf)] for r in rs], np.intp)
        self._seen(list(map(_first, self.cells)))
        self.moves = tally.moves

    def _seen(self, objs):
        self.objs = objs
        self.writes = tally.writes

    def changed(self):
        """(indices of the residents whose host value is newer than their device copy, the
        cells' values), or None where the table does not hold (a device copy moved)."""
        if self.moves != tally.moves:
            return None
        objs = list(map(_first, self.cells))
        # the objects the device copies hold: those the cells held when last seen, unless
        # a host_obj changed since
        held = self.objs if self.writes == tally.writes else \
            list(map(_host_obj, self.residents))
        if all(map(operator.is_, objs, held)):
            return [], objs
        return np.flatnonzero(np.fromiter(map(operator.is_not, objs, held), bool,
                                          len(objs))).tolist(), objs

    def fits(self, changed, objs):
        """Whether the values of residents ``changed`` fit their places as they are
        (``Resident.refillable``, for them all at once)."""
        values = list(map(objs.__getitem__, changed))
        return all(map(operator.is_, map(type, values), itertools.repeat(np.ndarray))) and \
            list(map(_shape, values)) == list(map(self.shapes.__getitem__, changed)) and \
            list(map(_dtype, values)) == list(map(self.dtypes.__getitem__, changed))

    def refill(self, dev, queue, changed, objs):
        """Upload the values (``objs``, which :meth:`fits`) of residents ``changed`` into
        their places, packed per buffer (``runtime.uploads.send``); each counts as uploaded
        once its transfer is enqueued (a failure before: the next call sends it again)."""
        values = list(map(objs.__getitem__, changed))
        if len(changed) < uploads.GROUP_MIN:
            # too few to pack into any buffer: each on its own, as send would, without
            # its table arithmetic (~20 us of a simulator reset's step 0 on the H200's host)
            origins, sizes, groups, bufs = self.origins, self.sizes, self.groups, self.bufs
            for k, v in zip(changed, values):
                if sizes[k]:
                    uploads.single(dev, queue, bufs[groups[k]], origins[k], v)
            self._refilled(changed, values, objs)
            return
        idx = np.array(changed, np.intp)
        sizes = self.sizes[idx]
        groups = self.groups[idx]
        full = sizes > 0               # (an empty value needs no upload)
        for g in np.unique(groups[full]).tolist():
            sel = full & (groups == g)
            if sel.all():              # (the usual case: one slab)
                uploads.send(dev, queue, self.bufs[g], values, self.origins[idx], sizes)
                continue
            sel = np.flatnonzero(sel)
            uploads.send(dev, queue, self.bufs[g], [values[k] for k in sel.tolist()],
                         self.origins[idx[sel]], sizes[sel])
        self._refilled(changed, values, objs)

    def _refilled(self, changed, values, objs):
        for r, v in zip(map(self.residents.__getitem__, changed), values):
            r.host_obj = v             # (Resident.uploaded, inline: flags set, counted once)
            r.newer = False
        tally.writes += 1              # (other frames' tables look again)
        tally.unmarks += 1
        self._seen(objs)


def resident_for(cell):
    res = _residents.get(id(cell))
    if res is None or res.cell is not cell:
        res = _residents[id(cell)] = Resident(cell)
    return res


def sync_cell(cell):
    """Bring a host cell up to date if a device holds a newer value."""
    res = _residents.get(id(cell))
    if res is not None and res.cell is cell and res.device_newer:
        res.sync_to_host()


def sync_all():
    commit.finish_pending()
    for res in list(_residents.values()):
        res.sync_to_host()


_patched = False


def install_patches():
    """Hook Theano's containers and Function so the host view stays coherent."""
    global _patched
    if _patched:
        return
    _patched = True
    from theano.gof.link import Container
    from theano.compile import function_module

    orig_get, orig_set = Container.__get__, Container.__set__

    def __get__(self):
        if commit.pending:
            commit.finish_pending()
        if _residents:
            sync_cell(self.storage)
        return orig_get(self)

    def __set__(self, value):
        if commit.pending:
            commit.finish_pending()     # an interrupted call's updates land before this
        orig_set(self, value)
        if _residents:
            res = _residents.get(id(self.storage))
            if res is not None and res.cell is self.storage:
                res.host_set()

    Container.__get__ = __get__
    Container.__set__ = __set__

    from theano.compile.sharedvalue import SharedVariable
    orig_set_value = SharedVariable.set_value

    def set_value(self, new_value, borrow=False):
        orig_set_value(self, new_value, borrow=borrow)
        if not borrow and _residents:
            cell = self.container.storage
            res = _residents.get(id(cell))
            if res is not None and res.cell is cell:
                res.send_now()
    set_value.__doc__ = orig_set_value.__doc__
    SharedVariable.set_value = set_value
    Container.data = property(__get__, __set__)
    Container.value = property(__get__, __set__)

    orig_deepcopy = Container.__deepcopy__

    def __deepcopy__(self, memo):
        if commit.pending:
            commit.finish_pending()
        if _residents:
            sync_cell(self.storage)
        return orig_deepcopy(self, memo)
    Container.__deepcopy__ = __deepcopy__

    def __getstate__(self):
        if commit.pending:
            commit.finish_pending()
        if _residents:
            sync_cell(self.storage)
        return self.__dict__
    Container.__getstate__ = __getstate__

    _accept_device_arrays()

    # FunctionMaker.create reads shared containers' raw cells (Function.copy, pickling,
    # SimulatorOCL): bring them up to date first.
    FunctionMaker = function_module.FunctionMaker
    orig_create = FunctionMaker.create

    def create(self, input_storage=None, *args, **kwargs):
        if commit.pending:
            commit.finish_pending()
        if _residents and input_storage:
            for c in input_storage:
                if isinstance(c, Container):
                    sync_cell(c.storage)
        return orig_create(self, input_storage, *args, **kwargs)
    FunctionMaker.create = create

    Function = function_module.Function
    orig_call = Function.__call__
    from .fast_call import fast_call

    def __call__(self, *args, **kwargs):
        if getattr(self.fn, 'is_ocl', False):
            # the OCL VM keeps its residents coherent itself; one call at a time: Function
            # writes the inputs into shared cells before the VM runs and reads the outputs
            # after, so concurrent calls from threads are serialized here, around it all
            with self.fn.lock:
                if not kwargs and not self.trust_input:
                    fast = self.__dict__.get('_ocl_call')
                    if fast is None:
                        fast = self._ocl_call = fast_call(self, orig_call)
                    if fast is not False:
                        return fast(args)
                return orig_call(self, *args, **kwargs)
        if commit.pending:
            commit.finish_pending()
        if _residents:
            for c in self.input_storage:
                res = _residents.get(id(c.storage))
                if res is not None and res.device_newer and res.cell is c.storage:
                    res.sync_to_host()
        out = orig_call(self, *args, **kwargs)
        if _residents:
            _mark_written(self)
        return out
    Function.__call__ = __call__


def _mark_written(function):
    """After a host function ran: its updates may have overwritten a shared value in place
    (same object, so the VM's identity check cannot tell); the host value is the newer one."""
    for inp, c in zip(function.maker.inputs, function.input_storage):
        if inp.update is not None or inp.mutable:
            res = _residents.get(id(c.storage))
            if res is not None and res.cell is c.storage:
                res.host_set()


def _accept_device_arrays():
    """Let tensor inputs be pyopencl arrays (used on the device without a copy).

    The dtype must match exactly (no device-side casting on input) and the
    broadcastable dimensions must have length 1, as for host arrays.
    """
    from theano.tensor.type import TensorType
    from .darray import is_device_array
    orig_filter = TensorType.filter

    def filter(self, data, strict=False, allow_downcast=None):
        if is_device_array(data):
            # (dtype objects compared: str() of one costs ~2 us, a tenth of a small call)
            if data.dtype != self.numpy_dtype:
                raise TypeError('expected a device array of dtype %s, got %s (device arrays are '
                                'not cast; convert with .astype first)' % (self.dtype, data.dtype))
            if data.ndim != self.ndim:
                raise TypeError('expected a device array with %d dimensions, got shape %s'
                                % (self.ndim, data.shape))
            for d, (b, n) in enumerate(zip(self.broadcastable, data.shape)):
                if b and n != 1:
                    raise TypeError('expected length 1 in broadcastable dimension %d, got shape %s'
                                    % (d, data.shape))
            return data
        return orig_filter(self, data, strict=strict, allow_downcast=allow_downcast)
    TensorType.filter = filter
