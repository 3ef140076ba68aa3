"""Indexing: Subtensor (a view), IncSubtensor, and integer-array indexing.

* ``Subtensor``: slices (any step, negative included) and integer indices give a view,
  its offset and strides computed as numpy does; the index values are host inputs.
* ``IncSubtensor``: x (in place when the VM says x is dead, else a copy) with the
  elementwise add or assignment of y over the view (the elementwise template).
* ``AdvancedSubtensor1``/``AdvancedSubtensor``: a gather kernel; ``AdvancedIncSubtensor1``/
  ``AdvancedIncSubtensor``: a scatter kernel that loops over the index points serially
  per x element, so duplicate indices accumulate (or the last one wins) as in Theano.
  Both come from ``kernels/subtensor.cl.mako``. Out-of-range indices are reported by the
  kernel in a small device buffer that a host step checks after the launch, raising
  IndexError as Theano does (so these frames have a host step).
* ``PermuteRowElements`` (forward): the same gather, with the output's index along each
  leading dim as an index array; the inverse (a scatter) stays on the host. ``Choose``
  (tensor choices): the mode's index fix-up in an elementwise launch, then that gather.

Boolean masks (``AdvancedBooleanSubtensor``, ``AdvancedBooleanIncSubtensor``, ``Nonzero``)
decide the result's shape by their values: the plan downloads the mask, uploads its
nonzero positions as frame constants (integer-array indexing from there), and a host step
of every replay downloads the mask again and re-plans when it changed.
"""
import numpy as np
import theano.scalar as ts
from theano.gof import Constant
from theano.tensor import basic as tbasic
from theano.tensor import subtensor as tsub
from theano.tensor.type import TensorType

from .. import kernels
from .. import scalar as oscalar
from ..darray import DArray, span
from ..errors import NoDeviceImplementation
from ..runtime.context import BranchFlip, Replan
from ..runtime.invokers import set_long
from ..runtime.plans import launch_geometry
from .base import DeviceImpl
from .elemwise import (Fused, check_flags, fmap, folded_code,
                       plan_elementwise)
from .registry import implemented_by, ocl_impl
from .shape import frame_constant

_STORE = {1: 'uchar', 2: 'ushort', 4: 'uint', 8: 'ulong'}


# -------------------------------------------------------------------- basic indexing
def _axis_place(d, e, n, st):
    """(byte offset, length, stride) of entry ``e`` on axis ``d`` of ``n`` elements and byte
    stride ``st``; length and stride None for an integer (the axis goes). numpy's rules
    and errors."""
    if isinstance(e, slice):
        start, stop, step = slice(*[None if v is None else int(v)
                                    for v in (e.start, e.stop, e.step)]).indices(n)
        length = len(range(start, stop, step))
        return (start * st if length else 0), length, st * step
    i = int(e)
    if not -n <= i < n:
        raise IndexError('index %d is out of bounds for axis %d with size %d' % (i, d, n))
    return (i % n) * st, None, None


def place(shape, strides, entries):
    """(byte offset, shape, strides) of the basic view ``entries`` (ints and slices) of an
    array of ``shape`` and byte ``strides``: numpy's rules and errors."""
    if len(entries) > len(shape):
        raise IndexError('too many indices for array')
    off, out_shape, out_strides = 0, [], []
    for d, e in enumerate(entries):
        o, length, st = _axis_place(d, e, shape[d], strides[d])
        off += o
        if length is not None:
            out_shape.append(length)
            out_strides.append(st)
    out_shape.extend(shape[len(entries):])
    out_strides.extend(strides[len(entries):])
    return off, tuple(out_shape), tuple(out_strides)


def basic_view(x, entries):
    """The view ``x[entries]`` for ints and slices (numpy's rules and errors)."""
    off, shape, strides = place(x.shape, x.strides, entries)
    return x.view(shape, strides, x.offset + off)


