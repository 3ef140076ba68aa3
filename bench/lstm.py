"""LSTM training-step benchmark: theano_ocl (Scan on the device) vs Theano C, in one process.

One LSTM layer over ``--steps`` time steps (``theano.scan``; its gradient is the mit-mot
scan Theano builds), the last hidden state through a dense output, mean squared error,
plain SGD on every parameter (shared variables updated by the compiled step). Theano C
runs Scan's Python loop (``Scan.execute``: on Python 3.11 its Cython loop does not build).
Both backends start from the same parameters; their losses over the first timed steps must
agree (relative 1e-4). Default size: batch 64, 256 hidden, 50 steps, float32; ``--quick``:
batch 16, 32 hidden, 20 steps.

``--runs`` rounds of ``--iters`` timed training steps, the backends taking turns (median
step time per round; rounds where other processes used more than ``--busy`` of the CPUs are
set aside when at least 3 quiet rounds remain). ``--json PATH`` writes the run (device,
date, commit, per-round samples) as data. ``--scan-rows`` times a third variant, theano_ocl
with the ``scan_rows`` setting on (a step's row copies in one launch each way), in the
same rounds; ``--copied-rows`` one with the ``scan_bind`` setting off (every step's rows
copied, as before ops/scan_bind.py). Exit status 1 only when the losses disagree.
"""
import argparse
import datetime
import os
import sys
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build_lstm(mode, n_in, n_hid, dtype='float32', lr=0.1, seed=0):
    """(train, params): ``train(X, y) -> loss`` for X (time, batch, n_in), y (batch, 1)."""
    rng = np.random.RandomState(seed)

    def param(name, shape, scale=0.1):
        return theano.shared(rng.uniform(-scale, scale, shape).astype(dtype), name=name)
    W = param('W', (n_in, 4 * n_hid))
    U = param('U', (n_hid, 4 * n_hid))
    b = param('b', (4 * n_hid,))
    V = param('V', (n_hid, 1))
    X = T.tensor3('X', dtype=dtype)
    y = T.matrix('y', dtype=dtype)

    def step(xw, h, c, U):
        g = xw + T.dot(h, U)
        i = T.nnet.sigmoid(g[:, :n_hid])
        f = T.nnet.sigmoid(g[:, n_hid:2 * n_hid])
        o = T.nnet.sigmoid(g[:, 2 * n_hid:3 * n_hid])
        u = T.tanh(g[:, 3 * n_hid:])
        c = f * c + i * u
        return o * T.tanh(c), c
    h0 = T.zeros((X.shape[1], n_hid), dtype=dtype)
    (hs, _), _ = theano.scan(step, sequences=T.dot(X, W) + b, outputs_info=[h0, h0],
                             non_sequences=U)
    loss = T.mean((T.dot(hs[-1], V) - y) ** 2)
    params = [W, U, b, V]
    lr = np.asarray(lr, dtype)
    updates = [(p, p - lr * g) for p, g in zip(params, T.grad(loss, params))]
    return theano.function([X, y], loss, updates=updates, mode=mode), params


def make_data(steps, batch, n_in, seed=1, dtype='float32'):
    rng = np.random.RandomState(seed)
    return (rng.uniform(-1, 1, (steps, batch, n_in)).astype(dtype),
            rng.uniform(-1, 1, (batch, 1)).astype(dtype))


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--device', default=None)
    ap.add_argument('--quick', action='store_true', help='batch 16, 32 hidden, 20 steps')
    ap.add_argument('--batch', type=int, default=None)
    ap.add_argument('--hidden', type=int, default=None)
    ap.add_argument('--steps', type=int, default=None, help='time steps of the scan')
    ap.add_argument('--inputs', type=int, default=32, help='input features per step')
    ap.add_argument('--iters', type=int, default=3, help='timed training steps per round')
    ap.add_argument('--runs', type=int, default=3, help='rounds per backend')
    ap.add_argument('--pause', type=float, default=0.5)
    ap.add_argument('--busy', type=float, default=0.05)
    ap.add_argument('--json', default=None, help='write the run to this file')
    ap.add_argument('--profile', action='store_true',
                    help="print theano_ocl's host time per scan step (cProfile of a round)")
    ap.add_argument('--scan-rows', action='store_true',
                    help="also time theano_ocl with OCLMode(scan_rows=True)")
    ap.add_argument('--copied-rows', action='store_true',
                    help='also time theano_ocl with OCLMode(scan_bind=False): every row '
                         'copied, the inner frame not pointed at the rows')
    args = ap.parse_args()
    size = (16, 32, 20) if args.quick else (64, 256, 50)
    batch = args.batch or size[0]
    n_hid = args.hidden or size[1]
    steps = args.steps or size[2]
    dev = theano_ocl.get_device(args.device)
    target = 20.0 if dev.is_gpu else 1.5
    print('# LSTM training step (scan + its gradient, SGD), batch %d, %d hidden, %d inputs, '
          '%d time steps, float32: %d rounds x %d steps per backend'
          % (batch, n_hid, args.inputs, steps, args.runs, args.iters))
    print('# %s | device: %s / %s (%d CUs)' % (datetime.date.today().isoformat(),
                                               dev.platform_name, dev.name, dev.compute_units))
    names = ('Theano C', 'theano_ocl')
    modes = ['FAST_RUN', theano_ocl.OCLMode(device=args.device)]
    if args.scan_rows:
        names += ('theano_ocl scan_rows',)
        modes.append(theano_ocl.OCLMode(device=args.device, scan_rows=True))
    if args.copied_rows:
        names += ('theano_ocl copied rows',)
        modes.append(theano_ocl.OCLMode(device=args.device, scan_bind=False))
    fns = {}
    for name, mode in zip(names, modes):
        t0 = time.perf_counter()
        fns[name] = build_lstm(mode, args.inputs, n_hid)[0]
        print('# %s: compiled in %.1f s' % (name, time.perf_counter() - t0))
    f_ocl = fns['theano_ocl']
    fallbacks = [str(n.op) for n in theano_ocl.fallback_nodes(f_ocl)]
    scans = [impl for node, where, impl in theano_ocl.placements(f_ocl)
             if type(node.op).__name__ == 'Scan']
    print('# host fallbacks: %s' % (fallbacks or 'none'))
    for r in scans:
        print('#   %s' % r)
    X, y = make_data(steps, batch, args.inputs)
    losses = {name: np.array([float(fns[name](X, y)) for _ in range(args.iters)])
              for name in names}
    c = losses['Theano C']
    rel = max(float(np.max(np.abs(losses[name] - c) / np.maximum(np.abs(c), 1e-6)))
              for name in names if name != 'Theano C')

    if args.profile:
        common.profile_scan_steps(f_ocl, (X, y), args.iters, 2 * steps)
    rounds = common.alternate_rounds(fns, args.runs, args.iters, args.pause,
                                     lambda k: (X, y))
    step, ratio = common.report_rounds(rounds, args.busy, target)
    ok = rel < 1e-4
    print('losses over %d steps agree within %.1e: %s' % (args.iters, rel,
                                                          'OK' if ok else 'MISMATCH'))
    if args.json:
        common.write_record(args.json, 'lstm', dev, rounds, step, ratio, rel,
                            batch=batch, hidden=n_hid, steps=steps, inputs=args.inputs,
                            scans=scans, fallbacks=fallbacks)
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
