"""Shapes, views, fills and joins.

Views (no kernel, no copy): DimShuffle, Reshape and Flatten of C-contiguous data,
SpecifyShape, Rebroadcast, Split, Assert (its conditions checked on the host where they
are host values, else by a one-item kernel setting an error flag read after the call).
Fills: Alloc (a broadcasting copy of the value), AllocEmpty (no launch). Values that only
depend on host inputs (Eye, Tri, ARange, TensorFromScalar) are computed once per frame with
numpy and uploaded into a frame constant: frames are keyed and guarded on those host values,
so replays cost nothing.
Joins (Join, MakeVector): one strided copy per input into its slice of the output.

ScalarFromTensor has no device implementation: its output is a Scalar, which the
linker keeps on the host (shape arithmetic when its input is there too).
"""
import numpy as np
from theano.compile.ops import Rebroadcast, SpecifyShape
from theano.gof import Constant
from theano.tensor import basic as tbasic
from theano.tensor.elemwise import DimShuffle
from theano.tensor.opt import Assert, MakeVector

from ..darray import c_strides
from ..errors import NoDeviceImplementation
from .base import DeviceImpl
from .elemwise import check_flag, error_flag, plan_elementwise, strided_copy
from .registry import implemented_by, ocl_impl


def frame_constant(ctx, value):
    """A device copy of a host-decided value, owned by the frame (see PlanContext.constant)."""
    return ctx.constant(value)


def contiguous(ctx, x):
    """``x`` itself when C-contiguous, else a C-contiguous device copy."""
    return ctx.contiguous(x)


def reshaped(ctx, x, shape):
    """``x`` with a new shape of the same size: a view, after a copy if ``x`` is strided."""
    x = contiguous(ctx, x)
    return x.view(shape, c_strides(shape, x.itemsize))


def resolve_shape(shape, size, what):
    """numpy's reshape rule: at most one -1, the sizes must agree; ValueError otherwise."""
    shape = [int(s) for s in shape]
    unknown = [d for d, s in enumerate(shape) if s == -1]
    known = 1
    for s in shape:
        if s != -1:
            if s < 0:
                raise ValueError('%s: negative dimension in shape %s' % (what, tuple(shape)))
            known *= s
    if len(unknown) > 1 or (unknown and (known == 0 or size % known)) or \
            (not unknown and known != size):
        raise ValueError('Cannot reshape input of size %d to shape %s (%s)'
                         % (size, tuple(shape), what))
    if unknown:
        shape[unknown[0]] = size // known
    return tuple(shape)


class DimShuffleView(DeviceImpl):
    complex_ok = True       # views and copies only
    is_view = True

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.new_order = node.op.new_order
        self.drop = [d for d in range(node.inputs[0].ndim) if d not in self.new_order]

    def describe(self):
        return 'view (DimShuffle %s)' % (self.new_order,)

    def plan(self, ctx, ins):
        x = ins[0]
        for d in self.drop:
            if x.shape[d] != 1:
                raise ValueError('DimShuffle%s cannot drop dimension %d of an input of shape %s '
                                 '(only broadcastable, size-1 dimensions can be dropped)'
                                 % (self.new_order, d, x.shape))
        shape, strides = [], []
        for o in self.new_order:
            if o == 'x':
                shape.append(1)
                strides.append(x.itemsize)
            else:
                shape.append(x.shape[o])
                strides.append(x.strides[o])
        return [x.view(shape, strides)]


@ocl_impl.register(DimShuffle)
@implemented_by(DimShuffleView)
def _dimshuffle(op, node, dev):
    return DimShuffleView(node, dev)


class ReshapeView(DeviceImpl):
    complex_ok = True       # views and copies only

    host_inputs = (1,)

    def plan(self, ctx, ins):
        x, shape = ins
        ndim = self.node.op.ndim
        if len(shape) != ndim:
            raise ValueError('shape argument to Reshape has length %d, expected %d'
                             % (len(shape), ndim))
        return [reshaped(ctx, x, resolve_shape(shape, x.size, str(self.node.op)))]


@ocl_impl.register(tbasic.Reshape)
@implemented_by(ReshapeView)
def _reshape(op, node, dev):
    return ReshapeView(node, dev)


