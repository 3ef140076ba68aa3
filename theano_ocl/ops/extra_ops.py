"""``theano.tensor.extra_ops`` ops that real graphs use: ``RepeatOp`` (``T.repeat``),
``CumOp`` (``cumsum``/``cumprod``), ``DiffOp``, ``FillDiagonal``, ``FillDiagonalOffset``,
``CpuContiguous``, ``RavelMultiIndex``, ``UnravelIndex``, ``SearchsortedOp``; ``Bartlett``
(a window that only depends on its host input: computed once per frame, as ``Eye``).

``repeat(x, repeats, axis)``: the repeats decide the output's shape, so they are a host
input (the frame is keyed on their values, as for any shape-deciding value); the host
computes which source index each output position takes (``np.repeat`` of a range, so
numpy's own errors for negative or mis-sized repeats) and the device gathers along the
axis with the subtensor family's gather kernel. ``axis=None`` repeats the flattened array.
"""
import numpy as np
import theano.scalar as ts
from theano.tensor.extra_ops import (Bartlett, CpuContiguous, CumOp, DiffOp, FillDiagonal,
                                     FillDiagonalOffset, RavelMultiIndex, RepeatOp,
                                     SearchsortedOp, UnravelIndex)

from .. import kernels
from .. import scalar as oscalar
from ..errors import NoDeviceImplementation
from ..runtime.plans import launch_geometry
from .base import DeviceImpl, FLOAT_DTYPES, INT_DTYPES
from .elemwise import check_flag, error_flag, plan_elementwise
from .registry import implemented_by, ocl_impl
from .shape import HostComputed, frame_constant, reshaped
from .subtensor import plan_gather



def _along_axis(ctx, x, axis):
    """(x, axis) for an op taking ``axis`` as numpy does: None means the flattened array,
    a negative axis counts from the end."""
    if axis is None:
        return reshaped(ctx, x, (x.size,)), 0
    return x, axis + x.ndim if axis < 0 else axis


class RepeatImpl(DeviceImpl):
    host_inputs = (1,)

    def describe(self):
        return 'gather kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x, axis = _along_axis(ctx, ins[0], self.node.op.axis)
        repeats = ins[1]
        n = x.shape[axis]
        # numpy decides validity (negative counts, a vector of the wrong length)
        src = np.repeat(np.arange(n, dtype=np.int64), np.asarray(repeats))
        idx = frame_constant(ctx, src)
        entries = [slice(None)] * axis + [idx]
        return [plan_gather(ctx, self.node, x, entries)]


@ocl_impl.register(RepeatOp)
@implemented_by(RepeatImpl)
def _repeat(op, node, dev):
    return RepeatImpl(node, dev)


class ContiguousImpl(DeviceImpl):
    """CpuContiguous: the input itself when C-contiguous (a view, as Theano's), else a copy."""

    def plan(self, ctx, ins):
        return [ctx.contiguous(ins[0])]


@ocl_impl.register(CpuContiguous)
@implemented_by(ContiguousImpl)
def _contiguous(op, node, dev):
    return ContiguousImpl(node, dev)


class CumImpl(DeviceImpl):
    """cumsum / cumprod along an axis (or of the flattened array): a work-item per line."""
    dtypes = INT_DTYPES + ('float32', 'float64')    # numpy accumulates the others in another type

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        dt = node.inputs[0].dtype
        t = oscalar.ctype(dt)
        support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable' if dt == 'float64' else ''
        self.src, self.name = kernels.render('extra_ops.cl.mako', 'cum' + node.op.mode,
                                             support=support, t=t, ct=oscalar.compute_ctype(dt),
                                             add=node.op.mode == 'add')

    def describe(self):
        return 'line-scan kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x, axis = _along_axis(ctx, ctx.contiguous(ins[0]), self.node.op.axis)
        z = ctx.alloc(x.shape, x.dtype)
        if z.size == 0:
            return [z]
        n = x.shape[axis]
        inner = 1
        for s in x.shape[axis + 1:]:
            inner *= s
        lines = z.size // n
        gsize, lsize = launch_geometry(ctx.dev, lines)
        ctx.launch(ctx.dev.build(self.src), self.name, gsize, lsize,
                   [np.int64(lines), np.int64(n), np.int64(inner), x, z])
        return [z]


@ocl_impl.register(CumOp)
@implemented_by(CumImpl)
def _cum(op, node, dev):
    dt = node.inputs[0].dtype
    if dt not in CumImpl.dtypes:
        raise NoDeviceImplementation('%s of %s (numpy accumulates it in another type)'
                                     % (op, dt))
    return CumImpl(node, dev)


