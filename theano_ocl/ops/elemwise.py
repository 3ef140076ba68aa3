"""Elementwise family: ``Elemwise`` (incl. fused ``Composite``) and strided copies.

One Mako template (``kernels/elemwise.cl.mako``) serves every elementwise kernel; it is
specialised per (scalar expression, dtypes, collapsed ndim, per-operand contiguity).
Dimensions that are contiguous in every operand are merged first, so the common
case (same-shaped C-contiguous operands) becomes a flat 1-d loop whatever the ndim.

Integer ``//`` and ``%`` by a divisor that may be zero (``scalar.elemwise_code_checked``):
Theano's C code raises ZeroDivisionError there. Those kernels (and only those: every other
kernel keeps the argument layout ``planner`` analyses) take one more argument, an int
error flag in a buffer the frame owns; a host step after the launch reads it and raises
ZeroDivisionError with Theano's message, as ``ops/subtensor.py`` does for its IndexError.
Their launches declare no ``Batch``, so the planner never merges them.

The values a consumer's plan receives for folded inputs are defined here too, since they
are made of elementwise code: ``Fused`` (a producer computed in its consumer's kernel),
``Deferred`` and ``Epilogue`` (a product whose kernel runs its elementwise consumer); the
passes that fold them are ``ops/fusion.py``'s. Plans tell them from DArrays by type.
"""
import numpy as np
import theano.scalar as ts
from theano.gof import Constant
from theano.tensor.elemwise import Elemwise

from .. import kernels
from .. import scalar as oscalar
from ..darray import DArray, Shaped
from ..runtime.context import provide
from ..runtime.invokers import set_long
from ..runtime.memory import download_later, upload
from ..runtime import planner
from ..runtime.plans import Batch, exact, launch_geometry, planes_local
from .base import DeviceImpl
from .registry import implemented_by, ocl_impl


def batch_key(support, body, outs, ins, ndim, contig):
    """The key under which elementwise launches merge (``planner``): same code, dtypes,
    collapsed rank and contiguity."""
    return (support, body, tuple(d.dtype.name for d in outs), tuple(d.dtype.name for d in ins),
            ndim, tuple(contig))


@kernels.memoize
def kernel_source(support, body, out_dtypes, in_dtypes, ndim, contig, check=False, nd=1,
                  uniform=(), guard=True, inner=()):
    """Render (memoized) the elementwise kernel; returns (source, kernel name). The
    sequence arguments are tuples (they are the memo's key); ``uniform``: per input, whether
    it is broadcast over the whole launch (``operand``).

    ``check``: the body sets ``th_err`` (``scalar.elemwise_code_checked``); the kernel then
    takes a trailing ``(int *err, offset)`` argument (named ``ewcheck_*`` in profiles).
    ``nd`` > 1: launched over an nd-dimensional range (see ``launch_dims``); ``guard``
    (a 1-d range): the range may be longer than the elements (``plans.exact``);
    ``inner``: per operand, its stride over the last dimension where an nd range takes it
    as a constant (1 or 0), else None."""
    operands = []
    for k, dt in enumerate(out_dtypes):
        operands.append(operand('o%d' % k, dt, True, contig[k]))
    for k, dt in enumerate(in_dtypes):
        operands.append(operand('i%d' % k, dt, False, contig[len(out_dtypes) + k],
                                k < len(uniform) and uniform[k]))
    for o, st in zip(operands, inner):
        o['inner'] = st
    needs_fp64 = any(d in ('float64', 'complex128') for d in list(out_dtypes) + list(in_dtypes))
    pre = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' if needs_fp64 and 'cl_khr_fp64' not in support else ''
    return kernels.render('elemwise.cl.mako', 'ewcheck' if check else 'elemwise',
                          support=pre + support, body=body, ndim=ndim, operands=operands,
                          check=check, nd=nd, guard=guard)


def operand(name, dtype, is_out, contig, uniform=False):
    """An operand of the elementwise templates: its name, storage and compute C types;
    ``uniform``: an input broadcast over the whole launch (every stride 0), read once at its
    offset (the kernel then vectorizes on CPU devices: PoCL turns a load through a runtime
    stride of 0 into a gather, and the Nengo-like LIF step's kernel ran 5x slower)."""
    return dict(name=name, ctype=oscalar.ctype(dtype, True), cctype=oscalar.compute_ctype(dtype, True),
                half=np.dtype(dtype) == np.float16, is_out=is_out, contig=contig,
                uniform=uniform)


