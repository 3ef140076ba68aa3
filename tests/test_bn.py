"""Batch normalization (ops/bn.py and the graphs Theano lowers it to) against Theano C.

Every case runs twice: under FAST_RUN, where Theano's ``batchnorm_opts`` rewrites the
abstract ops into elementwise and reduction graphs (except AbstractBatchNormTrain with running
averages of float32 values under floatX=float64, which the rewrite's types refuse), and with
``batchnorm_opts`` excluded, where AbstractBatchNormTrain, ...Inference and ...TrainGrad reach
the linker. Train and inference, per-activation, spatial and explicit axes, running averages
as shared-variable updates over several calls, the gradients, float32 and float64, odd
sizes, non-contiguous inputs; every compiled function is asserted to run without host
fallback, and with the abstract ops excluded from rewriting, to place them on the device.
"""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.tensor.nnet import bn

import theano_ocl
from helpers import assert_close, assert_matches_c, compile_both, rand

# sums in another order (float64 accumulators, where perform sums float32 in float32)
TOL = {'float32': dict(rtol=1e-4, atol=2e-5), 'float64': dict(rtol=1e-11, atol=1e-12)}
ABSTRACT = ('AbstractBatchNormTrain', 'AbstractBatchNormTrainGrad', 'AbstractBatchNormInference')
REWRITES = {'lowered': (), 'abstract': ('batchnorm_opts',)}
VIEWS = {'plain': lambda x: x, 'step': lambda x: x[:, :, ::2],
         'perm': lambda x: x.dimshuffle(3, 1, 0, 2)}
# (x shape, axes, the view of x normalized): every kind of axes, odd sizes, size-1 dims,
# a batch of one, non-contiguous views (each case compiles its own C code: few cases)
CASES = [((5, 3, 4, 7), 'per-activation', 'plain'), ((5, 3, 4, 7), 'spatial', 'step'),
         ((6, 5, 3, 9), (0, 2), 'perm'), ((3, 4, 1, 5), (0, 1, 2, 3), 'plain'),
         ((1, 7, 2, 3), (1, 2, 3), 'step')]
DTYPES = ['float32', 'float64']


def _combos(cases, lowered=2):
    """(case..., dtype, rewrite): each case with the abstract ops in one dtype (alternating;
    the first case in both), the first ``lowered`` cases lowered too. Few: each graph costs
    Theano C and PoCL builds of its own on a fresh machine, and the ops the lowered graphs
    consist of are the elemwise and reduce families' own tests."""
    out = [c + (DTYPES[k % 2], 'abstract') for k, c in enumerate(cases)]
    out.insert(1, cases[0] + (DTYPES[1], 'abstract'))
    return out + [cases[k] + (DTYPES[k % 2], 'lowered') for k in range(lowered)]


def _placed(f):
    return {type(n.op).__name__ for n, where, _ in theano_ocl.placements(f) if where == 'device'}


def _params(shape, axes, dtype, rng, k):
    """k parameter arrays of the shape the axes leave, in [0.5, 2] (scales and variances)."""
    axes = bn._prepare_batch_normalization_axes(axes, len(shape))[0]
    ps = tuple(1 if d in axes else n for d, n in enumerate(shape))
    return [rand(ps, dtype, rng, low=0.5, high=2) for _ in range(k)]


def _view_shape(view, shape):
    return theano.function([], VIEWS[view](T.zeros(shape)).shape)()


@pytest.mark.parametrize('shape,axes,view,dtype,rewrite', _combos(CASES))
def test_train_and_grad(shape, axes, view, dtype, rewrite):
    rng = np.random.RandomState(sum(shape))
    x = T.tensor4('x', dtype)
    vx = VIEWS[view](x)
    vshape = tuple(_view_shape(view, shape))
    scale, bias = (T.TensorType(dtype, [n == 1 for n in p.shape])(nm) for p, nm in
                   zip(_params(vshape, axes, dtype, rng, 2), ('scale', 'bias')))
    out, mean, invstd = bn.batch_normalization_train(vx, scale, bias, axes, epsilon=1e-3)
    dy = T.tensor4('dy', dtype)
    cost = (out * dy).sum()
    grads = T.grad(cost, [x, scale, bias])
    xv = rand(shape, dtype, rng) * 2 + 1
    values = [xv] + _params(vshape, axes, dtype, rng, 2) + [rand(vshape, dtype, rng)]
    f = assert_matches_c([x, scale, bias, dy], [out, mean, invstd] + grads, values,
                         excluding=REWRITES[rewrite], **TOL[dtype])
    if rewrite == 'abstract':
        assert {'AbstractBatchNormTrain', 'AbstractBatchNormTrainGrad'} <= _placed(f)