# ------------------------------------------------- index values changing between calls
def index_inputs(idx_list, first):
    """(position in ``node.inputs``, axis, role) of each index input of ``idx_list``, its
    index inputs starting at ``first``; role: 'int', or a slice's 'start', 'stop', 'step'."""
    out, j = [], first
    for axis, e in enumerate(idx_list):
        if isinstance(e, slice):
            for role, b in (('start', e.start), ('stop', e.stop), ('step', e.step)):
                if isinstance(b, ts.Scalar):
                    out.append((j, axis, role))
                    j += 1
        elif isinstance(e, ts.Scalar):
            out.append((j, axis, 'int'))
            j += 1
    return out


def _elem_strides(d, shape=None):
    """``d``'s strides in elements; with ``shape``, 0 where ``d`` broadcasts (size 1)."""
    if shape is None:
        return tuple(st // d.itemsize for st in d.strides)
    return tuple(0 if m == 1 and n != 1 else st // d.itemsize
                 for st, m, n in zip(d.strides, d.shape, shape))


class DynamicIndex(object):
    """The place of ``x[entries]`` where some integer indices or slice bounds change from
    call to call (``impl.dynamic_inputs``; a slice's step never does: it decides the
    strides). ``view`` is this call's view, ``extent`` the array it lies in. Made while
    planning, it records a host step that, at every call, reads those inputs' cells, raises
    IndexError as numpy does for an integer out of range, raises ``BranchFlip`` where a
    slice's length differs from the planned one (a frame of the same key planned for that
    length runs: the short last minibatch of an epoch), and sets the view's element offset
    within ``extent`` as the offset argument of every :meth:`move` recorded after it.
    Only the changing axes are placed again per call; the others' offset is summed once."""

    def __init__(self, ctx, impl, x, entries, first):
        self.extent = x
        self.view = basic_view(x, entries)          # this call's (checks it too)
        roles = {}
        for j, axis, role in index_inputs(impl.node.op.idx_list, first):
            if j in impl.dynamic_inputs:
                roles.setdefault(axis, []).append((ctx.cells[j], role))
        static, axes = 0, []
        for d, e in enumerate(entries):
            off, length, _ = _axis_place(d, e, x.shape[d], x.strides[d])
            if d in roles:
                axes.append((d, e, roles[d], x.shape[d], x.strides[d], length))
            else:
                static += off
        self.targets = []          # (kernel, argument index) of the moves' offsets
        ctx.host_step(self._offset_step(static, axes, ctx.node.inputs[impl.dynamic_inputs[0]]))

    def _offset_step(self, static, axes, var):
        itemsize, targets = self.extent.itemsize, self.targets

        def run():
            off = static
            for d, e, cells, n, st, length in axes:
                for cell, role in cells:
                    v = int(cell[0])
                    e = v if role == 'int' else slice(v, e.stop, e.step) if role == 'start' \
                        else slice(e.start, v, e.step)
                o, got, _ = _axis_place(d, e, n, st)
                if got != length:
                    raise BranchFlip(var)
                off += o
            off //= itemsize
            for kernel, argi in targets:
                set_long(kernel, argi, off)
        return run

    def move(self, ctx, other, into_extent):
        """Record one launch moving ``other`` (broadcast to the view's shape) into the view
        (``into_extent``), or the view into ``other``, at this call's place of the view."""
        view = self.view
        if view.size == 0:
            return
        near = (self.extent, _elem_strides(view))
        far = (other, _elem_strides(other, view.shape))
        (dst, dst_st), (src, src_st) = (near, far) if into_extent else (far, near)
        src_text, name = _move_kernel(view.ndim, _STORE[view.itemsize])
        args = [np.int64(view.size)] + [np.int64(n) for n in view.shape]
        args += [dst] + [np.int64(v) for v in dst_st] + [src] + [np.int64(v) for v in src_st]
        args += [np.int64(0), np.int64(0)]
        gsize, lsize = launch_geometry(ctx.dev, view.size)
        plan = ctx.launch(ctx.dev.build(src_text), name, gsize, lsize, args)
        # a DArray is two kernel arguments (buffer, offset): the last two are dyn_dst, dyn_src
        nargs = len(args) + 2
        self.targets.append((plan.kernel, nargs - 2 if into_extent else nargs - 1))


@kernels.memoize
def _move_kernel(nd, store):
    return kernels.render('dyn_index.cl.mako', 'dyn_move', nd=nd, T=store)


def _dynamic_capable(node, first):
    if np.dtype(node.inputs[0].type.dtype).itemsize not in _STORE:
        return ()
    return tuple(j for j, _, role in index_inputs(node.op.idx_list, first) if role != 'step')


class SubtensorView(DeviceImpl):
    """A view; where an integer index changes between calls (``dynamic_inputs``), a copy
    of the view by a kernel whose offset a host step sets at every call."""
    complex_ok = True
    is_view = True          # (but a copy where an index is read every call)

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = tuple(range(1, len(node.inputs)))
        self.dynamic_capable = _dynamic_capable(node, 1)

    def describe(self):
        return 'copy at an index read every call' if self.dynamic_inputs else 'view'

    def plan(self, ctx, ins):
        entries = tsub.get_idx_list(ins, self.node.op.idx_list)
        if not self.dynamic_inputs:
            return [basic_view(ins[0], entries)]
        dyn = DynamicIndex(ctx, self, ins[0], entries, 1)
        out = ctx.alloc(dyn.view.shape, dyn.view.dtype)
        dyn.move(ctx, out, into_extent=False)
        return [out]


@ocl_impl.register(tsub.Subtensor)
@implemented_by(SubtensorView)
def _subtensor(op, node, dev):
    return SubtensorView(node, dev)


def _update_code(set_instead_of_inc, x_dtype, y_dtype):
    """Elementwise code for o0 = i0 (+) i1 where i0 is x's element and i1 y's."""
    op = ts.second if set_instead_of_inc else ts.add
    return oscalar.elemwise_code(op, [x_dtype, y_dtype], [x_dtype])


def writable_x(ctx, x):
    """x itself when the VM lets this node overwrite it, else a fresh copy."""
    if ctx.destroyable[0]:
        return x
    out = ctx.alloc(x.shape, x.dtype)
    ctx.copy(out, x)
    return out


class IncSubtensorImpl(DeviceImpl):
    complex_ok = True       # an elementwise launch of second/add

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = tuple(range(2, len(node.inputs)))
        self.dynamic_capable = _dynamic_capable(node, 2)
        self.support, self.body = _update_code(node.op.set_instead_of_inc,
                                               node.inputs[0].type.dtype, node.inputs[1].type.dtype)
        self._set_code = None     # the same as a set (over known zeros: _write)
        self._folded = {}

    @property
    def fusable_inputs(self):
        """y's elementwise producer is computed in the update's kernel where the view is
        fixed (``ops.fusion.fuse_producers``): the gradient of a slice, ``inc(zeros[:, a:b],
        f(...))``, one launch instead of two."""
        return () if self.dynamic_inputs else (1,)

    def describe(self):
        if self.dynamic_inputs:
            return 'gather, update, scatter at an index read every call'
        return 'elementwise update of a view'

    def _update(self, xin, val, set_=False):
        """The scalar update x (+)= val, cast back to x's dtype (the folded code's op)."""
        x_dtype = self.node.inputs[0].type.dtype
        upd = (ts.second if set_ else ts.add)(xin, val)
        return [upd if upd.type.dtype == x_dtype else ts.cast(upd, x_dtype)]

    def _write(self, ctx, view, y):
        """The launch of view (+)= y (a fixed view). Where the view still holds a tracked
        zero fill of its buffer (``PlanContext.take_zeros``: this node over ``zeros[...]``)
        and y reads nothing of that buffer, y is written instead of added."""
        set_ = self.node.op.set_instead_of_inc
        zeros = None
        if view.dtype.kind != 'c' and \
                not any(a.root is view.root for a in (y.views if isinstance(y, Fused) else [y])):
            zeros = ctx.take_zeros(view)
        if zeros is not None and not set_:
            set_ = True
            if self._set_code is None:
                self._set_code = _update_code(True, view.dtype.name, y.dtype.name)
            support, body = self._set_code
        else:
            support, body = self.support, self.body
        ins = [view, y]
        if isinstance(y, Fused):
            # (a Fused y only here: fusable_inputs is empty where an index is dynamic): its
            # producer and the update composed into one Composite
            support, body, ins = folded_code(
                self._folded.setdefault(set_, {}), lambda x, v: self._update(x, v, set_),
                [view, y], [view.dtype.name, y.dtype.name], [view.dtype.name])
        plan_elementwise(ctx, support, body, [view], ins, view.shape)
        if zeros is not None:
            ctx.keep_zeros(zeros)

    def plan(self, ctx, ins):
        """x (+)= y over the view; where an index changes between calls, the view is
        gathered into a scratch array, updated there and scattered back (a set of y of x's
        dtype: y scattered in directly), at the offset a host step sets at every call. A
        folded producer of y (:class:`Fused`) is computed in the update's launch."""
        x, y = ins[:2]
        out = writable_x(ctx, x)
        entries = tsub.get_idx_list([x] + list(ins[2:]), self.node.op.idx_list)
        dyn = None
        if self.dynamic_inputs:
            dyn = DynamicIndex(ctx, self, out, entries, 2)
            view = dyn.view
        else:
            view = basic_view(out, entries)
        if y.ndim > view.ndim or any(n != 1 and n != m for n, m in
                                     zip(y.shape[::-1], view.shape[::-1])):
            raise ValueError('IncSubtensor: could not broadcast a value of shape %s into a '
                             'subtensor of shape %s' % (y.shape, view.shape))
        lead = view.ndim - y.ndim
        y = fmap(lambda d: d.view((1,) * lead + d.shape, (d.itemsize,) * lead + d.strides), y)
        if dyn is None:
            self._write(ctx, view, y)
            return [out]
        if self.node.op.set_instead_of_inc and y.dtype == view.dtype:
            dyn.move(ctx, y, into_extent=True)
            return [out]
        tmp = ctx.alloc(view.shape, view.dtype)
        dyn.move(ctx, tmp, into_extent=False)
        plan_elementwise(ctx, self.support, self.body, [tmp], [tmp, y], tmp.shape)
        dyn.move(ctx, tmp, into_extent=True)
        return [out]


@ocl_impl.register(tsub.IncSubtensor)
@implemented_by(IncSubtensorImpl)
def _inc_subtensor(op, node, dev):
    return IncSubtensorImpl(node, dev)


# -------------------------------------------------------------------- integer arrays
@kernels.memoize
def _kernel(mode, idx_dtypes, x=None, y=None, support='', **kw):
    """(source, kernel name) of the ``mode`` kernel ('gather' or 'scatter'): ``idx_dtypes``
    of the index arrays, ``x``/``y`` the dtypes of the scatter's operands; ``kw``: the
    template's other parameters."""
    kw['idxs'] = [_operand(d) for d in idx_dtypes]
    if x is not None:
        kw.update(x=_operand(x), y=_operand(y))
    if 'double' in repr(kw) + support and 'cl_khr_fp64' not in support:
        support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' + support
    return kernels.render('subtensor.cl.mako', mode, mode=mode, support=support, **kw)


def _operand(dtype):
    dtype = np.dtype(dtype)
    return dict(ctype=oscalar.ctype(dtype.name), cctype=oscalar.compute_ctype(dtype.name),
                half=dtype == np.float16, unsigned=dtype.kind in 'ub')


def _estride(d, dim):
    return d.strides[dim] // d.itemsize


class ArrayIndex(object):
    """x indexed by slices and integer arrays, laid out as numpy does.

    ``xv``: x with the slices applied (same ndim); ``arrays``: (axis, DArray) pairs;
    ``bshape``: the arrays' broadcast shape; ``dims``: the result's dimensions in order,
    each ``('x', axis)`` or ``('b', k)`` (k-th dimension of bshape).
    """

    def __init__(self, x, entries):
        entries = list(entries) + [slice(None)] * (x.ndim - len(entries))
        if len(entries) > x.ndim:
            raise IndexError('too many indices for array')
        self.xv = basic_view(x, [e if isinstance(e, slice) else slice(None) for e in entries])
        self.arrays = [(a, e) for a, e in enumerate(entries) if not isinstance(e, slice)]
        bnd = max(e.ndim for _, e in self.arrays)
        bshape = [1] * bnd
        for _, e in self.arrays:
            for d, n in enumerate(e.shape):
                d += bnd - e.ndim
                if n != 1:
                    if bshape[d] not in (1, n):
                        raise IndexError('shape mismatch: indexing arrays could not be broadcast '
                                         'together with shapes %s' % [e.shape for _, e in self.arrays])
                    bshape[d] = n
        self.bshape = tuple(bshape)
        axes = [a for a, _ in self.arrays]
        adjacent = axes == list(range(axes[0], axes[-1] + 1))
        xdims = [('x', a) for a in range(x.ndim) if a not in axes]
        bdims = [('b', k) for k in range(bnd)]
        if adjacent:
            lead = [d for d in xdims if d[1] < axes[0]]
            self.dims = lead + bdims + xdims[len(lead):]
        else:
            self.dims = bdims + xdims
        self.shape = tuple(self.xv.shape[i] if w == 'x' else self.bshape[i] for w, i in self.dims)

    def index_strides(self, e, bdims_only=False):
        """Element strides of index array ``e`` over the result's dims (0 where broadcast)."""
        off = len(self.bshape) - e.ndim
        out = []
        for w, i in self.dims:
            if w == 'b':
                j = i - off
                out.append(0 if j < 0 or e.shape[j] == 1 else _estride(e, j))
            elif not bdims_only:
                out.append(0)
        return out

    def index_args(self, bdims_only=False):
        args = []
        for a, e in self.arrays:
            args += [e, np.int64(self.xv.shape[a]), np.int64(_estride(self.xv, a))]
            args += [np.int64(s) for s in self.index_strides(e, bdims_only)]
        return args

    def index_dtypes(self):
        return tuple(e.dtype.name for _, e in self.arrays)


def error_buffer(ctx):
    return frame_constant(ctx, np.zeros(3, np.int64))


def check_errors(ctx, err, node, arr_index):
    """Once the call's outputs are fetched (``ctx.deferred_check``): raise IndexError if
    the kernel met a bad index (it skipped that element)."""
    sizes = [arr_index.xv.shape[a] for a, _ in arr_index.arrays]
    axes = [a for a, _ in arr_index.arrays]

    def make_error(flag):
        k = int(flag[2]) if 0 <= flag[2] < len(sizes) else 0
        return IndexError('index %d is out of bounds for axis %d with size %d (in %s)'
                          % (flag[1], axes[k], sizes[k], node.op))
    check_flags(ctx, err, make_error)


class GatherImpl(DeviceImpl):
    """AdvancedSubtensor1 (x[ivector]) and AdvancedSubtensor (slices and int arrays)."""
    host_when = ('an index that is neither an integer array, a boolean mask nor a constant '
                 'slice; a 0-d boolean index (it adds an axis)')

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = tuple(j for j, v in enumerate(node.inputs)
                                 if j > 0 and not isinstance(v.type, TensorType))
        self.plans_with_values = _has_mask(node, 1)

    def plan(self, ctx, ins):
        x = ins[0]
        return [plan_gather(ctx, self.node, x, mask_entries(ctx, self.node, ins, 1))]


def plan_gather(ctx, node, x, entries):
    """``x[entries]`` (slices and device integer arrays, numpy's layout) into a new array;
    an out-of-range index raises IndexError once the call's outputs are fetched."""
    ai = ArrayIndex(x, entries)
    out = ctx.alloc(ai.shape, x.dtype)
    if out.size == 0:
        return out
    xv = ai.xv
    src, name = _kernel('gather', ai.index_dtypes(), ndim=len(ai.dims),
                        store=_STORE[x.itemsize])
    args = [np.int64(out.size)]
    for n, (w, i) in zip(ai.shape, ai.dims):
        args += [np.int64(n), np.int64(_estride(xv, i) if w == 'x' else 0)]
    err = error_buffer(ctx)
    args += [out, xv] + ai.index_args() + [err]
    gsize, lsize = launch_geometry(ctx.dev, out.size)
    # it writes the result and the error flag; it reads x and the indices
    ctx.launch(ctx.dev.build(src), name, gsize, lsize, args, writes=[out, err],
               reads=[a for a in args if isinstance(a, DArray) and a is not out and a is not err])
    check_errors(ctx, err, node, ai)
    return out


class ScatterImpl(DeviceImpl):
    """AdvancedIncSubtensor1 and AdvancedIncSubtensor (set or inc)."""
    host_when = GatherImpl.host_when

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = tuple(j for j, v in enumerate(node.inputs)
                                 if j > 1 and not isinstance(v.type, TensorType))
        self.plans_with_values = _has_mask(node, 2)
        self.support, self.body = _update_code(node.op.set_instead_of_inc,
                                               node.inputs[0].type.dtype, node.inputs[1].type.dtype)

    def plan(self, ctx, ins):
        x, y = ins[:2]
        out = writable_x(ctx, x)
        ai = ArrayIndex(out, mask_entries(ctx, self.node, [out] + list(ins[1:]), 2))
        if y.ndim > len(ai.shape) or any(n != 1 and n != m for n, m in
                                         zip(y.shape[::-1], ai.shape[::-1])):
            raise ValueError('shape mismatch: value array of shape %s could not be broadcast '
                             'to indexing result of shape %s' % (y.shape, ai.shape))
        size = 1
        for n in ai.shape:
            size *= n
        if size == 0:
            return [out]
        lead = len(ai.shape) - y.ndim

        def ystride(pos):
            j = pos - lead
            return 0 if j < 0 or y.shape[j] == 1 else _estride(y, j)
        pdims = [(pos, i) for pos, (w, i) in enumerate(ai.dims) if w == 'x']
        sdims = [pos for pos, (w, _) in enumerate(ai.dims) if w == 'b']
        npar = 1
        for pos, _ in pdims:
            npar *= ai.shape[pos]
        src, name = _kernel('scatter', ai.index_dtypes(), x.dtype.name, y.dtype.name,
                            npd=len(pdims), nsd=len(sdims), body=self.body,
                            support=self.support)
        args = [np.int64(npar), np.int64(size // npar)]
        for pos, i in pdims:
            args += [np.int64(ai.shape[pos]), np.int64(_estride(ai.xv, i)), np.int64(ystride(pos))]
        for pos in sdims:
            args += [np.int64(ai.shape[pos]), np.int64(ystride(pos))]
        err = error_buffer(ctx)
        args += [ai.xv, y] + ai.index_args(bdims_only=True) + [err]
        gsize, lsize = launch_geometry(ctx.dev, npar)
        ctx.launch(ctx.dev.build(src), name, gsize, lsize, args)
        check_errors(ctx, err, self.node, ai)
        return [out]


# -------------------------------------------------------------------- boolean masks
def host_copy(dev, queue, d):
    """Blocking download of any (strided) DArray into a numpy array."""
    if d.size == 0:
        return np.zeros(d.shape, d.dtype)
    lo, hi = span(d)
    raw = np.empty(hi - lo, np.uint8)
    dev.cl.enqueue_copy(queue, raw, d.root.buf, src_offset=d.root.origin + lo,
                        is_blocking=True)
    return np.array(np.ndarray(d.shape, d.dtype, buffer=raw, offset=d.offset - lo,
                               strides=d.strides))


def planned_mask(ctx, d, var):
    """The mask's current values; the frame re-plans whenever a later call's differ."""
    dev, queue = ctx.dev, ctx.queue
    planned = host_copy(dev, queue, d)

    def run():
        if not np.array_equal(host_copy(dev, queue, d), planned):
            raise Replan(var)
    ctx.host_step(run, 'guard')
    return planned


def _has_mask(node, first):
    """Whether an index from input ``first`` on is a boolean mask (``planned_mask``)."""
    return any(getattr(v.type, 'dtype', None) == 'bool' for v in node.inputs[first:])


def mask_entries(ctx, node, ins, first):
    """Index entries with each boolean mask replaced by its nonzero positions."""
    entries, axis = [], 0
    x = ins[0]
    for v, var in zip(ins[first:], node.inputs[first:]):
        if isinstance(v, DArray) and v.dtype == np.bool_:
            m = planned_mask(ctx, v, var)
            for d, n in enumerate(m.shape):
                if axis + d >= x.ndim or x.shape[axis + d] != n:
                    raise IndexError('boolean index did not match indexed array along dimension '
                                     '%d; dimension is %s but corresponding boolean dimension is %d'
                                     % (axis + d, x.shape[axis + d] if axis + d < x.ndim else None, n))
            entries.extend(frame_constant(ctx, p.astype(np.int64)) for p in np.nonzero(m))
            axis += m.ndim
        else:
            entries.append(v)
            axis += 1
    return entries


class NonzeroImpl(DeviceImpl):
    plans_with_values = True        # (the mask's positions)

    def plan(self, ctx, ins):
        out = [None]
        self.node.op.perform(self.node, [planned_mask(ctx, ins[0], self.node.inputs[0])], [out])
        return [frame_constant(ctx, out[0])]


@ocl_impl.register(tbasic.Nonzero)
@implemented_by(NonzeroImpl)
def _nonzero(op, node, dev):
    return NonzeroImpl(node, dev)


def _check_indices(node, first):
    for v in node.inputs[first:]:
        if isinstance(v.type, TensorType):
            if v.type.dtype not in ('bool', 'int8', 'int16', 'int32', 'int64',
                                    'uint8', 'uint16', 'uint32', 'uint64'):
                raise NoDeviceImplementation('index of dtype %s (only integer arrays and '
                                             'boolean masks index on the device)' % v.type.dtype)
            if v.type.dtype == 'bool' and v.type.ndim == 0:
                raise NoDeviceImplementation('a 0-d boolean index adds an axis: not on the device')
        elif not (isinstance(v, Constant) and isinstance(v.data, slice)):
            raise NoDeviceImplementation('index %s is neither an integer array nor a constant '
                                         'slice' % (v,))


@ocl_impl.register(tsub.AdvancedSubtensor1)
@ocl_impl.register(tsub.AdvancedSubtensor)
@ocl_impl.register(tsub.AdvancedBooleanSubtensor)
@implemented_by(GatherImpl)
def _gather(op, node, dev):
    _check_indices(node, 1)
    return GatherImpl(node, dev)


@ocl_impl.register(tsub.AdvancedIncSubtensor1)
@ocl_impl.register(tsub.AdvancedIncSubtensor)
@ocl_impl.register(tsub.AdvancedBooleanIncSubtensor)
@implemented_by(ScatterImpl)
def _scatter(op, node, dev):
    _check_indices(node, 2)
    return ScatterImpl(node, dev)

