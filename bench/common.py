"""Shared helpers of the diagnostic scripts in bench/: arguments, header, table printing.
(The benchmark suite itself is theano_ocl/benchmarks, ``python -m theano_ocl bench``.)"""
import argparse
import datetime
import platform


def parser(doc):
    p = argparse.ArgumentParser(description=doc)
    p.add_argument('--device', default=None, help="OpenCL device ('P:D', 'gpu', 'cpu', name)")
    p.add_argument('--repeat', type=int, default=5, help='timed repeats (the median is reported)')
    return p


def header(title, dev):
    print('# %s' % title)
    print('# %s | device: %s / %s (%d CUs) | host: %s' % (
        datetime.date.today().isoformat(), dev.platform_name, dev.name, dev.compute_units,
        platform.processor() or platform.machine()))


def table(rows, cols):
    widths = [max(len(str(c)), *(len(_fmt(r.get(c))) for r in rows)) for c in cols]
    print('| ' + ' | '.join(str(c).ljust(w) for c, w in zip(cols, widths)) + ' |')
    print('|' + '|'.join('-' * (w + 2) for w in widths) + '|')
    for r in rows:
        print('| ' + ' | '.join(_fmt(r.get(c)).ljust(w) for c, w in zip(cols, widths)) + ' |')


def _fmt(v):
    if v is None:
        return ''
    if isinstance(v, float):
        if v == 0:
            return '0'
        if abs(v) >= 100:
            return '%.0f' % v
        if abs(v) >= 1:
            return '%.2f' % v
        return '%.3g' % v
    return str(v)