class DiffImpl(DeviceImpl):
    """n-th discrete difference along an axis: n elementwise subtractions of shifted views."""
    dtypes = INT_DTYPES + FLOAT_DTYPES    # numpy differences bools with not_equal

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        dt = node.inputs[0].dtype
        self.code = oscalar.elemwise_code(ts.sub, [dt, dt], [dt])

    def plan(self, ctx, ins):
        x = ins[0]
        op = self.node.op
        if op.n == 0:
            return [x]
        axis = op.axis + x.ndim if op.axis < 0 else op.axis
        if not 0 <= axis < x.ndim:
            raise ValueError('axis %d is out of bounds for array of dimension %d'
                             % (op.axis, x.ndim))
        if op.n < 0:
            raise ValueError('order must be non-negative but got %d' % op.n)
        support, body = self.code
        cur = x
        for _ in range(op.n):
            m = max(cur.shape[axis] - 1, 0)
            shape = cur.shape[:axis] + (m,) + cur.shape[axis + 1:]
            new = ctx.alloc(shape, x.dtype)
            hi = cur.view(shape, cur.strides, cur.offset + (cur.strides[axis] if m else 0))
            lo = cur.view(shape, cur.strides)
            plan_elementwise(ctx, support, body, [new], [hi, lo], shape)
            cur = new
        return [cur]


@ocl_impl.register(DiffOp)
@implemented_by(DiffImpl)
def _diff(op, node, dev):
    dt = node.inputs[0].dtype
    if dt not in DiffImpl.dtypes:
        raise NoDeviceImplementation('%s of %s (numpy takes not_equal)' % (op, dt))
    return DiffImpl(node, dev)


