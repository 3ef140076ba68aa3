"""nnet family (ops/nnet.py): the softmax ops and cross-entropies, against Theano's C backend,
plus the graphs users build from them (relu, elu, binary_crossentropy, h_softmax, a
logistic regression trained by SGD)."""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.tensor import nnet
from theano.tensor.nnet import nnet as tnnet

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


def _outcome(f, values):
    try:
        return 'ok', f(*values)
    except Exception as e:
        return type(e), str(e).splitlines()[0]


def _assert_same_outcome(f_c, f_o, values, dtype):
    kc, c = _outcome(f_c, values)
    ko, o = _outcome(f_o, values)
    if kc == 'ok':
        assert ko == 'ok', 'Theano gives a result, OCL raises %s %s' % (ko, o)
        for k, (g, w) in enumerate(zip(o if isinstance(o, list) else [o],
                                       c if isinstance(c, list) else [c])):
            assert_close(g, w, what='output %d' % k, **TOL[dtype])
    else:
        assert (ko, o) == (kc, c)
    return kc, c


@pytest.mark.parametrize('idx_dtype', ['int32', 'int64', 'uint8', 'uint64'])
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_class_index_out_of_range_raises_as_theano(dtype, idx_dtype):
    """A class index outside [0, D) raises what Theano raises (Theano's test_neg_idx): the C
    code's ValueError for CrossentropySoftmaxArgmax1HotWithBias and
    CrossentropySoftmax1HotWithBiasDx; numpy's IndexError for CrossentropyCategorical1Hot and
    its grad (Theano runs their perform, where -D <= index < 0 counts from the end). The
    function works again afterwards (the error flag is cleared)."""
    rng = np.random.RandomState(6)
    x, sm = T.matrix('x', dtype), T.matrix('sm', dtype)
    b, dy = T.vector('b', dtype), T.vector('dy', dtype)
    y = T.vector('y', idx_dtype)
    graphs = [([x, b, y], tnnet.CrossentropySoftmaxArgmax1HotWithBias()(x, b, y)),
              ([dy, sm, y], tnnet.CrossentropySoftmax1HotWithBiasDx()(dy, sm, y)),
              ([dy, sm, y], tnnet.crossentropy_categorical_1hot_grad(dy, sm, y))]
    if idx_dtype in ('int32', 'int64'):
        graphs.append(([sm, y], tnnet.crossentropy_categorical_1hot(sm, y)))
    N, D = 6, 5
    bad = [[0, 5, 1, 2, 3, 4], [0, 1, 2, 3, 4, 7]]
    if idx_dtype.startswith('u'):
        bad.append([0, 1, 2, 3, 4, np.iinfo(idx_dtype).max])
    else:
        bad += [[0, -1, 2, 3, 4, 1], [0, -5, 2, 3, 4, 1], [0, 1, -6, -9, 4, 7]]
    for inputs, out in graphs:
        f_c = theano.function(inputs, out, mode='FAST_RUN')
        f_o = theano.function(inputs, out, mode=theano_ocl.OCLMode())
        assert not theano_ocl.fallback_nodes(f_o)

        def values(idx, rows=N, cols=D):
            vals = {x: rand((rows, cols), dtype, rng), b: rand((cols,), dtype, rng),
                    dy: rand((rows,), dtype, rng),
                    sm: rng.uniform(0.1, 1, (rows, cols)).astype(dtype),
                    y: np.array(idx, idx_dtype)}
            return [vals[v] for v in inputs]
        good = values(rng.randint(0, D, N))
        _assert_same_outcome(f_c, f_o, good, dtype)
        for idx in bad:
            kind, message = _assert_same_outcome(f_c, f_o, values(idx), dtype)
            if -D <= min(idx) and max(idx) < D:
                continue        # numpy's negative indices (CrossentropyCategorical1Hot[Grad])
            assert kind in (ValueError, IndexError, OverflowError), (out.owner.op, idx, kind)
            _assert_same_outcome(f_c, f_o, good, dtype)     # usable again
        # no column: every index is out of range
        kind, _ = _assert_same_outcome(f_c, f_o, values([0] * 3, 3, 0), dtype)
        assert kind in (ValueError, IndexError)


def test_theano_neg_idx():
    """Theano's own test_neg_idx of both classes (floatX matrices, an lvector with -1)."""
    rng = np.random.RandomState(7)
    admat, advec, alvec = T.matrix(), T.vector(), T.lvector()
    m = theano_ocl.OCLMode()
    idx = rng.randint(low=0, high=5, size=3)
    idx[1] = -1
    f = theano.function([admat, advec, alvec],
                        tnnet.CrossentropySoftmaxArgmax1HotWithBias()(admat, advec, alvec), mode=m)
    with pytest.raises(ValueError, match='y_i value out of bounds'):
        f(rng.rand(3, 5), rng.rand(5), idx)
    idx = rng.randint(low=0, high=5, size=10)
    idx[1] = -1
    f = theano.function([advec, admat, alvec],
                        tnnet.CrossentropySoftmax1HotWithBiasDx()(advec, admat, alvec), mode=m)
    with pytest.raises(ValueError, match=r'y_i >= dx dimensions\[1\] or y_i < 0\.'):
        f(rng.rand(10), rng.rand(10, 5), idx)
