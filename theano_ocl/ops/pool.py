"""Pooling family: ``Pool`` (max, sum, average_inc_pad, average_exc_pad; any number of
pooled dimensions), ``MaxPoolGrad``, ``AveragePoolGrad`` and ``DownsampleFactorMaxGradGrad``
(theano/tensor/signal/pool.py).

Every op is one launch of ``kernels/pool.cl.mako``, one work-item per output element: the
forward ops loop over their window, the two gradients *gather* -- each input element sums
over the windows that hold it, in the order Theano's C code scatters into it -- so no atomics
and results equal to C's. On CPU devices the leading axes are taken as one where their
strides allow it and the pooled sizes are compile-time constants (a 1-d range), and a
MaxPoolGrad whose windows do not overlap runs one work-item per window, storing its tile of
the input (no element is in two windows). Window size, stride and padding are host inputs
(constants in practice): the kernel is specialised on their values, the frame keyed on them.

Where Theano's C code raises (padding without ignore_border, padding with average_exc_pad in
the gradient, vectors of the wrong length), the same ValueError is raised on planning.
"""
import numpy as np
from theano.tensor.signal import pool as tpool

from .. import scalar as oscalar
from .. import kernels
from ..errors import NoDeviceImplementation
from ..runtime.plans import launch_geometry, planes_local
from .base import DeviceImpl, INT_DTYPES
from .elemwise import collapse
from .registry import implemented_by, ocl_impl