class FlattenView(DeviceImpl):
    complex_ok = True       # views and copies only

    def plan(self, ctx, ins):
        x, = ins
        outdim = self.node.op.outdim
        lead = x.shape[:outdim - 1]
        rest = 1
        for s in x.shape[outdim - 1:]:
            rest *= s
        return [reshaped(ctx, x, lead + (rest,))]


@ocl_impl.register(tbasic.Flatten)
@implemented_by(FlattenView)
def _flatten(op, node, dev):
    return FlattenView(node, dev)


class SpecifyShapeView(DeviceImpl):
    complex_ok = True       # views and copies only

    host_inputs = (1,)

    def plan(self, ctx, ins):
        x, shape = ins
        shape = np.asarray(shape)
        # Theano's own checks and messages
        assert x.ndim == shape.size
        assert np.all(np.asarray(x.shape) == shape), ("got shape", x.shape, "expected", shape)
        return [x]


@ocl_impl.register(SpecifyShape)
@implemented_by(SpecifyShapeView)
def _specify_shape(op, node, dev):
    return SpecifyShapeView(node, dev)


class AssertView(DeviceImpl):
    """The value, viewed; Theano's ``AssertionError(op.msg)`` when a condition is false.

    Conditions the linker has on the host (shape arithmetic, constants, scalar inputs: the
    asserts Theano's optimizer inserts) are checked while planning; the frame is keyed or
    guarded on them, so a changed value plans (and checks) again. Conditions computed on the
    device are tested by one work-item that sets an error flag, read once the call's
    outputs are fetched (``check_flag``): no call waits for it, and a failed call commits
    no update.
    """
    host_when = 'a complex condition'
    complex_ok = True       # the value is only viewed

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        if any(c.type.dtype.startswith('complex') for c in node.inputs[1:]):
            raise NoDeviceImplementation('a complex Assert condition')
        self.host_if_available = tuple(range(1, len(node.inputs)))

    def plan(self, ctx, ins):
        msg = self.node.op.msg
        on_dev = []
        for j, c in enumerate(ins[1:], 1):
            if j in self.host_inputs:
                if not np.all(c):
                    raise AssertionError(msg)
            else:
                on_dev.append(c)
        if on_dev:
            err = error_flag(ctx)
            test = ' || '.join('!(i%d)' % k for k in range(len(on_dev)))
            plan_elementwise(ctx, '', 'if (%s) th_err = 1;' % test, [], on_dev, (), err=err)
            check_flag(ctx, err, lambda code: AssertionError(msg))
        return [ins[0]]


@ocl_impl.register(Assert)
@implemented_by(AssertView)
def _assert(op, node, dev):
    return AssertView(node, dev)


class RebroadcastView(DeviceImpl):
    complex_ok = True       # views and copies only

    def plan(self, ctx, ins):
        x, = ins
        for axis, value in self.node.op.axis.items():
            if value and x.shape[axis] != 1:
                raise ValueError("Dimension %s in Rebroadcast's input was supposed to be 1 "
                                 "(got %s instead)" % (axis, x.shape[axis]))
        return [x]


@ocl_impl.register(Rebroadcast)
@implemented_by(RebroadcastView)
def _rebroadcast(op, node, dev):
    return RebroadcastView(node, dev)


class AllocFill(DeviceImpl):
    complex_ok = True       # a broadcasting copy

    """Alloc(value, *shape): the value broadcast (numpy rules) into a fresh array."""

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = tuple(range(1, len(node.inputs)))
        self.zero = isinstance(node.inputs[0], Constant) and not np.any(node.inputs[0].data)

    def plan(self, ctx, ins):
        v, shape = ins[0], tuple(int(s) for s in ins[1:])
        out = ctx.alloc(shape, v.dtype)
        lead = len(shape) - v.ndim
        for d, n in enumerate(v.shape):
            if n != 1 and n != shape[lead + d]:
                raise ValueError('Alloc: could not broadcast a value of shape %s to shape %s'
                                 % (v.shape, shape))
        # a broadcasting copy: ctx.copy is for same-shaped arrays only
        strided_copy(ctx, out, v.view((1,) * lead + v.shape, (v.itemsize,) * lead + v.strides))
        if self.zero:
            ctx.zeros_written(out)    # updates of views that cover it may drop the fill
        return [out]


