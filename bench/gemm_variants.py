"""SGEMM n x n x n on one device: the tiled kernel's register-blocked tiles, the former
kernel's best against its variant for NVIDIA-like GPUs (``kernels/gemm.cl.mako``:
``fast``; ``ops/blas.py``: ``fast_variant``) in several configurations, and cuBLAS.

Each configuration is planned by ``blas.plan_kernel`` with its tile, as the tuner and a
tuned product plan it (so what the planner decides is what is timed: the variant's
specializations where they apply, a split sum where C has fewer tiles than the device has
compute units), into ``gemm_search._Bench``, whose launches run on the profiling queue.
Per size and configuration: built and run once on C filled with NaN, its result compared
with numpy's (float64) on ``--check-rows`` rows drawn at random plus the first and last;
then timed by OpenCL profiling events (device time): a warm-up, then ``--repeat`` rounds
that take the configurations in turn (clock ramps hit them all alike), each round's sample
the mean of ``--calls`` launches back to back; the median is reported. A configuration
that fails to build or computes a wrong result is reported as such and the others go on.

Configurations (``CONFIGS``; ``--only`` picks some by a part of their names): ``rb``: the
former register-blocked kernel, (TX, TY, RM, RN, BK) -- the baseline is 32x16 work-items
of 8x8 at depth 8 (128 x 256 tiles), the best the tuner found on the H200 before the
variant; ``fast``: the variant, (TX, TY, RM, RN, BK, V) with V 2 for two local buffers
(one barrier per depth step) and 1 for one, tiles 128x128 / 128x256 / 256x128 / 64x256 /
256x64 / 128x64 / 64x128 / 64x64 at depths 8, 16, 32; ``-novec`` and ``-nofull``: the same
with the 4-element loads or the whole-tile specialization off (``blas.FAST_VECTOR``,
``blas.FAST_FULL``), to see what each gives.

cuBLAS: ``torch.matmul`` (TF32 off) through ``bench/torch_ref.py --gemm N`` in another
Python (``--cublas PYTHON``, default ``python3`` on an NVIDIA platform, else none),
timed by the wall clock up to a synchronize over 10 calls (per call 0.1-30 ms here, so
launch costs do not count). The table gives TFLOP/s and the ratio to cuBLAS per size;
``--json PATH`` writes the rows, samples and the device.

    python bench/gemm_variants.py                      # 4096, 2048, 8192 on the GPU
    python bench/gemm_variants.py --sizes 4096 --only fast-128x128
    python bench/gemm_variants.py --n 256 --cublas none   # a quick check on PoCL

About 1-2 minutes on an H200, most of it the kernels' builds (once per configuration:
the sizes share them).
"""
import json
import os
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth

from theano_ocl.ops import blas, gemm_search
from theano_ocl.ops.blas_operands import NONE, ONE
from common import commit, header, parser, run_other_python, table

D, S = blas.FAST_DOUBLE, blas.FAST_SINGLE
#: (name, tile, options): the first is the baseline; options turn the variant's
#: specializations off (``novec``, ``nofull``)
CONFIGS = [
    ('rb-128x256-k8 (former best)', (32, 16, 8, 8, 8), ()),
    ('rb-128x128-k8', (16, 16, 8, 8, 8), ()),
    ('fast-128x128-k16-db', (16, 16, 8, 8, 16, D), ()),
    ('fast-128x128-k16-sb', (16, 16, 8, 8, 16, S), ()),
    ('fast-128x128-k8-db', (16, 16, 8, 8, 8, D), ()),
    ('fast-128x128-k32-sb', (16, 16, 8, 8, 32, S), ()),
    ('fast-128x256-k8-db', (32, 16, 8, 8, 8, D), ()),
    ('fast-128x256-k8-sb', (32, 16, 8, 8, 8, S), ()),
    ('fast-256x128-k8-db', (16, 32, 8, 8, 8, D), ()),
    ('fast-64x256-k16-db', (32, 8, 8, 8, 16, D), ()),
    ('fast-256x64-k16-db', (8, 32, 8, 8, 16, D), ()),
    ('fast-128x64-k16-db', (16, 16, 8, 4, 16, D), ()),
    ('fast-64x128-k16-db', (16, 16, 4, 8, 16, D), ()),
    ('fast-64x64-k16-db', (16, 16, 4, 4, 16, D), ()),
    ('fast-128x128-k16-db-novec', (16, 16, 8, 8, 16, D), ('novec',)),
    ('fast-128x128-k16-db-nofull', (16, 16, 8, 8, 16, D), ('nofull',)),
    ('fast-128x256-k8-db-novec', (32, 16, 8, 8, 8, D), ('novec',)),
    ('fast-128x256-k8-db-nofull', (32, 16, 8, 8, 8, D), ('nofull',)),
]

