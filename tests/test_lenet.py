"""The LeNet program (issue 17): bench/lenet.py's convnet -- conv 5x5x20, max-pool 2,
conv 5x5x50, max-pool 2, dense 500 (tanh), softmax -- on batches of 8 1x28x28 images,
trained 20 SGD steps under mode='OCL' with no host fallback in the compiled training step,
its losses (and parameters) equal to Theano C's within 1e-4 relative: same process, same
initial weights, same data. Twice: the benchmark's model, and the same with spatial batch
normalization after each convolution (running averages updated by the step: under
floatX=float64 Theano keeps AbstractBatchNormTrain, see ops/bn.py) and the argmax error rate
as a second output.
"""
import os
import sys

import numpy as np
import pytest
import theano

import theano_ocl

from helpers import assert_close

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                'bench'))
try:
    from lenet import build_lenet, make_data
finally:
    sys.path.pop(0)

BATCH, STEPS = 8, 20
# the softmax and the log-likelihood become Theano's fused cross-entropy ops
ON_DEVICE = {'CorrMM', 'CorrMM_gradWeights', 'CorrMM_gradInputs', 'Pool', 'MaxPoolGrad',
             'Dot22', 'CrossentropySoftmaxArgmax1HotWithBias', 'CrossentropySoftmax1HotWithBiasDx'}


@pytest.mark.parametrize('dtype,extras', [('float32', {}),
                                          ('float32', dict(batchnorm=True, errors=True))])
def test_lenet_trains_as_theano_c(dtype, extras):
    f_c, p_c = build_lenet('FAST_RUN', BATCH, dtype=dtype, **extras)
    f_o, p_o = build_lenet('OCL', BATCH, dtype=dtype, **extras)
    rows = theano_ocl.placements(f_o)
    assert not theano_ocl.fallback_nodes(f_o), [str(n) for n in theano_ocl.fallback_nodes(f_o)]
    placed = {type(n.op).__name__ for n, where, _ in rows if where == 'device'}
    want = ON_DEVICE | ({'AbstractBatchNormTrain'} if extras and theano.config.floatX == 'float64'
                        else set())
    assert want <= placed, want - placed
    if extras:
        assert {'MaxAndArgmax', 'Argmax'} & placed, placed
    # what stays on the host is shape arithmetic only
    assert {where for _, where, _ in rows} <= {'device', 'host-shape'}
    xs, ys = make_data(BATCH * 4, np.random.RandomState(7), dtype)
    losses = []
    for s in range(STEPS):
        i = (s % 4) * BATCH
        xb, yb = xs[i:i + BATCH], ys[i:i + BATCH]
        want, got = f_c(xb, yb), f_o(xb, yb)
        if extras:
            assert float(got[1]) == float(want[1]), (s, got[1], want[1])     # error rate
            want, got = want[0], got[0]
        assert abs(float(got) - float(want)) <= 1e-4 * abs(float(want)), (s, got, want)
        losses.append(float(want))
    assert losses[-1] < losses[0] and len(set(losses)) == STEPS     # it learns
    for a, b in zip(p_o, p_c):
        assert_close(a.get_value(), b.get_value(), rtol=1e-4, atol=1e-5, what=a.name)
