"""Batch normalization family: ``AbstractBatchNormTrain``, ``AbstractBatchNormInference``
and ``AbstractBatchNormTrainGrad`` (theano/tensor/nnet/bn.py).

Theano's optimizer (bn.py's ``batchnorm_opts``, in FAST_RUN and FAST_COMPILE) rewrites the
three ops into elementwise and reduction graphs, which the elemwise and reduce families
run; the old ``batch_normalization`` is an Elemwise (``BNComposite``) from the start. The
ops themselves reach the linker where that rewrite is left out (``excluding('batchnorm_opts')``,
``optimizer=None``) or refused: ``AbstractBatchNormTrain`` with running averages of float32
values under floatX=float64, whose rewritten running variance is float64 (the factor
m/(m-1) is cast to floatX), so the replacement's type does not match and the op stays.

No template of its own: each op is planned as the sums and elementwise stages its
``perform`` computes -- sums by the reduce family (the summed value computed inside the
reduction kernel, an :class:`~.fusion.Fused` producer, where that pays), stages by
``plan_elementwise`` -- each stage's scalar code generated from a Theano ``Composite``
(``scalar.elemwise_code``), so the arithmetic is Theano's. Sums accumulate in float64
(float32 on a device without fp64), where numpy's ``perform`` sums in the values' dtype,
so float32 results agree to rounding. Operands broadcast as numpy broadcasts them in
``perform``: shapes that do not broadcast raise its ValueError, axes past ``x.ndim`` its
"axes should be less than ndim".
"""
import numpy as np
import theano.scalar as ts
from theano.tensor.nnet import bn as tbn

from .. import kernels
from .. import scalar as oscalar
from ..errors import NoDeviceImplementation
from .base import DeviceImpl, INT_DTYPES
from .elemwise import Fused, elem_strides, plan_elementwise
from .reduce import plan_reduce, reduced_input, sum_combine
from .registry import implemented_by, ocl_impl


def _const(value, like):
    return ts.constant(np.asarray(value, dtype=like.type.dtype))


def _as(v, dtype):
    return v if v.type.dtype == dtype else ts.cast(v, dtype)


# The stages: scalar functions of Theano scalars, named so that their code is memoized
# (``stage_code``). Sums arrive in the accumulator's dtype, and a stage whose first input is
# one computes in it.
def _center_sq(x, mean):
    d = x - mean
    return [d * d]


def _divide(s, n):
    return [s / n]


def _invstd(vsum, n, eps):
    var = vsum / n
    return [var, ts.inv(ts.sqrt(var + eps))]


def _running(rm, rv, mean, var, raf, unbias):
    keep = _const(1.0, raf) - raf
    return [rm * keep + mean * raf, rv * keep + unbias * var * raf]


def _normalize(x, mean, scale, invstd, bias):
    return [(x - mean) * (scale * invstd) + bias]


def _infer(x, mean, scale, var, eps, bias):
    return [(x - mean) * (scale / ts.sqrt(var + eps)) + bias]


def _dy_xdiff(dy, x, xm):
    return [dy * (x - xm)]


def _dy_invstd_xdiff(dy, invstd, x, xm):
    return [dy * invstd * (x - xm)]


def _c(dy, x, xm, invstd, mdxd):
    return [dy * invstd - (x - xm) * mdxd * (invstd * invstd * invstd)]


def _grad_x(scale, dy, x, xm, invstd, mdxd, csum, n):
    return [scale * (_c(dy, x, xm, invstd, mdxd)[0] - csum / n)]


STAGES = dict((f.__name__.lstrip('_'), f) for f in (
    _center_sq, _divide, _invstd, _running, _normalize, _infer, _dy_xdiff, _dy_invstd_xdiff,
    _c, _grad_x))


@kernels.memoize
def stage_code(name, in_dtypes, out_dtypes):
    """(support, body) of stage ``name`` on inputs of ``in_dtypes``; values of the first
    input's dtype stay in it (Theano's scalar ops upcast float32 with float64, numpy's
    0-d operands do not: ``perform`` computes in the values' dtype)."""
    dt = in_dtypes[0]
    ins = [ts.get_scalar_type(d)() for d in in_dtypes]
    outs = STAGES[name](*[_as(v, dt) if dt == 'float32' and v.type.dtype == 'float64' else v
                          for v in ins])
    return oscalar.elemwise_code(ts.Composite(ins, outs), in_dtypes, out_dtypes)


class _Stage(object):
    """A stage as the reduce family's fused producer (``Fused``) takes it."""

    def __init__(self, code, out_dtype):
        self.support, self.body = code
        self.out_dtypes = (out_dtype,)


def _bcast(d, shape):
    """DArray ``d`` (a 0-d one included) viewed with ``shape``'s ndim, broadcast to it."""
    if d.ndim == 0:
        d = d.view((1,) * len(shape), (0,) * len(shape))
    return d.view(shape, tuple(s * d.itemsize for s in elem_strides(d, shape)))


def _shape(*arrays):
    return tuple(int(n) for n in np.broadcast_shapes(*(a.shape for a in arrays)))


