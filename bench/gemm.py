"""SGEMM n x n x n: theano_ocl untuned and tuned vs the reference library called directly,
cuBLAS (torch) and Theano C.

theano_ocl computes ``T.dot(A, B)`` of two float32 shared variables resident on the
device, with the result kept on the device (``OCLMode(outputs='device')``): what is
timed is the BLAS backend ``ops/blas.py`` picks (on GPUs the tiled kernel or CLBlast, on
CPU devices the host BLAS on mapped buffers), twice:

- *untuned*: the ``tune`` setting 'off' (the built-in choices, CLBlast's database
  parameters), with CLBlast called directly beside it where pyclblast is installed;
- *tuned*: the choices ``python -m theano_ocl tune`` stored for this device
  (``ops/gemm_tune.py``; the ``tune`` setting 'cached', so nothing is tuned unasked),
  after tuning them here first with ``--tune`` (``--tune-budget`` seconds, the tuner's
  progress and its before/after table printed). The header says which choice the tuned
  run takes, or that the device has none.

CLBlast's parameters hold for the whole process once set, so the untuned variants are
timed first, then the tuned ones. The reference on CPU devices is scipy's ``sgemm``
(``numpy.dot`` into a preallocated array too); Theano C runs in the same process. On an
NVIDIA device, ``--cublas PYTHON`` (default ``python3``; ``none`` skips it) times
``torch.matmul`` (cuBLAS, TF32 off) in that Python by ``bench/torch_ref.py --gemm``, and
the table gives each variant's speed against it. ``--backend`` forces the theano_ocl
backend (host, kernel, clblast).

Two times per variant, both medians over ``--repeat`` rounds that take the variants of a
phase in turn (so clock ramps and other load hit every variant alike):

- ``seconds``: wall time per call, ``--calls`` calls back to back then one queue finish;
- ``kernel s``: device time per call from OpenCL profiling events (the same function
  compiled with a profile), where no CLBlast call is involved (the event a CLBlast call
  returns is its *last* kernel's only); for host-BLAS steps the step's wall time.

    python bench/gemm.py [--n 4096] [--tune [--tune-budget 200]] [--cublas python3]
"""
import json
import os

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T
from theano.compile.profiling import ProfileStats

from theano_ocl.ops import blas, blas_clblast, gemm_search, gemm_tune
from theano_ocl.runtime import settings
from theano_ocl.benchmarks.progress import bar
from common import parser, header, table, run_other_python

p = parser(__doc__)
p.add_argument('--n', type=int, default=4096)
p.add_argument('--calls', type=int, default=3, help='calls per timed repeat')
p.add_argument('--backend', default=None, choices=['host', 'kernel', 'clblast'])
p.add_argument('--tune', action='store_true', help='tune GEMM on this device first')
p.add_argument('--tune-budget', type=float, default=gemm_search.DEFAULT_BUDGET,
               help='seconds the tuning may take (default %(default)s)')
p.add_argument('--cublas', default=None, metavar='PYTHON',
               help="a Python with torch and CUDA (default python3 on NVIDIA; 'none')")
p.add_argument('--json', default=None, help='write the rows and the tuning here')
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
A, B = theano.shared(a, 'A'), theano.shared(b, 'B')
clblast = blas_clblast.load_pyclblast() is not None and (dev.is_gpu or backend == 'clblast')


def ocl_row(label, tune):
    """A theano_ocl variant under the ``tune`` setting: its call, and its profiled twin
    for device time (None where a CLBlast call is involved)."""
    mode = theano_ocl.OCLMode(device=args.device, outputs='device', blas=args.backend,
                              tune=tune)
    f = theano.function([], T.dot(A, B), mode=mode)
    assert not theano_ocl.fallback_nodes(f)
    np.testing.assert_allclose(f().get()[:64], a[:64].dot(b), rtol=1e-3)
    with settings.active(settings.Settings.resolve({'blas': args.backend, 'tune': tune})):
        chosen = blas.tuned_choice(dev, backend, _C, _C, _C) if tune != 'off' else None
    uses = chosen.backend if chosen is not None else (
        'clblast' if backend == 'clblast' and blas.takes_clblast(dev, _C, _C, _C) else backend)
    stats = ProfileStats(atexit_print=False)
    f_prof = theano.function([], T.dot(A, B), mode=mode, profile=stats)

    def kernel():
        before = sum(stats.apply_time.values())
        for _ in range(args.calls):
            f_prof()
        return (sum(stats.apply_time.values()) - before) / args.calls
    return dict(variant='theano_ocl %s (%s)' % (label, uses), call=f, finish=dev.queue.finish,
                kernel=None if uses == 'clblast' else kernel), chosen


class _View(object):
    """What the backend choice reads of an n x n operand (shape, strides, dtype)."""
    shape, dtype, itemsize, strides = (1, n, n), np.dtype('float32'), 4, (0, 4 * n, 4)


_C = _View()


