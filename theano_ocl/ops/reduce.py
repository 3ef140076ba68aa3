"""Reduction family: ``CAReduce`` (Sum, Prod, Max/Min, All, Any, CAReduceDtype, ...),
``MaxAndArgmax`` and ``Argmax``.

One template (``kernels/reduce.cl.mako``) serves every reduction. The input is seen as
(kept dims) x (reduced dims); each group is collapsed on its own (merging dimensions that
are contiguous, dropping size-1 ones) but the reduced dims keep the op's axis order, so the
flat reduced index is the one numpy's argmax of the transposed, reshaped input gives.
The geometry (:func:`geometry`) then picks, per input signature:

- contiguous inner axis (rows): one work-group per output, lanes read consecutive elements
  and combine in a local-memory tree;
- anything else (columns, strided, several axes): one work-item per output walking its
  reduced range; adjacent work-items own adjacent outputs, so column reads coalesce;
- few outputs over a long range (a full reduction): each output is split in parts that
  write partials in the accumulator dtype, and a second launch reduces the partials.

Accumulation is in the op's ``acc_dtype`` (else the output dtype), as Theano's C code does;
the final value is converted to the output dtype with the conversion Theano's ``Cast`` has.
Empty reductions give the scalar op's identity; max/min/argmax of an empty range raise
ValueError, as Theano does.
"""
import os

import numpy as np
from mako.template import Template
import theano.scalar as ts
from theano.tensor.basic import Argmax, MaxAndArgmax
from theano.tensor.elemwise import CAReduce

from .. import scalar as oscalar
from ..errors import NoDeviceImplementation
from .base import DeviceImpl
from .elemwise import collapse
from .registry import ocl_impl

_TEMPLATE = Template(filename=os.path.join(os.path.dirname(__file__), '..', 'kernels',
                                           'reduce.cl.mako'))
_sources = {}


class Combine(object):
    """What one reduction kernel computes: dtypes and the OpenCL code of each stage.

    ``argmax``: (value, index) pairs instead of a scalar op; ``identity``: the OpenCL
    literal the accumulator starts from.
    """

    def __init__(self, scalar_op, in_dtype, acc_dtype, out_dtype, identity, argmax=False,
                 pairs_in=False):
        self.scalar_op = scalar_op
        self.in_dtype = in_dtype
        self.acc_dtype = acc_dtype
        self.out_dtype = out_dtype
        self.identity = identity
        self.argmax = argmax
        self.pairs_in = pairs_in
        supports = []
        self.absorb_body = self.combine_body = ''
        if not argmax:
            s, self.absorb_body = oscalar.elemwise_code(scalar_op, [acc_dtype, in_dtype], [acc_dtype])
            supports.append(s)
            s, self.combine_body = oscalar.elemwise_code(scalar_op, [acc_dtype, acc_dtype], [acc_dtype])
            supports.append(s)
        s, self.finish_body = oscalar.elemwise_code(ts.Cast(ts.get_scalar_type(out_dtype)),
                                                    [acc_dtype], [out_dtype])
        supports.append(s)
        self.support = '\n'.join(s for s in supports if s)

    @property
    def partial_dtype(self):
        """Partials are stored in the accumulator's compute type (float16 accumulates in float)."""
        return 'float32' if self.acc_dtype == 'float16' else self.acc_dtype

    def staged(self):
        """(first stage: input -> partials, second stage: partials -> output)."""
        d = self.partial_dtype
        return (Combine(self.scalar_op, self.in_dtype, self.acc_dtype, d, self.identity,
                        self.argmax, self.pairs_in),
                Combine(self.scalar_op, d, d, self.out_dtype, self.identity, self.argmax,
                        pairs_in=self.argmax))

    def source(self, kd, rd, r_contig, L):
        """Render (memoized) the kernel; returns (source, kernel name)."""
        key = (self.support, self.absorb_body, self.combine_body, self.finish_body,
               self.in_dtype, self.acc_dtype, self.out_dtype, self.identity, self.argmax,
               self.pairs_in, kd, rd, r_contig, L)
        hit = _sources.get(key)
        if hit is not None:
            return hit
        name = 'reduce_%d' % (len(_sources) + 1)
        fp64 = 'float64' in (self.in_dtype, self.acc_dtype, self.out_dtype)
        pre = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' if fp64 else ''
        src = _TEMPLATE.render(
            name=name, support=pre + self.support, absorb_body=self.absorb_body,
            combine_body=self.combine_body, finish_body=self.finish_body,
            in_t=oscalar.ctype(self.in_dtype), in_ct=oscalar.compute_ctype(self.in_dtype),
            acc_t=oscalar.compute_ctype(self.acc_dtype),
            out_t=oscalar.ctype(self.out_dtype), out_ct=oscalar.compute_ctype(self.out_dtype),
            half_in=self.in_dtype == 'float16', half_out=self.out_dtype == 'float16',
            is_float=self.acc_dtype.startswith('float'), identity=self.identity,
            argmax=self.argmax, pairs_in=self.pairs_in, kd=kd, rd=rd, r_contig=r_contig, L=L)
        _sources[key] = (src, name)
        return src, name


