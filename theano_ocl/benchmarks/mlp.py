"""MLP training step (the demo's model): tanh layers, softmax + negative log-likelihood,
SGD with momentum, every parameter a shared variable updated by the compiled step."""
import numpy as np

from . import BASELINE, OCL, Case, Variant, register
from .timing import fallbacks, launches


def make_data(n, n_in, n_classes, rng):
    """A synthetic classification set: class centroids plus noise (no download)."""
    centroids = rng.randn(n_classes, n_in).astype('float32')
    y = rng.randint(0, n_classes, size=n).astype('int32')
    x = 0.1 * centroids[y] + rng.randn(n, n_in).astype('float32')
    return x, y


def build(mode, sizes, batch, lr, momentum, seed, average=None):
    """The compiled training step ``train(x, y) -> [loss, error]`` and its parameters.
    ``average(grads, params)``: the gradients the updates take (data-parallel training:
    ``theano_ocl.distributed.average_gradients``)."""
    import theano
    import theano.tensor as T
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
    grads = T.grad(loss, params)
    if average is not None:
        grads = average(grads, params)
    for p, g in zip(params, grads):
        v = theano.shared(np.zeros_like(p.get_value()), 'v_' + p.name)
        updates += [(v, momentum * v - lr * g), (p, p + momentum * v - lr * g)]
    train = theano.function([x, y], [loss, err], updates=updates, mode=mode)
    return train, params


@register('mlp', quick=dict(hidden=(128,), batch=64, calls=5, check=5),
          full=dict(hidden=(1000, 1000), batch=256, calls=20, check=20))
def mlp(ctx, hidden, batch, calls, check):
    """Training steps of a 784-hidden-10 MLP, float32, SGD with momentum.

    The losses of the first ``check`` steps must agree with Theano C's (relative 1e-3)."""
    sizes = [784] + list(hidden) + [10]

    def setup():
        xs, ys = make_data(batch * 8, 784, 10, np.random.RandomState(1234))
        state = {}
        variants = []
        for label, mode in ((BASELINE, 'FAST_RUN'), (OCL, ctx.mode())):
            train = build(mode, sizes, batch, 0.01, 0.9, seed=0)[0]
            losses = []
            for step in range(check):
                i = (step % 8) * batch
                losses.append(float(train(xs[i:i + batch], ys[i:i + batch])[0]))
            state[label] = np.array(losses)
            step = [0]

            def call(train=train, step=step):
                i = (step[0] % 8) * batch
                step[0] += 1
                train(xs[i:i + batch], ys[i:i + batch])
            variants.append(Variant(label, call))
        c, o = state[BASELINE], state[OCL]
        rel = float(np.max(np.abs(o - c) / np.maximum(np.abs(c), 1e-3)))
        if rel >= 1e-3:
            raise AssertionError('losses of the first %d steps differ by %.1e (relative) '
                                 'from Theano C' % (check, rel))
        return variants, dict(launches=launches(train), fallbacks=fallbacks(train),
                              loss_rel_diff=rel)
    return [Case('MLP %s, batch %d' % ('-'.join(map(str, sizes)), batch), setup, calls=calls,
                 unit='step', pause=0.5, settle=max(1, calls // 4))]
