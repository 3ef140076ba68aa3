"""Small models, where a CPU device must not lose to Theano C: the functions of the
small-work issue's table, Theano C and theano_ocl side by side in one process.

Cases (``--only``): ``quickstart`` (docs/quickstart.md's logistic-regression training step:
784->10, batch 256, float32), ``logreg`` (a 2016-style tutorial's minibatch step, the batch
picked by index from a shared dataset, float64), ``mlp_test`` and ``mlp_train`` (the
tutorial's MLP 784-500-10, tanh, float64: its error-rate function and its SGD step),
``lenet`` (a LeNet-style step: two conv+pool layers of 20 and 50 5x5 filters, a 500 tanh
layer and softmax, batch 20, 28x28, float32). Each backend runs ``--runs`` rounds of
``--iters`` calls, taking turns; ``--variants`` adds theano_ocl with other settings
(``host_blas=mapped``: the host BLAS on mapped buffers instead of queued on the device).
Every backend's results over the first calls must agree with Theano C's (relative 1e-9 in
float64, 1e-4 in float32; exit status 1 otherwise).

    python bench/small_models.py [--only quickstart lenet] [--variants host_blas=mapped]
                                 [--runs 5] [--iters 20] [--json FILE]
"""
import argparse
import datetime
import json
import os
import sys

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


#: issue 37's targets, C / OCL on the 2-core CPU (the other cases: every function >= 1.0x)
TARGETS = {'lenet': 1.2}


def quickstart(mode):
    x, t = T.fmatrix('x'), T.ivector('t')
    W = theano.shared(np.zeros((784, 10), 'float32'), name='W')
    b = theano.shared(np.zeros(10, 'float32'), name='b')
    p = T.nnet.softmax(T.dot(x, W) + b)
    cost = T.nnet.categorical_crossentropy(p, t).mean()
    updates = [(v, v - np.float32(0.1) * g) for v, g in zip((W, b), T.grad(cost, (W, b)))]
    f = theano.function([x, t], cost, updates=updates, mode=mode)
    rng = np.random.RandomState(0)
    args = (rng.rand(256, 784).astype('float32'), rng.randint(0, 10, 256).astype('int32'))
    return f, lambda k: args


def logreg(mode, n=2000, bs=20):
    rng = np.random.RandomState(1)
    data_x = theano.shared(rng.rand(n, 784), 'train_x')
    data_y = theano.shared(rng.randint(0, 10, n).astype('int32'), 'train_y')
    W = theano.shared(np.zeros((784, 10)), 'W')
    b = theano.shared(np.zeros(10), 'b')
    i, x, y = T.lscalar('index'), T.matrix('x'), T.ivector('y')
    p = T.nnet.softmax(T.dot(x, W) + b)
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    gW, gb = T.grad(cost, [W, b])
    f = theano.function([i], cost, updates=[(W, W - 0.13 * gW), (b, b - 0.13 * gb)],
                        givens={x: data_x[i * bs:(i + 1) * bs], y: data_y[i * bs:(i + 1) * bs]},
                        mode=mode)
    return f, lambda k: (k % (n // bs),)


def _mlp(mode, train):
    rng = np.random.RandomState(2)
    bound = np.sqrt(6. / (784 + 500))
    W1 = theano.shared(rng.uniform(-bound, bound, (784, 500)), 'W1')
    b1 = theano.shared(np.zeros(500), 'b1')
    W2 = theano.shared(np.zeros((500, 10)), 'W2')
    b2 = theano.shared(np.zeros(10), 'b2')
    x, y = T.matrix('x'), T.ivector('y')
    h = T.tanh(T.dot(x, W1) + b1)
    p = T.nnet.softmax(T.dot(h, W2) + b2)
    xv = rng.rand(20, 784)
    yv = rng.randint(0, 10, 20).astype('int32')
    if not train:
        f = theano.function([x, y], T.mean(T.neq(T.argmax(p, axis=1), y)), mode=mode)
        return f, lambda k: (xv, yv)
    params = [W1, b1, W2, b2]
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y]) + 1e-4 * (W1 ** 2).sum()
    f = theano.function([x, y], cost, mode=mode,
                        updates=[(q, q - 0.01 * g) for q, g in zip(params, T.grad(cost, params))])
    return f, lambda k: (xv, yv)


def mlp_test(mode):
    return _mlp(mode, False)


def mlp_train(mode):
    return _mlp(mode, True)


