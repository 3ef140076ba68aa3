"""Shared bench helpers: timing (median of repeats), device choice, table printing."""
import argparse
import datetime
import platform
import time

import numpy as np


def parser(doc):
    p = argparse.ArgumentParser(description=doc)
    p.add_argument('--device', default=None, help="OpenCL device ('P:D', 'gpu', 'cpu', name)")
    p.add_argument('--repeat', type=int, default=5, help='timed repeats (the median is reported)')
    return p


def median_time(fn, repeat=5, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


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


def copy_bandwidth(dev, nbytes, repeat=5):
    """Bytes moved per second (read + write) by a device-to-device buffer copy."""
    cl = dev.cl
    a = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes)
    b = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(dev.queue, a, np.uint8(1), 0, nbytes)
    dev.queue.finish()

    def run():
        for _ in range(10):
            cl.enqueue_copy(dev.queue, b, a, byte_count=nbytes)
        dev.queue.finish()
    t = median_time(run, repeat) / 10
    return 2 * nbytes / t