class FillDiagonalImpl(DeviceImpl):
    """A copy of ``a`` whose (offset) diagonal is set to the scalar ``val``: a copy, then
    an elementwise store through a strided view of the diagonal."""

    def __init__(self, node, dev, with_offset):
        DeviceImpl.__init__(self, node, dev)
        self.with_offset = with_offset
        self.host_inputs = (2,) if with_offset else ()

    def plan(self, ctx, ins):
        a, val = ins[0], ins[1]
        out = ctx.alloc(a.shape, a.dtype)
        if out.size == 0:
            return [out]
        ctx.copy(out, a)
        itemsize = out.itemsize
        if self.with_offset:
            offset = int(ins[2])
            height, width = a.shape
            if offset >= 0:
                start, steps = offset, min(min(width, height), width - offset)
            else:
                start, steps = -offset * width, min(min(width, height), height + offset)
            step = width + 1
            # Theano's a.flat[start:end:step], Python's slice rules (a negative end counts
            # from the end) included
            sel = range(out.size)[start:start + step * steps:step]
            k, start = len(sel), (sel[0] if len(sel) else 0)
        elif a.ndim == 2:
            step = a.shape[1] + 1
            sel = range(out.size)[:a.shape[1] * a.shape[1]:step]
            k, start = len(sel), 0
        else:
            if any(s != a.shape[0] for s in a.shape):
                raise ValueError('All dimensions of input must be of equal length')
            start, k = 0, a.shape[0]
            step = sum(st // itemsize for st in out.strides)
        if k:
            diag = out.view((k,), (step * itemsize,), start * itemsize)
            v = val.view((1,), (itemsize,))
            plan_elementwise(ctx, '', 'o0 = i0;', [diag], [v], (k,))
        return [out]


@ocl_impl.register(FillDiagonal)
@implemented_by(FillDiagonalImpl)
def _fill_diagonal(op, node, dev):
    oscalar.ctype(node.inputs[0].dtype)
    return FillDiagonalImpl(node, dev, False)


@ocl_impl.register(FillDiagonalOffset)
@implemented_by(FillDiagonalImpl)
def _fill_diagonal_offset(op, node, dev):
    oscalar.ctype(node.inputs[0].dtype)
    return FillDiagonalImpl(node, dev, True)


# ------------------------------------------------------------- flat <-> multi indices
# The dims are a host input (the frame is keyed on their values) and become constants of
# an elementwise body; out-of-range entries set the kernel's error flag, raised after the
# call as numpy's ValueError.

def _int_dims(dims):
    dims = [int(d) for d in np.asarray(dims).ravel()]
    if any(d < 0 for d in dims):
        raise ValueError('dimensions must be non-negative, got %s' % (dims,))
    return dims


class UnravelIndexImpl(DeviceImpl):
    """indices -> one int64 coordinate array per dimension. Theano's perform ignores
    ``order`` (np.unravel_index(indices, dims) is C order): so does this."""
    host_inputs = (1,)

    def plan(self, ctx, ins):
        idx, dims = ins[0], _int_dims(ins[1])
        if len(dims) != self.node.op.ndim:
            raise ValueError('%s: dims has %d entries, the op has %d outputs'
                             % (self.node.op, len(dims), self.node.op.ndim))
        size = 1
        for d in dims:
            size *= d
        outs = [ctx.alloc(idx.shape, 'int64') for _ in dims]
        if idx.size == 0:
            return outs
        lines = ['long r = (long)i0;',
                 'if (r < 0 || r >= %dL) { th_err = 1; r = 0; }' % size]
        if size == 0:
            lines += ['o%d = 0;' % k for k in range(len(dims))]
        else:
            for k in reversed(range(len(dims))):
                lines.append('o%d = r %% %dL; r /= %dL;' % (k, dims[k], dims[k]))
        err = error_flag(ctx)
        plan_elementwise(ctx, '', '\n'.join(lines), outs, [idx], idx.shape, err=err)
        check_flag(ctx, err, lambda code: ValueError(
            'index out of bounds for array with size %d (in %s)' % (size, self.node.op)))
        return outs


class RavelMultiIndexImpl(DeviceImpl):
    """coordinate arrays -> int64 flat indices, modes raise / wrap / clip, order C / F."""

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = (len(node.inputs) - 1,)

    def plan(self, ctx, ins):
        coords, dims = ins[:-1], _int_dims(ins[-1])
        op = self.node.op
        if len(dims) != len(coords):
            raise ValueError('parameter multi_index must be a sequence of length %d'
                             % len(dims))
        shape = tuple(np.broadcast_shapes(*[c.shape for c in coords]))
        out = ctx.alloc(shape, 'int64')
        if out.size == 0:
            return [out]
        lines = []
        for k, d in enumerate(dims):
            c = 'c%d' % k
            lines.append('long %s = (long)i%d;' % (c, k))
            if op.mode == 'raise' or d == 0:
                lines.append('if (%s < 0 || %s >= %dL) { th_err = 1; %s = 0; }' % (c, c, d, c))
            elif op.mode == 'wrap':
                lines.append('%s %%= %dL; if (%s < 0) %s += %dL;' % (c, d, c, c, d))
            else:
                lines.append('%s = %s < 0 ? 0 : (%s >= %dL ? %dL : %s);' % (c, c, c, d, d - 1, c))
        order = range(len(dims)) if op.order == 'C' else reversed(range(len(dims)))
        expr = None
        for k in order:
            expr = 'c%d' % k if expr is None else '(%s) * %dL + c%d' % (expr, dims[k], k)
        lines.append('o0 = %s;' % expr)
        err = error_flag(ctx)
        plan_elementwise(ctx, '', '\n'.join(lines), [out], list(coords), shape, err=err)
        check_flag(ctx, err, lambda code: ValueError('invalid entry in coordinates array'))
        return [out]


@ocl_impl.register(UnravelIndex)
@implemented_by(UnravelIndexImpl)
def _unravel(op, node, dev):
    return UnravelIndexImpl(node, dev)


@ocl_impl.register(RavelMultiIndex)
@implemented_by(RavelMultiIndexImpl)
def _ravel(op, node, dev):
    return RavelMultiIndexImpl(node, dev)


class SearchsortedImpl(DeviceImpl):
    """searchsorted(x, v, side, sorter): a binary search per value, numpy's answers on an
    unsorted x too (kernels/searchsorted.cl.mako: check, search, serial)."""
    dtypes = ('bool',) + INT_DTYPES + ('float32', 'float64')

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        x, v = node.inputs[:2]
        sorter = node.inputs[2] if len(node.inputs) > 2 else None
        common = np.result_type(x.dtype, v.dtype).name
        dtypes = [x.dtype, v.dtype, common] + ([sorter.dtype] if sorter is not None else [])
        support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable' if 'float64' in dtypes else ''
        self.kernels = {}
        for mode in ('check', 'search', 'serial'):
            src, name = kernels.render(
                'searchsorted.cl.mako', 'searchsorted_' + mode, mode=mode, support=support,
                xt=oscalar.ctype(x.dtype), vt=oscalar.ctype(v.dtype),
                ct=oscalar.compute_ctype(common), is_float=common.startswith('float'),
                right=node.op.side == 'right', sorter=sorter is not None,
                st=oscalar.ctype(sorter.dtype) if sorter is not None else None)
            self.kernels[mode] = (name, src)

    def describe(self):
        return 'binary-search kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x, v = ins[0], ctx.contiguous(ins[1])
        sorter = ins[2] if len(ins) > 2 else None
        n = x.shape[0]
        if sorter is not None and sorter.shape[0] != n:
            raise ValueError('sorter.size must equal a.size')
        z = ctx.alloc(v.shape, 'int64')
        if z.size == 0:
            return [z]
        unsorted = error_flag(ctx)       # set by 'check', cleared by 'serial'
        args = [np.int64(z.size), np.int64(n), x, np.int64(x.strides[0] // x.itemsize),
                v, z, unsorted]
        err = None
        if sorter is not None:
            err = error_flag(ctx)
            args += [sorter, np.int64(sorter.strides[0] // sorter.itemsize), err]
        for mode, items in (('check', max(n - 1, 1)), ('search', z.size), ('serial', 1)):
            name, src = self.kernels[mode]
            gsize, lsize = launch_geometry(ctx.dev, items)
            ctx.launch(ctx.dev.build(src), name, gsize, lsize, args)
        if err is not None:
            check_flag(ctx, err, lambda code: ValueError('Sorter index out of range.'))
        return [z]


@ocl_impl.register(SearchsortedOp)
@implemented_by(SearchsortedImpl)
def _searchsorted(op, node, dev):
    if any(v.dtype not in SearchsortedImpl.dtypes for v in node.inputs):
        raise NoDeviceImplementation('%s of float16/complex values' % op)
    return SearchsortedImpl(node, dev)


@ocl_impl.register(Bartlett)
@implemented_by(HostComputed)
def _bartlett(op, node, dev):
    return HostComputed(node, dev)
