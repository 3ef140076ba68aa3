"""nnet family: the softmax ops and the cross-entropies Theano builds on them.

Softmax, SoftmaxWithBias, LogSoftmax, SoftmaxGrad, CrossentropySoftmaxArgmax1HotWithBias,
CrossentropySoftmax1HotWithBiasDx, CrossentropyCategorical1Hot and its grad
CrossentropyCategorical1HotGrad. One Mako template (``kernels/nnet.cl.mako``) serves them
all, specialised per (kind, operand dtypes and ndims, local size): row-wise ops run one
work-group per row with local-memory reductions, the others one work-item per element.
relu, elu, binary_crossentropy and h_softmax lower to Elemwise, reductions, Dot/Gemm and
these ops, so they need nothing of their own.

Class indices out of range raise what Theano raises: ValueError "y_i value out of bounds"
(CrossentropySoftmaxArgmax1HotWithBias) and "y_i >= dx dimensions[1] or y_i < 0."
(CrossentropySoftmax1HotWithBiasDx), their C code's; IndexError "index %d is out of bounds
for axis 1 with size %d" (CrossentropyCategorical1Hot and its grad, which Theano runs in
Python: numpy indexing, where a negative index counts from the row's end). The kernels set
an error flag that a host step reads after the launch (``elemwise.check_flag``, the
mechanism of ops/subtensor.py); the IndexError's index is then found on the host.
"""
import numpy as np
from theano.tensor.nnet import nnet as tnnet

from .. import kernels
from .. import scalar as oscalar
from ..errors import NoDeviceImplementation
from ..runtime.plans import launch_geometry
from .base import DeviceImpl, FLOAT_DTYPES, INT_DTYPES
from .elemwise import check_flag, error_flag
from .registry import implemented_by, ocl_impl
from .subtensor import host_copy

ROW_KINDS = ('softmax', 'log_softmax', 'softmax_grad', 'xent_softmax_1hot')
# kinds reading a class index per row: they report one out of range in an error flag
CHECKED_KINDS = ('xent_softmax_1hot', 'xent_dx', 'xent_1hot', 'xent_1hot_grad')


@kernels.memoize
def kernel_source(kind, operands, L):
    """Render (memoized) one kernel; ``operands``: a tuple of (name, dtype, ndim, is_output)
    in argument order. Returns (source, kernel name)."""
    ops = {}
    floats = []
    for name, dtype, nd, out in operands:
        ops[name] = dict(t=oscalar.ctype(dtype), half=dtype == 'float16', nd=nd, out=out,
                         signed=dtype.startswith('int'))
        if dtype.startswith('float'):
            floats.append(dtype)
    acc = 'double' if 'float64' in floats else 'float'
    support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' if acc == 'double' else ''
    return kernels.render('nnet.cl.mako', 'nnet_' + kind, kind=kind, support=support,
                          acc_t=acc, L=L, ops=ops, order=[o[0] for o in operands],
                          check=kind in CHECKED_KINDS)


def row_local_size(dev, D):
    """Lanes per row: a power of two covering the row, capped (CPU devices run lanes as
    loop iterations, where fewer lanes with longer strides are cheaper)."""
    cap = 64 if dev.is_cpu else 256
    cap = min(cap, dev.max_work_group_size)
    L = 1
    while L < cap and L < D:
        L *= 2
    return L


