"""What a run's samples say: their spread (median and interquartile range, as
pytest-benchmark and torch.utils.benchmark report), whether the run can be trusted, and
how two runs compare (``bench --compare``).

Everything is computed from the raw samples that every record keeps, so records written
before the spread was stored read the same way as new ones.
"""
import collections
import statistics

from . import BASELINE, OCL

#: the share of the CPUs other processes may use (median over the samples) before a run
#: is unreliable
LOAD_LIMIT = 0.05
#: the interquartile range, as a share of the median, above which a variant's samples
#: are too scattered to be recorded (pyperf calls a benchmark unstable at a standard
#: deviation of 10% of the mean; an IQR of 10% is a standard deviation of about 7%)
SPREAD_LIMIT = 0.10
#: how far outside the range of its earlier records (same device and sizes) Theano C's
#: median may fall: further, and the machine rather than theano_ocl changed
REFERENCE_TOLERANCE = 0.10


class Spread(collections.namedtuple('Spread', 'median q1 q3 n')):
    """Median, first and third quartile of ``n`` samples."""

    @property
    def iqr(self):
        return self.q3 - self.q1

    @property
    def relative_iqr(self):
        return self.iqr / self.median if self.median else 0.0


def spread(samples):
    """The :class:`Spread` of a list of samples (quartiles by ``statistics.quantiles``'
    inclusive method, the one numpy's percentiles use by default)."""
    samples = list(samples)
    if len(samples) < 2:
        return Spread(samples[0], samples[0], samples[0], len(samples))
    q1, median, q3 = statistics.quantiles(samples, n=4, method='inclusive')
    return Spread(median, q1, q3, len(samples))


def variant_spread(case, label):
    """The :class:`Spread` of variant ``label`` of a recorded case, or None."""
    v = (case.get('variants') or {}).get(label)
    return spread(v['samples']) if v and v.get('samples') else None


def ratio_range(case):
    """C / OCL from the quartiles: (lowest, highest) over the two interquartile ranges,
    or None when the case lacks either variant."""
    c, o = variant_spread(case, BASELINE), variant_spread(case, OCL)
    if c is None or o is None:
        return None
    return c.q1 / o.q3, c.q3 / o.q1


def cases(record):
    """(benchmark name, case) of a record, in suite order."""
    return [(b['name'], c) for b in record['benchmarks'] for c in b['cases']]


def others_cpu(record):
    """The median and the largest share of the CPUs that other processes used while
    samples were taken (None off Linux)."""
    shares = [x for _, c in cases(record) for v in c.get('variants', {}).values()
              for x in v.get('others_cpu') or () if x is not None]
    return (statistics.median(shares), max(shares)) if shares else None


def _params(record, bench):
    return [b.get('params') for b in record['benchmarks'] if b['name'] == bench]


def unreliable(record, earlier=()):
    """Why ``record``'s times cannot be trusted (an empty list when they can): other
    processes busy while it sampled, a variant's samples scattered, or Theano C's median
    outside the range of ``earlier`` records of the same device, sizes and case."""
    reasons = []
    load = others_cpu(record)
    if load and load[0] > LOAD_LIMIT:
        reasons.append('other processes used %.0f%% of the CPUs while samples were taken '
                       '(median; the limit is %.0f%%)' % (100 * load[0], 100 * LOAD_LIMIT))
    for bench, c in cases(record):
        for label in (BASELINE, OCL):
            s = variant_spread(c, label)
            if s and s.relative_iqr > SPREAD_LIMIT:
                reasons.append('%s: %s: %s\'s interquartile range is %.0f%% of its median '
                               '(the limit is %.0f%%)' % (bench, c['name'], label,
                                                          100 * s.relative_iqr,
                                                          100 * SPREAD_LIMIT))
        reasons += _reference_off(record, bench, c, earlier)
    return reasons


def brief(reasons, shown=3):
    """The first ``shown`` reasons joined, and how many more there are."""
    more = ' (and %d more)' % (len(reasons) - shown) if len(reasons) > shown else ''
    return '; '.join(reasons[:shown]) + more


def _reference_off(record, bench, case, earlier):
    s = variant_spread(case, BASELINE)
    if s is None:
        return []
    same = [variant_spread(c, BASELINE) for r in earlier
            if r['device']['name'] == record['device']['name'] and r['quick'] == record['quick']
            and _params(r, bench) == _params(record, bench)
            for b, c in cases(r) if b == bench and c['name'] == case['name']]
    same = [x for x in same if x is not None]
    if not same:
        return []
    lo, hi = min(x.q1 for x in same), max(x.q3 for x in same)
    if lo * (1 - REFERENCE_TOLERANCE) <= s.median <= hi * (1 + REFERENCE_TOLERANCE):
        return []
    return ['%s: %s: Theano C took %s, outside %s..%s, its range in %d earlier run(s) on '
            'this device (more than %.0f%% off)' % (
                bench, case['name'], fmt_time(s.median), fmt_time(lo), fmt_time(hi), len(same),
                100 * REFERENCE_TOLERANCE)]


def fmt_time(s):
    """Seconds as three significant digits in s, ms or us."""
    if s is None:
        return ''
    for unit, scale in (('s', 1.0), ('ms', 1e-3), ('us', 1e-6)):
        if s >= scale:
            break
    v = s / scale
    return ('%.0f %s' if v >= 100 else '%.3g %s') % (v, unit)


Change = collections.namedtuple('Change', 'bench case a b c_ratio verdict')


def compare(a, b, threshold=0.05):
    """theano_ocl's times of run ``b`` against run ``a``, per case found in both: a list of
    :class:`Change` (``a``, ``b``: the :class:`Spread` of theano_ocl's samples;
    ``c_ratio``: Theano C's median in b over a's, which says whether the machine
    changed). ``verdict`` is 'slower' when b's median is more than ``threshold`` above
    a's and the two interquartile ranges do not overlap, 'faster' the other way round,
    else ''."""
    before = {(bench, c['name']): c for bench, c in cases(a)}
    out = []
    for bench, c in cases(b):
        old = before.get((bench, c['name']))
        sa, sb = (variant_spread(x, OCL) if x else None for x in (old, c))
        if sa is None or sb is None:
            continue
        ca, cb = variant_spread(old, BASELINE), variant_spread(c, BASELINE)
        verdict = ''
        if sb.median > sa.median * (1 + threshold) and sb.q1 > sa.q3:
            verdict = 'slower'
        elif sb.median * (1 + threshold) < sa.median and sb.q3 < sa.q1:
            verdict = 'faster'
        out.append(Change(bench, c['name'], sa, sb,
                          cb.median / ca.median if ca and cb else None, verdict))
    return out