def collapse(shape, strides):
    """Merge dimensions contiguous in every operand; drop size-1 dimensions.

    ``strides``: per operand, element strides over ``shape`` (0 where broadcast).
    Returns (collapsed shape, per-operand collapsed strides, per-operand contiguity).
    """
    dims = []
    for d, n in enumerate(shape):
        if n == 1:
            continue
        st = [s[d] for s in strides]
        if dims and all(ps == cs * n for ps, cs in zip(dims[-1][1], st)):
            dims[-1] = (dims[-1][0] * n, st)
        else:
            dims.append((n, st))
    cshape = [n for n, _ in dims]
    cstrides = [[st[k] for _, st in dims] for k in range(len(strides))]
    contig_ref = []
    acc = 1
    for n in reversed(cshape):
        contig_ref.append(acc)
        acc *= n
    contig_ref = list(reversed(contig_ref))
    contig = [cs == contig_ref for cs in cstrides]
    return cshape, cstrides, contig


def elem_strides(d, shape):
    """Element strides of DArray ``d`` broadcast to ``shape`` (0 on broadcast dims)."""
    out = []
    for n, dn, st in zip(shape, d.shape, d.strides):
        out.append(0 if (dn == 1 and n != 1) else st // d.itemsize)
    return out


def plan_elementwise(ctx, support, body, outs, ins, shape, err=None):
    """Record one launch computing ``outs`` from ``ins`` over ``shape`` (any strides).

    ``err``: an int32 DArray for a body that sets ``th_err`` (see ``kernel_source``);
    returns whether the launch was recorded (nothing is launched for an empty shape)."""
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return False
    operands = list(outs) + list(ins)
    cshape, cstrides, contig = collapse(shape, [elem_strides(d, shape) for d in operands])
    nd = launch_dims(ctx.dev, cshape, contig)
    uniform = tuple(not c and not any(st)
                    for c, st in zip(contig[len(outs):], cstrides[len(outs):]))
    if nd > 1:
        outer = 1
        for s in cshape[:-2]:
            outer *= s
        gsize = (cshape[-1], cshape[-2]) + ((outer,) if nd == 3 else ())
        lsize = planes_local(ctx.dev, gsize)
    else:
        gsize, lsize = launch_geometry(ctx.dev, n)
    src, name = kernel_source(support, body, tuple(o.dtype.name for o in outs),
                              tuple(i.dtype.name for i in ins), len(cshape), tuple(contig),
                              check=err is not None, nd=nd,
                              uniform=uniform if any(uniform) else (),
                              guard=nd == 1 and not exact(gsize, n),
                              inner=tuple(st[-1] if st[-1] in (0, 1) else None
                                          for st in cstrides) if nd > 1 else ())
    prg = ctx.dev.build(src)
    args = [np.int64(n)] + [np.int64(s) for s in cshape]
    tails = []
    for d, st, c in zip(operands, cstrides, contig):
        args.append(d)
        tails.append(() if c else st)
        if not c:
            args.extend(np.int64(x) for x in st)
    batch = None
    if err is not None:
        args.append(err)
    else:
        # launches of this source merge into one batched launch (planner.py)
        batch = Batch('elemwise', batch_key(support, body, outs, ins, len(cshape), contig),
                      n, cshape, operands, tails, range(len(outs)),
                      pointwise=range(len(outs), len(operands)))
    ctx.launch(prg, name, gsize, lsize, args, batch=batch)
    return True


def launch_dims(dev, cshape, contig):
    """Dimensions of the launch range: 2 or 3 on CPU devices when some operand is strided
    over >= 2 collapsed dimensions (PoCL vectorizes along the first one; a division per
    element costs more than the work: tanh(x + row) 1.31 -> 0.82 ms for 256x1000), else 1."""
    if not dev.is_cpu or len(cshape) < 2 or all(contig):
        return 1
    return 2 if len(cshape) == 2 else 3


# ------------------------------------------------------------------ device error flags
def error_flag(ctx):
    """A zeroed int32 flag on the device, owned by the frame, for a kernel to report an
    error in (see ``check_flag``)."""
    return ctx.constant(np.zeros(1, np.int32))


def check_flag(ctx, err, make_error):
    """Check the int32 flag ``err`` once the call's outputs are fetched: when the kernel
    set it, raise ``make_error(code)`` (see ``check_flags``)."""
    check_flags(ctx, err, lambda flag: make_error(int(flag[0])))


def check_flags(ctx, err, make_error):
    """Check the error flags ``err`` (a 1-d device array, its first element set by a
    kernel that met an error, the others what it says of it) once the call's outputs are
    fetched (``ctx.deferred_check``: all of a call's flags and host outputs come back with
    one wait; the steps of a call, and of ``run_steps``, never wait for them). When set:
    clear them (the frame is replayed later) and raise ``make_error(host copy)``."""
    dev, queue = ctx.dev, ctx.queue
    flag = np.zeros(err.shape, err.dtype)
    zero = np.zeros(err.shape, err.dtype)

    def read():
        return download_later(dev, queue, err, flag)

    def run():
        if flag[0]:
            upload(dev, queue, err, zero, blocking=True)
            raise make_error(flag)
    ctx.deferred_check(run, read, err)


def _zero_division(code):
    return ZeroDivisionError(oscalar.ZERO_DIVISION_ERRORS[code])


def _copy_code(out_dtype, in_dtype):
    if np.dtype(out_dtype) == np.bool_:
        return '', 'o0 = (i0 != 0);'
    if np.dtype(out_dtype).kind == 'c' or np.dtype(in_dtype).kind == 'c':
        return '', 'o0 = %s;' % oscalar.complex_convert('i0', in_dtype, out_dtype)
    return '', 'o0 = (%s)i0;' % oscalar.compute_ctype(out_dtype)


def strided_copy(ctx, dst, src):
    """Record ``dst[...] = src`` (same shape; any strides; dtype cast allowed)."""
    support, body = _copy_code(dst.dtype.name, src.dtype.name)
    plan_elementwise(ctx, support, body, [dst], [src], dst.shape)


provide('strided_copy', strided_copy)


class _ImmediateContext(object):
    """Enough of a PlanContext to launch outside a frame: each launch becomes a callable
    (the kernel fetched once, bound to its arrays' current buffers when called)."""

    def __init__(self, dev, queue):
        self.dev = dev
        self.queue = queue
        self.launches = []

    def launch(self, prg, name, gsize, lsize, args, batch=None):
        import pyopencl as cl
        k = cl.Kernel(prg, name)
        queue = self.queue
        # other arguments are bound once; an array's buffer and element offset again only
        # when its root moved (setting every argument per launch cost ~0.1 ms on NVIDIA)
        arrays = []
        argi = 0
        for a in args:
            if isinstance(a, DArray):
                arrays.append((argi, a))
                argi += 2
            else:
                k.set_arg(argi, a)
                argi += 1
        bound = [None] * len(arrays)
        enqueue = cl.enqueue_nd_range_kernel

        def run():
            for n, (i, a) in enumerate(arrays):
                buf, off = a.root.buf, a.boff
                b = bound[n]
                if b is None or b[0] is not buf or b[1] != off:
                    k.set_arg(i, buf)
                    set_long(k, i + 1, off // a.itemsize)
                    bound[n] = (buf, off)
            enqueue(queue, k, gsize, lsize)
        self.launches.append(run)


def elementwise_later(dev, queue, body, outs, ins, shape, support=''):
    """A callable enqueuing the elementwise ``body`` (as ``plan_elementwise`` takes it)
    each time it is called, on the arrays' buffers at that time: the kernel is built once
    (a device Scan runs such copies on every run or every step, outside any frame)."""
    ctx = _ImmediateContext(dev, queue)
    plan_elementwise(ctx, support, body, outs, ins, shape)
    launches = tuple(ctx.launches)

    def run():
        for launch in launches:
            launch()
    return run


def strided_copy_later(dev, queue, dst, src):
    """``elementwise_later`` of ``dst[...] = src`` (same shape; any strides; a cast)."""
    support, body = _copy_code(dst.dtype.name, src.dtype.name)
    return elementwise_later(dev, queue, body, [dst], [src], dst.shape, support)


provide('strided_copy_later', strided_copy_later)
provide('elementwise_later', elementwise_later)


# ------------------------------------------------------------------ batched launches
# How this family's launches merge (runtime.planner): K launches of one source as one
# launch of a kernel reading a table of per-launch offsets, sizes and strides.

def _elemwise_batched(dev, key, K, slab, chunk, group, whole=False):
    src, name, rec = _elemwise_batched_source(key, K, slab, chunk, group, whole)
    return dev.build(src), name, rec


@kernels.memoize
def _elemwise_batched_source(key, K, slab, chunk, group, whole=False):
    """(source, kernel name, record length) of the kernel running K elementwise launches of
    ``key`` (:func:`batch_key`); ``whole``: every launch is whole work-groups of ``group``
    (``runtime.planner.whole_groups``)."""
    support, body, out_dtypes, in_dtypes, ndim, contig = key
    operands = []
    pos = 1 + ndim
    nops = len(out_dtypes) + len(in_dtypes)
    for k in range(nops):
        is_out = k < len(out_dtypes)
        dt = out_dtypes[k] if is_out else in_dtypes[k - len(out_dtypes)]
        o = operand(('o%d' % k) if is_out else ('i%d' % (k - len(out_dtypes))), dt,
                        is_out, contig[k])
        o['off_at'] = pos
        pos += 1
        if not contig[k]:
            o['st_at'] = pos
            pos += ndim
        operands.append(o)
    needs_fp64 = 'float64' in out_dtypes or 'float64' in in_dtypes
    pre = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' \
        if needs_fp64 and 'cl_khr_fp64' not in support else ''
    src, name = kernels.render('batched.cl.mako', 'batched', support=pre + support, body=body,
                               ndim=ndim, operands=operands, K=K, rec=pos, slab=slab,
                               chunk=chunk, group=group, whole=whole)
    return src, name, pos


def _elemwise_max_batch(dev, key):
    nops = len(key[2]) + len(key[3])
    try:
        limit = int(dev.device.max_parameter_size)
    except Exception:
        limit = 1024
    return max(1, min(planner.MAX_BATCH, (limit - 32) // (8 * nops)))


def copy_key(dtype):
    """The batch key of a contiguous same-dtype copy (``dst = src``): commit copies batch
    as elementwise launches (``runtime.planner.CommitPlan``)."""
    support, body = _copy_code(dtype.name, dtype.name)
    return (support, body, (dtype.name,), (dtype.name,), 1, (True, True))


planner.register_family('elemwise', planner.Family(_elemwise_batched, _elemwise_max_batch))
provide('copy_key', copy_key)


def compose(cache, scalar_fn, ins, in_dtypes, out_dtypes):
    """(composite, support, body, arrays) of one elementwise kernel computing ``scalar_fn``
    (scalar variables in, a list of output variables out) over ``ins``, some of them folded
    elementwise producers (``ops.fusion.Fused``: computed in place from their own inputs):
    one Composite whose inputs are the plain inputs and each folded producer's inputs, in
    order; ``arrays`` are what the kernel reads, in that order. The code is memoized in
    ``cache`` by the folded producers' code."""
    key = tuple((j, x.spec()) for j, x in enumerate(ins) if isinstance(x, Fused))
    code = cache.get(key)
    if code is None:
        cins, args, dtypes = [], [], []
        for x, dtype in zip(ins, in_dtypes):
            if isinstance(x, Fused):
                pins = [ts.get_scalar_type(v.dtype.name)() for v in x.views]
                args.append(x.impl.scalar_op.make_node(*pins).outputs[0])
                cins += pins
                dtypes += [v.dtype.name for v in x.views]
            else:
                v = ts.get_scalar_type(dtype)()
                args.append(v)
                cins.append(v)
                dtypes.append(dtype)
        composite = ts.Composite(cins, scalar_fn(*args))
        code = cache[key] = (composite,) + tuple(oscalar.elemwise_code(composite, dtypes,
                                                                       out_dtypes))
    arrays = []
    for x in ins:
        arrays += x.views if isinstance(x, Fused) else [x]
    return code + (arrays,)


def folded_code(cache, scalar_fn, ins, in_dtypes, out_dtypes):
    """(support, body, arrays) of :func:`compose`. Used by ElemwiseImpl and
    IncSubtensorImpl."""
    return compose(cache, scalar_fn, ins, in_dtypes, out_dtypes)[1:]


class Fused(Shaped):
    """An elementwise node folded into its consumer (``ops.fusion.fuse_producers``).

    Its output is never stored: the consumer's kernel computes each element it reads from
    the producer's inputs with the producer's scalar code (``th_pre`` in the consumer's
    template). ``views`` are the producer's inputs broadcast to its output shape (stride 0
    on broadcast dims), always DArrays: a producer with folded producers of its own is one
    :class:`Composed` scalar op over all of their inputs. A consumer applies the views it
    would make of the output to each of them (:meth:`map`), so the element at an index of
    the mapped views is the element the producer would have stored at that index. A
    consumer that cannot take it for some call (a product too big for the small kernel)
    calls :meth:`materialize`: the producer's own launch, planned at that point.

    ``stored``: None, or the variable of a producer whose value is kept
    (``ops.fusion.fuse_kept_producers``; set by the frame builder): the consumer's kernel
    stores it too, in ``out``.
    """

    stored = None
    out = None

    def __init__(self, impl, views):
        self.impl = impl
        self.views = list(views)
        self.shape = tuple(self.views[0].shape)
        self.dtype = np.dtype(impl.out_dtypes[0])

    @classmethod
    def of(cls, impl, ins):
        """The fused value of ``impl`` (an :class:`ElemwiseImpl`) on ``ins`` (DArrays, or
        fused values of its own folded producers); raises the producer's own shape errors."""
        shape = impl.out_shape(ins)
        ins = [fmap(lambda d: d.view(shape, tuple(s * d.itemsize
                                                  for s in elem_strides(d, shape))), x)
               for x in ins]
        if not any(isinstance(x, Fused) for x in ins):
            return cls(impl, ins)
        composite, support, body, arrays = compose(
            impl._composed,
            lambda *a: impl.scalar_op.make_node(*a).outputs, ins, impl.in_dtypes,
            impl.out_dtypes)
        return cls(Composed(composite, support, body, impl.out_dtypes), arrays)

    def spec(self):
        """What a consumer kernel's source depends on: (support, body, input dtypes)."""
        return (self.impl.support, self.impl.body, tuple(v.dtype.name for v in self.views))

    def map(self, fn):
        """The same value seen through the view ``fn`` makes of a DArray."""
        return Fused(self.impl, [fn(v) for v in self.views])

    def materialize(self, ctx):
        out = ctx.alloc(self.shape, self.dtype.name)
        plan_elementwise(ctx, self.impl.support, self.impl.body, [out], self.views, self.shape)
        return out


class Composed(object):
    """An elementwise producer and the producers folded into it, as one scalar op (what
    :class:`Fused` needs of its ``impl``)."""

    def __init__(self, scalar_op, support, body, out_dtypes):
        self.scalar_op = scalar_op
        self.support, self.body = support, body
        self.out_dtypes = tuple(out_dtypes)


class Deferred(object):
    """A product folded into its one elementwise consumer (``ops.fusion.fuse_epilogues``): not
    computed at its own place; the consumer plans it with itself as the epilogue
    (:meth:`epilogue`, then :meth:`plan_with`)."""

    def __init__(self, task, ins):
        self.task = task
        self.ins = ins

    @staticmethod
    def epilogue(impl, j, ins, alloc):
        """The consumer ``impl`` (input ``j`` is this product) as an :class:`Epilogue`."""
        return Epilogue(impl, j, ins, alloc)

    def plan_with(self, ctx, epilogue):
        """Plan the product with ``epilogue`` (an :class:`Epilogue`); returns the consumer's
        output when the product's kernel computed it, else the product's value (where its
        kernel takes no epilogue for this call: not a small product; the consumer then
        runs on it)."""
        saved = getattr(ctx, 'destroyable', None)
        # the product never overwrites its inputs here: its reads moved to the consumer's
        # place, where the VM's last-use analysis no longer applies to them
        ctx.destroyable = [False] * len(self.task.node.inputs)
        try:
            return self.task.impl.plan(ctx, self.ins, epilogue=epilogue)[0]
        finally:
            ctx.destroyable = saved


class Epilogue(object):
    """An elementwise consumer evaluated in a product's kernel, per element of C.

    ``impl``: the consumer (:class:`ElemwiseImpl`); ``j``: the input that is the product's
    value; ``ins``: its inputs (``ins[j]`` unused); ``out``: its output, allocated once the
    product's shape is known (``alloc(shape)``)."""

    def __init__(self, impl, j, ins, alloc):
        self.impl, self.j, self.ins = impl, j, ins
        self.alloc = alloc
        self.out = None

    def views_over(self, shape, value=None):
        """The consumer's inputs broadcast to ``shape``, the shape of the folded value
        (``value``, a DArray of it, or None where it is not stored: it then stands in for
        itself in the shape check), None at index ``j``; None where the consumer's shape
        check fails (its own launch then raises the error) or its output has another shape."""
        if any(isinstance(d, (Fused, Deferred)) for k, d in enumerate(self.ins) if k != self.j):
            return None      # (folded producers of its own: not taken)
        try:
            full = [None if k == self.j else
                    d.view(shape, tuple(s * d.itemsize for s in elem_strides(d, shape)))
                    for k, d in enumerate(self.ins)]
            probe = value if value is not None else _Shaped(shape)
            out_shape = self.impl.out_shape([probe if k == self.j else d
                                             for k, d in enumerate(self.ins)])
        except ValueError:
            return None      # the consumer's own launch raises its shape error
        return full if tuple(out_shape) == tuple(shape) else None

    def allocate(self, shape):
        """The consumer's output, once its kernel is sure to compute it."""
        self.out = self.alloc(shape)
        return self.out

    def views_for(self, C, prod_out):
        """The consumer's inputs and output as 3-d views of C's geometry, where C is a
        3-d view of the product's output ``prod_out``: (impl, j, views, out), or None when
        C's dimensions do not map one to one onto ``prod_out``'s."""
        if C.offset != prod_out.offset:
            return None
        dims = []
        for n, st in zip(C.shape, C.strides):
            if n == 1:
                dims.append(None)
                continue
            match = [d for d in range(prod_out.ndim)
                     if prod_out.shape[d] == n and prod_out.strides[d] == st]
            if len(match) != 1:
                return None
            dims.append(match[0])
        full = self.views_over(prod_out.shape, prod_out)
        if full is None:
            return None
        self.allocate(prod_out.shape)

        def three_d(d):
            return d.view(C.shape, tuple(0 if k is None else d.strides[k] for k in dims),
                          d.offset)
        return (self.impl, self.j, [None if v is None else three_d(v) for v in full],
                three_d(self.out))


class _Shaped(object):
    """A value of a shape, for a shape check (``Epilogue.views_over``)."""

    def __init__(self, shape):
        self.shape = tuple(shape)
        self.ndim = len(self.shape)


def fmap(fn, x):
    """``fn(x)`` for a DArray, the mapped views for a :class:`Fused` value."""
    return x.map(fn) if isinstance(x, Fused) else fn(x)


class ElemwiseImpl(DeviceImpl):
    host_when = 'the scalar op has no OpenCL code for these dtypes (the scalar-op table below)'
    complex_ok = True

    def __init__(self, node, dev, support, body, checked=False):
        DeviceImpl.__init__(self, node, dev)
        self.support = support
        self.body = body
        self.checked = checked          # the body reports integer division by zero
        self.inplace = dict(node.op.inplace_pattern)
        self.bcast = [i.type.broadcastable for i in node.inputs]
        self.in_dtypes = [i.type.dtype for i in node.inputs]
        self.out_dtypes = [o.type.dtype for o in node.outputs]
        self._folded = {}       # stored inputs -> this node's kernels with folded producers
        self._composed = {}     # this node folded, its own folded producers composed in

    def describe(self):
        return 'Elemwise kernel (%s)' % self.node.op.scalar_op

    def out_shape(self, ins):
        """The output shape, checked as Theano's C code checks it (``elemwise_cgen.make_checks``):
        a dimension broadcasts only where an input's *type* says it is broadcastable; along
        every other dimension all inputs have the same length, 1 included (a length-1
        dimension that is not broadcastable by type is a mismatch, never a broadcast)."""
        ndim = self.node.outputs[0].ndim
        shape = []
        for d in range(ndim):
            first = None
            for k, x in enumerate(ins):
                n = x.shape[d]
                if self.bcast[k][d]:
                    if n != 1:
                        raise ValueError('Input %d of %s has shape %s but dimension %d is '
                                         'broadcastable (expected 1)' % (k, self.node.op, x.shape, d))
                    continue
                if first is None:
                    first = (k, n)
                elif n != first[1]:
                    raise ValueError(
                        'Input dimension mis-match. (input[%d].shape[%d] = %d, input[%d].shape[%d] '
                        '= %d) in %s; input shapes %s' % (first[0], d, first[1], k, d, n,
                                                          self.node.op, [x.shape for x in ins]))
            shape.append(1 if first is None else first[1])
        return tuple(shape)

    def _in_place(self, ctx, k, x, shape, dtype):
        """Whether output ``k`` is computed over its destroyed input ``x``. Not into a strided
        view for a value the function keeps (``ctx.kept``): that would be copied out
        contiguous after (a download, or a Scan output's slot its frame cannot follow,
        ops/scan_bind.py), where a fresh array costs no launch. Never where fusion made the
        node write fresh outputs (``writes_fresh``)."""
        j = self.inplace[k]
        return not self.writes_fresh and ctx.destroyable[j] and x.shape == shape and x.dtype == np.dtype(dtype) and \
            not (k < len(ctx.kept) and ctx.kept[k] and not x.is_c_contiguous())

    @property
    def scalar_op(self):
        """The scalar op a consumer composes when this node is folded into it."""
        return self.node.op.scalar_op

    def takes_fused(self):
        """Whether a folded elementwise producer (``ops.fusion.Fused``) may stand for an
        input (``ops.fusion.fuse_shared_producers``): the node's code and the producer's
        composed into one Composite. Not with an error flag, complex or float16 values."""
        return not self.checked and not any(
            d.startswith('complex') or d == 'float16' for d in self.in_dtypes + self.out_dtypes)

    def plan(self, ctx, ins):
        for j, x in enumerate(ins):
            if isinstance(x, Deferred):
                # a product folded in (ops.fusion.fuse_epilogues): its kernel computes this
                # node's output when it can, else its value comes first
                epi = x.epilogue(self, j, ins, lambda shape: ctx.alloc(shape, self.out_dtypes[0]))
                res = x.plan_with(ctx, epi)
                if epi.out is not None and res is epi.out:
                    return [res]
                ins = list(ins)
                ins[j] = res
        shape = self.out_shape(ins)
        outs = []
        for k, dt in enumerate(self.out_dtypes):
            j = self.inplace.get(k)
            if j is not None and self._in_place(ctx, k, ins[j], shape, dt) and ins[j] not in outs:
                outs.append(ins[j])
            else:
                outs.append(ctx.alloc(shape, dt))
        support, body = self.support, self.body
        if any(isinstance(x, Fused) for x in ins):
            # (the checked bodies take no folded producer: ElemwiseImpl.takes_fused). A
            # folded producer whose value is kept (``ops.fusion.fuse_kept_producers``): this
            # kernel stores it too, an output more
            stored = tuple(j for j, x in enumerate(ins)
                           if isinstance(x, Fused) and x.stored is not None)
            extra = []
            for j in stored:
                ins[j].out = ctx.alloc(shape, ins[j].dtype.name)
                extra.append(ins[j].out)

            def scalar_fn(*a):
                return list(self.scalar_op.make_node(*a).outputs) + \
                    [a[j] for j in stored]
            support, body, ins = folded_code(
                self._folded.setdefault(stored, {}), scalar_fn, ins, self.in_dtypes,
                self.out_dtypes + [x.dtype.name for x in extra])
            outs = outs + extra
        err = error_flag(ctx) if self.checked else None
        if plan_elementwise(ctx, support, body, outs, ins, shape, err) and self.checked:
            check_flag(ctx, err, _zero_division)
        return outs[:len(self.out_dtypes)]


@ocl_impl.register(Elemwise)
@implemented_by(ElemwiseImpl)
def _elemwise(op, node, dev):
    in_dtypes = [i.type.dtype for i in node.inputs]
    out_dtypes = [o.type.dtype for o in node.outputs]
    # divisors known to hold no zero (constants) need no check
    nonzero = [j for j, v in enumerate(node.inputs)
               if isinstance(v, Constant) and np.all(np.asarray(v.data) != 0)]
    support, body, codes = oscalar.elemwise_code_checked(op.scalar_op, in_dtypes, out_dtypes,
                                                         nonzero)
    return ElemwiseImpl(node, dev, support, body, checked=bool(codes))