def _strided(d):
    """A DArray argument followed by its element strides."""
    return [d] + [np.int64(s // d.itemsize) for s in d.strides]


def _leading_collapsed(d, lead):
    """``d`` with its ``lead`` leading axes as one (a view of the same elements; one of
    size 1 where there is none), or None where their strides do not allow it
    (``ops.elemwise.collapse``'s rule)."""
    size = d.itemsize
    cshape, cstrides, _ = collapse(d.shape[:lead], [[s // size for s in d.strides[:lead]]])
    if len(cshape) > 1:
        return None
    n = int(np.prod(d.shape[:lead], dtype=np.int64))
    return d.view((n,) + d.shape[lead:], (cstrides[0][0] * size if cshape else 0,) +
                  d.strides[lead:], d.offset)


def plan_pool(ctx, kind, mode, ignore_border, params, x, out, others=()):
    """Record one pooling launch writing the C-contiguous ``out``.

    ``params``: (ws, stride, pad) tuples over the pooled (trailing) axes; ``others``: the
    extra strided operands of ``kind`` (maxout and/or a gradient), in template order.

    On CPU devices the leading axes of every operand are collapsed into one where their
    strides allow it, and the kernel runs a 1-d range with the pooled axes' sizes as
    constants (``flat``; the index splits into axes by constant divisions). Measured on
    PoCL (2-core EPYC), LeNet batch 128's shapes: Pool about as fast either way; a
    gathering MaxPoolGrad slower flat (9.5 against 6.0 ms over (128, 20, 24, 24)), so
    the flat one is the per-window tile kernel below (2.1-3.4 ms there)."""
    if out.size == 0:
        return
    ws, st, pd = params
    nd = len(ws)
    lead = x.ndim - nd
    # the windows run over the pooled axes of the forward op's output: ``out`` for the
    # forward kinds, the gradient for the gathering ones
    zshape = (out if kind in ('pool', 'gradgrad') else others[-1]).shape[lead:]
    flat = None
    if ctx.dev.is_cpu:
        flat = [_leading_collapsed(d, lead) for d in (x,) + tuple(others) + (out,)]
        if any(d is None for d in flat):
            flat = None
    # windows apart (stride >= window, no padding), at least one per pooled axis: one
    # work-item per window, storing its tile of the input
    tiles = bool(flat) and kind == 'max_grad' and all(s >= w for s, w in zip(st, ws)) and \
        not any(pd) and all(zshape)
    if tiles:
        kind = 'max_grad_tiles'
    t = oscalar.ctype(x.dtype)
    support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable' if x.dtype == np.float64 else ''
    src, name = kernels.render('pool.cl.mako', 'pool_' + kind, support=support, kind=kind,
                               mode=mode, ignore_border=bool(ignore_border), t=t,
                               ndim=nd + 1 if flat else x.ndim, nd=nd, ws=ws, st=st, pd=pd,
                               flat=bool(flat), xs=tuple(x.shape[lead:]), zs=tuple(zshape))
    if flat:
        x, others, out = flat[0], flat[1:-1], flat[-1]
        args = [np.int64(out.size), np.int64(x.shape[0])]
    else:
        args = [np.int64(out.size)] + [np.int64(s) for s in x.shape] + \
            [np.int64(z) for z in zshape]
    args += _strided(x)
    for d in others:
        args += _strided(d)
    if tiles:           # one work-item per window
        args += _strided(out)
        args[0] = np.int64(x.shape[0] * int(np.prod(zshape, dtype=np.int64)))
        gsize, lsize = launch_geometry(ctx.dev, int(args[0]))
    elif flat or out.ndim < 2:
        args.append(out)
        gsize, lsize = launch_geometry(ctx.dev, out.size)
    else:      # (last axis, the one before, the others): see the template
        args.append(out)
        gsize = (out.shape[-1], out.shape[-2], out.size // (out.shape[-1] * out.shape[-2]))
        lsize = planes_local(ctx.dev, gsize)
    ctx.launch(ctx.dev.build(src), name, gsize, lsize, args)


def _params(op, ws, stride, pad):
    """(ws, stride, pad) as tuples of ints, checked as Theano's C code checks them."""
    nd = op.ndim
    vals = []
    for what, v in (('ws', ws), ('stride', stride), ('pad', pad)):
        v = np.asarray(v)
        if v.ndim != 1 or v.shape[0] != nd:
            raise ValueError('%s must be a vector of size %d' % (what, nd))
        vals.append(tuple(int(a) for a in v))
    return tuple(vals)


class _PoolImpl(DeviceImpl):
    dtypes = INT_DTYPES + ('float32', 'float64')
    host_when = ('the old interface (window, stride and padding as op parameters, not inputs); '
                 'inputs of mixed dtypes')
    #: positions of ws, stride, pad among the node's inputs
    param_inputs = ()

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.host_inputs = self.param_inputs

    def describe(self):
        op = self.node.op
        return 'pool kernel (%s, %s, %d-d window%s)' % (
            type(op).__name__, op.mode, op.ndim, '' if op.ignore_border else ', partial windows')

    def params(self, ins):
        op = self.node.op
        ws, st, pd = _params(op, *[ins[j] for j in self.param_inputs])
        x = ins[0]
        if x.ndim < op.ndim:
            raise NotImplementedError('%s requires input with %d or more dimensions'
                                      % (type(op).__name__, op.ndim))
        return ws, st, pd


class PoolImpl(_PoolImpl):
    param_inputs = (1, 2, 3)

    def plan(self, ctx, ins):
        op = self.node.op
        x = ins[0]
        ws, st, pd = self.params(ins)
        if not op.ignore_border and any(pd):
            raise ValueError('padding must be zero when ignore border is False')
        zshape = tpool.Pool.out_shape(x.shape, ws, op.ignore_border, st, pd, op.ndim)
        out = ctx.alloc(tuple(int(s) for s in zshape), x.dtype)
        plan_pool(ctx, 'pool', op.mode, op.ignore_border, (ws, st, pd), x, out)
        return [out]


def _same_shape(op, what, a, b):
    if a.shape != b.shape:
        raise ValueError('%s: %s has shape %s, expected %s' % (type(op).__name__, what,
                                                                a.shape, b.shape))


class MaxPoolGradImpl(_PoolImpl):
    """MaxPoolGrad(x, maxout, gz, ws, stride, pad) and DownsampleFactorMaxGradGrad (the same
    inputs, ggx in place of gz; its output has maxout's shape)."""
    param_inputs = (3, 4, 5)

    def __init__(self, node, dev, kind):
        _PoolImpl.__init__(self, node, dev)
        self.kind = kind

    def plan(self, ctx, ins):
        op = self.node.op
        x, maxout, g = ins[:3]
        params = self.params(ins)
        if self.kind == 'max_grad':
            _same_shape(op, 'gz', g, maxout)
            if x.shape[:x.ndim - op.ndim] != maxout.shape[:x.ndim - op.ndim]:
                raise ValueError('%s: x has shape %s, maxout %s' % (type(op).__name__,
                                                                   x.shape, maxout.shape))
            out = ctx.alloc(x.shape, x.dtype)
        else:
            _same_shape(op, 'ggx', g, x)
            out = ctx.alloc(maxout.shape, x.dtype)      # as C's: maxout's shape
        plan_pool(ctx, self.kind, 'max', op.ignore_border, params, x, out, (maxout, g))
        return [out]


class AveragePoolGradImpl(_PoolImpl):
    param_inputs = (2, 3, 4)

    def plan(self, ctx, ins):
        op = self.node.op
        x, gz = ins[:2]
        ws, st, pd = params = self.params(ins)
        if op.mode == 'average_exc_pad' and any(pd):
            raise ValueError('padding must be zero for average_exc_pad')
        if x.shape[:x.ndim - op.ndim] != gz.shape[:x.ndim - op.ndim]:
            raise ValueError('%s: x has shape %s, gz %s' % (type(op).__name__, x.shape, gz.shape))
        out = ctx.alloc(x.shape, x.dtype)
        plan_pool(ctx, 'avg_grad', op.mode, op.ignore_border, params, x, out, (gz,))
        return [out]


def _factory(cls, *extra):
    @implemented_by(cls)
    def factory(op, node, dev):
        if len(node.inputs) != cls.param_inputs[-1] + 1:
            raise NoDeviceImplementation('%s with the old interface (no ws/stride/pad '
                                         'inputs)' % type(op).__name__)
        dtypes = {v.type.dtype for v in node.inputs[:-3] + node.outputs}
        if len(dtypes) != 1:
            raise NoDeviceImplementation('%s of mixed dtypes %s' % (type(op).__name__,
                                                                     sorted(dtypes)))
        dtype = dtypes.pop()
        if dtype not in cls.dtypes:
            raise NoDeviceImplementation('%s of %s' % (type(op).__name__, dtype))
        return cls(node, dev, *extra)
    return factory


ocl_impl.register(tpool.Pool)(_factory(PoolImpl))
ocl_impl.register(tpool.MaxPoolGrad)(_factory(MaxPoolGradImpl, 'max_grad'))
ocl_impl.register(tpool.DownsampleFactorMaxGradGrad)(_factory(MaxPoolGradImpl, 'gradgrad'))
ocl_impl.register(tpool.AveragePoolGrad)(_factory(AveragePoolGradImpl))
