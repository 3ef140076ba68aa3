"""What a launch costs on an OpenCL driver, apart from the kernel: live sub-buffers of an argument
buffer, and many buffer arguments. A plain pyopencl script (no Theano).

On the H100 (NVIDIA OpenCL 3.0, 2026-11-23) it showed ~50 ns per live sub-buffer on every
launch that uses the parent buffer and ~0.5 us per buffer argument: why SimulatorOCL's
sub-buffer slab does not pay there (docs/benchmarks.md). Picks the first NVIDIA platform,
else the first device.

    python bench/launch_costs.py
"""
import pyopencl as cl, numpy as np, time
plats = cl.get_platforms()
plat = ([p for p in plats if 'NVIDIA' in p.name] or plats)[0]
ctx = cl.Context(plat.get_devices()[:1]); q = cl.CommandQueue(ctx)
K, N = 500, 100
tot = K * N
src = """
__kernel void simple(const long n, __global float *a, __global const float *b) {
  for (long i = get_global_id(0); i < n; i += get_global_size(0)) a[i] = b[i] * 2.0f; }
__kernel void tabbed(const long total, __global const long *tab, __global float *a, __global const float *b) {
  for (long gi = get_global_id(0); gi < total; gi += get_global_size(0)) {
    int op = 0, hi = %d - 1;
    while (op < hi) { const int mid = (op + hi + 1) >> 1; if (tab[mid * 3] <= gi) op = mid; else hi = mid - 1; }
    __global const long *r = tab + op * 3; const long li = gi - r[0];
    a[r[1] + li] = b[r[2] + li] * 2.0f; } }
""" % K
prg = cl.Program(ctx, src).build()
A = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 << 20)
B = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 << 20)
tab = np.zeros((K, 3), np.int64); tab[:, 0] = np.arange(K) * N; tab[:, 1] = np.arange(K) * 128; tab[:, 2] = np.arange(K) * 128
T = cl.Buffer(ctx, cl.mem_flags.READ_ONLY, tab.nbytes); cl.enqueue_copy(q, T, tab, is_blocking=True)
def t(name, kern, args, g):
    kern.set_args(*args)
    cl.enqueue_nd_range_kernel(q, kern, (g,), (256,)); q.finish()
    ts = []
    for _ in range(20):
        t0 = time.perf_counter(); cl.enqueue_nd_range_kernel(q, kern, (g,), (256,)); q.finish(); ts.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    for _ in range(200): cl.enqueue_nd_range_kernel(q, kern, (g,), (256,))
    q.finish()
    print('%-40s finish-each %8.1f us   pipelined %8.1f us' % (name, sorted(ts)[10] * 1e6, (time.perf_counter() - t0) / 200 * 1e6), flush=True)
g = ((tot + 255) // 256) * 256
ks = cl.Kernel(prg, 'simple'); kt = cl.Kernel(prg, 'tabbed')
t('simple, plain buffers', ks, [np.int64(tot), A, B], g)
t('tabbed, plain buffers', kt, [np.int64(tot), T, A, B], g)
subs = [A.get_sub_region(k * 512, 400) for k in range(3000)] + [B.get_sub_region(k * 512, 400) for k in range(3000)]
t('simple, 6000 sub-buffers alive', ks, [np.int64(tot), A, B], g)
t('tabbed, 6000 sub-buffers alive', kt, [np.int64(tot), T, A, B], g)
ks2 = cl.Kernel(prg, 'simple')
t('simple on a sub-buffer, subs alive', ks2, [np.int64(100), subs[5], subs[3005]], 256)
# touch sub-buffers with kernels (as the frame's single launches do)
for k in range(0, 3000, 1):
    ks2.set_args(np.int64(100), subs[k], subs[3000 + k]); cl.enqueue_nd_range_kernel(q, ks2, (256,), (256,))
q.finish()
t('tabbed, after sub-buffer kernels ran', kt, [np.int64(tot), T, A, B], g)
del subs
t('tabbed, sub-buffers released', kt, [np.int64(tot), T, A, B], g)
# many buffer arguments (pointer mode)
src2 = "__kernel void many(const long n" + "".join(", __global float *p%d" % k for k in range(154)) + ") { if (get_global_id(0) == 0) p0[0] = p153[0]; }"
km = cl.Kernel(cl.Program(ctx, src2).build(), 'many')
bufs = [cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 512) for _ in range(154)]
t('154 distinct buffer args', km, [np.int64(1)] + bufs, 256)
t('154 args, same buffer', km, [np.int64(1)] + [bufs[0]] * 154, 256)
