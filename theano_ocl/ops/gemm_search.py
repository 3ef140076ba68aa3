"""The GEMM tuner: on one device, measures the tiled kernel's tiles and (with pyclblast)
CLBlast's Xgemm parameters on n x n x n products of each tuned size
(``gemm_tune.sizes_for``), and stores per dtype and shape class the backend and tile that
ran fastest (``gemm_tune.store_entry``). ``python -m theano_ocl tune`` runs it ahead of
time; a product's first use runs it where the ``tune`` setting says so.

What is measured is what the planner runs: each candidate is planned by
``blas.plan_kernel`` / ``blas_clblast.plan_clblast`` into a stand-in context
(:class:`_Bench`) that runs the recorded launches at once and repeats them.

* Search space, kernel (``kernel_tiles``): work-groups of 64 to 256 work-items (TX x TY
  of 8, 16, 32), 2 to 8 elements of C per work-item each way (RM, RN: the vector widths
  the template reads its local tiles with), depths BK of 8, 16, 32; only tiles whose two
  local tiles fit the device's local memory and whose loads divide among the work-items.
  Each tile of RM, RN 4 or 8 also in the kernel's variant for NVIDIA-like GPUs
  (``blas.fast_variant``: a 6th element, 1 for one local buffer, 2 for two), which the
  planner takes only where it applies (else the same tile as before).
  Tiles likely to do well on the H200 come first (``FIRST_TILES``: the variant's 128 x 128
  and 128 x 256 tiles of 8 x 8 per work-item, which is how fast SGEMMs block, then the
  former kernel's best, the built-in 64 x 64, tiles for products with few tiles), then the
  rest in a fixed pseudo-random order, the one element per work-item kernel among the
  first: a short budget still measures the likely winners.
* Search space, CLBlast (``clblast_candidates``): the grid of ``bench/clblast_tune.py``
  under CLBlast's own constraints (``clblast_valid``), the set tuned on the H100 first.
  A candidate's parameters hold for every CLBlast call of the process (pyclblast has no
  way back to the database's), so it is timed on the largest size only.
* Budget: seconds per dtype (default ``DEFAULT_BUDGET``); the kernel's tiles take up to
  half of it where CLBlast is searched too (all of it otherwise), CLBlast the rest but a
  tenth kept for the final comparison; the first candidate of each search always runs,
  so a result exists however short the budget.
* Each candidate: built, run once, its result compared with numpy's (the tuned sizes'
  first and last rows; the kernel's tiles also on an odd product, 139 x 75 x 101, with
  operands plain and transposed: edges of every tile), then timed -- the kernel by
  OpenCL profiling events (device time), CLBlast by the wall clock up to a queue finish
  (its event is its last kernel's only). A candidate that fails to build or computes a
  wrong result is recorded as such and never chosen.
* The choice per class: the best tile and CLBlast with its best parameters timed again
  the same way (wall clock, several calls back to back), the faster one stored.
* Resumable: every candidate measured is stored with its times (``tried``) as soon as its
  phase ends or the search is interrupted, and a later search skips it.
"""
import datetime
import itertools
import json
import random
import time

import numpy as np

from ..darray import DArray, Root
from ..runtime import memory, settings
from ..runtime.context import provide
from . import blas, blas_clblast, gemm_tune
from .blas_operands import NONE, ONE, as_batch

#: seconds per dtype that ``python -m theano_ocl tune`` searches by default
DEFAULT_BUDGET = 90.0
#: CLBlast parameter sets measured at most (a sample of the grid's valid ones)
CLBLAST_MAX = 200
#: the odd product every tile is checked on (sides that are no multiple of any tile)
ODD = (139, 75, 101)

