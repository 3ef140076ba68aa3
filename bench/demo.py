"""theano_ocl demo: train a real Theano model with Theano C and with OCL, side by side.

An MLP classifier (784-500-10 by default; ``--hidden 1000,1000`` for 784-1000-1000-10;
tanh, softmax + negative log-likelihood, SGD with momentum, all parameters in shared
variables updated by the compiled function) on a synthetic 10-class data set (class
centroids plus noise: no download needed).
The same script is compiled twice, once with ``mode='FAST_RUN'`` (Theano's C backend)
and once with ``mode=theano_ocl.OCLMode()``; the loss trajectories must agree and the
median step times are printed with their ratio. ``--runs N`` repeats the timed steps N
times in alternation (Theano C, theano_ocl, Theano C, ...) and reports the median of the
per-run medians, which is steadier on a busy machine.

The table counts three times per backend: compiling (``theano.function``), the first call
(theano_ocl builds its OpenCL kernels and uploads the parameters there; Theano C has
compiled its C code already) and the steady time per step (the median over the steps
after the first two).
"""
import argparse
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
from theano_ocl.benchmarks.mlp import build, make_data
from theano_ocl.benchmarks.timing import OtherLoad


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--device', default=None)
    ap.add_argument('--steps', type=int, default=100)
    ap.add_argument('--batch', type=int, default=256)
    ap.add_argument('--hidden', default='500',
                    help='hidden layer sizes, comma-separated (e.g. 1000,1000)')
    ap.add_argument('--runs', type=int, default=1,
                    help='timed runs of --steps steps per backend, alternating backends')
    args = ap.parse_args()
    hidden = [int(h) for h in str(args.hidden).split(',') if h.strip()]
    if not hidden or min(hidden) < 1:
        ap.error('--hidden needs one or more positive sizes')

    dev = theano_ocl.get_device(args.device)
    sizes = [784] + hidden + [10]
    print('theano_ocl demo: MLP %s, batch %d, %d SGD+momentum steps, float32'
          % ('-'.join(str(n) for n in sizes), args.batch, args.steps))
    print('device: %s / %s' % (dev.platform_name, dev.name))
    rng = np.random.RandomState(1234)
    xs, ys = make_data(args.batch * 8, 784, 10, rng)
    results = {}
    for name, mode in (('Theano C', 'FAST_RUN'), ('theano_ocl', theano_ocl.OCLMode(device=args.device))):
        t0 = time.perf_counter()
        train, params = build(mode, sizes, args.batch, 0.01, 0.9, seed=0)
        results[name] = dict(compile=time.perf_counter() - t0, train=train, params=params, steps=[])
    load = OtherLoad()
    others = []
    for run in range(args.runs):
        for name in ('Theano C', 'theano_ocl'):
            r = results[name]
            losses, times = [], []
            time.sleep(0.5)     # let the other backend's BLAS threads stop busy-waiting
            load.start()
            for step in range(args.steps):
                i = (step % 8) * args.batch
                t0 = time.perf_counter()
                loss, err = r['train'](xs[i:i + args.batch], ys[i:i + args.batch])
                times.append(time.perf_counter() - t0)
                losses.append(float(loss))
            r['steps'].append(float(np.median(times[2:])))
            if run == 0:
                r['first'] = times[0]
            others.append(load.stop())
            if run == 0:
                # the first run's trajectory is the one compared; later runs keep training
                r.update(losses=np.array(losses), err=float(err),
                         final=[p.get_value() for p in r['params']])
    for r in results.values():
        r['step'] = float(np.median(r['steps']))
    c, o = results['Theano C'], results['theano_ocl']
    print('\nstep   loss (Theano C)   loss (theano_ocl)')
    for k in sorted(set([0, 1, 2, args.steps // 2, args.steps - 1])):
        print('%4d   %15.6f   %17.6f' % (k, c['losses'][k], o['losses'][k]))
    rel = np.max(np.abs(c['losses'] - o['losses']) / np.maximum(np.abs(c['losses']), 1e-3))
    pdiff = max(float(np.max(np.abs(a - b))) for a, b in zip(c['final'], o['final']))
    print('\nlargest relative loss difference over %d steps: %.2e' % (args.steps, rel))
    print('largest parameter difference after training:   %.2e' % pdiff)
    print('final training error: Theano C %.3f, theano_ocl %.3f' % (c['err'], o['err']))
    fb = theano_ocl.fallback_nodes(o['train'])
    print('nodes on the host for want of a device kernel: %d %s'
          % (len(fb), sorted({type(n.op).__name__ for n in fb}) if fb else ''))
    print('\n| backend | compile s | first call s | ms / step (median) | steps/s |%s' % (
        ' ms / step per run |' if args.runs > 1 else ''))
    print('|---|---|---|---|---|%s' % ('---|' if args.runs > 1 else ''))
    for name in ('Theano C', 'theano_ocl'):
        r = results[name]
        runs = (' %s |' % ' '.join('%.2f' % (t * 1e3) for t in r['steps'])) if args.runs > 1 else ''
        print('| %s | %.1f | %.2f | %.2f | %.1f |%s' % (name, r['compile'], r['first'],
                                                        r['step'] * 1e3, 1 / r['step'], runs))
    print('\ntheano_ocl is %.2fx the speed of Theano C on this machine' % (c['step'] / o['step']))
    busy = [x for x in others if x is not None]
    if busy and max(busy) > 0.05:
        print('note: other processes used up to %.0f%% of the CPUs while steps were timed '
              '(median %.0f%%): the timings are unreliable' % (100 * max(busy), 100 * np.median(busy)))
    ok = rel < 1e-3
    print('RESULT: %s (loss trajectories agree within %.0e)' % ('OK' if ok else 'MISMATCH', 1e-3))
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
