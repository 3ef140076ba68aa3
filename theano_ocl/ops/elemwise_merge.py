"""Independent elementwise launches of one size as one launch of a merged kernel.

The planner (``runtime.planner.merge_frame``) finds, in a frame just built, elementwise
launches of the same number of elements that touch no common memory and can run next to
each other; this family gives their merged launch: one kernel
(``kernels/elemwise_merged.cl.mako``) in which work-item ``gi`` computes element ``gi`` of
every one of them, each with its own code, operands, collapsed dimensions and strides, as
its own kernel (``kernels/elemwise.cl.mako``) would. A launch costs NVIDIA's driver about
8 us of host time whatever it computes; an LSTM gradient's time step is a product, five
small elementwise launches writing the four gate slices and the cell state's gradient,
and another product (``bench/lstm.py``).

Only launches that declared a :class:`~theano_ocl.runtime.plans.Batch` of the
``'elemwise'`` family merge (never one with an error flag), with no support code or
one and the same. The merged launch reads and writes what its launches do; every load
of a work-item comes before its stores, so the pointwise reads its launches declared
stay pointwise (``ops/scan_bind.py`` may point a read and a write at one row).
"""
import warnings

import numpy as np

from .. import kernels
from ..darray import layout
from ..errors import KernelBuildError
from ..runtime.context import provide
from ..runtime.plans import exact, launch_geometry
from .elemwise import operand


@kernels.memoize
def merged_source(keys, slots, views, uniform=None, forward=None, opaque=False, guard=True):
    """(source, kernel name) of the kernel running launches of the elementwise
    ``keys`` (``ops.elemwise.batch_key``) over one range, operand ``o`` of launch ``k``
    in pointer argument ``slots[k][o]``, ``views[j]`` its (dtype, whether only read);
    ``uniform[k][o]``: an input of launch ``k`` broadcast over the whole range, read once
    at its offset, with no strides (``ops.elemwise.operand``); ``forward[k][o]``: None, or
    the (launch, output) of an earlier launch that computes input ``o`` of launch ``k``
    element for element, whose value it takes as a store and a load would give it
    (through an ``opq`` argument where ``opaque``: :func:`_opaque`); ``guard``: the range
    may be longer than the elements (``runtime.plans.exact``). Their support code is
    each launch's distinct one in turn: every helper in it is guarded by its own macro
    (``scalar.codegen``), so one that two define is defined once, first where it was
    first needed (a float64 ``tanh`` launch's own-function helper beside launches with
    none: apart from this, such launches did not merge)."""
    support = '\n'.join(dict.fromkeys(k[0] for k in keys if k[0]))
    ops = []
    for q, ((_, body, out_dtypes, in_dtypes, ndim, contig), slot) in enumerate(zip(keys, slots)):
        nout = len(out_dtypes)
        unif = uniform[q] if uniform else ()
        fwd = forward[q] if forward else ()
        operands = [operand('o%d' % k, dt, True, contig[k]) for k, dt in enumerate(out_dtypes)]
        operands += [operand('i%d' % k, dt, False, contig[nout + k],
                             nout + k < len(unif) and unif[nout + k])
                     for k, dt in enumerate(in_dtypes)]
        for k, o in enumerate(operands):
            o['forward'] = fwd[k] if k < len(fwd) else None
        for o, j in zip(operands, slot):
            o['view'] = j
        ops.append(dict(ndim=ndim, operands=operands, body=body))
    fp64 = any(dt in ('float64', 'complex128') for dt, _ in views)
    views = [dict(operand('v', dt, not ro, True), const=ro) for dt, ro in views]
    pre = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' \
        if fp64 and 'cl_khr_fp64' not in support else ''
    return kernels.render('elemwise_merged.cl.mako', 'ewmerged', support=pre + support,
                          ops=ops, views=views, opaque=opaque, guard=guard)


