"""SGEMM n x n x n: theano_ocl vs the reference library called directly vs Theano C.

theano_ocl computes ``T.dot(A, B)`` of two float32 shared variables resident on the
device, with the result kept on the device (``OCLMode(outputs='device')``): what is
timed is the BLAS backend ``ops/blas.py`` picks (CLBlast on GPUs, host BLAS on mapped
buffers on CPU devices, else the tiled kernel). The reference is the library that backend
calls, called directly on the same kind of buffers: CLBlast through pyclblast (GPUs, or
any device with ``--backend clblast``), else scipy's ``sgemm`` (``numpy.dot`` into a
preallocated array is shown too). Theano C runs
in the same process. ``--backend`` forces the theano_ocl backend (host, kernel, clblast).

Two times per variant, both medians over ``--repeat`` rounds that take the variants in
turn (so clock ramps and other load hit every variant alike):

- ``seconds``: wall time per call, ``--calls`` calls back to back then one queue finish
  (call overhead that the device does not hide shows up here);
- ``kernel s``: device time per call from OpenCL profiling events (theano_ocl: the same
  function compiled with a profile, whose steps run on the profiling queue) -- what the
  kernels cost, without the host. For host-BLAS steps it is the step's wall time (map,
  ?gemm, unmap). Not shown for CLBlast: the event a CLBlast call returns is its *last*
  kernel's (on the indirect path a small post-processing kernel: it read 0.045 ms for a
  5 ms product on the H100), so only the wall time is its cost.
"""
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T
from theano.compile.profiling import ProfileStats

from theano_ocl.ops import blas, blas_clblast
from theano_ocl.runtime import settings
from common import parser, header, table

p = parser(__doc__)
p.add_argument('--n', type=int, default=4096)
p.add_argument('--calls', type=int, default=3, help='calls per timed repeat')
p.add_argument('--backend', default=None, choices=['host', 'kernel', 'clblast'])
args = p.parse_args()

n = args.n
dev = theano_ocl.get_device(args.device)
with settings.active(settings.Settings.resolve({'blas': args.backend})):
    backend = blas.choose_backend(dev, ['float32', 'float32'])
header('SGEMM %d^3, theano_ocl backend %r' % (n, backend), dev)
rng = np.random.RandomState(0)
a = rng.rand(n, n).astype('float32')
b = rng.rand(n, n).astype('float32')
flops = 2.0 * n ** 3
mode = theano_ocl.OCLMode(device=args.device, outputs='device', blas=args.backend)
rows = []        # dict(variant, wall=fn timed with a finish, kernel=fn -> seconds per call)

if backend == 'clblast':
    # CLBlast with its own database's parameters, measured before theano_ocl applies the
    # tuned set of clblast_tuned.json (which then holds for every CLBlast call of the process)
    import pyclblast
    import pyopencl.array as cla
    q = dev.queue
    da, db = cla.to_device(q, a), cla.to_device(q, b)
    dc = cla.empty(q, (n, n), np.float32)

    def direct():
        t0 = time.perf_counter()
        for _ in range(args.calls):
            pyclblast.gemm(q, n, n, n, da, db, dc, n, n, n)
        q.finish()
        return (time.perf_counter() - t0) / args.calls
    direct()
    t_db = float(np.median([direct() for _ in range(args.repeat)]))
    tuned = blas_clblast.clblast_tuning(dev)
    print('# CLBlast with its database parameters: %.3f ms, %.0f GFLOP/s; tuned parameters '
          'from clblast_tuned.json: %s' % (t_db * 1e3, flops / t_db / 1e9,
                                          'applied' if tuned else 'none for this device'))

A, B = theano.shared(a, 'A'), theano.shared(b, 'B')
f_ocl = theano.function([], T.dot(A, B), mode=mode)
assert not theano_ocl.fallback_nodes(f_ocl)
np.testing.assert_allclose(f_ocl().get()[:64], a[:64].dot(b), rtol=1e-3)
stats = ProfileStats(atexit_print=False)
f_prof = theano.function([], T.dot(A, B), mode=mode, profile=stats)


def ocl_kernel():
    before = sum(stats.apply_time.values())
    for _ in range(args.calls):
        f_prof()
    return (sum(stats.apply_time.values()) - before) / args.calls


rows.append(dict(variant='theano_ocl (%s)' % backend, call=f_ocl, finish=dev.queue.finish,
                 kernel=None if backend == 'clblast' else ocl_kernel))

if blas_clblast.load_pyclblast() is not None and (dev.is_gpu or backend == 'clblast'):
    import pyclblast
    import pyopencl.array as cla
    da, db = cla.to_device(dev.queue, a), cla.to_device(dev.queue, b)
    dc = cla.empty(dev.queue, (n, n), np.float32)

    rows.append(dict(variant='CLBlast (pyclblast)', finish=dev.queue.finish,
                     call=lambda: pyclblast.gemm(dev.queue, n, n, n, da, db, dc, n, n, n)))
else:
    from scipy.linalg import blas as sblas
    c = np.empty((n, n), np.float32)
    # row-major c = a @ b is column-major c.T = b.T @ a.T: no copies, as the host backend calls it
    rows.append(dict(variant='scipy sgemm (host BLAS)',
                     call=lambda: sblas.sgemm(1.0, b.T, a.T, 0.0, c.T, overwrite_c=1)))
    rows.append(dict(variant='numpy.dot', call=lambda: np.dot(a, b, out=c)))

f_c = theano.function([], T.dot(A, B), mode='FAST_RUN')
rows.append(dict(variant='Theano C', call=f_c))


def wall(r):
    t0 = time.perf_counter()
    for _ in range(args.calls):
        r['call']()
    if r.get('finish'):
        r['finish']()
    return (time.perf_counter() - t0) / args.calls


for r in rows:                       # warm up (CLBlast compiles its kernels on first use)
    wall(r)
    if r.get('kernel'):
        r['kernel']()
times = {r['variant']: ([], []) for r in rows}
for _ in range(args.repeat):
    for r in rows:
        w, k = times[r['variant']]
        w.append(wall(r))
        if r.get('kernel'):
            k.append(r['kernel']())

ref_s = float(np.median(times[rows[1]['variant']][0]))
c_s = float(np.median(times['Theano C'][0]))
out = []
for r in rows:
    w, k = times[r['variant']]
    s = float(np.median(w))
    row = {'variant': r['variant'], 'seconds': s, 'GFLOP/s': flops / s / 1e9,
           'x reference': ref_s / s, 'x Theano C': c_s / s}
    if k:
        row['kernel s'] = float(np.median(k))
        row['kernel GFLOP/s'] = flops / row['kernel s'] / 1e9
    out.append(row)
table(out, ['variant', 'seconds', 'GFLOP/s', 'kernel s', 'kernel GFLOP/s', 'x reference',
            'x Theano C'])
