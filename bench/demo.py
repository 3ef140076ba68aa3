"""theano_ocl demo: train a real Theano model with Theano C and with OCL, side by side.

An MLP classifier (784-500-10, tanh, softmax + negative log-likelihood, SGD with
momentum, all parameters in shared variables updated by the compiled function) on a
synthetic 10-class data set (class centroids plus noise: no download needed).
The same script is compiled twice, once with ``mode='FAST_RUN'`` (Theano's C backend)
and once with ``mode=theano_ocl.OCLMode()``; the loss trajectories must agree and the
timings are printed with their ratio.
"""
import argparse
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T



def make_data(n, n_in, n_classes, rng):
    centroids = rng.randn(n_classes, n_in).astype('float32')
    y = rng.randint(0, n_classes, size=n).astype('int32')
    x = 0.1 * centroids[y] + rng.randn(n, n_in).astype('float32')
    return x, y


def build(mode, sizes, batch, lr, momentum, seed):
    rng = np.random.RandomState(seed)
    x = T.fmatrix('x')
    y = T.ivector('y')
    params, h = [], x
    for k, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        bound = np.sqrt(6.0 / (n_in + n_out))
        W = theano.shared(rng.uniform(-bound, bound, (n_in, n_out)).astype('float32'), 'W%d' % k)
        b = theano.shared(np.zeros(n_out, 'float32'), 'b%d' % k)
        params += [W, b]
        act = T.dot(h, W) + b
        h = T.tanh(act) if k < len(sizes) - 2 else T.nnet.softmax(act)
    loss = -T.mean(T.log(h)[T.arange(y.shape[0]), y])
    err = T.mean(T.neq(T.argmax(h, axis=1), y))
    lr, momentum = np.float32(lr), np.float32(momentum)
    updates = []
    for p, g in zip(params, T.grad(loss, params)):
        v = theano.shared(np.zeros_like(p.get_value()), 'v_' + p.name)
        updates += [(v, momentum * v - lr * g), (p, p + momentum * v - lr * g)]
    train = theano.function([x, y], [loss, err], updates=updates, mode=mode)
    return train, params


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--device', default=None)
    ap.add_argument('--steps', type=int, default=100)
    ap.add_argument('--batch', type=int, default=256)
    ap.add_argument('--hidden', type=int, default=500)
    args = ap.parse_args()

    dev = theano_ocl.get_device(args.device)
    print('theano_ocl demo: MLP 784-%d-10, batch %d, %d SGD+momentum steps, float32'
          % (args.hidden, args.batch, args.steps))
    print('device: %s / %s' % (dev.platform_name, dev.name))
    rng = np.random.RandomState(1234)
    xs, ys = make_data(args.batch * 8, 784, 10, rng)
    sizes = [784, args.hidden, 10]
    results = {}
    for name, mode in (('Theano C', 'FAST_RUN'), ('theano_ocl', theano_ocl.OCLMode(device=args.device))):
        t0 = time.perf_counter()
        train, params = build(mode, sizes, args.batch, 0.01, 0.9, seed=0)
        t_compile = time.perf_counter() - t0
        losses, times = [], []
        for step in range(args.steps):
            i = (step % 8) * args.batch
            t0 = time.perf_counter()
            loss, err = train(xs[i:i + args.batch], ys[i:i + args.batch])
            times.append(time.perf_counter() - t0)
            losses.append(float(loss))
        final = [p.get_value() for p in params]
        results[name] = dict(losses=np.array(losses), err=float(err), compile=t_compile,
                             step=float(np.median(times[2:])), final=final, train=train)
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
    print('\n| backend | compile s | ms / step (median) | steps/s |')
    print('|---|---|---|---|')
    for name in ('Theano C', 'theano_ocl'):
        r = results[name]
        print('| %s | %.1f | %.2f | %.1f |' % (name, r['compile'], r['step'] * 1e3, 1 / r['step']))
    print('\ntheano_ocl is %.2fx the speed of Theano C on this machine' % (c['step'] / o['step']))
    ok = rel < 1e-3
    print('RESULT: %s (loss trajectories agree within %.0e)' % ('OK' if ok else 'MISMATCH', 1e-3))
    return 0 if ok else 1


if __name__ == '__main__':
    raise SystemExit(main())