def clblast_row(label):
    import pyclblast
    import pyopencl.array as cla
    q = dev.queue
    da, db = cla.to_device(q, a), cla.to_device(q, b)
    dc = cla.empty(q, (n, n), np.float32)
    return dict(variant='CLBlast (pyclblast, %s)' % label, finish=q.finish,
                call=lambda: pyclblast.gemm(q, n, n, n, da, db, dc, n, n, n))


def wall(r):
    import time
    t0 = time.perf_counter()
    for _ in range(args.calls):
        r['call']()
    if r.get('finish'):
        r['finish']()
    return (time.perf_counter() - t0) / args.calls


def measure(rows):
    for r in rows:                   # warm up (kernels compile on first use)
        wall(r)
        if r.get('kernel'):
            r['kernel']()
    for r in rows:
        r['w'], r['k'] = [], []
    for _ in range(args.repeat):
        for r in rows:
            r['w'].append(wall(r))
            if r.get('kernel'):
                r['k'].append(r['kernel']())


# untuned first: CLBlast's parameters, once set, hold for the whole process
untuned, _ = ocl_row('untuned', 'off')
phase = [untuned] + ([clblast_row('database parameters')] if clblast else [])
measure(phase)
rows = list(phase)

tuning = []
if args.tune:
    print('# tuning GEMM on %s for up to %.0f s (float32)' % (dev.name, args.tune_budget))
    tuning = gemm_search.tune(dev, dtypes=['float32'], budget=args.tune_budget,
                              progress=lambda total: bar(total), log=print)
    table([dict(r, before=r['before'], after=r['after'],
                gain=r['after'] / r['before'] if r['before'] else None) for r in tuning],
          ['dtype', 'n', 'before', 'after', 'gain', 'choice'])
    print('(GFLOP/s by the wall clock, the built-in choice before, the tuned one after)')

tuned, chosen = ocl_row('tuned', 'cached')
if backend not in ('kernel', 'clblast'):
    status = 'does not apply (the %s backend)' % backend
elif chosen is not None:
    status = 'tuned: %s (class %d^3, %s)' % (
        gemm_search.describe(dict(backend=chosen.backend, tile=chosen.tile)), chosen.size,
        gemm_tune.tuning_file())
else:
    status = 'none: the device ran untuned (run `%s`, or pass --tune)' % gemm_tune.COMMAND
print('# tuning for %d^3 float32 on this device: %s' % (n, status))
phase = [tuned]
if clblast and gemm_tune.clblast_params(dev).get(32):
    phase.append(clblast_row('tuned parameters'))
if not clblast:
    from scipy.linalg import blas as sblas
    c = np.empty((n, n), np.float32)
    # row-major c = a @ b is column-major c.T = b.T @ a.T: no copies, as the host backend calls it
    phase.append(dict(variant='scipy sgemm (host BLAS)',
                      call=lambda: sblas.sgemm(1.0, b.T, a.T, 0.0, c.T, overwrite_c=1)))
    phase.append(dict(variant='numpy.dot', call=lambda: np.dot(a, b, out=c)))
f_c = theano.function([], T.dot(A, B), mode='FAST_RUN')
phase.append(dict(variant='Theano C', call=f_c))
measure(phase)
rows += phase

cublas = args.cublas or ('python3' if 'NVIDIA' in dev.platform_name.upper() else 'none')
cublas_s = None
if cublas != 'none':
    here = os.path.dirname(os.path.abspath(__file__))
    res = run_other_python(cublas, [os.path.join(here, 'torch_ref.py'), '--gemm', str(n),
                                    '--repeat', str(args.repeat)])
    lines = [l for l in res.stdout.splitlines() if l.startswith('JSON ')]
    if res.returncode or not lines:
        print('# cuBLAS: not measured (%s: %s)' % (cublas, (res.stderr or res.stdout).strip()
                                                  .splitlines()[-1:] or 'no output'))
    else:
        ref = json.loads(lines[-1][5:])
        cublas_s = float(np.median(ref['samples']))
        rows.append(dict(variant='cuBLAS (torch %s, TF32 off)' % ref['torch'], w=ref['samples'],
                         k=[]))

c_s = float(np.median(next(r for r in rows if r['variant'] == 'Theano C')['w']))
out = []
for r in rows:
    s = float(np.median(r['w']))
    row = {'variant': r['variant'], 'seconds': s, 'GFLOP/s': flops / s / 1e9,
           'x Theano C': c_s / s}
    if cublas_s:
        row['x cuBLAS'] = cublas_s / s
    if r['k']:
        row['kernel s'] = float(np.median(r['k']))
        row['kernel GFLOP/s'] = flops / row['kernel s'] / 1e9
    out.append(row)
table(out, ['variant', 'seconds', 'GFLOP/s', 'kernel s', 'kernel GFLOP/s', 'x cuBLAS',
            'x Theano C'])
if args.json:
    from common import commit
    with open(args.json, 'w') as fh:
        json.dump(dict(bench='gemm', n=n, device=dev.name, platform=dev.platform_name,
                       commit=commit(), tuning=tuning, rows=out,
                       samples={r['variant']: r['w'] for r in rows}), fh, indent=1)
