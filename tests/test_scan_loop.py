"""A device Scan's steps run by the runtime's loop driver (ops/scan_lower.py,
runtime/loop.py): the steps after a run's first are one declared loop over the inner
frame, not a pass of the inner function each. Observed through ``theano_ocl.stats(f)``
(``scans``), against Theano C: every step's values, a bad index at a chosen step (the
error where Theano raises it, the function usable after), loops the driver does not take.
"""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from helpers import assert_close, compile_both


def _rnn(dtype):
    x = T.tensor3('x', dtype=dtype)
    h0 = T.matrix('h0', dtype=dtype)
    W = T.matrix('W', dtype=dtype)

    def step(v, h, W):
        return T.tanh(T.dot(h, W) + v)
    hs, _ = theano.scan(step, sequences=x, outputs_info=h0, non_sequences=W)
    cost = (hs ** 2).sum()
    return [x, h0, W], [hs, theano.grad(cost, W), theano.grad(cost, h0)]


def _args(rng, n, dtype, batch=3, width=5):
    return [rng.uniform(-1, 1, (n, batch, width)).astype(dtype),
            rng.uniform(-1, 1, (batch, width)).astype(dtype),
            rng.uniform(-0.5, 0.5, (width, width)).astype(dtype)]


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_steps_after_the_first_run_by_the_driver(dtype):
    """A scan and its gradient (a mit-mot scan): every step after the first is run by the
    loop driver, its launches counted; the values equal Theano C's for several lengths
    (another frame per length) and again on replays."""
    ins, outs = _rnn(dtype)
    f_c, f_o = compile_both(ins, outs)
    rng = np.random.RandomState(0)
    tol = 1e-5 if dtype == 'float32' else 1e-10
    for n in (6, 1, 2, 6, 9, 6):
        args = _args(rng, n, dtype)
        for k, (got, want) in enumerate(zip(f_o(*args), f_c(*args))):
            assert_close(got, want, rtol=tol, atol=tol, what='output %d, %d steps' % (k, n))
        scans = theano_ocl.stats(f_o)['scans']
        assert len(scans) == 2, scans          # the scan and its gradient's
        for s in scans:
            assert s['steps'] == n, s
            assert s['lowered_steps'] == n - 1, s
            if n > 1:
                assert s['launches_per_step'] >= 1, s
            assert s['loop_s'] > 0, s


@pytest.mark.parametrize('bad_step', [1, 3, 6])
def test_bad_index_at_a_chosen_step_raises_as_theano(bad_step):
    """An index out of bounds inside the loop at step ``bad_step`` (a device error flag of
    the inner frame, read once after the driver's steps): IndexError, as Theano C raises;
    the run then went again as passes reading the flags each step. The next calls (good
    indices) equal Theano C's and run through the driver again."""
    idx = T.lvector('idx')
    E = T.matrix('E')
    h0 = T.vector('h0')

    def step(i, h, E):
        return T.tanh(E[i] + h)
    hs, _ = theano.scan(step, sequences=idx, outputs_info=h0, non_sequences=E)
    f_c, f_o = compile_both([idx, E, h0], hs)
    rng = np.random.RandomState(bad_step)
    e = rng.uniform(-1, 1, (5, 4))
    h = rng.uniform(-1, 1, 4)
    good = rng.randint(-5, 5, 7)
    assert_close(f_o(good, e, h), f_c(good, e, h), what='before')
    bad = good.copy()
    bad[bad_step] = 5
    with pytest.raises(IndexError):
        f_c(bad, e, h)
    with pytest.raises(IndexError):
        f_o(bad, e, h)
    for n in (7, 3):
        other = rng.randint(-5, 5, n)
        assert_close(f_o(other, e, h), f_c(other, e, h), what='after the error, %d steps' % n)
        s, = theano_ocl.stats(f_o)['scans']
        assert s['lowered_steps'] == n - 1, s


def test_until_loops_run_as_passes():
    """A loop with an ``until`` condition is not taken by the driver (its stop flag and
    masked writes stay the loop's own): no lowered step, values as Theano C's."""
    x = T.vector('x')

    def step(h, x):
        h2 = h * 2 + x
        return h2, theano.scan_module.until(T.gt(h2.sum(), 50))
    hs, _ = theano.scan(step, outputs_info=T.zeros_like(x), non_sequences=x, n_steps=20)
    f_c, f_o = compile_both([x], hs)
    v = np.ones(3)
    assert_close(f_o(v), f_c(v))
    s, = theano_ocl.stats(f_o)['scans']
    assert s['lowered_steps'] == 0 and s['launches_per_step'] is None, s
    assert s['steps'] == len(f_c(v)), s
