"""nnet family (ops/nnet.py): the softmax ops and cross-entropies, against Theano's C backend,
plus the graphs users build from them (relu, elu, binary_crossentropy, h_softmax, a
logistic regression trained by SGD)."""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.tensor import nnet

import theano_ocl
from helpers import assert_close, assert_matches_c, rand

FLOATS = ['float16', 'float32', 'float64']
# float16: Theano has no C code and its perform rounds every step (sums included) to half
TOL = {'float16': dict(rtol=5e-3, atol=5e-3), 'float32': dict(rtol=1e-5, atol=1e-6),
       'float64': dict(rtol=1e-12, atol=1e-13)}
VIEWS = {'plain': lambda x: x, 'T': lambda x: x.T, 'rev': lambda x: x[::-1],
         'step': lambda x: x[:, ::2]}


def _ops(f):
    return {type(n.op).__name__ for n in f.maker.fgraph.toposort()}


@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('view', sorted(VIEWS))
@pytest.mark.parametrize('shape', [(7, 300), (3, 1), (1, 5), (0, 4), (4, 0), (5, 1000)])
def test_softmax_family(dtype, view, shape):
    rng = np.random.RandomState(0)
    x, b, t = T.matrix('x', dtype), T.vector('b', dtype), T.matrix('t', dtype)
    vx = VIEWS[view](x)
    xv = rand(shape, dtype, rng, low=-20, high=20)
    rows, cols = theano.function([x], vx.shape, mode='FAST_RUN')(xv)
    if dtype == 'float16' and cols == 0:
        pytest.skip("Theano's float16 softmax (perform) raises on empty rows; its C code does not")
    bv, tv = rand((cols,), dtype, rng), rand((rows, cols), dtype, rng)
    outs = [nnet.softmax(vx), nnet.softmax(vx + b), nnet.logsoftmax(vx),
            T.grad((nnet.softmax(vx) * t).sum(), x)]
    f = assert_matches_c([x, b, t], outs, [xv, bv, tv], **TOL[dtype])
    assert {'Softmax', 'SoftmaxWithBias', 'LogSoftmax', 'SoftmaxGrad'} <= _ops(f)


def test_softmax_is_stable_and_vector_input():
    x = T.matrix('x', 'float32')
    v = T.vector('v', 'float32')
    xv = np.array([[1000, 1001, 999], [-1e4, 0, 1e4]], 'float32')
    f = assert_matches_c([x, v], [nnet.softmax(x), nnet.logsoftmax(x), nnet.softmax(v)],
                       [xv, xv[0]])
    out = f(xv, xv[0])
    assert np.isfinite(out[0]).all() and np.isfinite(out[1]).all()
    np.testing.assert_allclose(out[0].sum(axis=1), 1, rtol=1e-6)


@pytest.mark.parametrize('dtype', FLOATS)
@pytest.mark.parametrize('idx_dtype', ['int32', 'int64'])
@pytest.mark.parametrize('view', ['plain', 'T', 'rev'])
def test_crossentropy_softmax_1hot(dtype, idx_dtype, view):
    rng = np.random.RandomState(1)
    x, b = T.matrix('x', dtype), T.vector('b', dtype)
    y = T.vector('y', idx_dtype)
    vx = VIEWS[view](x)
    n, d = (6, 40)
    xv = rand((n, d) if view != 'T' else (d, n), dtype, rng)
    bv = rand((d,), dtype, rng)
    yv = rng.randint(0, d, n).astype(idx_dtype)
    nll_sum = -T.sum(T.log(nnet.softmax(vx + b))[T.arange(y.shape[0]), y])
    outs = list(nnet.crossentropy_softmax_argmax_1hot_with_bias(vx, b, y)) + \
        [nll_sum] + T.grad(nll_sum, [x, b])
    f = assert_matches_c([x, b, y], outs, [xv, bv, yv], **TOL[dtype])
    assert {'CrossentropySoftmaxArgmax1HotWithBias', 'CrossentropySoftmax1HotWithBiasDx'} <= _ops(f)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_crossentropy_categorical_1hot_and_grad(dtype):
    rng = np.random.RandomState(2)
    p, w = T.matrix('p', dtype), T.matrix('w', dtype)
    y = T.ivector('y')
    pv = rng.uniform(0.05, 1, (5, 7)).astype(dtype)
    wv = rand((5, 7), dtype, rng)
    yv = rng.randint(0, 7, 5).astype('int32')
    xent = nnet.crossentropy_categorical_1hot(p[::-1], y)
    outs = [xent, T.grad((xent * w[:, 0]).sum(), p)]
    f = assert_matches_c([p, y, w], outs, [pv, yv, wv], **TOL[dtype])
    assert {'CrossentropyCategorical1Hot', 'CrossentropyCategorical1HotGrad'} <= _ops(f)


