"""Runs benchmarks and returns their record (the dict :mod:`.record` writes as JSON).

Per case: ``setup`` (compile, check against Theano C: theano_ocl builds its kernels in
that first call; the whole is recorded as ``setup_s``), one warm-up call of every variant
(``warmup_s``), then rounds in which the variants take turns, each timing ``calls`` calls
and one device sync (after ``pause`` idle seconds and ``settle`` untimed calls where the
case asks for them). Taking turns spreads clock ramps and other processes' load over all
variants alike; the share of the CPUs that other processes used is recorded per sample
(``others_cpu``), since on a small shared machine it decides what a sample is worth.

The number of rounds adapts to the case, as torch's ``blocked_autorange`` does: at least
``repeat``, and more until every variant's samples add up to ``min_time`` seconds, unless
the case has already spent ``MAX_TIME_FACTOR * min_time`` seconds sampling (cases that
pause before each sample) or taken ``MAX_SAMPLES``.
"""
import time
import traceback

from . import BASELINE, OCL, Context, Skip, registry
from .progress import bar
from .stats import fmt_time, spread
from .timing import OtherLoad, environment

SCHEMA = 2      # 2: samples autoranged to min_time, quartiles stored
MAX_TIME_FACTOR = 10
MAX_SAMPLES = 1000


def _timed(v, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        v.fn()
    if v.sync is not None:
        v.sync()
    return (time.perf_counter() - t0) / (calls * v.per)


def run_case(case, repeat, min_time=0.0):
    """The record of one case: per variant the raw samples (seconds per unit), median,
    quartiles, min, max; the ratio C / OCL of the medians; ``info`` from its setup."""
    t0 = time.perf_counter()
    variants, info = case.setup()
    out = dict(name=case.name, unit=case.unit, calls=case.calls, info=info,
               setup_s=time.perf_counter() - t0, variants={})
    if case.settle:
        out['settle'] = case.settle
    load = OtherLoad()
    warmup = {v.label: _timed(v, 1) * v.per for v in variants}
    samples = {v.label: [] for v in variants}
    others = {v.label: [] for v in variants}
    started = time.perf_counter()
    while _more(case, variants, samples, repeat, min_time, time.perf_counter() - started):
        for v in variants:
            if case.pause:
                time.sleep(case.pause)
            if case.settle:
                _timed(v, case.settle)
            load.start()
            samples[v.label].append(_timed(v, case.calls))
            others[v.label].append(load.stop())
    for v in variants:
        s = samples[v.label]
        sp = spread(s)
        out['variants'][v.label] = dict(samples=s, median=sp.median, q1=sp.q1, q3=sp.q3,
                                        min=min(s), max=max(s), warmup_s=warmup[v.label],
                                        others_cpu=others[v.label])
    vs = out['variants']
    if BASELINE in vs and OCL in vs:
        out['ratio'] = vs[BASELINE]['median'] / vs[OCL]['median']
    return out


def _more(case, variants, samples, repeat, min_time, spent):
    """Whether to take another round: fewer than ``repeat`` so far, or some variant's
    timed calls add up to less than ``min_time`` seconds, within the case's limits
    (``spent``: seconds since its first round)."""
    n = len(samples[variants[0].label])
    if n < repeat:
        return True
    if n >= MAX_SAMPLES or spent >= MAX_TIME_FACTOR * min_time:
        return False
    return any(sum(samples[v.label]) * case.calls * v.per < min_time for v in variants)


def run(names=None, device=None, quick=False, repeat=5, min_time=0.0, progress=True, log=True,
        overrides=None):
    """Run the named benchmarks (all by default) and return the run's record;
    ``overrides``: benchmark name -> parameters replacing some of its quick/full ones."""
    reg = registry()
    names = list(names or reg)
    unknown = [n for n in names if n not in reg]
    if unknown:
        raise KeyError('no benchmark %s (known: %s)' % (', '.join(unknown), ', '.join(reg)))
    ctx = Context(device, quick)
    record = dict(schema=SCHEMA, quick=quick, repeat=repeat, min_time=min_time,
                  overrides=overrides or {}, **environment(ctx.dev))
    record['benchmarks'] = []
    todo = []
    for name in names:
        b = reg[name]
        params = dict(b.quick if quick else b.full, **(overrides or {}).get(name, {}))
        try:
            todo.append((b, params, b.fn(ctx, **params), None))
        except Skip as e:            # an optional package missing: said, and recorded
            todo.append((b, params, [], str(e)))
    with bar(sum(len(cases) for _, _, cases, _ in todo), progress) as shown:
        for b, params, cases, skipped in todo:
            entry = dict(name=b.name, doc=b.doc, params=params, cases=[])
            record['benchmarks'].append(entry)
            if skipped:
                entry['skipped'] = skipped
                if log:
                    shown.write('%s | skipped: %s' % (b.name, skipped))
            for case in cases:
                shown.set_description('%s: %s' % (b.name, case.name))
                try:
                    res = run_case(case, repeat, min_time)
                except Exception as e:         # recorded, and the suite goes on
                    res = dict(name=case.name, unit=case.unit,
                               error='%s: %s' % (type(e).__name__, e),
                               traceback=traceback.format_exc())
                shown.update(1)
                entry['cases'].append(res)
                if log:
                    shown.write(_summary(b.name, res))
    return record


def _summary(bench, res):
    if 'error' in res:
        return '%s | %s | FAILED: %s' % (bench, res['name'], res['error'])
    vs = res['variants']
    parts = ['%s %s (IQR %s, %d samples)' % (k, fmt_time(v['median']),
                                             fmt_time(v['q3'] - v['q1']), len(v['samples']))
             for k, v in vs.items()]
    ratio = (' | C/OCL %.2fx' % res['ratio']) if 'ratio' in res else ''
    return '%s | %s | per %s: %s%s' % (bench, res['name'], res['unit'], ', '.join(parts), ratio)
