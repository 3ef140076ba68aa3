"""Shared helpers of the diagnostic scripts in bench/: arguments, header, table printing.
(The benchmark suite itself is theano_ocl/benchmarks, ``python -m theano_ocl bench``.)"""
import argparse
import datetime
import platform
import time


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


def commit():
    """The checkout's commit (and whether it has changes), as the suite records it."""
    from theano_ocl.benchmarks.timing import _git
    return _git()


def write_record(path, bench, dev, rounds, step, ratio, loss_rel_diff, **params):
    """Write one script run as JSON (docs/_data/scripts/ keeps those the changelog cites):
    the benchmark's name and ``params``, date, commit, device, host, every round's samples,
    ms per step per backend, the ratio against Theano C and the losses' agreement."""
    import datetime
    import json
    import os
    import sys
    from theano_ocl.benchmarks.timing import cpu_name
    record = dict(bench=bench, date=datetime.date.today().isoformat(), commit=commit(),
                  device=dev.name, platform=dev.platform_name,
                  host=dict(cpu=cpu_name(), cpus=os.cpu_count(),
                            python=sys.version.split()[0]),
                  # the settings the run took from the environment (the cost model's, ...)
                  environment={k: v for k, v in sorted(os.environ.items())
                               if k.startswith('THEANO_OCL_') and k != 'THEANO_OCL_BENCH_COMMIT'})
    record.update(params)
    record.update(rounds=dict(rounds), ms_per_step={n: t * 1e3 for n, t in step.items()},
                  ratio=ratio, loss_rel_diff=loss_rel_diff)
    with open(path, 'w') as fh:
        json.dump(record, fh, indent=1)


def alternate_rounds(fns, runs, iters, pause, args_for, warmup=5):
    """Time ``fns`` ({backend name: function}) in alternating rounds of ``iters`` calls, each
    round after ``pause`` seconds: {name: [(median seconds per call, share of the CPUs other
    processes used, or None)]}. ``args_for(k)``: the arguments of the k-th call of a round.
    Each function first makes ``warmup`` untimed calls: a theano_ocl function plans its batched
    replay after its first calls (``OCLFunction.batch_after``), a one-time cost (kernel builds)
    that a round of two or three calls would otherwise report as its step time."""
    import time
    import numpy as np
    from theano_ocl.benchmarks.timing import OtherLoad
    load = OtherLoad()
    rounds = {name: [] for name in fns}
    for name, f in fns.items():
        for k in range(warmup):
            f(*args_for(k))
    for _ in range(runs):
        for name, f in fns.items():
            time.sleep(pause)
            load.start()
            times = step_times(f, args_for, iters)
            rounds[name].append((float(np.median(times)), load.stop()))
    return rounds


def step_times(f, args_for, iters):
    """Seconds of each of ``iters`` calls ``f(*args_for(k))`` (the arguments made untimed)."""
    import time
    times = []
    for k in range(iters):
        a = args_for(k)
        t0 = time.perf_counter()
        f(*a)
        times.append(time.perf_counter() - t0)
    return times


def report_rounds(rounds, busy, target, base='Theano C', ours='theano_ocl'):
    """Print the rounds' table (only the rounds where other processes used at most ``busy``
    of the CPUs, when each backend has 3 such, else all), the load, and ``base``/``ours``
    against ``target``. Returns ({name: seconds per call}, ratio)."""
    import numpy as np
    quiet = {name: [t for t, o in rs if o is not None and o <= busy]
             for name, rs in rounds.items()}
    use_quiet = all(len(q) >= 3 for q in quiet.values())
    print('\n| backend | ms / step | rounds used | ms / step, all rounds (min..max) |')
    print('|---|---|---|---|')
    step = {}
    for name, rs in rounds.items():
        every = [t for t, _ in rs]
        used = quiet[name] if use_quiet else every
        step[name] = float(np.median(used))
        print('| %s | %.1f | %d/%d | %.1f (%.1f..%.1f) |' % (
            name, step[name] * 1e3, len(used), len(every), np.median(every) * 1e3,
            min(every) * 1e3, max(every) * 1e3))
    others = [o for rs in rounds.values() for _, o in rs if o is not None]
    if others:
        print('\nother processes used %.0f%% of the CPUs per round (median; max %.0f%%)'
              % (100 * np.median(others), 100 * max(others)))
    if not use_quiet and others:
        print('warning: fewer than 3 quiet rounds per backend: all rounds used')
    ratio = step[base] / step[ours]
    print('%s: %.2fx %s (target %.1fx: %s)'
          % (ours, ratio, base, target, 'met' if ratio >= target else 'not met'))
    return step, ratio


def timed(fn, calls, repeat, sync):
    """Seconds per call of ``fn`` in each of ``repeat`` runs of ``calls`` calls, after one
    warm-up call; ``sync()`` waits for the device's queue after each run."""
    import time
    fn()
    sync()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / calls)
    return out


def run_other_python(exe, args):
    """Run ``exe`` (a Python of its own, e.g. one with torch: ``python3`` on the GPU
    machines) on ``args`` in its own environment: none of this interpreter's settings, and
    its name looked up on PATH without this interpreter's folder. Returns the
    ``subprocess.CompletedProcess`` (text output captured)."""
    import os
    import shutil
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items()
           if k not in ('PYTHONHOME', 'PYTHONPATH', 'LD_LIBRARY_PATH', 'LIBRARY_PATH')}
    here = os.path.realpath(sys.prefix)
    env['PATH'] = os.pathsep.join(
        p for p in os.environ.get('PATH', '').split(os.pathsep)
        if p and not os.path.realpath(p).startswith(here))
    exe = shutil.which(exe, path=env['PATH']) or exe
    return subprocess.run([exe] + list(args), env=env, capture_output=True, text=True)


def profile_scan_steps(f, args, iters, scan_steps, top=18):
    """cProfile ``iters`` calls of ``f(*args)`` and print the host time per training step and
    per scan step (``scan_steps`` per call, forward and back), the functions that took it,
    and what ``theano_ocl.stats`` says of the function's device Scans (launches per step,
    steps run by the loop driver), where this version of theano_ocl says it."""
    import cProfile
    import pstats
    import theano_ocl
    pr = cProfile.Profile()
    t0 = time.perf_counter()
    pr.enable()
    for _ in range(iters):
        f(*args)
    pr.disable()
    dt = time.perf_counter() - t0
    print('# profiled: %.2f ms per training step, %.1f us per scan step (%d scan steps '
          'forward and back)' % (dt / iters * 1e3, dt / iters / scan_steps * 1e6, scan_steps))
    for s in theano_ocl.stats(f).get('scans', ()):
        print('#   scan %s: %s' % (s.pop('node'), s))
    pstats.Stats(pr).sort_stats('tottime').print_stats(top)
