"""Convolution and pooling families against Theano C, in the same process.

Pooling: every mode, ignore_border both ways, strides, padding, 2-d and 3-d windows,
float32/float64/int32, non-contiguous inputs, the gradients theano.grad builds (MaxPoolGrad,
AveragePoolGrad) and DownsampleFactorMaxGradGrad. Convolution: every border mode, subsample,
dilation, groups, filter_flip both ways, conv2d_transpose, float32/float64, a non-contiguous
image, both algorithms of ops/conv.py, and the gradients (CorrMM_gradWeights/gradInputs).
Every compiled function is asserted to run without host fallback. The LeNet program is
tests/test_lenet.py.
"""

import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.tensor.nnet import conv2d, conv2d_transpose
from theano.tensor.signal import pool as tpool
from theano.tensor.signal.pool import pool_2d, pool_3d

import theano_ocl
from theano_ocl.ops import conv as oconv

from helpers import assert_matches_c, compile_both, rand, setting

# float32 convolutions sum up to a few hundred products in another order than the BLAS
TOL = {'float32': dict(rtol=1e-4, atol=1e-4), 'float64': dict(rtol=1e-10, atol=1e-10)}


def _placed(f, opname):
    """The implementation descriptions of the nodes of op type ``opname``."""
    return [impl for node, where, impl in theano_ocl.placements(f)
            if type(node.op).__name__ == opname and where == 'device']


# --------------------------------------------------------------------------- pooling
POOL_CASES = [
    # (ws, ignore_border, stride, pad)
    ((2, 2), True, None, (0, 0)),
    ((2, 3), False, None, (0, 0)),          # partial windows at the border
    ((3, 2), True, (1, 2), (1, 1)),         # overlapping, padded
    ((3, 3), False, (2, 1), (0, 0)),        # overlapping, partial windows
    ((2, 2), True, (3, 3), (1, 0)),         # gaps between windows
]
MODES = ['max', 'sum', 'average_inc_pad', 'average_exc_pad']


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('case', range(len(POOL_CASES)))
def test_pool_2d_and_grad(mode, case):
    ws, ib, st, pad = POOL_CASES[case]
    dtype = 'float64' if case % 2 else 'float32'
    x = T.tensor4('x', dtype=dtype)
    y = pool_2d(x, ws, ignore_border=ib, stride=st, pad=pad, mode=mode)
    outs = [y]
    if not (mode == 'average_exc_pad' and any(pad)):    # C raises there (tested below)
        outs.append(theano.grad((y * y).sum(), x))
    xv = rand((2, 3, 7, 9), dtype)
    f = assert_matches_c([x], outs, [xv])
    assert _placed(f, 'Pool')
    if len(outs) > 1:
        grad_op = 'MaxPoolGrad' if mode == 'max' else 'AveragePoolGrad'
        assert _placed(f, grad_op), grad_op


def test_pool_exc_pad_grad_raises_as_c():
    x = T.dmatrix('x').reshape((1, 1, 5, 5))
    y = pool_2d(x, (2, 2), ignore_border=True, pad=(1, 1), mode='average_exc_pad')
    g = theano.grad(y.sum(), x)
    f_c, f_o = compile_both([x.owner.inputs[0]], g)
    assert not theano_ocl.fallback_nodes(f_o)
    for f in (f_c, f_o):
        with pytest.raises(ValueError, match='padding must be zero for average_exc_pad'):
            f(np.ones((5, 5)))


@pytest.mark.parametrize('mode', ['max', 'sum', 'average_inc_pad'])
def test_pool_int32(mode):
    x = T.itensor4('x')
    y = pool_2d(x, (2, 3), ignore_border=False, stride=(1, 2), mode=mode)
    assert_matches_c([x], [y], [rand((2, 2, 5, 7), 'int32', low=-50, high=50)])


@pytest.mark.parametrize('mode', ['max', 'average_exc_pad'])
def test_pool_non_contiguous_and_5d(mode):
    """A transposed, stepped view as input; a 5-d tensor with 2 pooled axes."""
    x = T.TensorType('float32', (False,) * 5)('x')
    view = x.dimshuffle(0, 4, 1, 3, 2)[:, ::2, :, :, 1:]
    y = pool_2d(view, (2, 2), ignore_border=False, stride=(1, 1), mode=mode)
    g = theano.grad((y ** 2).sum(), x)
    assert_matches_c([x], [y, g], [rand((2, 3, 6, 5, 4), 'float32')])


# views of a (3, 4, 7, 8) input whose leading (non-pooled) axes a CPU device's kernel takes
# as one axis (ops/pool.py: ``flat``), and ones whose strides do not allow it
POOL_LAYOUTS = {
    'contiguous': lambda x: x,
    'leading_reversed': lambda x: x[::-1, ::-1],        # one axis, a negative stride
    'batch_reversed': lambda x: x[::-1],                # not one axis
    'channels_stepped': lambda x: x[:, ::2],            # not one axis
    'pooled_reversed_stepped': lambda x: x[:, :, ::-1, ::2],
    'one_leading_axis': lambda x: x[1],
    'no_leading_axis': lambda x: x[1, 2],
    'empty_batch': lambda x: x[:0],
}


