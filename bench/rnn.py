"""Small scan RNN training-step benchmark: theano_ocl (Scan on the device) vs Theano C.

The recurrent net of a 2016-style Theano tutorial: ``h_t = tanh(x_t Wx + h_{t-1} Wh + b)``
over ``--steps`` time steps (``theano.scan``; its gradient is the scan Theano builds),
a dense output of the last hidden state, mean squared error, plain SGD on every parameter.
Default size: 16 inputs, 64 hidden, 4 outputs, 20 steps, batch 32, float64 (small work:
where a device Scan's per-step cost shows). Both backends start from the same parameters;
their losses over the first timed steps must agree (relative 1e-9 in float64, 1e-4 in
float32). ``--runs`` rounds of ``--iters`` training steps, the backends taking turns.
``--profile`` prints theano_ocl's host time per scan step (cProfile of one round);
``--variants SETTING=VALUE ...`` times theano_ocl with other settings beside it (e.g.
``host_math=c``: Theano C's code and ops on the host's VM, its bits).
Exit status 1 only when the losses disagree.
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


def build_rnn(mode, n_in, n_hid, n_out, dtype='float64', lr=0.05, seed=0):
    rng = np.random.RandomState(seed)

    def param(name, shape, scale=0.2):
        return theano.shared(rng.uniform(-scale, scale, shape).astype(dtype), name=name)
    Wx, Wh, b = param('Wx', (n_in, n_hid)), param('Wh', (n_hid, n_hid)), param('b', (n_hid,))
    V, c = param('V', (n_hid, n_out)), param('c', (n_out,))
    X = T.tensor3('X', dtype=dtype)
    y = T.matrix('y', dtype=dtype)
    h0 = T.zeros((X.shape[1], n_hid), dtype=dtype)
    hs, _ = theano.scan(lambda x, h: T.tanh(T.dot(x, Wx) + T.dot(h, Wh) + b),
                        sequences=X, outputs_info=h0)
    loss = T.mean((T.dot(hs[-1], V) + c - y) ** 2)
    params = [Wx, Wh, b, V, c]
    lr = np.asarray(lr, dtype)
    updates = [(p, p - lr * g) for p, g in zip(params, T.grad(loss, params))]
    return theano.function([X, y], loss, updates=updates, mode=mode)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--device', default=None)
    ap.add_argument('--batch', type=int, default=32)
    ap.add_argument('--hidden', type=int, default=64)
    ap.add_argument('--inputs', type=int, default=16)
    ap.add_argument('--outputs', type=int, default=4)
    ap.add_argument('--steps', type=int, default=20, help='time steps of the scan')
    ap.add_argument('--dtype', default='float64')
    ap.add_argument('--iters', type=int, default=20, help='timed training steps per round')
    ap.add_argument('--runs', type=int, default=5, help='rounds per backend')
    ap.add_argument('--pause', type=float, default=0.2)
    ap.add_argument('--busy', type=float, default=0.05)
    ap.add_argument('--profile', action='store_true')
    ap.add_argument('--variants', nargs='*', default=[], metavar='SETTING=VALUE',
                    help="theano_ocl with other settings beside it (host_math=c: Theano C's "
                         "code and ops on the host's VM)")
    ap.add_argument('--json', default=None, help='write the run to this file')
    args = ap.parse_args()
    dev = theano_ocl.get_device(args.device)
    print('# scan RNN training step (scan + its gradient, SGD), batch %d, %d inputs, %d hidden, '
          '%d outputs, %d time steps, %s: %d rounds x %d steps per backend' % (
              args.batch, args.inputs, args.hidden, args.outputs, args.steps, args.dtype,
              args.runs, args.iters))
    print('# %s | device: %s / %s (%d CUs)' % (datetime.date.today().isoformat(),
                                               dev.platform_name, dev.name, dev.compute_units))
    fns = {}
    modes = [('Theano C', 'FAST_RUN'), ('theano_ocl', theano_ocl.OCLMode(device=args.device))]
    for v in args.variants:
        k, val = v.split('=')
        modes.append(('theano_ocl ' + v, theano_ocl.OCLMode(device=args.device, **{k: val})))
    for name, mode in modes:
        t0 = time.perf_counter()
        fns[name] = build_rnn(mode, args.inputs, args.hidden, args.outputs, args.dtype)
        print('# %s: compiled in %.1f s' % (name, time.perf_counter() - t0))
    f_ocl = fns['theano_ocl']
    print('# host fallbacks: %s' % ([str(n.op) for n in theano_ocl.fallback_nodes(f_ocl)]
                                    or 'none'))
    rng = np.random.RandomState(1)
    X = rng.uniform(-1, 1, (args.steps, args.batch, args.inputs)).astype(args.dtype)
    y = rng.uniform(-1, 1, (args.batch, args.outputs)).astype(args.dtype)
    losses = {name: np.array([float(f(X, y)) for _ in range(3)]) for name, f in fns.items()}
    c = losses['Theano C']
    rel = max(float(np.max(np.abs(v - c) / np.maximum(np.abs(c), 1e-12)))
              for name, v in losses.items() if name != 'Theano C')
    tol = 1e-9 if args.dtype == 'float64' else 1e-4
    if args.profile:
        common.profile_scan_steps(f_ocl, (X, y), args.iters, 2 * args.steps)
    rounds = common.alternate_rounds(fns, args.runs, args.iters, args.pause, lambda k: (X, y))
    step, ratio = common.report_rounds(rounds, args.busy, 1.5)     # (issue 37's target)
    for name in fns:
        if name not in ('Theano C', 'theano_ocl'):
            print('%s: %.2fx Theano C' % (name, step['Theano C'] / step[name]))
    ok = rel < tol
    print('losses over 3 steps agree within %.1e: %s' % (rel, 'OK' if ok else 'MISMATCH'))
    if args.json:
        common.write_record(args.json, 'rnn', dev, rounds, step, ratio, rel,
                            batch=args.batch, hidden=args.hidden, steps=args.steps,
                            inputs=args.inputs, outputs=args.outputs, dtype=args.dtype)
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
