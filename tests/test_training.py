"""Classic Theano training scripts on the device: zero host fallbacks, C's loss trajectory.

Logistic regression and an MLP 784-500-500-10 (tanh and relu), softmax + NLL, SGD with
momentum, parameters updated in shared variables by the compiled function, 100 steps.
"""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl


def _data(dtype, n=64, n_in=784, n_classes=10, seed=0):
    rng = np.random.RandomState(seed)
    centroids = rng.randn(n_classes, n_in)
    y = rng.randint(0, n_classes, size=n).astype('int32')
    x = (0.1 * centroids[y] + rng.randn(n, n_in)).astype(dtype)
    return x, y


def _build(mode, sizes, act, dtype, seed=0):
    rng = np.random.RandomState(seed)
    x = T.matrix('x', dtype=dtype)
    y = T.ivector('y')
    params, h = [], x
    for k, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        bound = np.sqrt(6.0 / (n_in + n_out))
        W = theano.shared(rng.uniform(-bound, bound, (n_in, n_out)).astype(dtype), 'W%d' % k)
        b = theano.shared(np.zeros(n_out, dtype), 'b%d' % k)
        params += [W, b]
        a = T.dot(h, W) + b
        h = act(a) if k < len(sizes) - 2 else T.nnet.softmax(a)
    loss = -T.mean(T.log(h)[T.arange(y.shape[0]), y])
    lr, mom = np.asarray(0.01, dtype), np.asarray(0.9, dtype)
    updates = []
    for p, g in zip(params, T.grad(loss, params)):
        v = theano.shared(np.zeros_like(p.get_value()), 'v_' + p.name)
        updates += [(v, mom * v - lr * g), (p, p + mom * v - lr * g)]
    return theano.function([x, y], loss, updates=updates, mode=mode), params


@pytest.mark.parametrize('sizes,act,dtype', [
    ([784, 10], None, 'float32'),                                    # logistic regression
    ([784, 500, 500, 10], T.tanh, 'float32'),
    ([784, 500, 500, 10], T.nnet.relu, 'float32'),
    ([784, 500, 500, 10], T.tanh, 'float64'),
])
def test_training_matches_c(sizes, act, dtype):
    dev = theano_ocl.get_device()
    if not dev.supports_dtype(dtype):
        pytest.skip('the device has no float64')
    x, y = _data(dtype)
    runs = []
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        f, params = _build(mode, sizes, act, dtype)
        losses = [float(f(x, y)) for _ in range(100)]
        runs.append((f, np.array(losses), [p.get_value() for p in params]))
    (_, want, p_c), (f_o, got, p_o) = runs
    assert theano_ocl.fallback_nodes(f_o) == []
    assert got[-1] < got[0]                                  # it trains
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    for a, b in zip(p_o, p_c):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