@pytest.mark.parametrize('dtype', ['int8', 'uint16', 'int64', 'float32', 'float64'])
def test_pool_layouts_and_dtypes(dtype):
    """Pool (max, sum, average_exc_pad) and, for floats, MaxPoolGrad (overlapping windows
    and windows apart, ops/pool.py's two kernels) and AveragePoolGrad on views with
    negative, stepped and collapsible strides, 2 to 4 axes, an empty batch: every layout
    in one function (one compilation per dtype)."""
    x = T.TensorType(dtype, (False,) * 4)('x')
    outs, names = [], []
    for layout in sorted(POOL_LAYOUTS):
        view = POOL_LAYOUTS[layout](x)
        for mode, (ws, ib, st, pad) in (('max', ((2, 3), True, (1, 2), (0, 0))),
                                        # windows apart: a gap, a partial window at the border
                                        ('max', ((2, 2), True, (3, 2), (0, 0))),
                                        ('max', ((2, 3), False, None, (0, 0))),
                                        ('sum', ((3, 2), False, (2, 2), (0, 0))),
                                        ('average_exc_pad', ((2, 2), True, (1, 1), (1, 0)))):
            what = '%s, %s %s stride %s' % (layout, mode, ws, st)
            y = pool_2d(view, ws, ignore_border=ib, stride=st, pad=pad, mode=mode)
            outs.append(y)
            names.append(what)
            if dtype.startswith('float') and not (mode == 'average_exc_pad' and any(pad)):
                outs.append(theano.grad((y * y).sum(), x))
                names.append('gradient of ' + what)
    xv = rand((3, 4, 7, 8), dtype, low=-50, high=50)
    if dtype.startswith('float'):
        xv = np.round(xv, 0)       # ties: several maxima in a window
    f = assert_matches_c([x], outs, [xv], names=names)
    assert _placed(f, 'Pool')


@pytest.mark.parametrize('mode', ['max', 'sum', 'average_inc_pad'])
def test_pool_3d_and_grad(mode):
    x = T.tensor4('x')
    y = pool_3d(x, (2, 3, 2), ignore_border=True, stride=(1, 2, 2), pad=(1, 1, 0), mode=mode)
    g = theano.grad((y ** 2).sum(), x)
    assert_matches_c([x], [y, g], [rand((2, 5, 7, 6), 'float64')])


def test_max_pool_grad_grad():
    x, gg = T.dtensor4('x'), T.dtensor4('gg')
    ws, st, pad = (2, 3), (1, 2), (1, 1)
    maxout = pool_2d(x, ws, ignore_border=True, stride=st, pad=pad)
    z = tpool.DownsampleFactorMaxGradGrad(ignore_border=True)(x, maxout, gg, ws, st, pad)
    xv = np.round(rand((2, 2, 6, 7), 'float64'), 1)      # ties: several maxima per window
    f = assert_matches_c([x, gg], [z], [xv, rand((2, 2, 6, 7), 'float64')])
    assert _placed(f, 'DownsampleFactorMaxGradGrad')


# --------------------------------------------------------------------------- convolution
CONV_CASES = [
    dict(border_mode='valid'),
    dict(border_mode='full'),
    dict(border_mode='half'),
    dict(border_mode=(1, 2)),
    dict(border_mode=((0, 2), (1, 0))),
    dict(border_mode='valid', subsample=(2, 3)),
    dict(border_mode='half', subsample=(2, 2), filter_dilation=(2, 1)),
    dict(border_mode='full', filter_dilation=(2, 2)),
    dict(border_mode=(1, 1), num_groups=2),
    dict(border_mode='valid', filter_flip=False, subsample=(1, 2), num_groups=2),
]


@pytest.fixture(params=oconv.ALGORITHMS)
def algorithm(request, monkeypatch):
    setting(monkeypatch, 'conv', request.param)
    return request.param


def _conv_impls(f):
    return [impl for op in ('CorrMM', 'CorrMM_gradWeights', 'CorrMM_gradInputs')
            for impl in _placed(f, op)]