@ocl_impl.register(tbasic.Alloc)
@implemented_by(AllocFill)
def _alloc(op, node, dev):
    return AllocFill(node, dev)


class AllocEmptyImpl(DeviceImpl):
    complex_ok = True       # views and copies only
    is_view = True          # an allocation: no launch

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = tuple(range(len(node.inputs)))

    def plan(self, ctx, ins):
        return [ctx.alloc(tuple(int(s) for s in ins), self.node.outputs[0].type.dtype)]


@ocl_impl.register(tbasic.AllocEmpty)
@implemented_by(AllocEmptyImpl)
def _alloc_empty(op, node, dev):
    return AllocEmptyImpl(node, dev)


class HostComputed(DeviceImpl):
    """An output that only depends on host inputs: computed by the op's own ``perform``
    once per frame, uploaded as a frame constant."""
    complex_ok = True       # bytes uploaded as they are

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = tuple(range(len(node.inputs)))

    def plan(self, ctx, ins):
        out = [None]
        # None stays None: Theano passes a None input as is (eye(N, None) is eye(N, N))
        self.node.op.perform(self.node, [v if v is None else np.asarray(v) for v in ins], [out])
        dtype = self.node.outputs[0].type.dtype
        return [frame_constant(ctx, np.asarray(out[0], dtype=dtype))]


@ocl_impl.register(tbasic.Eye)
@ocl_impl.register(tbasic.Tri)
@ocl_impl.register(tbasic.ARange)
@ocl_impl.register(tbasic.TensorFromScalar)
@implemented_by(HostComputed)
def _host_computed(op, node, dev):
    return HostComputed(node, dev)


@ocl_impl.register(tbasic.ScalarFromTensor)
@implemented_by()
def _scalar_from_tensor(op, node, dev):
    """Its output is a Scalar, which lives on the host (Theano scalars have no device storage)."""
    raise NoDeviceImplementation('ScalarFromTensor gives a Scalar, which lives on the host')


def copy_into_slices(ctx, out, axis, parts):
    """Copy each of ``parts`` into consecutive slices of ``out`` along ``axis``."""
    start = 0
    for p in parts:
        n = p.shape[axis]
        shape = out.shape[:axis] + (n,) + out.shape[axis + 1:]
        ctx.copy(out.view(shape, out.strides, out.offset + start * out.strides[axis]), p)
        start += n


class JoinImpl(DeviceImpl):
    complex_ok = True       # views and copies only

    host_inputs = (0,)

    def plan(self, ctx, ins):
        axis, parts = int(ins[0]), ins[1:]
        ndim = parts[0].ndim
        if not -ndim <= axis < ndim:
            raise IndexError('Join axis %d out of bounds [0, %d)' % (axis, ndim))
        axis %= ndim
        ref = parts[0].shape
        for k, p in enumerate(parts):
            if p.ndim != ndim or any(a != b for d, (a, b) in enumerate(zip(p.shape, ref)) if d != axis):
                raise ValueError('Join: input %d has shape %s, input 0 has %s: all dimensions '
                                 'but axis %d must agree' % (k, p.shape, ref, axis))
        total = sum(p.shape[axis] for p in parts)
        out = ctx.alloc(ref[:axis] + (total,) + ref[axis + 1:], self.node.outputs[0].type.dtype)
        copy_into_slices(ctx, out, axis, parts)
        return [out]


@ocl_impl.register(tbasic.Join)
@implemented_by(JoinImpl)
def _join(op, node, dev):
    return JoinImpl(node, dev)


class MakeVectorImpl(DeviceImpl):
    def plan(self, ctx, ins):
        out = ctx.alloc((len(ins),), self.node.outputs[0].type.dtype)
        copy_into_slices(ctx, out, 0, [x.view((1,), (x.itemsize,)) for x in ins])
        return [out]


@ocl_impl.register(MakeVector)
@implemented_by(MakeVectorImpl)
def _make_vector(op, node, dev):
    return MakeVectorImpl(node, dev)


