"""The legacy ``theano.tensor.nnet.conv.ConvOp`` on the device, against Theano C.

ConvOp is a convolution (flipped kernel), 'valid' or 'full', subsampled by (dx, dy), with
the image/kernel/batch/filter shapes optionally fixed at build time; ``ConvOp.grad`` builds
ConvOps again, with logical (zero-inserted) shapes when subsampled. Each case compiles a
C ConvOp (one gcc run per distinct op, cached in the compiledir), so the cases are few and
each covers several things: both algorithms, float32/float64, odd sizes, non-contiguous
inputs (a transposed graph input and strided values), the gradients, the errors.
"""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.tensor.nnet import conv

import theano_ocl
from theano_ocl.ops import conv as oconv

from helpers import assert_matches_c, compile_both, rand, setting

TOL = {'float32': dict(rtol=1e-4, atol=1e-4), 'float64': dict(rtol=1e-10, atol=1e-10)}


@pytest.fixture(params=oconv.ALGORITHMS)
def algorithm(request, monkeypatch):
    setting(monkeypatch, 'conv', request.param)
    return request.param


def _convops(f):
    """(device implementation descriptions, number of ConvOp nodes) of ``f``."""
    on = [impl for node, where, impl in theano_ocl.placements(f)
          if isinstance(node.op, conv.ConvOp) and where == 'device']
    n = sum(isinstance(node.op, conv.ConvOp) for node in f.maker.fgraph.apply_nodes)
    return on, n


CASES = [
    # (border, subsample, dtype, image shape, filter shape, shapes given at build time)
    ('valid', (1, 1), 'float64', (2, 3, 9, 8), (4, 3, 3, 2), False),
    ('full', (2, 3), 'float32', (3, 2, 7, 5), (5, 2, 4, 3), True),
    ('valid', (3, 2), 'float64', (1, 3, 10, 7), (2, 3, 2, 3), True),
    ('full', (1, 1), 'float32', (2, 1, 5, 6), (3, 1, 5, 2), False),
    ('full', (1, 1), 'float64', (2, 5, 6, 7), (2, 5, 3, 4), True),     # as CorrMM_gradInputs
]


@pytest.mark.parametrize('case', range(len(CASES)))
def test_forward(case, algorithm):
    border, ss, dtype, ishp, kshp, given = CASES[case]
    x, w = T.tensor4('x', dtype=dtype), T.tensor4('w', dtype=dtype)
    kw = dict(image_shape=ishp, filter_shape=kshp) if given else {}
    y = conv.conv2d(x, w, border_mode=border, subsample=ss, **kw)
    f = assert_matches_c([x, w], [y], [rand(ishp, dtype), rand(kshp, dtype, low=-1, high=1)],
                         **TOL[dtype])
    on, n = _convops(f)
    assert n == 1 and len(on) == 1
    assert ('GEMM' in on[0]) == (algorithm == 'gemm'), on
    assert (border + ' CorrMM of the flipped kernel') in on[0]
    op = [n.op for n in f.maker.fgraph.apply_nodes if isinstance(n.op, conv.ConvOp)][0]
    assert oconv.full_as_grad_inputs(op, ishp, kshp) == (case == 4)


def test_non_contiguous(algorithm):
    """A transposed graph input (a strided device view) and strided input values."""
    x, w = T.dtensor4('x'), T.dtensor4('w')
    y = conv.conv2d(x.dimshuffle(0, 1, 3, 2), w[:, :, ::-1, :], border_mode='full',
                    subsample=(2, 1))
    xv = rand((2, 3, 6, 14), 'float64')[:, :, :, ::2]       # (2, 3, 6, 7), strided
    wv = rand((3, 6, 3, 2), 'float64')[:, ::2]              # (3, 3, 3, 2), strided
    f = assert_matches_c([x, w], [y], [xv, wv], **TOL['float64'])
    assert len(_convops(f)[0]) == 1


@pytest.mark.parametrize('border,ss,dtype', [('valid', (1, 1), 'float64'),
                                             ('full', (2, 2), 'float32')])