@pytest.mark.parametrize('case', range(len(CONV_CASES)))
def test_conv2d_and_grads(case, algorithm):
    kw = CONV_CASES[case]
    dtype = 'float32' if case % 2 else 'float64'
    G = kw.get('num_groups', 1)
    x, w = T.tensor4('x', dtype=dtype), T.tensor4('w', dtype=dtype)
    y = conv2d(x, w, **kw)
    gx, gw = theano.grad((y * y).sum(), [x, w])
    f = assert_matches_c([x, w], [y, gx, gw],
                         [rand((3, 4, 9, 8), dtype), rand((6, 4 // G, 3, 2), dtype)],
                         **TOL[dtype])
    impls = _conv_impls(f)
    assert len(impls) == 3, impls
    word = 'im2col' if algorithm == 'gemm' else 'direct'
    assert all(word in i for i in impls), impls


@pytest.mark.parametrize('kw', [
    dict(border_mode='valid'),
    dict(border_mode='half', subsample=(2, 3), filter_dilation=(1, 2)),
    dict(border_mode=(0, 5), subsample=(1, 2)),
    dict(border_mode='full', filter_dilation=(1, 3), num_groups=3),
], ids=['valid', 'half-strided-dilated', 'padded-strided', 'full-dilated-groups'])
def test_input_gradient_of_wide_rows(kw, monkeypatch):
    """Rows wider than one of the CPU's col2im tiles (70 columns: tiles of 32, the last
    partial), with strides, dilation and padding moving taps across the tiles' edges."""
    setting(monkeypatch, 'conv', 'gemm')
    G = kw.get('num_groups', 1)
    x, w = T.ftensor4('x'), T.ftensor4('w')
    gx = theano.grad((conv2d(x, w, **kw) ** 2).sum(), x)
    assert_matches_c([x, w], [gx], [rand((2, 3, 5, 70), 'float32'),
                                    rand((6, 3 // G, 3, 4), 'float32')], **TOL['float32'])


@pytest.mark.parametrize('view', ['swapped', 'stepped', 'reversed-rows'])
def test_gradients_of_a_strided_top(view, algorithm):
    """The top (the output gradient) as a view: batch and channel axes swapped (its rows
    still contiguous), every other column, or its rows reversed."""
    from theano.tensor.nnet import corr as tcorr
    b, w = T.ftensor4('b'), T.ftensor4('w')
    t = T.ftensor4('t')
    top = {'swapped': t.dimshuffle(1, 0, 2, 3), 'stepped': t[:, :, :, ::2],
           'reversed-rows': t[:, :, ::-1, :]}[view]
    tshape = {'swapped': (4, 3, 5, 6), 'stepped': (3, 4, 5, 12),
              'reversed-rows': (3, 4, 5, 6)}[view]
    gw = tcorr.CorrMM_gradWeights()(b, top, shape=(3, 2))
    gi = tcorr.CorrMM_gradInputs()(w, top, shape=(7, 7))
    assert_matches_c([b, w, t], [gw, gi], [rand((3, 2, 7, 7), 'float32'),
                                           rand((4, 2, 3, 2), 'float32'),
                                           rand(tshape, 'float32')], **TOL['float32'])


def test_conv2d_non_contiguous_image(algorithm):
    """The image is a transposed, stepped view; the kernel a slice."""
    x, w = T.ftensor4('x'), T.ftensor4('w')
    xv = x.dimshuffle(0, 3, 2, 1)[:, :, ::2, :]
    y = conv2d(xv, w[:, 1:], border_mode='half', subsample=(1, 2))
    gx, gw = theano.grad((y * y).sum(), [x, w])
    assert_matches_c([x, w], [y, gx, gw],
                     [rand((2, 7, 11, 3), "float32"), rand((4, 4, 3, 3), "float32")],
                     **TOL['float32'])


def test_conv2d_transpose(algorithm):
    """conv2d_transpose is CorrMM_gradInputs with an explicit output shape."""
    x, w = T.dtensor4('x'), T.dtensor4('w')
    y = conv2d_transpose(x, w, output_shape=(2, 3, 10, 9), border_mode='half',
                         input_dilation=(2, 2))
    f = assert_matches_c([x, w], [y], [rand((2, 4, 5, 5), 'float64'),
                                       rand((4, 3, 3, 2), 'float64')], **TOL['float64'])
    assert _placed(f, 'CorrMM_gradInputs')


def test_conv2d_wrong_channels_raise_as_c():
    x, w = T.dtensor4('x'), T.dtensor4('w')
    f_c, f_o = compile_both([x, w], conv2d(x, w))
    assert not theano_ocl.fallback_nodes(f_o)
    for f in (f_c, f_o):
        with pytest.raises(ValueError, match='same stack size'):
            f(np.ones((1, 3, 5, 5)), np.ones((2, 2, 3, 3)))
        with pytest.raises(ValueError, match='impossible output shape'):
            f(np.ones((1, 2, 2, 2)), np.ones((2, 2, 3, 3)))


def test_default_algorithm_recorded():
    """Without forcing, the choice is the device's (GEMM where a BLAS backend exists) and
    report(f) says which."""
    x, w = T.ftensor4('x'), T.ftensor4('w')
    f = theano.function([x, w], conv2d(x, w), mode=theano_ocl.OCLMode())
    dev = theano_ocl.get_device()
    algo, blas = oconv.choose_algorithm(dev, 'float32')
    impl, = _placed(f, 'CorrMM')
    assert ('im2col' in impl) == (algo == 'gemm') and ('direct' in impl) == (algo == 'direct')
    if dev.is_cpu:
        assert algo == 'gemm' and blas == 'host'