def _opaque(keys, forward):
    """Whether a forwarded value is floating point: the kernel then takes an ``opq``
    argument (always 0) that its forwarded values go through (``x`` xor ``opq`` as bits),
    so that no compiler contracts the writer's product into the reader's sum, as NVIDIA's
    does across statements (the H200 gave the merged Nengo step's voltage other last bits
    than the launches apart, which store and load it)."""
    for key, fwd in zip(keys, forward or ()):
        nout = len(key[2])
        dtypes = list(key[2]) + list(key[3])
        if any(f is not None and np.dtype(dtypes[k]).kind == 'f' for k, f in enumerate(fwd)
               if k >= nout):
            return True
    return False


def merge_launches(ctx, launches):
    """Record the one launch doing what ``launches`` (``runtime.plans.Launch``es of the
    elementwise family, one size, independent) do; None where they cannot merge."""
    index, views, args_views, slots = {}, [], [], []
    for p in launches:
        b = p.batch
        slot = []
        for k, d in enumerate(b.operands):
            where = (id(d.root), d.offset, d.dtype.name)
            j = index.get(where)
            if j is None:
                j = index[where] = len(views)
                views.append([d.dtype.name, True])
                args_views.append(d)
            if k in b.written:
                views[j][1] = False
            slot.append(j)
        slots.append(tuple(slot))
    # inputs broadcast over the whole range (every stride 0): read at their offsets, as
    # their own kernels read them (PoCL turns a load through a runtime stride of 0 into a
    # gather: the Nengo step's three LIF launches merged ran 1.4x slower than apart)
    uniform = tuple(tuple(bool(t) and not any(t) and k not in p.batch.written
                          for k, t in enumerate(p.batch.tails)) for p in launches)
    forward = _forwarded(launches)
    keys = tuple(p.batch.key for p in launches)
    opaque = _opaque(keys, forward)
    n = launches[0].batch.n
    gsize, lsize = launch_geometry(ctx.dev, n)
    src, name = merged_source(keys, tuple(slots),
                              tuple(tuple(v) for v in views),
                              uniform if any(any(u) for u in uniform) else None,
                              forward if any(any(f) for f in forward) else None, opaque,
                              not exact(gsize, n))
    args = [np.int64(n)]
    for p in launches:
        args.extend(np.int64(s) for s in p.batch.head)
    args.extend(args_views)
    reads, writes, pointwise = [], [], []
    for p, unif in zip(launches, uniform):
        for tail, u in zip(p.batch.tails, unif):
            if not u:
                args.extend(np.int64(x) for x in tail)
        reads.extend(p.reads)
        writes.extend(p.writes)
        pointwise.extend(p.pointwise)
    if opaque:
        args.append(np.uint32(0))
    # every argument takes 8 bytes (a pointer or a long): within what the device takes
    if 8 * (len(args) + len(args_views)) > _parameter_bytes(ctx.dev):
        return None
    try:
        prg = ctx.dev.build(src)
    except KernelBuildError as e:       # a defect of this module: the launches run apart
        warnings.warn('theano_ocl: a merged elementwise kernel did not build on %s; its %d '
                      'launches run apart:\n%s' % (ctx.dev, len(launches), e))
        return None
    return ctx.launch(prg, name, gsize, lsize, args, reads=reads, writes=writes,
                      pointwise=pointwise)


def _forwarded(launches):
    """Per launch, per operand: the (launch, output name) of an earlier launch writing the
    input with the same layout (the planner merges such a read after a write only where it
    is element for element: ``runtime.planner._pointwise_after``), else None."""
    written, out = {}, []
    for q, p in enumerate(launches):
        b = p.batch
        nout = len(b.written)
        out.append(tuple(None if k in b.written else written.get(layout(d))
                         for k, d in enumerate(b.operands)))
        for k in sorted(b.written):
            written[layout(b.operands[k])] = (q, 'o%d' % k)
        assert sorted(b.written) == list(range(nout))
    return tuple(out)


def _parameter_bytes(dev):
    """The bytes of kernel arguments ``dev`` takes (CL_DEVICE_MAX_PARAMETER_SIZE: 1024 on
    PoCL, 4352 on NVIDIA's driver), less a margin."""
    try:
        return int(dev.device.max_parameter_size) - 32
    except Exception:
        return 1024 - 32


provide('merge_elementwise', merge_launches)
