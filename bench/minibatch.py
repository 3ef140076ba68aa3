"""The tutorials' minibatch-by-index training function: Theano C and theano_ocl side by side.

``f(i)`` trains on the slice ``X[i * bs:(i + 1) * bs]`` of a shared dataset (the pattern of
the deeplearning.net tutorials: ``givens={x: train_x[index * bs: (index + 1) * bs]}``): a
product, a squared-error loss and an SGD update of the weights. The dataset holds
``--batches`` full minibatches and a short last one. Each backend runs ``--epochs`` epochs
over every index in order; the table gives the time per call of the first epoch (where
theano_ocl plans) and the median over the later ones, and the plans theano_ocl keeps. A
function keeps up to 256 plans: where an index decides the plan (theano_ocl before
2026-11-26), a dataset of more minibatches than that plans on every call.
``--index row`` times ``X[i]`` (one row per call) instead of a slice. The losses of both
backends must agree (relative 1e-4; exit status 1 otherwise).

    python bench/minibatch.py [--device gpu] [--batches 200] [--bs 20] [--epochs 4]
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build(mode, data, w0, bs, index, lr=0.01):
    import theano
    import theano.tensor as T
    X = theano.shared(data)
    W = theano.shared(w0.copy())
    i = T.lscalar('i')
    rows = X[i] if index == 'row' else X[i * bs:(i + 1) * bs]
    loss = T.sqr(T.dot(rows, W)).mean()
    return theano.function([i], loss, updates=[(W, W - np.float32(lr) * T.grad(loss, W))],
                           mode=mode)


def plans_kept(f):
    """The plans theano_ocl keeps for ``f``: one frame per key and the frames kept beside
    one for other branches or slice lengths (its alternates); None for Theano C."""
    vm = f.fn
    if not hasattr(vm, 'frames'):
        return None
    return sum(1 + len(fr.alternates) for fr in vm.frames.values())


def main():
    p = common.parser(__doc__.split('\n')[0])
    p.add_argument('--batches', type=int, default=200)
    p.add_argument('--bs', type=int, default=20)
    p.add_argument('--features', type=int, default=50)
    p.add_argument('--epochs', type=int, default=4)
    p.add_argument('--index', choices=('slice', 'row'), default='slice')
    a = p.parse_args()
    import theano_ocl
    dev = theano_ocl.get_device(a.device)
    common.header('minibatch by index (%s): %d batches of %d, %d features'
                  % (a.index, a.batches, a.bs, a.features), dev)
    rng = np.random.RandomState(0)
    if a.index == 'row':
        data = rng.rand(a.batches, a.bs, a.features).astype('float32')
        n_calls = a.batches
    else:
        data = rng.rand(a.batches * a.bs + a.bs // 4, a.features).astype('float32')
        n_calls = a.batches + 1
    w0 = rng.rand(a.features, 10).astype('float32')
    fns = [('Theano C', build('FAST_RUN', data, w0, a.bs, a.index)),
           ('theano_ocl', build(theano_ocl.OCLMode(device=a.device), data, w0, a.bs, a.index))]
    rows, losses = [], {}
    for name, f in fns:
        epochs, got = [], []
        for _ in range(a.epochs):
            t0 = time.perf_counter()
            for k in range(n_calls):
                got.append(float(f(k)))
            epochs.append((time.perf_counter() - t0) / n_calls)
        losses[name] = np.array(got)
        rows.append({'backend': name, 'first epoch, ms/call': epochs[0] * 1e3,
                     'later epochs, ms/call (median)': float(np.median(epochs[1:])) * 1e3,
                     'plans kept': plans_kept(f)})
    common.table(rows, ['backend', 'first epoch, ms/call', 'later epochs, ms/call (median)',
                        'plans kept'])
    c, o = losses['Theano C'], losses['theano_ocl']
    rel = float(np.max(np.abs(o - c) / np.maximum(np.abs(c), 1e-6)))
    print('losses over %d calls agree within %.1e: %s' % (len(c), rel,
                                                         'OK' if rel < 1e-4 else 'FAILED'))
    sys.exit(0 if rel < 1e-4 else 1)


if __name__ == '__main__':
    main()
