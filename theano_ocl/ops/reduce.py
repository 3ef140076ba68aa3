"""Reduction family: ``CAReduce`` (Sum, Prod, Max/Min, All, Any, CAReduceDtype, ...),
``MaxAndArgmax`` and ``Argmax``.

One template (``kernels/reduce.cl.mako``) serves every reduction. The input is seen as
(kept dims) x (reduced dims); each group is collapsed on its own (merging dimensions that
are contiguous, dropping size-1 ones) but the reduced dims keep the op's axis order, so the
flat reduced index is the one numpy's argmax of the transposed, reshaped input gives.

The launch geometry (generic kernel, and the fast paths for rows and columns) is chosen in
``reduce_geometry.py`` from the device's traits; its docstring describes the fast paths.

Vectors exist for add, mul, max, min, and, or and argmax when the scalar code's conversion
of the input to the accumulator is a plain C conversion (:meth:`Combine.vector_kind`); other
scalar ops take the same geometries with scalar loads. Everything else (reduced dims not
contiguous while the kept ones are not contiguous either, negative inner strides, argmax
partials) takes the generic kernel: one work-item (or work-group,
``reduce_geometry.geometry``) per output and part walking its reduced range with
per-element index arithmetic.

Complex sums and products (``acc_dtype`` complex128 by Theano's rule) take the same
kernels with (re, im) vector values and scalar loads (no fast-path vectors).

Accumulation is in the op's ``acc_dtype`` (else the output dtype), as Theano's C code does;
the final value is converted to the output dtype with the conversion Theano's ``Cast`` has.
Floating-point sums are combined in a different order than Theano's C loop (lanes, parts),
so they agree to rounding. Empty reductions give the scalar op's identity; max/min/argmax of
an empty range raise ValueError, as Theano does.
"""
import warnings

import numpy as np
import theano.scalar as ts
from theano.tensor.basic import Argmax, MaxAndArgmax
from theano.tensor.elemwise import CAReduce

from .. import scalar as oscalar
from ..darray import DArray
from ..errors import KernelBuildError, NoDeviceImplementation
from ..runtime.dispatch import dispatch_s
from .base import DeviceImpl
from .elemwise import collapse
from .fusion import Fused
from .reduce_combine import Combine, max_identity, sum_combine  # noqa: F401 (bn.py, tests)
from .reduce_geometry import (cross_group_sync, device_traits, fast_geometry, geometry,
                              pow2_at_least, prod, sync_options)
from .registry import implemented_by, ocl_impl