def plan_nnet(ctx, kind, operands, N, D, make_error=None):
    """Record one launch of ``kind`` over N rows of D columns.

    ``operands``: (name, DArray, is_output) in the kernel's argument order; every operand
    passes its offset and element strides. Kinds in CHECKED_KINDS also take an error flag,
    checked after the launch: a set flag raises ``make_error()``."""
    if N == 0:
        return
    L = row_local_size(ctx.dev, D) if kind in ROW_KINDS else 1
    src, name = kernel_source(kind, tuple((n, d.dtype.name, d.ndim, out)
                                          for n, d, out in operands), L)
    prg = ctx.dev.build(src)
    args = [np.int64(N), np.int64(D)]
    for _, d, _ in operands:
        args.append(d)
        args.extend(np.int64(s // d.itemsize) for s in d.strides)
    err = error_flag(ctx) if kind in CHECKED_KINDS else None
    if err is not None:
        args.append(err)
    if kind in ROW_KINDS:
        gsize, lsize = (N * L,), (L,)
    else:
        gsize, lsize = launch_geometry(ctx.dev, N if kind == 'xent_1hot' or D == 0 else N * D)
    ctx.launch(prg, name, gsize, lsize, args)
    if err is not None:
        check_flag(ctx, err, lambda code: make_error())


def _broadcast_rows(d, N):
    """A vector (or 0-d) per-row operand; length 1 (or 0-d) is broadcast over the N rows."""
    if d.ndim == 0:
        return d.view((N,), (0,))
    if d.shape[0] == 1 and N != 1:
        return d.view((N,), (0,))
    return d


class _NnetImpl(DeviceImpl):
    dtypes = INT_DTYPES + FLOAT_DTYPES    # float values, integer class indices
    host_when = 'an output that is not a float'

    def describe(self):
        return '%s kernel' % type(self.node.op).__name__

    def out_dtype(self, k=0):
        return self.node.outputs[k].type.dtype


class SoftmaxImpl(_NnetImpl):
    """Softmax, LogSoftmax, SoftmaxWithBias: y = softmax(x [+ b]) row by row."""

    def __init__(self, node, dev, kind):
        _NnetImpl.__init__(self, node, dev)
        self.kind = kind

    def plan(self, ctx, ins):
        x = ins[0]
        N, D = x.shape
        ops = [('x', x, False)]
        if len(ins) > 1:
            b = ins[1]
            if b.shape[0] != D:
                raise ValueError('number of columns in x (%d) does not match length of b (%d) '
                                 'in %s' % (D, b.shape[0], self.node.op))
            ops.append(('b', b, False))
        y = ctx.alloc((N, D), self.out_dtype())
        if D:
            plan_nnet(ctx, self.kind, ops + [('y', y, True)], N, D)
        return [y]


class SoftmaxGradImpl(_NnetImpl):
    """SoftmaxGrad(dy, sm): dx = dy * sm - sum(dy * sm, axis=1) * sm."""

    def plan(self, ctx, ins):
        dy, sm = ins
        if dy.shape != sm.shape:
            raise ValueError('dy and the softmax output must have the same shape in %s: '
                             'dy %s, sm %s' % (self.node.op, dy.shape, sm.shape))
        N, D = sm.shape
        dx = ctx.alloc((N, D), self.out_dtype())
        if D:
            plan_nnet(ctx, 'softmax_grad', [('dy', dy, False), ('sm', sm, False), ('dx', dx, True)],
                      N, D)
        return [dx]


class XentSoftmaxArgmaxImpl(_NnetImpl):
    """CrossentropySoftmaxArgmax1HotWithBias(x, b, y_idx) -> (nll, softmax(x + b), argmax)."""

    def plan(self, ctx, ins):
        x, b, yidx = ins
        N, D = x.shape
        if b.shape[0] != D:
            raise ValueError('number of columns in x (%d) does not match length of b (%d)'
                             % (D, b.shape[0]))
        if yidx.shape[0] != N:
            raise ValueError('number of rows in x (%d) does not match length of y (%d)'
                             % (N, yidx.shape[0]))
        nll = ctx.alloc((N,), self.out_dtype(0))
        sm = ctx.alloc((N, D), self.out_dtype(1))
        am = ctx.alloc((N,), self.out_dtype(2))
        plan_nnet(ctx, 'xent_softmax_1hot', [('x', x, False), ('b', b, False), ('yidx', yidx, False),
                                             ('nll', nll, True), ('y', sm, True), ('am', am, True)],
                  N, D, lambda: ValueError('y_i value out of bounds'))
        return [nll, sm, am]


class XentDxImpl(_NnetImpl):
    """CrossentropySoftmax1HotWithBiasDx(dy, sm, y_idx): dy[i] * (sm[i] - onehot(y_idx[i]))."""

    def plan(self, ctx, ins):
        dy, sm, yidx = ins
        N, D = sm.shape
        if dy.ndim and dy.shape[0] not in (1, N):
            raise ValueError('dnll has %d rows, the softmax output %d' % (dy.shape[0], N))
        if yidx.shape[0] != N:
            raise ValueError('y_idx has %d rows, the softmax output %d' % (yidx.shape[0], N))
        dx = ctx.alloc((N, D), self.out_dtype())
        # with D == 0 the kernel still checks every row's index (all out of range)
        plan_nnet(ctx, 'xent_dx', [('dy', _broadcast_rows(dy, N), False), ('sm', sm, False),
                                   ('tidx', yidx, False), ('y', dx, True)], N, D,
                  lambda: ValueError('y_i >= dx dimensions[1] or y_i < 0.'))
        return [dx]


class Xent1HotImpl(_NnetImpl):
    """CrossentropyCategorical1Hot(coding, t): -log(coding[i, t[i]])."""

    def plan(self, ctx, ins):
        x, t = ins
        N, D = x.shape
        if t.shape[0] != N:
            raise ValueError('coding_dist has %d rows, true_one_of_n %d' % (N, t.shape[0]))
        y = ctx.alloc((N,), self.out_dtype())
        plan_nnet(ctx, 'xent_1hot', [('x', x, False), ('tidx', t, False), ('y', y, True)], N, D,
                  _index_error(ctx, t, D))
        return [y]


class Xent1HotGradImpl(_NnetImpl):
    """CrossentropyCategorical1HotGrad(g_y, coding, t): -g_y[i] / coding[i, t[i]] at t[i]."""

    def plan(self, ctx, ins):
        gy, x, t = ins
        N, D = x.shape
        if gy.shape[0] != N or t.shape[0] != N:
            raise ValueError('coding_dist has %d rows, g_y %d, true_one_of_n %d'
                             % (N, gy.shape[0], t.shape[0]))
        g = ctx.alloc((N, D), self.out_dtype())
        plan_nnet(ctx, 'xent_1hot_grad', [('dy', gy, False), ('x', x, False), ('tidx', t, False),
                                          ('y', g, True)], N, D, _index_error(ctx, t, D))
        return [g]


def _index_error(ctx, t, D):
    """numpy's IndexError for the first row whose index ``t[i]`` is outside [-D, D): what
    Theano's perform of CrossentropyCategorical1Hot[Grad] raises (read when the flag is set)."""
    dev, queue = ctx.dev, ctx.queue

    def make_error():
        values = host_copy(dev, queue, t)
        bad = values >= D if values.dtype.kind == 'u' else (values < -D) | (values >= D)
        value = int(values[bad][0]) if bad.any() else -1
        if value > np.iinfo(np.int64).max:      # a uint64 index numpy cannot convert
            return OverflowError('Python int too large to convert to C long')
        return IndexError('index %d is out of bounds for axis 1 with size %d' % (value, D))
    return make_error


def _factory(cls, *extra):
    @implemented_by(cls)
    def factory(op, node, dev):
        for v in node.inputs + node.outputs:
            if v.type.dtype.startswith('complex'):
                raise NoDeviceImplementation('complex dtypes have no device kernels')
        if not node.outputs[0].type.dtype.startswith('float'):
            raise NoDeviceImplementation('%s of %s' % (type(op).__name__, node.outputs[0].type.dtype))
        return cls(node, dev, *extra)
    return factory


ocl_impl.register(tnnet.Softmax)(_factory(SoftmaxImpl, 'softmax'))
ocl_impl.register(tnnet.SoftmaxWithBias)(_factory(SoftmaxImpl, 'softmax'))
ocl_impl.register(tnnet.LogSoftmax)(_factory(SoftmaxImpl, 'log_softmax'))
ocl_impl.register(tnnet.SoftmaxGrad)(_factory(SoftmaxGradImpl))
ocl_impl.register(tnnet.CrossentropySoftmaxArgmax1HotWithBias)(_factory(XentSoftmaxArgmaxImpl))
ocl_impl.register(tnnet.CrossentropySoftmax1HotWithBiasDx)(_factory(XentDxImpl))
ocl_impl.register(tnnet.CrossentropyCategorical1Hot)(_factory(Xent1HotImpl))
ocl_impl.register(tnnet.CrossentropyCategorical1HotGrad)(_factory(Xent1HotGradImpl))