def max_identity(dtype, maximum=True):
    """The value max (min) starts from: -inf (+inf) for floats, the dtype's bound for ints."""
    if dtype.startswith('float'):
        value = -np.inf if maximum else np.inf
    elif dtype == 'bool':
        value = not maximum
    else:
        info = np.iinfo(dtype)
        value = info.min if maximum else info.max
    return oscalar._literal(value, dtype)


def split_axes(x, axes):
    """Collapse ``x`` into (kept dims, reduced dims).

    Returns (kept shape, kept element strides, reduced shape, reduced element strides) with
    each group collapsed; reduced dims in the order of ``axes``.
    """
    axes = list(axes)
    kept = [d for d in range(x.ndim) if d not in axes]
    est = [s // x.itemsize for s in x.strides]
    kshape = [x.shape[d] for d in kept]
    out_strides = []
    acc = 1
    for n in reversed(kshape):
        out_strides.append(acc)
        acc *= n
    out_strides.reverse()
    kshape, (kstrides, _), _ = collapse(kshape, [[est[d] for d in kept], out_strides])
    rshape, (rstrides,), _ = collapse([x.shape[d] for d in axes], [[est[d] for d in axes]])
    return kshape, kstrides, rshape, rstrides


def _prod(xs):
    n = 1
    for s in xs:
        n *= s
    return n


def _pow2_at_most(n, cap):
    L = 1
    while L * 2 <= min(n, cap):
        L *= 2
    return L


def geometry(dev, n_out, n_red, rows):
    """(local size L, parts, interleaved) for ``n_out`` reductions of ``n_red`` elements.

    ``rows``: the reduced elements are contiguous (one collapsed dim of stride 1).
    """
    if n_red <= 1 or n_out == 0:
        return 1, 1, False
    if dev.is_cpu:
        # PoCL (measured on 4096x4096): one work-item per (output, chunk) beats local-memory
        # trees; columns go faster split in row chunks (better locality per work-group).
        target = max(dev.compute_units, 1) * 32
        if rows:
            parts = 1 if n_out >= target else max(1, min(-(-target // n_out), n_red // 4096))
        else:
            parts = max(1, min(max(8, -(-target // n_out)), n_red // 256))
        return 1, parts, False
    target = max(dev.compute_units, 1) * 2048
    if rows and n_red >= 32:
        L = _pow2_at_most(n_red, min(256, dev.max_work_group_size))
        parts = 1 if n_out * L >= target else max(1, min(-(-target // (n_out * L)), n_red // (4 * L)))
        return L, parts, parts > 1
    parts = 1 if n_out >= target else max(1, min(-(-target // n_out), n_red // 32))
    return 1, parts, False


def plan_reduce(ctx, comb, x, axes, out, out_idx=None, x_idx=None, parts=None):
    """Record the launches reducing DArray ``x`` over ``axes`` into C-contiguous ``out``
    (and ``out_idx``, the argmax); ``x_idx`` holds the indices of partial pairs."""
    kshape, kstrides, rshape, rstrides = split_axes(x, axes)
    n_out = _prod(kshape)
    n_red = _prod(rshape)
    if n_out == 0:
        return
    r_contig = rstrides == [1] or not rshape
    L, nparts, interleaved = geometry(ctx.dev, n_out, n_red, rstrides == [1])
    if parts is not None:
        nparts = parts
    if nparts > 1:
        pdt = comb.partial_dtype
        partial = ctx.alloc((nparts, n_out), pdt)
        partial_idx = ctx.alloc((nparts, n_out), 'int64') if comb.argmax else None
        stage1, stage2 = comb.staged()
        _launch(ctx, stage1, x, x_idx, partial, partial_idx, kshape, kstrides, rshape, rstrides,
                r_contig, n_out, n_red, L, nparts, interleaved)
        plan_reduce(ctx, stage2, partial, (0,), out.view((n_out,), (out.itemsize,)),
                    None if out_idx is None else out_idx.view((n_out,), (8,)),
                    partial_idx, parts=1)
        return
    _launch(ctx, comb, x, x_idx, out, out_idx, kshape, kstrides, rshape, rstrides,
            r_contig, n_out, n_red, L, 1, False)


def _launch(ctx, comb, x, x_idx, out, out_idx, kshape, kstrides, rshape, rstrides, r_contig,
            n_out, n_red, L, parts, interleaved):
    src, name = comb.source(len(kshape), len(rshape), r_contig, L)
    prg = ctx.dev.build(src)
    if interleaved:
        a_step, span, k_step = L, max(n_red, 1), parts * L
    else:
        chunk = -(-n_red // parts)
        chunk = -(-chunk // L) * L
        a_step, span, k_step = chunk, max(chunk, 1), L
    n_items = n_out * parts
    args = [np.int64(n_items), np.int64(n_out), np.int64(n_red),
            np.int64(a_step), np.int64(span), np.int64(k_step)]
    args += [np.int64(s) for s in kshape] + [np.int64(s) for s in rshape]
    args.append(x)
    args += [np.int64(s) for s in kstrides]
    if not r_contig:
        args += [np.int64(s) for s in rstrides]
    if comb.pairs_in:
        args.append(x_idx)
    args.append(out)
    if comb.argmax:
        args.append(out_idx)
    if L > 1:
        gsize, lsize = (n_items * L,), (L,)
    elif ctx.dev.is_cpu:
        gsize, lsize = (n_items,), None
    else:
        local = 64
        gsize, lsize = (-(-n_items // local) * local,), (local,)
    ctx.launch(prg, name, gsize, lsize, args)


def _empty_error(node, x, axes):
    return ValueError('%s: input of shape %s has zero-size on reduced axis %s, and %s has no '
                      'identity' % (node.op, x.shape, [a for a in axes if x.shape[a] == 0][0],
                                    node.op))


class ReduceImpl(DeviceImpl):
    """CAReduce (and subclasses) on the device."""

    def __init__(self, node, dev, comb, axes, needs_nonempty):
        DeviceImpl.__init__(self, node, dev)
        self.comb = comb
        self.axes = axes
        self.needs_nonempty = needs_nonempty

    def describe(self):
        return 'reduce kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x = ins[0]
        if self.needs_nonempty and any(x.shape[a] == 0 for a in self.axes):
            raise _empty_error(self.node, x, self.axes)
        shape = tuple(n for d, n in enumerate(x.shape) if d not in self.axes)
        out = ctx.alloc(shape, self.comb.out_dtype)
        plan_reduce(ctx, self.comb, x, self.axes, out)
        return [out]


class ArgmaxImpl(DeviceImpl):
    """MaxAndArgmax (both outputs) and Argmax (the index only) on the device."""

    def __init__(self, node, dev, comb, axes, with_max):
        DeviceImpl.__init__(self, node, dev)
        self.comb = comb
        self.axes = axes
        self.with_max = with_max

    def describe(self):
        return 'argmax kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x = ins[0]
        if any(x.shape[a] == 0 for a in self.axes):
            raise _empty_error(self.node, x, self.axes)
        shape = tuple(n for d, n in enumerate(x.shape) if d not in self.axes)
        vals = ctx.alloc(shape, self.comb.out_dtype)
        idx = ctx.alloc(shape, 'int64')
        plan_reduce(ctx, self.comb, x, self.axes, vals, idx)
        return [vals, idx] if self.with_max else [idx]


def _axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    return tuple(a + ndim if a < 0 else a for a in axis)


@ocl_impl.register(CAReduce)
def _careduce(op, node, dev):
    in_dtype = node.inputs[0].type.dtype
    out_dtype = node.outputs[0].type.dtype
    acc_dtype = getattr(op, 'acc_dtype', None) or out_dtype
    if any(d.startswith('complex') for d in (in_dtype, acc_dtype, out_dtype)):
        raise NoDeviceImplementation('complex dtypes have no device kernels')
    scalar_op = op.scalar_op
    needs_nonempty = False
    if isinstance(scalar_op, (ts.Maximum, ts.Minimum)):
        identity = max_identity(acc_dtype, isinstance(scalar_op, ts.Maximum))
        needs_nonempty = True
    elif hasattr(scalar_op, 'identity'):
        identity = oscalar._literal(scalar_op.identity, acc_dtype) if acc_dtype == 'bool' \
            else oscalar._literal(np.asarray(scalar_op.identity).astype(acc_dtype), acc_dtype)
    else:
        raise NoDeviceImplementation('%s has no identity' % scalar_op)
    comb = Combine(scalar_op, in_dtype, acc_dtype, out_dtype, identity)
    return ReduceImpl(node, dev, comb, _axes(op.axis, node.inputs[0].ndim), needs_nonempty)


@ocl_impl.register(MaxAndArgmax)
@ocl_impl.register(Argmax)
def _argmax(op, node, dev):
    in_dtype = node.inputs[0].type.dtype
    if in_dtype.startswith('complex'):
        raise NoDeviceImplementation('complex dtypes have no device kernels')
    acc = 'float32' if in_dtype == 'float16' else in_dtype
    comb = Combine(None, in_dtype, acc, in_dtype, max_identity(in_dtype), argmax=True)
    return ArgmaxImpl(node, dev, comb, _axes(op.axis, node.inputs[0].ndim),
                      isinstance(op, MaxAndArgmax))