#: tiles (TX, TY, RM, RN, BK[, V]) measured first, in this order (see the module doc).
#: First the variant's (V = 2: two local buffers; 1: one): 128 x 128 of 8 x 8 at depth 16,
#: the fastest on the H200 (2026-11-30, ``bench/gemm_variants.py``, device time, 4096^3:
#: 44.1 TFLOP/s, 0.87x cuBLAS; 128 x 256 at depth 8 with two buffers 35.0, as the former
#: kernel 39.1), 128 x 256 / 256 x 128 at depth 8 (the former kernel's best shape),
#: 128 x 64 and 64 x 64 for products of fewer tiles. Then the
#: former kernel's fastest on the H200 (2026-11-29, 102 tiles, device time; float32
#: 4096^3 / 2048^3 / 1024^3 in TFLOP/s): 32x16 of 8x8, depth 8: 39.1 / 25.5 / 13.5; 16x16
#: of 8x8, depth 8: 36.5 / 34.4 / 16.1; the built-in 16x16 of 4x4, depth 16: 28.5 / 28.0 /
#: 23.4; 32x8 of 8x2, depth 16: 28.4 / 27.4 / 24.2
FIRST_TILES = ((16, 16, 8, 8, 16, 2), (32, 16, 8, 8, 8, 2), (16, 32, 8, 8, 8, 2),
               (16, 16, 8, 8, 8, 2), (16, 16, 8, 8, 16, 1), (32, 16, 8, 8, 8, 1),
               (32, 16, 8, 8, 8), (16, 16, 8, 8, 8), (16, 16, 8, 4, 16, 2),
               (16, 16, 4, 8, 16, 2), (16, 16, 4, 4, 16, 2), (16, 16, 4, 4, 16),
               (32, 8, 8, 2, 16), (16, 32, 4, 4, 16), (32, 16, 4, 4, 16), (32, 16, 8, 4, 32),
               (16, 16, 8, 4, 8), (32, 16, 8, 8, 16), (16, 16, 8, 8, 16), (16, 32, 8, 4, 16),
               None)


def tile_name(tile):
    return 'ts' if tile is None else 'x'.join(str(v) for v in tile)


def kernel_tiles(dev, dtype, seed=0):
    """The kernel's candidate tiles on ``dev`` for ``dtype``, in the order measured."""
    acc = 8 if np.dtype(dtype).itemsize == 8 else 4
    sides, per, depths = (8, 16, 32), (2, 4, 8), (8, 16, 32)

    def fits(tile):
        if tile is None:
            return dev.max_work_group_size >= 64
        tx, ty, rm, rn, bk = tile[:5]
        wg, bm, bn = tx * ty, ty * rm, tx * rn
        if len(tile) > 5:
            # the variant's local tiles: rows padded by 4 elements, one or two buffers
            local = tile[5] * bk * (bm + 4 + bn + 4) * acc
            if rm % 4 or rn % 4:
                return False
        else:
            local = (bk * (bm + rm) + bk * (bn + rn)) * acc
        return (64 <= wg <= dev.max_work_group_size and (bm * bk) % wg == 0 and
                (bn * bk) % wg == 0 and local <= dev.local_mem_size and rm * rn <= 64)
    every = [t + v for t in itertools.product(sides, sides, per, per, depths)
             for v in ((), (blas.FAST_SINGLE,), (blas.FAST_DOUBLE,))]
    rest = [t for t in every if t not in FIRST_TILES and fits(t)]
    random.Random(seed).shuffle(rest)
    return [t for t in FIRST_TILES if fits(t)] + rest


CLBLAST_NAMES = ('GEMMK', 'KREG', 'KWG', 'KWI', 'MDIMA', 'MDIMC', 'MWG', 'NDIMB', 'NDIMC',
                 'NWG', 'SA', 'SB', 'STRM', 'STRN', 'VWM', 'VWN')
#: the grid of CLBlast's Xgemm parameters searched (GEMMK = 0, KREG = 1)
CLBLAST_GRID = dict(KWG=[16, 32], KWI=[2, 8], MDIMC=[8, 16, 32], NDIMC=[8, 16, 32],
                    MDIMA=[8, 16, 32], NDIMB=[8, 16, 32], MWG=[64, 128], NWG=[64, 128],
                    SA=[0, 1], SB=[0, 1], STRM=[0, 1], STRN=[0, 1], VWM=[1, 2, 4, 8],
                    VWN=[1, 2, 4, 8])