def lenet(mode, batch=20):
    from theano.tensor.nnet import conv2d
    from theano.tensor.signal.pool import pool_2d
    rng = np.random.RandomState(3)

    def shared(shape, scale):
        return theano.shared(rng.uniform(-scale, scale, shape).astype('float32'))
    W0, b0 = shared((20, 1, 5, 5), 0.2), shared((20,), 0)
    W1, b1 = shared((50, 20, 5, 5), 0.05), shared((50,), 0)
    W2, b2 = shared((800, 500), 0.05), shared((500,), 0)
    W3, b3 = shared((500, 10), 0.05), shared((10,), 0)
    x, y = T.ftensor4('x'), T.ivector('y')
    h0 = T.tanh(pool_2d(conv2d(x, W0), (2, 2), ignore_border=True) + b0.dimshuffle('x', 0, 'x', 'x'))
    h1 = T.tanh(pool_2d(conv2d(h0, W1), (2, 2), ignore_border=True) + b1.dimshuffle('x', 0, 'x', 'x'))
    h2 = T.tanh(T.dot(h1.flatten(2), W2) + b2)
    p = T.nnet.softmax(T.dot(h2, W3) + b3)
    cost = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
    params = [W0, b0, W1, b1, W2, b2, W3, b3]
    f = theano.function([x, y], cost, mode=mode, updates=[
        (q, q - np.float32(0.1) * g) for q, g in zip(params, T.grad(cost, params))])
    args = (rng.rand(batch, 1, 28, 28).astype('float32'), rng.randint(0, 10, batch).astype('int32'))
    return f, lambda k: args


CASES = dict(quickstart=quickstart, logreg=logreg, mlp_test=mlp_test, mlp_train=mlp_train,
             lenet=lenet)


def run_case(name, variants, runs, iters, device):
    modes = [('Theano C', 'FAST_RUN'), ('theano_ocl', theano_ocl.OCLMode(device=device))]
    for v in variants:
        k, val = v.split('=')
        modes.append(('theano_ocl ' + v, theano_ocl.OCLMode(device=device, **{k: val})))
    fns, argf, first = {}, None, {}
    for label, mode in modes:
        f, argf = CASES[name](mode)
        fns[label] = f
        first[label] = np.array([np.asarray(f(*argf(k)), dtype='float64') for k in range(3)])
    ref = first['Theano C']
    tol = 1e-4 if 'float32' in str(fns['Theano C'].maker.fgraph.outputs[0].dtype) else 1e-9
    agree = {lab: float(np.max(np.abs(v - ref) / np.maximum(np.abs(ref), 1e-12)))
             for lab, v in first.items()}
    rounds = common.alternate_rounds(fns, runs, iters, 0.1, argf)
    print('\n## %s' % name)
    step, ratio = common.report_rounds(rounds, 0.05, TARGETS.get(name, 1.0))
    others = {lab: step['Theano C'] / step[lab] for lab in fns if lab not in ('Theano C', 'theano_ocl')}
    for lab, r in others.items():
        print('%s: %.2fx Theano C' % (lab, r))
    ok = all(d <= tol for d in agree.values())
    print('results over 3 calls agree within %.1e: %s' % (max(agree.values()), 'OK' if ok else 'MISMATCH'))
    return dict(case=name, ms_per_call={k: v * 1e3 for k, v in step.items()}, ratio=ratio,
                ratios=dict(others), rounds=rounds, agree=agree), ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--only', nargs='+', default=list(CASES), choices=list(CASES))
    ap.add_argument('--variants', nargs='*', default=[], metavar='SETTING=VALUE')
    ap.add_argument('--runs', type=int, default=5)
    ap.add_argument('--iters', type=int, default=20)
    ap.add_argument('--device', default=None)
    ap.add_argument('--json', default=None)
    a = ap.parse_args()
    dev = theano_ocl.get_device(a.device)
    print('# small models, %s | device: %s / %s (%d CUs)' % (
        datetime.date.today().isoformat(), dev.platform_name, dev.name, dev.compute_units))
    results, ok = [], True
    for name in a.only:
        r, good = run_case(name, a.variants, a.runs, a.iters, a.device)
        results.append(r)
        ok = ok and good
    if a.json:
        with open(a.json, 'w') as fh:
            json.dump(dict(bench='small_models', date=datetime.date.today().isoformat(),
                           commit=common.commit(), device=dev.name, platform=dev.platform_name,
                           variants=a.variants, cases=results), fh, indent=1)
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