p = parser(__doc__)
p.set_defaults(repeat=12)
p.add_argument('--sizes', default='4096,2048,8192', help='n of the n^3 products (comma-separated)')
p.add_argument('--n', type=int, default=None, help='one size (in place of --sizes)')
p.add_argument('--calls', type=int, default=3, help='launches per timed sample')
p.add_argument('--check-rows', type=int, default=24, help='rows of C checked against numpy')
p.add_argument('--only', default=None,
               help='comma-separated parts of configuration names to run (the baseline always)')
p.add_argument('--cublas', default=None, metavar='PYTHON',
               help="a Python with torch and CUDA (default python3 on NVIDIA; 'none')")
p.add_argument('--json', default=None, help='write the rows and samples here')
args = p.parse_args()

sizes = [args.n] if args.n else [int(s) for s in args.sizes.split(',') if s.strip()]
dev = theano_ocl.get_device(args.device)
header('SGEMM n^3 (n = %s): register-blocked kernel variants against cuBLAS'
       % ', '.join(map(str, sizes)), dev)
configs = CONFIGS
if args.only:
    keys = [k.strip() for k in args.only.split(',') if k.strip()]
    configs = [CONFIGS[0]] + [c for c in CONFIGS[1:] if any(k in c[0] for k in keys)]


def plan_with(tile, options):
    """``plan(bench, problem)`` for the tuner's stand-in context, with the variant's
    specializations turned off as ``options`` say while planning (the rendered source
    keeps what was decided)."""
    def plan(bench, prob):
        saved = blas.FAST_VECTOR, blas.FAST_FULL
        blas.FAST_VECTOR = 'novec' not in options
        blas.FAST_FULL = 'nofull' not in options
        try:
            blas.plan_kernel(bench, prob.A, prob.B, prob.C, ONE, NONE, None, tile=tile)
            return blas.fast_variant(tile, prob.A, prob.B, prob.C)
        finally:
            blas.FAST_VECTOR, blas.FAST_FULL = saved
    return plan


def prepare(prob, name, tile, options):
    """The configuration's bench, run once and checked (or the reason it has none)."""
    rec = dict(config=name, n=prob.shape[0], tile='x'.join(map(str, tile)))
    t0 = time.perf_counter()
    bench = gemm_search._Bench(dev)
    try:
        fast = plan_with(tile, options)(bench, prob)
        nbytes = prob.C.nbytes
        dev.cl.enqueue_fill_buffer(dev.profiling_queue, prob.C.root.buf,
                                   np.float32(np.nan), 0, nbytes)
        bench.run()
        ok = prob.check()
    except Exception as e:      # a tile the driver refuses (resources, local memory)
        rec['error'] = 'failed: %s' % (str(e).strip().splitlines() or [type(e).__name__])[0][:160]
        return rec, None
    rec['variant'] = 'former' if len(tile) == 5 else 'not applied' if fast is None else \
        ' '.join(['2buf' if fast[0] else '1buf'] +
                 [w for w, on in zip(('full', 'vecA', 'vecB'), fast[1:]) if on])
    split = blas.split_sum(dev, prob.C, prob.shape[2], 16, blas.blocking(tile, prob.A, prob.B))
    rec['split'] = split[0] if split else 1
    rec['first s'] = time.perf_counter() - t0       # build + first run + check
    if not ok:
        rec['error'] = 'wrong result'
        return rec, None
    return rec, bench


