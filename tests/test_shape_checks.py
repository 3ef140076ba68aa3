"""Shape checks exactly where Theano's C code has them (issue 15, item 1).

A dimension broadcasts only where an input's *type* says it is broadcastable: two
``fvector``s of lengths 1 and 4 are a mismatch (ValueError), not a broadcast. Each case is
called more often than the in-thread host tier needs to take over (``host_tier_after``; the
float cases opt in with ``host_tier='any'``), so
every executor a call can take (planning, replay, the steady-state guard, the in-thread
tier, the simulator) is held to the same outcome as Theano C, call after call, and a
failing call commits no update.
"""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from helpers import assert_close, compile_both, setting

f32 = 'float32'


def _bce():
    p, t = T.fvector('p'), T.fvector('t')
    return [p, t], T.nnet.binary_crossentropy(p, t).mean(), \
        [np.full(4, .5, f32), np.ones(1, f32)]


def _add_vec():
    x, y = T.fvector('x'), T.fvector('y')
    return [x, y], x + y, [np.ones(1, f32), np.ones(4, f32)]


def _sub_mat():
    a, b = T.fmatrix('a'), T.fmatrix('b')
    return [a, b], a - b, [np.ones((1, 3), f32), np.ones((5, 3), f32)]


def _three_inputs():
    a, b, c = T.fvector('a'), T.fvector('b'), T.fvector('c')
    return [a, b, c], T.switch(a > 0, b, c) * 2, \
        [np.ones(4, f32), np.ones(1, f32), np.ones(4, f32)]


def _fused_into_sum():
    # the elementwise producer is computed inside the reduction's kernel (fusion)
    x, y = T.fmatrix('x'), T.fmatrix('y')
    return [x, y], T.sum(T.exp(x) * y, axis=1), \
        [np.ones((3, 1), f32), np.ones((3, 4), f32)]


def _epilogue():
    # a small product's consumer evaluated in the product's kernel (epilogue fusion)
    W, v, b = T.fmatrix('W'), T.fvector('v'), T.fvector('b')
    return [W, v, b], T.tanh(T.dot(W, v)) * b, \
        [np.ones((5, 4), f32), np.ones(4, f32), np.ones(1, f32)]


def _dot_inner():
    W, v = T.fmatrix('W'), T.fvector('v')
    return [W, v], T.dot(W, v), [np.ones((5, 4), f32), np.ones(1, f32)]


def _broadcastable_ok():
    # the legitimate broadcast: a row of a broadcastable type against a matrix
    r, m = T.frow('r'), T.fmatrix('m')
    return [r, m], r * m, [np.ones((1, 3), f32), np.full((5, 3), 2, f32)]


CASES = [_add_vec, _sub_mat, _bce, _three_inputs, _fused_into_sum, _epilogue, _dot_inner,
         _broadcastable_ok]


def _outcome(f, values):
    try:
        return 'value', np.asarray(f(*values))
    except Exception as e:      # noqa: BLE001 - the exception class is the outcome
        return 'error', type(e)


@pytest.mark.parametrize('case', CASES, ids=[c.__name__.strip('_') for c in CASES])
def test_mismatched_lengths_raise_as_under_c(case, monkeypatch):
    # epilogues are taken on GPUs by default: every device here
    setting(monkeypatch, 'epilogues', 'always')
    inputs, out, values = case()
    counter_c = theano.shared(np.int64(0), 'calls_c')
    counter_o = theano.shared(np.int64(0), 'calls_o')
    f_c = theano.function(inputs, out, updates={counter_c: counter_c + 1}, mode='FAST_RUN')
    f_o = theano.function(inputs, out, updates={counter_o: counter_o + 1},
                          mode=theano_ocl.OCLMode(host_tier='any'))
    sim = theano_ocl.SimulatorOCL(theano.function(inputs, out, mode='FAST_RUN'))
    calls = theano_ocl.stats(f_o)['host_tier']['after'] + 5
    for k in range(calls):
        want = _outcome(f_c, values)
        for who, fn in (('OCL', f_o), ('SimulatorOCL', sim)):
            got = _outcome(fn, values)
            assert got[0] == want[0], 'call %d (%s): Theano C gives %s, theano_ocl %s' % (
                k, who, want, got)
            if want[0] == 'error':
                assert issubclass(got[1], want[1]), 'call %d (%s): %s vs %s' % (
                    k, who, got[1], want[1])
            else:
                assert_close(got[1], want[1], what='call %d (%s)' % (k, who))
        # a failing call commits nothing: the counters move together
        assert int(counter_o.get_value()) == int(counter_c.get_value()), 'call %d' % k


def test_the_good_shapes_still_work_after_a_bad_call():
    inputs, out, bad = _add_vec()
    f_c, f_o = compile_both(inputs, out)
    good = [np.arange(4, dtype=f32), np.ones(4, f32)]
    for values in (good, bad, good, bad, good):
        want = _outcome(f_c, values)
        got = _outcome(f_o, values)
        assert got[0] == want[0]
        if want[0] == 'value':
            assert_close(got[1], want[1])