class SplitViews(DeviceImpl):
    complex_ok = True       # views and copies only

    host_inputs = (1, 2)

    def plan(self, ctx, ins):
        x, axis, splits = ins
        axis = int(axis)
        if not -x.ndim <= axis < x.ndim:
            raise ValueError('Split with axis=(%s) is invalid for x.shape==(%s)' % (axis, x.shape))
        axis %= x.ndim
        if len(splits) != self.node.op.len_splits:
            raise ValueError('Split: len(splits) != len_splits.', (len(splits), self.node.op.len_splits))
        if np.sum(splits) != x.shape[axis]:
            raise ValueError('The splits sum to %s, expected %s' % (np.sum(splits), x.shape[axis]))
        if any(s < 0 for s in splits):
            raise ValueError('Split: you tried to make an ndarray with a negative number of elements.')
        outs, start = [], 0
        for s in splits:
            shape = x.shape[:axis] + (int(s),) + x.shape[axis + 1:]
            offset = x.offset + start * x.strides[axis] if s else x.offset
            outs.append(x.view(shape, x.strides, offset))
            start += int(s)
        return outs


@ocl_impl.register(tbasic.Split)
@implemented_by(SplitViews)
def _split(op, node, dev):
    return SplitViews(node, dev)


def diagonal_view(x, offset, axis1, axis2):
    """numpy's ``x.diagonal(offset, axis1, axis2)`` of a DArray, as a view: the other dims
    in order, then the diagonal (stride = the two axes' strides summed)."""
    s1, s2 = x.shape[axis1], x.shape[axis2]
    n = max(0, min(s1, s2 - offset)) if offset >= 0 else max(0, min(s1 + offset, s2))
    start = x.offset
    if n:
        start += offset * x.strides[axis2] if offset >= 0 else -offset * x.strides[axis1]
    keep = [d for d in range(x.ndim) if d not in (axis1, axis2)]
    return x.view(tuple(x.shape[d] for d in keep) + (n,),
                  tuple(x.strides[d] for d in keep) + (x.strides[axis1] + x.strides[axis2],),
                  start)


class ExtractDiagImpl(DeviceImpl):
    """ExtractDiag: a strided view of the diagonal (the op's ``view``), else its copy."""

    def plan(self, ctx, ins):
        op = self.node.op
        x = ins[0]
        a1, a2 = [a + x.ndim if a < 0 else a for a in (op.axis1, op.axis2)]
        d = diagonal_view(x, op.offset, a1, a2)
        if getattr(op, 'view', False):
            return [d]
        out = ctx.alloc(d.shape, d.dtype)
        if out.size:
            strided_copy(ctx, out, d)
        return [out]


@ocl_impl.register(tbasic.ExtractDiag)
@implemented_by(ExtractDiagImpl)
def _extract_diag(op, node, dev):
    return ExtractDiagImpl(node, dev)


class AllocDiagImpl(DeviceImpl):
    """AllocDiag: zeros with ``x`` copied onto the (offset) diagonal of two new axes, which
    are then moved to (axis1, axis2) by a view, as the op's ``perform`` transposes."""

    def plan(self, ctx, ins):
        op = self.node.op
        x = ins[0]
        off = op.offset
        n = x.shape[-1] + abs(off)
        shape = x.shape[:-1] + (n, n)
        res = ctx.alloc(shape, x.dtype)
        if res.size:
            zero = ctx.constant(np.zeros((), x.dtype))
            strided_copy(ctx, res, zero.view(shape, (0,) * len(shape)))
            diag = diagonal_view(res, off, len(shape) - 2, len(shape) - 1)
            if x.size:
                strided_copy(ctx, diag, x)
        if x.ndim > 1:
            axis1, axis2 = min(op.axis1, op.axis2), max(op.axis1, op.axis2)
            axes = list(range(x.ndim - 1))
            last = axes[-1]
            axes = axes[:axis1] + [last + 1] + axes[axis1:]
            axes = axes[:axis2] + [last + 2] + axes[axis2:]
            res = res.view(tuple(res.shape[a] for a in axes),
                           tuple(res.strides[a] for a in axes), res.offset)
        return [res]


@ocl_impl.register(tbasic.AllocDiag)
@implemented_by(AllocDiagImpl)
def _alloc_diag(op, node, dev):
    return AllocDiagImpl(node, dev)