def clblast_valid(p, max_wg, local_bytes, isz):
    """CLBlast's own constraints on Xgemm parameters (the GEMMK = 0 kernel)."""
    mdimc, ndimc, mdima, ndimb = p['MDIMC'], p['NDIMC'], p['MDIMA'], p['NDIMB']
    mwg, nwg, kwg, vwm, vwn = p['MWG'], p['NWG'], p['KWG'], p['VWM'], p['VWN']
    wg = mdimc * ndimc
    if wg > max_wg or wg < 32:
        return False
    if mwg % (mdimc * vwm) or nwg % (ndimc * vwn):
        return False
    if mwg % (mdima * vwm) or nwg % (ndimb * vwn):
        return False
    if wg % mdima or wg % ndimb:
        return False
    if kwg % (wg // mdima) or kwg % (wg // ndimb):
        return False
    if kwg % p['KWI']:
        return False
    local = (p['SA'] * kwg * mwg + p['SB'] * kwg * nwg) * isz
    return local <= local_bytes


def clblast_candidates(dev, dtype, seed=0):
    """Valid Xgemm parameter sets (at most ``CLBLAST_MAX``): those of
    ``clblast_tuned.json`` first, then ``CLBLAST_GRID`` in a fixed pseudo-random order."""
    isz = np.dtype(dtype).itemsize
    keys = sorted(CLBLAST_GRID)
    grid = [dict(zip(keys, values), GEMMK=0, KREG=1)
            for values in itertools.product(*(CLBLAST_GRID[k] for k in keys))]
    ok = [p for p in grid if clblast_valid(p, dev.max_work_group_size, dev.local_mem_size, isz)]
    random.Random(seed).shuffle(ok)
    with open(blas_clblast.TUNED_FILE) as fh:
        shipped = [e['params'] for entries in json.load(fh).values() for e in entries]
    return ([p for p in shipped if p not in ok] + [p for p in shipped if p in ok] +
            [p for p in ok if p not in shipped])[:CLBLAST_MAX]


# --------------------------------------------------------------------------- measuring
class _Bench(object):
    """What ``blas.plan_kernel`` and ``blas_clblast.plan_clblast`` record into, as a
    ``PlanContext`` offers it (``dev``, ``queue``, ``alloc``, ``launch``, ``enqueue``):
    the launches are bound as a frame binds them and run on the profiling queue."""

    def __init__(self, dev):
        self.dev = dev
        self.queue = dev.profiling_queue
        self.steps = []

    def alloc(self, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = max(int(np.prod(shape)) * dtype.itemsize, 1)
        return DArray(Root(self.dev.alloc(nbytes), nbytes), shape, dtype)

    def launch(self, prg, kernel_name, gsize, lsize, args, **declared):
        cl = self.dev.cl
        kernel = cl.Kernel(prg, kernel_name)
        expanded = []
        for a in args:
            if isinstance(a, DArray):
                expanded += [a.root.buf, np.int64(a.boff // a.itemsize)]
            else:
                expanded.append(a)
        kernel.set_args(*expanded)
        self.steps.append(lambda: cl.enqueue_nd_range_kernel(self.queue, kernel, gsize, lsize))

    def enqueue(self, fn):
        self.steps.append(fn)

    def run(self):
        return [step() for step in self.steps]

    def seconds(self, calls, events):
        """Seconds per call over ``calls`` calls: device time from the launches' events,
        or (``events`` False) the wall clock up to a queue finish."""
        self.queue.finish()
        t0 = time.perf_counter()
        evs = [ev for _ in range(calls) for ev in self.run()]
        self.queue.finish()
        if events:
            return sum(e.profile.end - e.profile.start for e in evs) * 1e-9 / calls
        return (time.perf_counter() - t0) / calls


class _Problem(object):
    """One product C = A @ B on the device, operands uniform in [-1, 1), A (B) stored
    transposed where ``at`` (``bt``); ``check`` compares C's first and last rows (all of
    them for small products; ``rows``: those rows) with numpy's."""

    def __init__(self, dev, dtype, M, N, K, at=False, bt=False, seed=0, rows=None):
        rng = np.random.RandomState(seed)
        self.dev, self.dtype, self.shape = dev, np.dtype(dtype), (M, N, K)
        a = (rng.rand(M, K) * 2 - 1).astype(dtype)
        b = (rng.rand(K, N) * 2 - 1).astype(dtype)
        self.A = as_batch(self._put(a, at))
        self.B = as_batch(self._put(b, bt))
        nbytes = M * N * self.dtype.itemsize
        self.C = as_batch(DArray(Root(dev.alloc(nbytes), nbytes), (M, N), dtype))
        self.rows = np.asarray(rows) if rows is not None else \
            np.arange(M) if M <= 64 else np.r_[0:8, M - 8:M]
        self.ref = a[self.rows].astype('float64') @ b.astype('float64')
        self.atol = 16 * np.finfo(dtype).eps * K

    def _put(self, x, transposed):
        host = np.ascontiguousarray(x.T if transposed else x)
        d = DArray(Root(self.dev.alloc(host.nbytes), host.nbytes), host.shape, host.dtype)
        memory.upload(self.dev, self.dev.queue, d, host, blocking=True)
        return d.view(x.shape, d.strides[::-1]) if transposed else d

    def poison(self):
        """Fill C with NaN (a candidate that writes nothing, or only part of C, then fails
        ``check`` instead of passing on the last candidate's result)."""
        nan = np.full(self.C.shape[1:], np.nan, self.dtype)
        memory.upload(self.dev, self.dev.queue, self.C.view(nan.shape, self.C.strides[1:]),
                      nan, blocking=True)

    def check(self):
        out = np.empty(self.C.shape[1:], self.dtype)
        self.dev.profiling_queue.finish()
        memory.download(self.dev, self.dev.queue, self.C.view(out.shape, self.C.strides[1:]), out)
        return bool(np.allclose(out[self.rows], self.ref, rtol=1e-3, atol=self.atol))

    @property
    def flops(self):
        M, N, K = self.shape
        return 2.0 * M * N * K


def _measure(problem, plan, events, repeat=3, target_s=0.03):
    """Seconds per call of what ``plan(bench, problem)`` records (median of ``repeat``
    runs of enough calls for ``target_s``; 0 where ``repeat`` is 0: checked only), or a
    string saying why it has none."""
    bench = _Bench(problem.dev)
    try:
        problem.poison()
        plan(bench, problem)
        bench.run()
        ok = problem.check()
    except Exception as e:       # a tile or parameter set the driver or CLBlast refuses
        return 'failed: %s' % (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    if not ok:
        return 'wrong result'
    if not repeat:
        return 0.0
    t = bench.seconds(1, events)
    calls = int(min(max(target_s / max(t, 1e-7), 1), 50))
    return float(np.median([bench.seconds(calls, events) for _ in range(repeat)]))


def _kernel_plan(tile):
    def plan(bench, p):
        blas.plan_kernel(bench, p.A, p.B, p.C, ONE, NONE, None, tile=tile)
    return plan


def _clblast_plan(bench, p):
    blas_clblast.plan_clblast(bench, p.A, p.B, p.C, ONE, NONE, None)


def _builtin_plan(backend):
    def plan(bench, p):
        blas.plan_gemm(bench, backend, p.A, p.B, p.C)
    return plan


# --------------------------------------------------------------------------- the search
class _Quiet(object):
    """No progress display (the part of the bar's interface the search uses)."""

    def __init__(self, total):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_description(self, text):
        pass

    def update(self, n=1):
        pass


def tune(dev, dtypes=gemm_tune.DTYPES, budget=None, sizes=None, progress=None, log=None,
         clblast=True):
    """Search GEMM choices for ``dev`` (``budget`` seconds in all, shared by the dtypes;
    default ``DEFAULT_BUDGET`` per dtype), store them, and
    return one row per dtype and size: {dtype, n, before, after (GFLOP/s), choice}.
    ``progress``: ``total -> bar`` (``benchmarks.progress.bar``); ``log``: a function
    printing a line; ``clblast``: search CLBlast's parameters where pyclblast is
    installed."""
    sizes = tuple(sorted(sizes or gemm_tune.sizes_for(dev)))
    log = log or (lambda text: None)
    for dtype in dtypes:
        if not dev.supports_dtype(dtype):
            log('%s: the device has no %s, skipped' % (dev.name, dtype))
    dtypes = [dt for dt in dtypes if dev.supports_dtype(dt)]
    budget = float(budget or DEFAULT_BUDGET * len(dtypes)) / max(len(dtypes), 1)
    rows = []
    for dtype in dtypes:
        entry = dict(gemm_tune.device_entry(dev) or {})
        search = _Search(dev, dtype, sizes, entry.get(dtype), progress, log)
        try:
            search.run(time.perf_counter() + budget, budget,
                       clblast and blas_clblast.load_pyclblast() is not None)
        finally:
            entry[dtype] = search.result()
            gemm_tune.store_entry(dev, entry)
        rows += search.rows
    return rows


class _Search(object):
    """The search for one device and dtype (see the module doc)."""

    def __init__(self, dev, dtype, sizes, previous, progress, log):
        self.dev, self.dtype, self.sizes, self.log = dev, dtype, sizes, log
        self.progress = progress or _Quiet
        previous = previous if isinstance(previous, dict) and \
            previous.get('sizes') == list(sizes) else {}
        tried = previous.get('tried') or {}
        self.tried = {'kernel': dict(tried.get('kernel') or {}),
                      'clblast': dict(tried.get('clblast') or {})}
        self.clblast_params = previous.get('clblast')
        self.classes = dict(previous.get('classes') or {})
        self.rows = []

    def run(self, deadline, budget, with_clblast):
        dev, dtype = self.dev, self.dtype
        t0 = time.perf_counter()
        problems = {n: _Problem(dev, dtype, n, n, n) for n in self.sizes}
        odd = [_Problem(dev, dtype, *ODD, at=t, bt=t) for t in (False, True)]
        builtin = blas.choose_backend(dev, [dtype] * 3)
        builtin = 'kernel' if builtin == 'host' else builtin
        with settings.active(settings.Settings.resolve({'tune': 'off'})):
            before = {n: _measure(p, _builtin_plan(builtin), events=False)
                      for n, p in problems.items()}
        tiles = [t for t in kernel_tiles(dev, dtype) if tile_name(t) not in self.tried['kernel']]
        params = [p for p in clblast_candidates(dev, dtype)
                  if json.dumps(p, sort_keys=True) not in self.tried['clblast']] \
            if with_clblast else []
        kernel_end = t0 + budget * (0.5 if with_clblast else 0.9)
        with self.progress(len(tiles) + len(params)) as bar:
            for k, tile in enumerate(tiles):
                if k and time.perf_counter() > kernel_end:
                    break
                bar.set_description('%s tile %s' % (dtype, tile_name(tile)))
                self.tried['kernel'][tile_name(tile)] = self._kernel(tile, problems, odd)
                bar.update(1)
            if params:
                self._clblast(params, problems[self.sizes[-1]], t0 + budget * 0.9, bar)
        self._choose(problems, {n: (t, self._builtin(builtin, problems[n]))
                                for n, t in before.items()})

    def _builtin(self, backend, p):
        """The built-in choice for problem ``p`` as a stored choice would say it."""
        if backend == 'clblast' and blas.takes_clblast(self.dev, p.A, p.B, p.C):
            return dict(backend='clblast')
        rb = blas.register_blocking(self.dev, p.A, p.B, p.C)
        return dict(backend='kernel', tile=list(rb[:5]) if rb else None)

    def _kernel(self, tile, problems, odd):
        plan = _kernel_plan(tile)
        for p in odd:
            why = _measure(p, plan, events=True, repeat=0)
            if isinstance(why, str):
                return {'error': why + ' (%dx%dx%d)' % p.shape}
        return {str(n): _measure(p, plan, events=True) for n, p in problems.items()}

    def _clblast(self, params, problem, deadline, bar):
        precision = 8 * np.dtype(self.dtype).itemsize
        blas_clblast.clblast_tuning(self.dev)     # the shipped table first, as a call would
        for k, p in enumerate(params):
            if k and time.perf_counter() > deadline:
                break
            bar.set_description('%s CLBlast %s' % (self.dtype, ' '.join(
                '%s=%d' % (n, p[n]) for n in CLBLAST_NAMES if n not in ('GEMMK', 'KREG'))))
            try:
                blas_clblast.override(self.dev, precision, p)
                t = _measure(problem, _clblast_plan, events=False)
            except Exception as e:
                t = 'failed: %s' % str(e).strip()[:200]
            self.tried['clblast'][json.dumps(p, sort_keys=True)] = \
                {'seconds': t} if isinstance(t, float) else {'error': t}
            bar.update(1)
        best = self._best_clblast()
        if best is not None:
            blas_clblast.override(self.dev, precision, best)
            self.clblast_params = best

    def _best_clblast(self):
        timed = [(v['seconds'], k) for k, v in self.tried['clblast'].items() if 'seconds' in v]
        return json.loads(min(timed)[1]) if timed else None

    def _best_tile(self, n):
        timed = [(v[str(n)], name) for name, v in self.tried['kernel'].items()
                 if isinstance(v.get(str(n)), float)]
        if not timed:
            return None, None
        name = min(timed)[1]
        return name, None if name == 'ts' else tuple(int(x) for x in name.split('x'))

    def _choose(self, problems, before):
        """Per size: the best tile and CLBlast (its best parameters) timed again the same
        way as the built-in choice was (``before``: size -> (seconds, choice)), the fastest
        of the three kept."""
        with_clblast = self.clblast_params is not None and \
            blas_clblast.load_pyclblast() is not None
        for n, p in problems.items():
            name, tile = self._best_tile(n)
            options = []
            if name is not None:
                t = _measure(p, _kernel_plan(tile), events=False)
                if isinstance(t, float):
                    options.append((t, dict(backend='kernel', tile=list(tile) if tile else None)))
            if with_clblast:
                t = _measure(p, _clblast_plan, events=False)
                if isinstance(t, float):
                    options.append((t, dict(backend='clblast')))
            b, builtin = before[n]
            if isinstance(b, float):
                options.append((b, builtin))
            if not options:
                self.log('%s %d^3: no candidate computed a right result' % (self.dtype, n))
                continue
            t, choice = min(options, key=lambda o: o[0])
            choice.update(gflops=p.flops / t / 1e9,
                          untuned_gflops=p.flops / b / 1e9 if isinstance(b, float) else None)
            self.classes[str(n)] = choice
            self.rows.append(dict(dtype=self.dtype, n=n, before=choice['untuned_gflops'],
                                  after=choice['gflops'], choice=describe(choice)))

    def result(self):
        return dict(sizes=list(self.sizes), classes=self.classes, clblast=self.clblast_params,
                    tried=self.tried, measured=datetime.datetime.utcnow().strftime(
                        '%Y-%m-%d %H:%M UTC'))


def describe(choice):
    if choice['backend'] == 'clblast':
        return 'CLBlast (tuned parameters)'
    tile = choice.get('tile')
    if not tile:
        return 'kernel, one element per work-item'
    tx, ty, rm, rn, bk = tile[:5]
    variant = {blas.FAST_SINGLE: ', fast variant, one buffer',
               blas.FAST_DOUBLE: ', fast variant, two buffers'}.get(
                   tile[5] if len(tile) > 5 else 0, '')
    return 'kernel, %dx%d tiles (%dx%d work-items of %dx%d, depth %d%s)' % (
        ty * rm, tx * rn, tx, ty, rm, rn, bk, variant)


provide('gemm_tuner', tune)