def cublas_seconds(n):
    exe = args.cublas or ('python3' if 'NVIDIA' in dev.platform_name.upper() else 'none')
    if exe == 'none':
        return None, 'not measured (--cublas none)'
    here = os.path.dirname(os.path.abspath(__file__))
    res = run_other_python(exe, [os.path.join(here, 'torch_ref.py'), '--gemm', str(n),
                                 '--repeat', str(args.repeat)])
    lines = [l for l in res.stdout.splitlines() if l.startswith('JSON ')]
    if res.returncode or not lines:
        why = ((res.stderr or res.stdout).strip().splitlines() or ['no output'])[-1]
        return None, 'not measured (%s: %s)' % (exe, why)
    ref = json.loads(lines[-1][5:])
    return ref, 'torch %s, %s' % (ref['torch'], ref['device'])


t_start = time.perf_counter()
rows, samples, refs = [], {}, {}
for n in sizes:
    rng_rows = np.random.RandomState(n).choice(n, min(n, args.check_rows), replace=False)
    prob = gemm_search._Problem(dev, 'float32', n, n, n,
                                rows=np.unique(np.r_[0, n - 1, rng_rows]))
    prob.atol = max(prob.atol, 1e-3)
    benches = []
    for name, tile, options in configs:
        rec, bench = prepare(prob, name, tile, options)
        print('# %5d^3 %-30s %s (%.1f s)' % (n, name, rec.get('error', 'ok ' + rec['variant']),
                                             rec.get('first s', 0)), flush=True)
        rows.append(rec)
        if bench is not None:
            benches.append((rec, bench))
    for rec, bench in benches:          # warm-up
        bench.seconds(args.calls, events=True)
    for rec, _ in benches:
        rec['samples'] = []
    for _ in range(args.repeat):
        for rec, bench in benches:
            rec['samples'].append(bench.seconds(args.calls, events=True))
    ref, what = cublas_seconds(n)
    refs[n] = dict(ref or {}, what=what)
    cub = float(np.median(ref['samples'])) if ref else None
    flops = 2.0 * n ** 3
    if cub:
        rows.append(dict(config='cuBLAS (%s)' % what, n=n, seconds=cub,
                         **{'TFLOP/s': flops / cub / 1e12, 'x cuBLAS': 1.0}))
    else:
        print('# %d^3 cuBLAS: %s' % (n, what))
    for rec, _ in benches:
        s = float(np.median(rec['samples']))
        rec.update(seconds=s, **{'TFLOP/s': flops / s / 1e12})
        if cub:
            rec['x cuBLAS'] = cub / s
        samples['%s %d' % (rec['config'], n)] = rec.pop('samples')
    base = next((r for r in rows if r['n'] == n and r['config'] == configs[0][0]
                 and 'seconds' in r), None)
    for r in rows:
        if r['n'] == n and base and 'seconds' in r:
            r['x former best'] = base['seconds'] / r['seconds']

print()
for n in sizes:
    print('## %d^3 (device time per product, median of %d rounds of %d launches)'
          % (n, args.repeat, args.calls))
    ranked = sorted((r for r in rows if r['n'] == n),
                    key=lambda r: -r.get('TFLOP/s', 0))
    table([dict(r, ms=r['seconds'] * 1e3 if 'seconds' in r else None,
                status=r.get('error', '')) for r in ranked],
          ['config', 'tile', 'variant', 'split', 'ms', 'TFLOP/s', 'x cuBLAS', 'x former best',
           'status'])
    print()
print('# %.0f s in all' % (time.perf_counter() - t_start))
if args.json:
    with open(args.json, 'w') as fh:
        json.dump(dict(bench='gemm_variants', sizes=sizes, device=dev.name,
                       platform=dev.platform_name, driver=dev.device.driver_version.strip(),
                       commit=commit(), repeat=args.repeat, calls=args.calls, rows=rows,
                       cublas=refs, samples=samples), fh, indent=1)
    print('wrote %s' % args.json)
