"""A Keras-style Adam step with an integer iteration counter, against the same step with a
float32 counter and against Theano C, in one process.

Keras 2 (Theano backend) keeps ``iterations`` as an int64 shared scalar, updated by
``iterations + 1`` next to the parameters and the moments, and derives the step's learning
rate from it. The counter is state like any other: it must not make theano_ocl re-plan
every call, nor advance on a failed call (issue 15, item 3).

    python bench/adam_counter.py [--device SPEC] [--rounds 7] [--calls 200]
"""
import argparse
import time

import numpy as np
import theano_ocl  # noqa: F401  (first: Theano on numpy >= 1.22 without the .pth)
import theano
import theano.tensor as T


def build_adam(mode, counter_dtype='int64', sizes=(20, 32, 10), seed=0, lr=1e-3):
    """(step function, shared variables) of a small softmax MLP trained by Keras' Adam
    (its formulas and defaults, ``decay`` included) on integer labels."""
    floatx = 'float32'
    rng = np.random.RandomState(seed)
    params = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append(theano.shared((rng.randn(a, b) * .1).astype(floatx)))
        params.append(theano.shared(np.zeros(b, floatx)))
    x = T.fmatrix('x')
    y = T.lvector('y')
    h = x
    for k in range(0, len(params), 2):
        h = T.dot(h, params[k]) + params[k + 1]
        h = T.nnet.relu(h) if k + 2 < len(params) else T.nnet.softmax(h)
    loss = -T.mean(T.log(h[T.arange(y.shape[0]), y]))
    grads = T.grad(loss, params)
    iterations = theano.shared(np.array(0, counter_dtype), name='iterations')
    lr_s = theano.shared(np.float32(lr), name='lr')
    beta_1 = theano.shared(np.float32(.9), name='beta_1')
    beta_2 = theano.shared(np.float32(.999), name='beta_2')
    decay = theano.shared(np.float32(0.), name='decay')
    eps = np.float32(1e-7)
    lr_d = lr_s * (1. / (1. + decay * T.cast(iterations, 'float32')))
    t = T.cast(iterations, floatx) + 1
    lr_t = lr_d * (T.sqrt(1. - T.pow(beta_2, t)) / (1. - T.pow(beta_1, t)))
    updates = [(iterations, iterations + 1)]
    moments = []
    for p, g in zip(params, grads):
        m = theano.shared(np.zeros(p.get_value().shape, floatx))
        v = theano.shared(np.zeros(p.get_value().shape, floatx))
        moments += [m, v]
        m_t = beta_1 * m + (1. - beta_1) * g
        v_t = beta_2 * v + (1. - beta_2) * T.sqr(g)
        updates += [(m, m_t), (v, v_t), (p, p - lr_t * m_t / (T.sqrt(v_t) + eps))]
    f = theano.function([x, y], loss, updates=updates, mode=mode)
    return f, [iterations] + params + moments


def make_batch(n=32, sizes=(20, 32, 10), seed=1):
    rng = np.random.RandomState(seed)
    return (rng.randn(n, sizes[0]).astype('float32'),
            rng.randint(0, sizes[-1], size=n).astype('int64'))


def time_calls(f, xb, yb, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        f(xb, yb)
    return (time.perf_counter() - t0) / calls


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--device', default=None)
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--calls', type=int, default=200)
    args = ap.parse_args()
    dev = theano_ocl.get_device(args.device)
    print('# Keras-style Adam step (MLP 20-32-10, batch 32, float32) | %s / %s' % (
        dev.platform_name, dev.name))
    xb, yb = make_batch()
    fns = {
        'Theano C, int64 counter': build_adam('FAST_RUN')[0],
        'theano_ocl, int64 counter': build_adam(theano_ocl.OCLMode(device=args.device))[0],
        'theano_ocl, float32 counter': build_adam(theano_ocl.OCLMode(device=args.device),
                                                  counter_dtype='float32')[0],
    }
    losses = {k: [float(f(xb, yb)) for _ in range(5)] for k, f in fns.items()}
    ref = losses['Theano C, int64 counter']
    for k, v in losses.items():
        if not np.allclose(v, ref, rtol=1e-4):
            raise SystemExit('losses disagree: %s %s vs %s' % (k, v, ref))
    samples = {k: [] for k in fns}
    for _ in range(args.rounds):
        for k, f in fns.items():
            samples[k].append(time_calls(f, xb, yb, args.calls))
    c = np.array(samples['Theano C, int64 counter'])
    print('| step | us/call (min-max over %d rounds) | Theano C / it |' % args.rounds)
    print('|---|---|---|')
    for k, s in samples.items():
        s = np.array(s)
        print('| %s | %.1f-%.1f | %.2f-%.2f |' % (k, s.min() * 1e6, s.max() * 1e6,
                                                  (c / s).min(), (c / s).max()))
    i = np.array(samples['theano_ocl, int64 counter'])
    fl = np.array(samples['theano_ocl, float32 counter'])
    print('# int64 counter / float32 counter (theano_ocl): %.2f-%.2f' % (
        (i / fl).min(), (i / fl).max()))


if __name__ == '__main__':
    main()