def test_shape_errors():
    x, b = T.matrix('x'), T.vector('b')
    f = theano.function([x, b], nnet.softmax(x + b), mode=theano_ocl.OCLMode())
    with pytest.raises(ValueError, match=r'columns in x \(3\).*length of b \(4\)'):
        f(np.ones((2, 3)), np.ones(4))


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_activations_and_losses_lower_to_device_ops(dtype):
    rng = np.random.RandomState(3)
    x, t = T.matrix('x', dtype), T.matrix('t', dtype)
    xv = rand((6, 9), dtype, rng)
    tv = rng.uniform(0, 1, (6, 9)).astype(dtype)
    p = nnet.sigmoid(x)
    outs = [nnet.relu(x), nnet.relu(x, 0.1), nnet.elu(x), nnet.elu(x, 0.5),
            nnet.binary_crossentropy(p, t).mean(axis=1),
            T.grad(nnet.binary_crossentropy(p, t).sum() + nnet.elu(x).sum(), x)]
    assert_matches_c([x, t], outs, [xv, tv], **TOL[dtype])


def test_relu_grad():
    x = T.matrix('x')
    xv = rand((6, 9), 'float64', np.random.RandomState(3))
    assert_matches_c([x], T.grad(nnet.relu(x).sum(), x), [xv])


def test_h_softmax():
    rng = np.random.RandomState(4)
    n_in, n_classes, n_groups, per_group = 5, 12, 3, 4
    x = T.matrix('x', 'float32')
    y = T.ivector('y')
    W1 = theano.shared(rand((n_in, n_groups), 'float32', rng), 'W1')
    b1 = theano.shared(rand((n_groups,), 'float32', rng), 'b1')
    W2 = theano.shared(rand((n_groups, n_in, per_group), 'float32', rng), 'W2')
    b2 = theano.shared(rand((n_groups, per_group), 'float32', rng), 'b2')
    full = nnet.h_softmax(x, 8, n_classes, n_groups, per_group, W1, b1, W2, b2)
    picked = nnet.h_softmax(x, 8, n_classes, n_groups, per_group, W1, b1, W2, b2, y)
    xv = rand((8, n_in), 'float32', rng)
    yv = rng.randint(0, n_classes, 8).astype('int32')
    f = assert_matches_c([x, y], [full, picked], [xv, yv], device_only=False, rtol=1e-5, atol=1e-6)
    # the softmax, dot and elementwise parts run on the device; what falls back belongs
    # to other families (advanced indexing, batched dot on some paths)
    fb = {type(n.op).__name__ for n in theano_ocl.fallback_nodes(f)}
    assert not fb & {'Softmax', 'SoftmaxWithBias', 'Dot22', 'Gemm', 'Dot', 'BatchedDot'}, fb


def test_logistic_regression_sgd_matches_c():
    """20 SGD steps of softmax + NLL on shared variables: same loss trajectory as Theano C."""
    rng = np.random.RandomState(5)
    n, d, k = 64, 20, 5
    Xv = rng.randn(n, d).astype('float32')
    yv = rng.randint(0, k, n).astype('int32')
    W0 = (0.01 * rng.randn(d, k)).astype('float32')
    losses, weights = [], []
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        X = theano.shared(Xv, 'X')
        y = theano.shared(yv, 'y')
        W = theano.shared(W0.copy(), 'W')
        b = theano.shared(np.zeros(k, 'float32'), 'b')
        p = nnet.softmax(T.dot(X, W) + b)
        loss = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
        gW, gb = T.grad(loss, [W, b])
        lr = np.float32(0.5)
        train = theano.function([], loss, updates=[(W, W - lr * gW), (b, b - lr * gb)], mode=mode)
        losses.append(np.array([train() for _ in range(20)]))
        weights.append(W.get_value())
    fb = theano_ocl.fallback_nodes(train)
    assert not fb, [str(node) for node in fb]
    assert losses[0][-1] < losses[0][0] * 0.9        # it does learn
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-4)
    np.testing.assert_allclose(weights[1], weights[0], rtol=1e-4, atol=1e-6)
