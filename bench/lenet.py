"""LeNet training-step benchmark: theano_ocl vs Theano C, in one process.

The model of the Theano tutorial: 28x28 images, conv 5x5x20 -> max-pool 2 -> conv 5x5x50 ->
max-pool 2 -> dense 500 (tanh) -> softmax over 10 classes, negative log-likelihood, plain
SGD; every parameter a shared variable updated by the compiled step. ``conv2d`` with the
default ``filter_flip=True``: Theano's optimizer turns it into CorrMM on a flipped-kernel
view, the gradients into CorrMM_gradWeights / CorrMM_gradInputs, the pooling into Pool and
MaxPoolGrad. Both backends start from the same parameters; the losses of the first
``--steps`` steps must agree (relative 1e-4).

Then ``--runs`` rounds of ``--steps`` timed steps, the backends taking turns (the median
step time of each round; rounds where other processes used more than ``--busy`` of the CPUs
are set aside when at least 3 quiet rounds remain, as bench/mlp.py does). ``--conv``
forces the convolution algorithm of theano_ocl (ops/conv.py: 'direct' or 'gemm');
``--batchnorm`` adds spatial batch normalization after each convolution (``build_lenet``).
``--json PATH`` writes the run (device, date, commit, per-round samples) as data.
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
from theano.tensor.nnet import bn, conv2d
from theano.tensor.signal.pool import pool_2d

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build_lenet(mode, batch, lr=0.05, seed=0, dtype='float32', batchnorm=False, errors=False,
                average=None):
    """(train step, parameters): ``train(x, y) -> loss`` for x (batch, 1, 28, 28), y int32.

    ``batchnorm``: each convolution's output normalized per channel (spatial batch
    normalization, a learned scale, running averages updated by the step); ``errors``: the
    step also returns the error rate of the argmax prediction, ``train(x, y) -> [loss, errors]``;
    ``average(grads, params)``: the gradients the updates take (data-parallel training).
    """
    rng = np.random.RandomState(seed)
    x = T.tensor4('x', dtype=dtype)
    y = T.ivector('y')

    def shared(shape, fan_in, fan_out, name):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        return theano.shared(rng.uniform(-bound, bound, shape).astype(dtype), name)

    params = []
    bn_updates = []
    h = x
    for k, (n_in, n_out) in enumerate(((1, 20), (20, 50))):
        W = shared((n_out, n_in, 5, 5), n_in * 25, n_out * 25 // 4, 'Wc%d' % k)
        b = theano.shared(np.zeros(n_out, dtype), 'bc%d' % k)
        params += [W, b]
        c = conv2d(h, W, input_shape=(batch, n_in) + ((28, 28) if k == 0 else (12, 12)),
                   filter_shape=(n_out, n_in, 5, 5))
        if batchnorm:
            c = _batchnorm(c, n_out, dtype, params, bn_updates)
        h = T.tanh(pool_2d(c, (2, 2), ignore_border=True) + b.dimshuffle('x', 0, 'x', 'x'))
    h = h.flatten(2)
    for k, (n_in, n_out) in enumerate(((800, 500), (500, 10))):
        W = shared((n_in, n_out), n_in, n_out, 'W%d' % k)
        b = theano.shared(np.zeros(n_out, dtype), 'b%d' % k)
        params += [W, b]
        act = T.dot(h, W) + b
        h = T.tanh(act) if k == 0 else T.nnet.softmax(act)
    loss = -T.mean(T.log(h)[T.arange(y.shape[0]), y])
    lr = np.asarray(lr, dtype)
    grads = T.grad(loss, params)
    if average is not None:
        grads = average(grads, params)
    updates = [(p, p - lr * g) for p, g in zip(params, grads)]
    outputs = [loss, T.mean(T.neq(T.argmax(h, axis=1), y))] if errors else loss
    return theano.function([x, y], outputs, updates=updates + bn_updates, mode=mode), params


def _batchnorm(c, n, dtype, params, bn_updates):
    """Spatial batch normalization of ``c`` (n channels): a learned scale (appended to
    ``params``), the running mean and variance updated (appended to ``bn_updates``)."""
    pattern = (True, False, True, True)
    gamma = theano.shared(np.ones((1, n, 1, 1), dtype), 'gamma', broadcastable=pattern)
    stats = [theano.shared(np.full((1, n, 1, 1), v, dtype), name, broadcastable=pattern)
             for v, name in ((0, 'running_mean'), (1, 'running_var'))]
    out, _, _, mean, var = bn.batch_normalization_train(
        c, gamma, T.zeros_like(gamma), 'spatial', running_mean=stats[0], running_var=stats[1])
    params.append(gamma)
    bn_updates.extend(zip(stats, (mean, var)))
    return out


def make_data(n, rng, dtype='float32'):
    """Ten classes of noisy blobs on 28x28 images (learnable, so the loss moves)."""
    y = rng.randint(0, 10, size=n).astype('int32')
    centers = rng.randn(10, 1, 28, 28)
    x = 0.5 * centers[y] + rng.randn(n, 1, 28, 28)
    return x.astype(dtype), y


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--device', default=None)
    ap.add_argument('--batch', type=int, default=128)
    ap.add_argument('--steps', type=int, default=5, help='timed steps per round')
    ap.add_argument('--runs', type=int, default=5, help='rounds per backend')
    ap.add_argument('--pause', type=float, default=0.5)
    ap.add_argument('--busy', type=float, default=0.05)
    ap.add_argument('--conv', choices=('direct', 'gemm'), default=None)
    ap.add_argument('--batchnorm', action='store_true',
                    help='spatial batch normalization after each convolution')
    ap.add_argument('--json', default=None, help='write the run to this file')
    args = ap.parse_args()
    dev = theano_ocl.get_device(args.device)
    # (issue 37: at least 2.5x Theano C at batch 128 on a CPU device; a GPU, 20x)
    target = 20.0 if dev.is_gpu else (2.5 if args.batch == 128 else 1.5)
    print('# LeNet (conv5x5x20, %spool2, conv5x5x50, pool2, dense500, softmax), batch %d, '
          'float32, SGD: %d rounds x %d steps per backend'
          % ('batch norm, ' if args.batchnorm else '', args.batch, args.runs, args.steps))
    print('# %s | device: %s / %s (%d CUs)' % (datetime.date.today().isoformat(),
                                               dev.platform_name, dev.name, dev.compute_units))
    names = ('Theano C', 'theano_ocl')
    fns = {}
    for name, mode in zip(names, ('FAST_RUN', theano_ocl.OCLMode(device=args.device, conv=args.conv))):
        t0 = time.perf_counter()
        fns[name] = build_lenet(mode, args.batch, batchnorm=args.batchnorm)[0]
        print('# %s: compiled in %.1f s' % (name, time.perf_counter() - t0))
    f_ocl = fns['theano_ocl']
    fallbacks = [str(n.op) for n in theano_ocl.fallback_nodes(f_ocl)]
    conv_rows = [impl for node, where, impl in theano_ocl.placements(f_ocl)
                 if 'Corr' in type(node.op).__name__]
    print('# host fallbacks: %s' % (fallbacks or 'none'))
    for r in conv_rows:
        print('#   %s' % r)

    rng = np.random.RandomState(1234)
    xs, ys = make_data(args.batch * 4, rng)

    def batch(step):
        i = (step % 4) * args.batch
        return xs[i:i + args.batch], ys[i:i + args.batch]

    losses = {name: np.array([float(fns[name](*batch(s))) for s in range(args.steps)])
              for name in names}
    c = losses['Theano C']
    rel = float(np.max(np.abs(losses['theano_ocl'] - c) / np.maximum(np.abs(c), 1e-3)))

    rounds = common.alternate_rounds(fns, args.runs, args.steps, args.pause, batch)
    step, ratio = common.report_rounds(rounds, args.busy, target)
    ok = rel < 1e-4
    print('losses over %d steps agree within %.1e: %s' % (args.steps, rel, 'OK' if ok else 'MISMATCH'))
    if args.json:
        common.write_record(args.json, 'lenet', dev, rounds, step, ratio, rel,
                            batch=args.batch, batchnorm=args.batchnorm, conv=conv_rows,
                            fallbacks=fallbacks)
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
