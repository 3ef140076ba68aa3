"""What a full reduction of a 4096x4096 float32 array can reach on this device, by OpenCL
profiling events: a plain grid-stride float4 read kernel (one partial per work-group) with
and without a single-pass combine (release fence, counter, the last group sums the
partials; on NVIDIA from Volta on also as one PTX atom.acq_rel.gpu increment, the handshake
theano_ocl uses there), next to theano_ocl's rows kernel as a first stage alone and as a
single pass.

    THEANO_FLAGS=blas.ldflags= python bench/reduce_ceiling.py [--device SPEC] [--reps 80]
                                                              [--loads]

Each row is the median of ``--reps`` launches' event times, as GB/s of the 64 MB read. The
single-pass rows check their sum against numpy. See docs/benchmarks.md, session 12.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import theano_ocl  # noqa: E402  (first: makes Theano importable on numpy >= 1.22)
import theano.scalar as ts  # noqa: E402
from theano_ocl.ops import reduce as R, reduce_geometry as G  # noqa: E402

PLAIN = r"""
#if LOADQ
/* the load as one PTX instruction with the qualifiers @LOADQ@ (NVIDIA only) */
inline float4 ld4(__global const float4 *p)
{
    float4 v;
    asm("ld.global@LOADQ@.v4.f32 {%0,%1,%2,%3}, [%4];"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
#else
#define ld4(p) (*(p))
#endif
__kernel void plain(__global const float4 *x, const long n4, __global float *part,
                    __global volatile int *ctr, __global float *res)
{
    const int l = get_local_id(0);
    float4 a[UNR];
    for (int u = 0; u < UNR; u++)
        a[u] = (float4)(0);
    const long G = get_global_size(0);
    long i = get_global_id(0);
    for (; i + (UNR - 1) * G < n4; i += UNR * G) {
        for (int u = 0; u < UNR; u++)
            a[u] += ld4(x + i + u * G);
    }
    for (; i < n4; i += G)
        a[0] += ld4(x + i);
    for (int u = 1; u < UNR; u++)
        a[0] += a[u];
    __local float s[L];
    s[l] = a[0].x + a[0].y + a[0].z + a[0].w;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = L / 2; k > 0; k >>= 1) {
        if (l < k)
            s[l] += s[l + k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0)
        part[get_group_id(0)] = s[0];
#if SINGLE
    __local int last;
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (l == 0) {
#if ATOM
        /* one release-acquire increment that wraps to 0 (theano_ocl's NVIDIA handshake) */
        const unsigned int bound = get_num_groups(0) - 1;
        unsigned int seen;
        asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
                     : "=r"(seen) : "l"(ctr), "r"(bound) : "memory");
        last = seen == bound;
#else
        DEVICE_FENCE
        last = atomic_inc(ctr) == get_num_groups(0) - 1;
        if (last) {
            DEVICE_FENCE
        }
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!last)
        return;
    float t = 0;
    for (int g = l; g < get_num_groups(0); g += L)
        t += ((volatile __global float *)part)[g];
    s[l] = t;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = L / 2; k > 0; k >>= 1) {
        if (l < k)
            s[l] += s[l + k];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l == 0) {
        res[0] = s[0];
#if !ATOM
        ctr[0] = 0;
#endif
    }
#endif
}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device', default=None)
    ap.add_argument('--reps', type=int, default=80)
    ap.add_argument('--loads', action='store_true',
                    help='also the plain kernel with PTX load qualifiers (NVIDIA)')
    args = ap.parse_args()
    dev = theano_ocl.get_device(args.device)
    cl = dev.cl
    ctx = dev.context
    q = dev.profiling_queue
    n = 4096 * 4096
    nbytes = 4 * n
    host = np.random.RandomState(0).rand(n).astype('float32')
    want = host.astype('float64').sum()
    mf = cl.mem_flags
    x = cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    y = cl.Buffer(ctx, mf.READ_WRITE, nbytes)
    cl.enqueue_copy(q, x, host).wait()
    part = cl.Buffer(ctx, mf.READ_WRITE, 1 << 20)
    res = cl.Buffer(ctx, mf.READ_WRITE, 64)
    ctr = cl.Buffer(ctx, mf.READ_WRITE, 64)
    cl.enqueue_fill_buffer(q, ctr, np.int32(0), 0, 64).wait()
    # the plain kernel's handshake: NVIDIA's device-scope PTX fence from Volta on, else
    # mem_fence (work-group scope by OpenCL 1.2: a ceiling, not a correct combine)
    fence = 'fence.acq_rel.gpu' if G.ptx_acq_rel(dev) else None
    sync = G.cross_group_sync(dev)
    fence_code = 'asm volatile("%s;" ::: "memory");' % fence if fence else \
        'mem_fence(CLK_GLOBAL_MEM_FENCE);'

    def ev(enqueue):
        evs = [enqueue() for _ in range(args.reps)]
        q.finish()
        return statistics.median((e.profile.end - e.profile.start) * 1e-9 for e in evs)

    def check():
        r = np.empty(1, 'float32')
        cl.enqueue_copy(q, r, res).wait()
        assert abs(r[0] - want) <= 1e-4 * abs(want), (r[0], want)

    t_copy = ev(lambda: cl.enqueue_copy(q, y, x, byte_count=nbytes))
    print('device: %s (%s), %d CUs; 64 MB float32; copy by events %.1f GB/s (read+write); '
          'fence: %s' % (dev.name, dev.platform_name, dev.compute_units,
                         2 * nbytes / t_copy / 1e9, fence or 'mem_fence'))
    rows = []
    L = 256 if not dev.is_cpu else 64

    def time_plain(unr, per_cu, single=0, loadq=None):
        """Event time of the plain kernel; ``single`` 1: fences + atomic_inc, 2: the PTX
        atom.acq_rel.gpu handshake; ``loadq``: PTX load qualifiers (NVIDIA)."""
        src = PLAIN.replace('DEVICE_FENCE', fence_code).replace('@LOADQ@', loadq or '')
        prg = cl.Program(ctx, src).build(options=[
            '-D', 'UNR=%d' % unr, '-D', 'L=%d' % L, '-D', 'SINGLE=%d' % bool(single),
            '-D', 'ATOM=%d' % (single == 2), '-D', 'LOADQ=%d' % bool(loadq)])
        k = cl.Kernel(prg, 'plain')
        k.set_args(x, np.int64(n // 4), part, ctr, res)
        G = dev.compute_units * per_cu * L
        t = ev(lambda: cl.enqueue_nd_range_kernel(q, k, (G,), (L,)))
        if single:
            check()
        return t

    # single 2: the handshake as one PTX atom.acq_rel.gpu increment (Volta on)
    for single in (0, 1, 2) if fence == 'fence.acq_rel.gpu' else (0, 1):
        for unr, per_cu in ((8, 4), (16, 2), (4, 8), (8, 8)):
            how = ['', ', single pass (fences + atomic_inc)',
                   ', single pass (atom.acq_rel.gpu)'][single]
            rows.append(('plain, unroll %d, %d groups/CU%s' % (unr, per_cu, how),
                         time_plain(unr, per_cu, single)))
    tr = G.device_traits(dev)
    comb = R.Combine(ts.add, 'float32', 'float32', 'float32', '0.0f')
    saved = G.GPU_THREADS_PER_CU
    try:
        for tpc in (2048, 1024, 512):
            G.GPU_THREADS_PER_CU = tpc
            g = G.fast_geometry(tr, comb, [], [], [n], [1], 0)
            for single in (False, True) if g.parts > 1 and g.lsize > 1 and sync else (False,):
                src, name = comb.source('rows', kd=0, L=g.L, V=g.V, U=g.U, T=g.T,
                                        aligned=g.aligned, idx32=g.idx32,
                                        sync=sync if single else None)
                k = cl.Kernel(dev.build(src, G.sync_options(dev, sync) if single else ()), name)
                a = [np.int64(g.parts), np.int64(1), np.int64(n), np.int64(g.chunk), x,
                     np.int64(0)]
                if single:
                    a += [res, np.int64(0), part, np.int64(0), ctr, np.int64(0),
                          np.int64(g.parts), np.int32(min(g.L, G.pow2_at_least(g.parts)))]
                else:
                    a += [part, np.int64(0)]
                k.set_args(*a)
                t = ev(lambda: cl.enqueue_nd_range_kernel(q, k, (g.gsize,), (g.lsize,)))
                if single:
                    check()
                rows.append(('theano_ocl rows, GPU_THREADS_PER_CU=%d (%d parts)%s'
                             % (tpc, g.parts, ', single pass' if single else ', first stage'),
                             t))
            if dev.is_cpu:
                break
    finally:
        G.GPU_THREADS_PER_CU = saved
    if args.loads and fence:
        # PTX load qualifiers (cache hints, L2 prefetch sizes) on the plain kernel
        for qual in ('.nc', '.nc.L2::128B', '.nc.L2::256B', '.nc.L1::no_allocate',
                     '.nc.L1::no_allocate.L2::256B', '.cs', '.lu', '.L1::evict_first'):
            rows.append(('plain, unroll 8, 4 groups/CU, ld.global%s' % qual,
                         time_plain(8, 4, loadq=qual)))
    for name, t in rows:
        print('%9.1f GB/s  %7.1f us  %s' % (nbytes / t / 1e9, t * 1e6, name))


if __name__ == '__main__':
    main()