def split_axes(x, axes):
    """Collapse ``x`` into (kept dims, reduced dims).

    Returns (kept shape, kept element strides, reduced shape, reduced element strides) with
    each group collapsed; reduced dims in the order of ``axes``.
    """
    kshape, (kstrides,), rshape, (rstrides,) = split_axes_all(
        x.shape, [[s // x.itemsize for s in x.strides]], axes)
    return kshape, kstrides, rshape, rstrides


def split_axes_all(shape, strides, axes):
    """:func:`split_axes` of several operands of one shape (element ``strides`` each),
    collapsed together: (kept shape, kept strides per operand, reduced shape, reduced
    strides per operand). Kept dims merge only where the (C-contiguous) output allows."""
    axes = list(axes)
    kept = [d for d in range(len(shape)) if d not in axes]
    kshape = [shape[d] for d in kept]
    out_strides = []
    acc = 1
    for n in reversed(kshape):
        out_strides.append(acc)
        acc *= n
    out_strides.reverse()
    kshape, kstrides, _ = collapse(kshape, [[st[d] for d in kept] for st in strides]
                                   + [out_strides])
    rshape, rstrides, _ = collapse([shape[d] for d in axes], [[st[d] for d in axes]
                                                              for st in strides])
    return kshape, kstrides[:-1], rshape, rstrides


# False: every reduction takes the generic kernel (tests compare both).
FAST_PATHS = True
# GPUs' parts: reduced by the last work-group of the same launch with the handshake the
# device's memory model allows ('auto': reduce_geometry.cross_group_sync, a second launch
# where it has none), always by a second launch ('launch'), or with a named handshake
# ('atomics', 'ptx'; ValueError where the device lacks it): the tests run each path
CROSS_GROUP = 'auto'
# outputs of fewer reduced elements than this are reduced as Theano C reduces them (numpy
# too: it adds fewer than 8 elements one after another), so results are equal, not only
# close: in the view's index order (reversed dims are not walked forwards; on GPUs the
# generic kernel, one work-item an output, not the fast paths' lanes), and a fused
# elementwise producer is computed into a buffer first (``fuse_pays``: rounded, as Theano C
# stores it; NVIDIA's compiler contracted x * x + acc into one fma inside the fused
# kernel). Theano's
# test_pfunc compares a sum of 5 float64 squares with numpy's for equality (it failed on
# the H200, 2026-11-26).
IN_ORDER_BELOW = 8


def _flip_reduced(x, axes):
    """``x`` with its reduced dims of negative stride walked forwards (same elements: the
    scalar ops of CAReduce are commutative), so ``x[:, ::-1].sum(1)`` takes the rows path."""
    strides = list(x.strides)
    offset = x.offset
    for a in axes:
        if strides[a] < 0 and x.shape[a] > 1:
            offset += (x.shape[a] - 1) * strides[a]
            strides[a] = -strides[a]
    if offset == x.offset:
        return x
    return x.view(x.shape, tuple(strides), offset)


def plan_reduce(ctx, comb, x, axes, out, out_idx=None, x_idx=None, parts=None):
    """Record the launches reducing DArray ``x`` over ``axes`` into C-contiguous ``out``
    (and ``out_idx``, the argmax); ``x_idx`` holds the indices of partial pairs. ``x`` may
    be a :class:`~.fusion.Fused` producer: :func:`plan_reduce_fused`."""
    if isinstance(x, Fused):
        return plan_reduce_fused(ctx, comb, x, axes, out, out_idx)
    in_order = prod(x.shape[a] for a in axes) < IN_ORDER_BELOW
    if not comb.argmax and not in_order:
        x = _flip_reduced(x, axes)
    kshape, kstrides, rshape, rstrides = split_axes(x, axes)
    n_out = prod(kshape)
    n_red = prod(rshape)
    if n_out == 0:
        return
    fast = None
    tr = device_traits(ctx.dev)
    if FAST_PATHS and n_red > 1 and not comb.pairs_in and \
            (tr.is_cpu or not in_order):
        fast = fast_geometry(tr, comb, kshape, kstrides, rshape, rstrides,
                             x.boff // x.itemsize, parts)
        sync = _cross_group(ctx.dev) if fast is not None and fast.parts > 1 \
            and not tr.is_cpu and fast.lsize > 1 else None
        if sync is not None:
            _launch_fast(ctx, comb, fast, x, out, out_idx, kshape, kstrides, rshape, rstrides,
                         n_out, n_red, sync=sync)
            return
    if fast is not None:
        nparts = fast.parts
    else:
        r_contig = rstrides == [1] or not rshape
        L, nparts, interleaved = geometry(ctx.dev, n_out, n_red, rstrides == [1])
        if parts is not None:
            nparts = parts
    if nparts > 1:
        pdt = comb.partial_dtype
        partial = ctx.alloc((nparts, n_out), pdt)
        partial_idx = ctx.alloc((nparts, n_out), 'int64') if comb.argmax else None
        stage1, stage2 = comb.staged()
        if fast is not None:
            _launch_fast(ctx, stage1, fast, x, partial, partial_idx, kshape, kstrides, rshape,
                         rstrides, n_out, n_red)
        else:
            _launch(ctx, stage1, x, x_idx, partial, partial_idx, kshape, kstrides, rshape,
                    rstrides, r_contig, n_out, n_red, L, nparts, interleaved)
        plan_reduce(ctx, stage2, partial, (0,), out.view((n_out,), (out.itemsize,)),
                    None if out_idx is None else out_idx.view((n_out,), (8,)),
                    partial_idx, parts=1)
        return
    if fast is not None:
        _launch_fast(ctx, comb, fast, x, out, out_idx, kshape, kstrides, rshape, rstrides,
                     n_out, n_red)
        return
    _launch(ctx, comb, x, x_idx, out, out_idx, kshape, kstrides, rshape, rstrides,
            r_contig, n_out, n_red, L, 1, False)


def plan_reduce_fused(ctx, comb, x, axes, out, out_idx=None):
    """Reduce the values of a fused elementwise producer ``x`` without storing them: the
    generic kernel walks every producer input with its own strides (collapsed together)
    and applies the producer's code to each element it absorbs."""
    kshape, kstrides, rshape, rstrides = split_axes_all(
        x.shape, [[s // v.itemsize for s in v.strides] for v in x.views], axes)
    n_out = prod(kshape)
    n_red = prod(rshape)
    if n_out == 0:
        return
    r_contig = not rshape or all(rs == [1] for rs in rstrides)
    L, nparts, interleaved = geometry(ctx.dev, n_out, n_red, r_contig and bool(rshape))
    comb = comb.with_pre(x.spec())
    ins = [(v, ks, rs) for v, ks, rs in zip(x.views, kstrides, rstrides)]
    if nparts > 1:
        partial = ctx.alloc((nparts, n_out), comb.partial_dtype)
        partial_idx = ctx.alloc((nparts, n_out), 'int64') if comb.argmax else None
        stage1, stage2 = comb.staged()
        _launch(ctx, stage1, ins, None, partial, partial_idx, kshape, None, rshape, None,
                r_contig, n_out, n_red, L, nparts, interleaved)
        plan_reduce(ctx, stage2, partial, (0,),
                    out.view((n_out,), (out.itemsize,)),
                    None if out_idx is None else out_idx.view((n_out,), (8,)),
                    partial_idx, parts=1)
        return
    _launch(ctx, comb, ins, None, out, out_idx, kshape, None, rshape, None, r_contig, n_out,
            n_red, L, 1, False)


def plan_reduce_epilogue(ctx, comb, x, axes, shape, epilogue):
    """Reduce the fused producer ``x`` over ``axes`` and compute ``epilogue`` (an
    ``ops.elemwise.Epilogue``: the result's one elementwise consumer, folded in by
    ``ops.fusion.fuse_epilogues``) from each result in the same launch, in place of storing
    it: the generic kernel in one part (each result is final where it is computed), the
    consumer's other inputs read at the result's element. Returns the consumer's output, or
    None where this launch cannot (more than one part, argmax, complex or float16 values,
    a kernel that does not build): the caller then reduces as usual and the consumer runs
    on the result. The Nengo step's synapse update reading its decoders' sum (one launch
    less on the H200)."""
    impl = epilogue.impl
    dts = list(impl.in_dtypes) + list(impl.out_dtypes)
    if not isinstance(x, Fused) or comb.argmax or comb.pairs_in or \
            any(d == 'float16' or d.startswith('complex') for d in dts + [comb.out_dtype]) or \
            len(impl.out_dtypes) != 1 or getattr(impl, 'checked', False):
        return None
    n_out = prod(shape)
    if n_out == 0 or x.size == 0:
        return None
    views = epilogue.views_over(shape)
    if views is None:
        return None
    others = [(q, v) for q, v in enumerate(views) if q != epilogue.j]
    kept = [d for d in range(len(x.shape)) if d not in axes]

    def full(v):
        st = [0] * len(x.shape)      # the consumer's inputs do not move along reduced axes
        for k, d in enumerate(kept):
            st[d] = v.strides[k] // v.itemsize
        return st
    nx = len(x.views)
    kshape, kstrides, rshape, rstrides = split_axes_all(
        x.shape, [[s // v.itemsize for s in v.strides] for v in x.views]
        + [full(v) for _, v in others], axes)
    n_red = prod(rshape)
    r_contig = not rshape or all(rs == [1] for rs in rstrides[:nx])
    L, nparts, interleaved = geometry(ctx.dev, n_out, n_red, r_contig and bool(rshape))
    if nparts > 1:
        return None
    comb = comb.with_pre(x.spec())
    key = (impl.support, impl.body, epilogue.j, tuple(impl.in_dtypes), impl.out_dtypes[0])
    try:
        src, name = comb.source('generic', len(kshape), len(rshape), r_contig, L, epi=key)
        prg = ctx.dev.build(src)
    except KernelBuildError as e:     # a defect of this module: reduce, then the consumer
        warnings.warn('theano_ocl: a reduction with its consumer in the kernel did not '
                      'build on %s; they run apart:\n%s' % (ctx.dev, e))
        return None
    out = epilogue.allocate(shape)
    extra = []
    for (q, v), ks in zip(others, kstrides[nx:]):
        extra.append(v)
        extra.extend(np.int64(st) for st in ks)
    extra.append(out)
    ins = [(v, ks, rs) for v, ks, rs in zip(x.views, kstrides[:nx], rstrides[:nx])]
    # the result is not stored: ``out`` stands in the launch's output argument too (a
    # C-contiguous buffer of n_out elements of the consumer's type; the kernel never
    # writes it there)
    _launch(ctx, comb, ins, None, out, None, kshape, None, rshape, None, r_contig, n_out,
            n_red, L, 1, False, extra=extra, prg=(prg, name))
    return out


def _launch_fast(ctx, comb, g, x, out, out_idx, kshape, kstrides, rshape, rstrides, n_out,
                 n_red, sync=None):
    """One fast-path launch; ``sync`` (:func:`_cross_group`): ``g.parts`` > 1 and the
    kernel's last group reduces the partials into ``out`` (GPUs: local sizes > 1)."""
    single = sync is not None
    if g.mode == 'rows':
        # with one lane per item the code does not depend on L (one build for every L)
        src, name = comb.source('rows', kd=len(kshape), L=g.L if g.T > 1 or single else 1,
                                V=g.V, U=g.U, T=g.T, aligned=g.aligned, idx32=g.idx32,
                                sync=sync, K=g.K)
        args = [np.int64(n_out * g.parts), np.int64(n_out), np.int64(n_red), np.int64(g.chunk)]
        args += [np.int64(s) for s in kshape]
        args.append(x)
        args += [np.int64(s) for s in kstrides]
    else:
        src, name = comb.source('cols', rd=len(rshape), L=g.L, V=g.V, U=g.U, NB=g.NB, CX=g.CX,
                                RY=g.RY, aligned=g.aligned, idx32=g.idx32, sync=sync)
        args = [np.int64(n_out), np.int64(n_red), np.int64(g.chunk), np.int64(g.n_cg)]
        args += [np.int64(s) for s in rshape]
        args.append(x)
        args += [np.int64(s) for s in rstrides]
    args.append(out)
    if comb.argmax:
        args.append(out_idx)
    if single:
        # partials [part][output] in the accumulator type, and zeroed counters the frame owns
        # (the last group resets its own, so a replay finds them at 0)
        args.append(ctx.alloc((g.parts, n_out), comb.partial_dtype))
        if comb.argmax:
            args.append(ctx.alloc((g.parts, n_out), 'int64'))
        args.append(ctx.constant(np.zeros(1 if g.mode == 'rows' else g.n_cg, np.int32)))
        args.append(np.int64(g.parts))
        if g.mode == 'rows':
            # lanes per output in the last group's pass: enough for the parts, at most L
            args.append(np.int32(min(g.L, pow2_at_least(g.parts))))
    prg = ctx.dev.build(src, sync_options(ctx.dev, sync) if single else ())
    # it reads x; it writes the rest (the results, the partials, the counters it resets)
    ctx.launch(prg, name, (g.gsize,), (g.lsize,), args, reads=[x],
               writes=[a for a in args if isinstance(a, DArray) and a is not x])


def _cross_group(dev):
    """The handshake by which a launch's last work-group reduces its partials on ``dev``
    ('ptx', 'atomics'), or None (a second launch), as ``CROSS_GROUP`` says."""
    if CROSS_GROUP == 'auto':
        return cross_group_sync(dev)
    if CROSS_GROUP == 'launch':
        return None
    if CROSS_GROUP in ('ptx', 'atomics'):
        sync_options(dev, CROSS_GROUP)          # names what the device lacks
        return CROSS_GROUP
    raise ValueError("reduce.CROSS_GROUP is %r; expected 'auto', 'launch', 'atomics' or 'ptx'"
                     % (CROSS_GROUP,))


def _launch(ctx, comb, x, x_idx, out, out_idx, kshape, kstrides, rshape, rstrides, r_contig,
            n_out, n_red, L, parts, interleaved, epi=None, extra=(), prg=None):
    if prg is None:
        src, name = comb.source('generic', len(kshape), len(rshape), r_contig, L, epi=epi)
        prg = ctx.dev.build(src)
    else:
        prg, name = prg
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
    # a fused producer: x is [(input view, its kept strides, its reduced strides)]
    for d, ks, rs in (x if comb.pre is not None else [(x, kstrides, rstrides)]):
        args.append(d)
        args += [np.int64(s) for s in ks]
        if not r_contig:
            args += [np.int64(s) for s in rs]
    if comb.pairs_in:
        args.append(x_idx)
    args.append(out)
    if comb.argmax:
        args.append(out_idx)
    args.extend(extra)
    if L > 1:
        gsize, lsize = (n_items * L,), (L,)
    elif ctx.dev.is_cpu:
        gsize, lsize = (n_items,), None
    else:
        local = 64
        gsize, lsize = (-(-n_items // local) * local,), (local,)
    # it writes the results (an epilogue's output: the last of ``extra``); it reads the rest
    written = [d for d in (out, out_idx) if d is not None]
    if extra and isinstance(extra[-1], DArray):
        written.append(extra[-1])
    ctx.launch(prg, name, gsize, lsize, args, writes=written,
               reads=[a for a in args if isinstance(a, DArray) and
                      not any(a is w for w in written)])


def _empty_error(node, x, axes):
    return ValueError('%s: input of shape %s has zero-size on reduced axis %s, and %s has no '
                      'identity' % (node.op, x.shape, [a for a in axes if x.shape[a] == 0][0],
                                    node.op))


# Fused producers (ops.fusion.fuse_producers) are reduced in the generic kernel, one scalar
# th_pre per element; the unfused plan runs the producer's launch and the vectorized fast
# paths. bench/fusion.py, 2026-11-23, kernel time unfused / fused ("gain"):
# - PoCL, 2-core (--force): 64x64 sum((x-m)^2, 1) 1.42, argmax rows 1.07, sum(exp(x), 0)
#   1.08, but max|x-m| over all 0.50; from 256x256 on every case loses (0.11-0.6): the
#   scalar loop does not vectorize as the fast paths' explicit vectors do. So CPU devices
#   fuse reductions of at most FUSE_MAX_CPU elements, to one output too: there the kernel
#   time lost (a few us at 4096 elements) is less than the launch saved (7-10 us on the
#   2-core Xeon's PoCL, 47-54 us on the H200 machine's 16-core one, cost.constants,
#   2026-12-01; the Nengo step's probe, a sum of 100 products, then one launch, not two).
# - H100: 4096x4096 sum((x-m)^2, 1) 3.53, sum(exp(x), 0) 2.83, mean(tanh(x)) 2.32 (one
#   pass over x instead of three), but max|x-m| over all 0.62 and argmax rows 0.88; at
#   1024x1024 every case within 0.91-1.93. So GPUs fuse any size except full reductions
#   and argmax past FUSE_MAX_GPU elements.
# - On many cores a launch saved is worth more: a CPU device fuses up to
#   FUSED_LOSS_S elements a core per second of its launch cost (runtime.dispatch), at
#   least FUSE_MAX_CPU. 2.5 ns: the 2-core Xeon's 4-6 us empty launches (2026-12-01) then
#   give about FUSE_MAX_CPU; the H200 machine's 16-core PoCL (41 us: 260,000 elements)
#   fuses the Nengo step's synapse products (499 sums of 100) into their reduction: with
#   the epilogue below, 5 launches a step, not 7, in 612-617 us against 708-724 (one
#   process each, twice, 2026-12-01).
FUSE_MAX_CPU = 4096
FUSED_LOSS_S = 2.5e-9
FUSE_MAX_GPU = 1 << 20


def fuse_max_cpu(dev):
    """The most elements a CPU device reduces from a fused producer (see above)."""
    cores = max(1, int(dev.device.max_compute_units))
    return max(FUSE_MAX_CPU, int(dispatch_s(dev) * cores / FUSED_LOSS_S))


def fuse_pays(dev, size, n_out, argmax=False, dtype=None):
    """Whether to reduce a fused producer of ``size`` elements to ``n_out`` values in the
    kernel (else its value is materialized by its own launch first). Always for one
    element an output (a reduction over axes of length 1, as a Nengo ensemble's
    one-dimensional encoders make): the kernel is then an elementwise pass, and the
    identity combined with one value the kernel rounds as the producer's storage would is
    Theano C's result bit for bit (``x + 0``, so -0 gives +0 as in C), with or without a
    contraction into an fma; float16 storage apart (the kernel keeps the producer's value
    in float). Never for 2 to ``IN_ORDER_BELOW`` - 1 elements an output: those are reduced
    as Theano C reduces them, from the producer's stored (rounded) values."""
    if size == n_out and n_out and dtype != 'float16':
        return True
    if size < IN_ORDER_BELOW * n_out:
        return False
    if dev.is_cpu:
        return size <= fuse_max_cpu(dev)
    return size <= FUSE_MAX_GPU or (n_out > 1 and not argmax)


def reduced_input(ctx, x, axes, argmax=False):
    """``x`` (a DArray, or a :class:`~.elemwise.Fused` producer) as a reduction over ``axes``
    takes it: a fused producer is materialized where computing it in the kernel does not
    pay (:func:`fuse_pays`)."""
    if isinstance(x, Fused):
        n_out = prod(n for d, n in enumerate(x.shape) if d not in axes)
        if not fuse_pays(ctx.dev, x.size, n_out, argmax, x.dtype.name):
            return x.materialize(ctx)
    return x


class ReduceImpl(DeviceImpl):
    """CAReduce (and subclasses) on the device."""
    host_when = ('complex reductions other than sums and products; a scalar op with no '
                 'identity')

    fusable_inputs = (0,)       # an elementwise producer is computed in the kernel
    complex_ok = True           # sums and products (the factory refuses the others)
    #: its one elementwise consumer may be computed in its kernel (``ops.fusion.fuse_epilogues``;
    #: where :func:`plan_reduce_epilogue` takes it)
    takes_epilogue = True

    def __init__(self, node, dev, comb, axes, needs_nonempty):
        DeviceImpl.__init__(self, node, dev)
        self.comb = comb
        self.axes = axes
        self.needs_nonempty = needs_nonempty

    def describe(self):
        return 'reduce kernel (%s)' % self.node.op

    def plan(self, ctx, ins, epilogue=None):
        x = reduced_input(ctx, ins[0], self.axes)
        if self.needs_nonempty and any(x.shape[a] == 0 for a in self.axes):
            raise _empty_error(self.node, x, self.axes)
        shape = tuple(n for d, n in enumerate(x.shape) if d not in self.axes)
        if epilogue is not None:
            done = plan_reduce_epilogue(ctx, self.comb, x, self.axes, shape, epilogue)
            if done is not None:
                return [done]
        out = ctx.alloc(shape, self.comb.out_dtype)
        plan_reduce(ctx, self.comb, x, self.axes, out)
        return [out]


class ArgmaxImpl(DeviceImpl):
    """MaxAndArgmax (both outputs) and Argmax (the index only) on the device."""

    fusable_inputs = (0,)

    def __init__(self, node, dev, comb, axes, with_max):
        DeviceImpl.__init__(self, node, dev)
        self.comb = comb
        self.axes = axes
        self.with_max = with_max

    def describe(self):
        return 'argmax kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x = reduced_input(ctx, ins[0], self.axes, argmax=True)
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
@implemented_by(ReduceImpl)
def _careduce(op, node, dev):
    in_dtype = node.inputs[0].type.dtype
    out_dtype = node.outputs[0].type.dtype
    acc_dtype = getattr(op, 'acc_dtype', None) or out_dtype
    scalar_op = op.scalar_op
    if any(d.startswith('complex') for d in (in_dtype, acc_dtype, out_dtype)) and not (
            isinstance(scalar_op, (ts.Add, ts.Mul))
            and all(d.startswith('complex') for d in (in_dtype, acc_dtype, out_dtype))):
        raise NoDeviceImplementation('complex reductions other than sums and products have '
                                     'no device kernels')
    needs_nonempty = False
    if isinstance(scalar_op, (ts.Maximum, ts.Minimum)):
        identity = max_identity(acc_dtype, isinstance(scalar_op, ts.Maximum))
        needs_nonempty = True
    elif hasattr(scalar_op, 'identity'):
        identity = oscalar.literal(scalar_op.identity, acc_dtype) if acc_dtype == 'bool' \
            else oscalar.literal(np.asarray(scalar_op.identity).astype(acc_dtype), acc_dtype)
    else:
        raise NoDeviceImplementation('%s has no identity' % scalar_op)
    comb = Combine(scalar_op, in_dtype, acc_dtype, out_dtype, identity)
    return ReduceImpl(node, dev, comb, _axes(op.axis, node.inputs[0].ndim), needs_nonempty)


@ocl_impl.register(MaxAndArgmax)
@ocl_impl.register(Argmax)
@implemented_by(ArgmaxImpl)
def _argmax(op, node, dev):
    in_dtype = node.inputs[0].type.dtype
    if in_dtype.startswith('complex'):
        raise NoDeviceImplementation('complex dtypes have no device kernels')
    acc = 'float32' if in_dtype == 'float16' else in_dtype
    comb = Combine(None, in_dtype, acc, in_dtype, max_identity(in_dtype), argmax=True)
    return ArgmaxImpl(node, dev, comb, _axes(op.axis, node.inputs[0].ndim),
                      isinstance(op, MaxAndArgmax))
