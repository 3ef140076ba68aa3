"""Runs benchmarks and returns their record (the dict :mod:`.record` writes as JSON).

Per case: ``setup`` (compile, check against Theano C: theano_ocl builds its kernels in
that first call; the whole is recorded as ``setup_s``), one warm-up call of every variant
(``warmup_s``), then ``repeat`` rounds in which the variants take turns, each timing
``calls`` calls and one device sync (after ``pause`` idle seconds and ``settle`` untimed
calls where the case asks for them). Taking turns spreads clock ramps and other processes' load
over all variants alike; the share of the CPUs that other processes used is recorded
per sample (``others_cpu``), since on a small shared machine it decides what a sample
is worth.
"""
import time
import traceback

import numpy as np

from . import BASELINE, OCL, Context, registry
from .record import fmt_time
from .timing import OtherLoad, environment

SCHEMA = 1


def _timed(v, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        v.fn()
    if v.sync is not None:
        v.sync()
    return (time.perf_counter() - t0) / (calls * v.per)


def run_case(case, repeat, tick=lambda: None):
    """The record of one case: per variant the raw samples (seconds per unit), median,
    min, max; the ratio C / OCL of the medians; ``info`` from its setup."""
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
    for _ in range(repeat):
        for v in variants:
            if case.pause:
                time.sleep(case.pause)
            if case.settle:
                _timed(v, case.settle)
            load.start()
            samples[v.label].append(_timed(v, case.calls))
            others[v.label].append(load.stop())
        tick()
    for v in variants:
        s = samples[v.label]
        out['variants'][v.label] = dict(samples=s, median=float(np.median(s)), min=min(s),
                                        max=max(s), warmup_s=warmup[v.label],
                                        others_cpu=others[v.label])
    vs = out['variants']
    if BASELINE in vs and OCL in vs:
        out['ratio'] = vs[BASELINE]['median'] / vs[OCL]['median']
    return out


def run(names=None, device=None, quick=False, repeat=5, progress=True, log=True,
        overrides=None):
    """Run the named benchmarks (all by default) and return the run's record;
    ``overrides``: benchmark name -> parameters replacing some of its quick/full ones."""
    reg = registry()
    names = list(names or reg)
    unknown = [n for n in names if n not in reg]
    if unknown:
        raise KeyError('no benchmark %s (known: %s)' % (', '.join(unknown), ', '.join(reg)))
    ctx = Context(device, quick)
    record = dict(schema=SCHEMA, quick=quick, repeat=repeat, overrides=overrides or {},
                  **environment(ctx.dev))
    record['benchmarks'] = []
    todo = []
    for name in names:
        b = reg[name]
        params = dict(b.quick if quick else b.full, **(overrides or {}).get(name, {}))
        todo.append((b, params, b.fn(ctx, **params)))
    from tqdm import tqdm
    total = sum(len(cases) for _, _, cases in todo) * (repeat + 1)
    with tqdm(total=total, disable=None if progress else True, unit='step',
              dynamic_ncols=True) as bar:
        for b, params, cases in todo:
            entry = dict(name=b.name, doc=b.doc, params=params, cases=[])
            record['benchmarks'].append(entry)
            for case in cases:
                bar.set_description('%s: %s' % (b.name, case.name))
                try:
                    res = run_case(case, repeat, tick=lambda: bar.update(1))
                except Exception as e:         # recorded, and the suite goes on
                    res = dict(name=case.name, unit=case.unit,
                               error='%s: %s' % (type(e).__name__, e),
                               traceback=traceback.format_exc())
                    bar.update(repeat)
                bar.update(1)
                entry['cases'].append(res)
                if log:
                    bar.write(_summary(b.name, res))
    return record


def _summary(bench, res):
    if 'error' in res:
        return '%s | %s | FAILED: %s' % (bench, res['name'], res['error'])
    vs = res['variants']
    parts = ['%s %s' % (k, fmt_time(v['median'])) for k, v in vs.items()]
    ratio = (' | C/OCL %.2fx' % res['ratio']) if 'ratio' in res else ''
    return '%s | %s | per %s: %s%s' % (bench, res['name'], res['unit'], ', '.join(parts), ratio)