@pytest.mark.parametrize('shape,axes,dtype,rewrite', _combos([c[:2] for c in CASES[:2]], 1))
def test_running_averages(shape, axes, dtype, rewrite):
    """The running mean and variance as updates of shared variables, over three calls of
    each backend on its own copies, and the inference op on the averages it gathered."""
    rng = np.random.RandomState(1)
    g, b, rm, rv = _params(shape, axes, dtype, rng, 4)
    x = T.tensor4('x', dtype)
    fns, shared = [], []
    for f_mode in ('c', 'ocl'):
        srm, srv = (theano.shared(v.copy(), nm, broadcastable=[n == 1 for n in v.shape])
                    for v, nm in ((rm, 'rm'), (rv, 'rv')))
        out, _, _, nrm, nrv = bn.batch_normalization_train(
            x, g, b, axes, running_average_factor=0.3, running_mean=srm, running_var=srv)
        test = bn.batch_normalization_test(x, g, b, srm, srv, axes)
        f_c, f_o = compile_both([x], [out, test], updates=[(srm, nrm), (srv, nrv)],
                                excluding=REWRITES[rewrite])
        fns.append(f_c if f_mode == 'c' else f_o)
        shared.append((srm, srv))
    f_o = fns[1]
    assert not theano_ocl.fallback_nodes(f_o), theano_ocl.fallback_nodes(f_o)
    if rewrite == 'abstract':
        assert set(ABSTRACT) - {'AbstractBatchNormTrainGrad'} <= _placed(f_o)
    elif dtype == 'float32' and theano.config.floatX == 'float64':
        # the rewrite's running variance is float64 here: Theano keeps the op
        assert 'AbstractBatchNormTrain' in _placed(f_o)
    for step in range(3):
        xv = rand(shape, dtype, rng) * (step + 1)
        for k, (w, got) in enumerate(zip(fns[0](xv), f_o(xv))):
            assert_close(got, w, what='step %d output %d' % (step, k), **TOL[dtype])
        for a, c in zip(shared[1], shared[0]):
            assert_close(a.get_value(), c.get_value(), what='step %d %s' % (step, a.name),
                         **TOL[dtype])


@pytest.mark.parametrize('shape,axes,view,dtype,rewrite', [
    CASES[1] + ('float32', 'abstract'), CASES[2] + ('float64', 'abstract'),
    CASES[1] + ('float64', 'lowered')])
def test_inference_and_grad(shape, axes, view, dtype, rewrite):
    rng = np.random.RandomState(2)
    x, dy = T.tensor4('x', dtype), T.tensor4('dy', dtype)
    vx = VIEWS[view](x)
    vshape = tuple(_view_shape(view, shape))
    pv = _params(vshape, axes, dtype, rng, 4)
    ps = [T.TensorType(dtype, [n == 1 for n in p.shape])(nm)
          for p, nm in zip(pv, ('scale', 'bias', 'mean', 'var'))]
    out = bn.batch_normalization_test(vx, ps[0], ps[1], ps[2], ps[3], axes, epsilon=1e-3)
    grads = T.grad((out * dy).sum(), [x] + ps)
    values = [rand(shape, dtype, rng), rand(vshape, dtype, rng)] + pv
    f = assert_matches_c([x, dy] + ps, [out] + grads, values, excluding=REWRITES[rewrite], **TOL[dtype])
    if rewrite == 'abstract':
        assert 'AbstractBatchNormInference' in _placed(f)


@pytest.mark.parametrize('mode,dtype', [('low_mem', 'float32'), ('high_mem', 'float64')])
def test_batch_normalization_elementwise(mode, dtype):
    """The old ``batch_normalization``: an Elemwise of BNComposite (low_mem) or plain
    arithmetic (high_mem), with its gradient, on a transposed input."""
    rng = np.random.RandomState(3)
    x, dy = T.matrix('x', dtype), T.matrix('dy', dtype)
    ps = [T.row(nm, dtype) for nm in ('gamma', 'beta', 'mean', 'std')]
    out = bn.batch_normalization(x.T, *ps, mode=mode)
    grads = T.grad((out * dy).sum(), [x] + ps)
    pv = [rand((1, 9), dtype, rng, low=0.5, high=2) for _ in ps]
    assert_matches_c([x, dy] + ps, [out] + grads, [rand((9, 13), dtype, rng),
                                                   rand((13, 9), dtype, rng)] + pv,
                     **TOL[dtype])


@pytest.mark.parametrize('rewrite', sorted(REWRITES))
def test_shapes_that_do_not_broadcast_raise(rewrite):
    """A scale of the wrong length raises ValueError under both backends."""
    x = T.tensor4('x')
    scale, bias = T.TensorType('float64', (True, False, True, True))(), T.tensor4()
    out = bn.batch_normalization_train(x, scale, bias, 'spatial')[0]
    test = bn.batch_normalization_test(x, scale, bias, bias, scale, 'spatial')
    xv = np.ones((2, 3, 4, 5))
    bad, good = np.ones((1, 4, 1, 1)), np.ones((1, 3, 1, 1))
    for outs in (out, test):
        for f in compile_both([x, scale, bias], outs, excluding=REWRITES[rewrite]):
            with pytest.raises(ValueError):
                f(xv, bad, good)


def test_axes_past_ndim_raise():
    """AbstractBatchNormTrain with an axis past x.ndim (which no rewrite takes) raises the
    ValueError of its perform."""
    x, s = T.matrix('x'), T.matrix('s')
    out = bn.AbstractBatchNormTrain(axes=(2,))(x, s, s)[0]
    for f in compile_both([x, s], out):
        with pytest.raises(ValueError, match='axes should be less than ndim'):
            f(np.ones((3, 4)), np.ones((1, 4)))