class _BNImpl(DeviceImpl):
    dtypes = INT_DTYPES + ('float32', 'float64')     # epsilon and the factor may be ints
    host_when = 'the values normalized are integers'

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.axes = tuple(node.op.axes)
        self.dt = node.outputs[0].type.dtype
        self.acc = 'float64' if dev.has_fp64 else 'float32'

    def describe(self):
        return '%s: reductions and elementwise kernels' % type(self.node.op).__name__

    def check_axes(self, x):
        if min(self.axes) < 0 or max(self.axes) >= x.ndim:
            raise ValueError('axes should be less than ndim (<%d), but %s given'
                             % (x.ndim, str(self.axes)))

    def keep_shape(self, shape):
        return tuple(1 if d in self.axes else n for d, n in enumerate(shape))

    def count(self, ctx, shape):
        """The number of values each sum takes, as a 0-d constant of the sums' dtype."""
        n = 1
        for a in self.axes:
            n *= shape[a]
        return ctx.constant(np.asarray(n, self.acc))

    def stage(self, ctx, name, outs, ins, shape=None):
        """Plan stage ``name`` writing ``outs`` (dtypes, or DArrays) over ``shape`` (the
        broadcast shape of ``ins`` by default); returns the output DArrays."""
        shape = shape or _shape(*ins)
        outs = [ctx.alloc(shape, o) if isinstance(o, str) else o for o in outs]
        code = stage_code(name, tuple(i.dtype.name for i in ins),
                          tuple(o.dtype.name for o in outs))
        plan_elementwise(ctx, code[0], code[1], outs, [_bcast(i, shape) for i in ins], shape)
        return outs

    def sum(self, ctx, name, ins, out_dtype=None):
        """The sum over the axes (keepdims, C-contiguous) of stage ``name`` of ``ins`` (of
        ``ins[0]`` itself when ``name`` is None), in ``out_dtype`` (the accumulator's by
        default)."""
        shape = _shape(*ins)
        if name is None:
            x = ins[0]
            in_dtype = x.dtype.name
        else:
            code = stage_code(name, tuple(i.dtype.name for i in ins), (self.dt,))
            x = reduced_input(ctx, Fused(_Stage(code, self.dt), [_bcast(i, shape) for i in ins]),
                              self.axes)
            in_dtype = self.dt
        out = ctx.alloc(self.keep_shape(shape), out_dtype or self.acc)
        plan_reduce(ctx, sum_combine(in_dtype, self.acc, out.dtype.name), x, self.axes, out)
        return out


class BatchNormTrainImpl(_BNImpl):
    """AbstractBatchNormTrain: the batch's mean and variance (two sums), invstd, the
    running averages where given, the normalized values."""

    def plan(self, ctx, ins):
        x, scale, bias, eps, raf = ins[:5]
        self.check_axes(x)
        shape = _shape(x, scale, bias)
        n = self.count(ctx, x.shape)
        mean, = self.stage(ctx, 'divide', [self.dt], [self.sum(ctx, None, [x]), n])
        var, invstd = self.stage(ctx, 'invstd', [self.dt, self.dt],
                                 [self.sum(ctx, 'center_sq', [x, mean]), n, eps])
        out, = self.stage(ctx, 'normalize', [self.dt], [x, mean, scale, invstd, bias], shape)
        outs = [out, mean, invstd]
        if len(ins) > 5:
            rm, rv = ins[5:7]
            m = float(np.prod(x.shape) / np.prod(scale.shape))
            unbias = ctx.constant(np.asarray(m / (m - 1), self.acc))   # m == 1 raises as perform
            outs += self.stage(ctx, 'running', [self.dt, self.dt],
                               [rm, rv, mean, var, raf, unbias])
        return outs


class BatchNormInferenceImpl(_BNImpl):
    """AbstractBatchNormInference: one elementwise launch."""

    def plan(self, ctx, ins):
        x, scale, bias, mean, var, eps = ins
        return self.stage(ctx, 'infer', [self.dt], [x, mean, scale, var, eps, bias])


class BatchNormTrainGradImpl(_BNImpl):
    """AbstractBatchNormTrainGrad: four sums (dy * x_diff, dy * invstd * x_diff, dy, c)
    and the elementwise gradient of x."""

    def plan(self, ctx, ins):
        x, dy, scale, xm, invstd, eps = ins
        self.check_axes(x)
        n = self.count(ctx, _shape(x, dy, xm))
        mdxd, = self.stage(ctx, 'divide', [self.dt], [self.sum(ctx, 'dy_xdiff', [dy, x, xm]), n])
        csum = self.sum(ctx, 'c', [dy, x, xm, invstd, mdxd])
        gx, = self.stage(ctx, 'grad_x', [self.dt], [scale, dy, x, xm, invstd, mdxd, csum, n])
        gscale = self.sum(ctx, 'dy_invstd_xdiff', [dy, invstd, x, xm], self.dt)
        gbias = self.sum(ctx, None, [dy], self.dt)
        return [gx, gscale, gbias]


def _factory(impl):
    @implemented_by(impl)
    def factory(op, node, dev):
        dtype = node.outputs[0].type.dtype
        if dtype not in ('float32', 'float64'):
            raise NoDeviceImplementation('batch normalization of %s values has no device code'
                                         % dtype)
        return impl(node, dev)
    return factory


ocl_impl.register(tbn.AbstractBatchNormTrain)(_factory(BatchNormTrainImpl))
ocl_impl.register(tbn.AbstractBatchNormInference)(_factory(BatchNormInferenceImpl))
ocl_impl.register(tbn.AbstractBatchNormTrainGrad)(_factory(BatchNormTrainGradImpl))