def test_gradient_convops(border, ss, dtype):
    """theano.grad of a ConvOp: ConvOps again (strided 'full': logical, zero-inserted
    image and kernel shapes), all on the device."""
    ishp, kshp = (2, 3, 7, 6), (4, 3, 3, 2)
    x, w = T.tensor4('x', dtype=dtype), T.tensor4('w', dtype=dtype)
    y = conv.conv2d(x, w, border_mode=border, subsample=ss, image_shape=ishp,
                    filter_shape=kshp)
    loss = (y * y).sum()
    gx, gw = theano.grad(loss, [x, w])
    f = assert_matches_c([x, w], [loss, gx, gw],
                         [rand(ishp, dtype, low=-1, high=1), rand(kshp, dtype, low=-1, high=1)],
                         **TOL[dtype])
    on, n = _convops(f)
    assert n == 3 and len(on) == 3, on
    # the valid case's input gradient (a full ConvOp, shapes given) takes the
    # CorrMM_gradInputs path; the strided full forward the padded CorrMM
    full = [node.op for node in f.maker.fgraph.apply_nodes
            if isinstance(node.op, conv.ConvOp) and node.op.out_mode == 'full']
    assert [oconv.full_as_grad_inputs(op, (op.bsize,) + op.imshp,
                                      (op.nkern, op.imshp[0]) + op.kshp) for op in full] \
        == [border == 'valid']
    if ss != (1, 1):
        logical = [node.op for node in f.maker.fgraph.apply_nodes
                   if isinstance(node.op, conv.ConvOp) and
                   (node.op.imshp_logical != node.op.imshp or
                    node.op.kshp_logical != node.op.kshp)]
        assert len(logical) == 2        # the zero-inserted cases are exercised


def test_wrong_shapes_raise_as_c():
    x, w = T.dtensor4('x'), T.dtensor4('w')
    # shapes fixed at build time, other shapes at run time: the C code's messages
    y = conv.conv2d(x, w, image_shape=(2, 3, 6, 5), filter_shape=(4, 3, 3, 3))
    f_c, f_o = compile_both([x, w], y)
    assert len(_convops(f_o)[0]) == 1
    good = [rand((2, 3, 6, 5), 'float64'), rand((4, 3, 3, 3), 'float64')]
    np.testing.assert_allclose(f_o(*good), f_c(*good), rtol=1e-10, atol=1e-10)
    for bad, what in [((rand((2, 3, 7, 5), 'float64'), good[1]), 'number of rows in the image'),
                      ((rand((1, 3, 6, 5), 'float64'), good[1]), 'batch size'),
                      ((good[0], rand((4, 3, 3, 2), 'float64')), 'number of columns in the filter'),
                      ((good[0], rand((5, 3, 3, 3), 'float64')), 'number of kernels')]:
        for f in (f_c, f_o):
            with pytest.raises(ValueError, match='The hardcoded shape for the ' + what):
                f(*bad)
    # no shapes: different stack sizes
    y = conv.conv2d(x, w)
    f_c, f_o = compile_both([x, w], y)
    for f in (f_c, f_o):
        with pytest.raises(ValueError, match='stack size'):
            f(rand((2, 3, 6, 5), 'float64'), rand((4, 2, 3, 3), 'float64'))
    # a kernel larger than the image ('valid')
    for f in (f_c, f_o):
        for kshp, dims in [((1, 1, 4, 4), '0x0'), ((1, 1, 3, 4), '1x0')]:
            with pytest.raises(ValueError, match='Output dimensions are not valid ' + dims):
                f(rand((1, 1, 3, 3), 'float64'), rand(kshp, 'float64'))
    # empty batch, stack or filters: zeros of the right shape, as C
    for ishp, kshp in [((0, 1, 3, 3), (2, 1, 2, 2)), ((2, 0, 3, 3), (2, 0, 2, 2)),
                       ((2, 1, 3, 3), (0, 1, 2, 2))]:
        want = f_c(rand(ishp, 'float64'), rand(kshp, 'float64'))
        got = f_o(rand(ishp, 'float64'), rand(kshp, 'float64'))
        assert got.shape == want.shape and not got.any()


def test_int_stays_on_host_and_fails_as_c():
    """Theano C has no ConvOp code for integers (and says so when it compiles); the node
    stays on the host under OCL (no device code for it either) and fails the same way."""
    x, w = T.itensor4('x'), T.itensor4('w')
    y = conv.conv2d(x, w, border_mode='full')
    with pytest.raises(Exception, match='Type int32 not implemented'):
        theano.function([x, w], y, mode='FAST_RUN')
    with pytest.raises(Exception, match='Type int32 not implemented'):
        theano.function([x, w], y, mode=theano_ocl.OCLMode())
    with pytest.raises(theano_ocl.errors.NoDeviceImplementation, match='int32'):
        oconv._convop_factory(y.owner.op, y.owner, None)
