"""Host outputs handed over without a copy on CPU devices (``runtime/steps.py``,
``handed_host_output``): from the second call of a frame, a large host output is the
frame's own host memory, handed to the caller, and the frame binds fresh memory for the
next call. Checked against Theano C through the public API: every array a call returned
keeps that call's values while later calls run (it is never written again), over dtypes,
shapes, a second output viewing the same buffer, a caller writing into what it got, and
``run_steps`` probes and plain calls of a simulator agreeing. On a GPU the outputs are
copied as before and the same must hold."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl import SimulatorOCL
from theano_ocl.runtime import steps

OFF = dict(cost_model='off')     # (on the device: the cost model would take small ones)


def _stepping(mode, shape, dtype):
    """A shared value ``x`` and a counter ``k``: each call returns ``f(x) + k`` (a new value
    every call, cast to ``dtype``; for integers and booleans computed exactly, so that
    both sides give the same bits) and increments ``k``."""
    rng = np.random.RandomState(5)
    x = theano.shared(rng.rand(*shape).astype('float32'), 'x')
    k = theano.shared(np.float32(0), 'k')
    if dtype.startswith('float'):
        y = T.cast(T.exp(x) * 3 + k, dtype)
    else:
        y = T.cast(T.floor(x * 100) - 50 + k, dtype)
    return theano.function([], y, updates=[(k, k + 1)], mode=mode)


@pytest.mark.parametrize('shape,dtype', [((230400,), 'float32'), ((64, 40, 30), 'float64'),
                                         ((300, 301), 'int32'), ((100000,), 'bool'),
                                         ((70000,), 'uint8')])
def test_each_call_hands_over_its_own_array(shape, dtype):
    f = _stepping(theano_ocl.OCLMode(**OFF), shape, dtype)
    g = _stepping('FAST_RUN', shape, dtype)
    assert np.dtype(dtype).itemsize * int(np.prod(shape)) >= steps.HANDED_MIN_BYTES
    got = [f() for _ in range(6)]
    want = [g() for _ in range(6)]
    for call, (a, b) in enumerate(zip(got, want)):     # nothing returned was written again
        assert a.dtype == b.dtype and a.shape == b.shape
        if dtype.startswith('float'):
            np.testing.assert_allclose(a, b, rtol=1e-6, err_msg='call %d' % call)
        else:
            np.testing.assert_array_equal(a, b, err_msg='call %d' % call)
    assert theano_ocl.stats(f)['on_host'] is False


def test_writing_into_what_a_call_returned_changes_no_later_call():
    f = _stepping(theano_ocl.OCLMode(**OFF), (100000,), 'float32')
    g = _stepping('FAST_RUN', (100000,), 'float32')
    for call in range(5):
        a, b = f(), g()
        np.testing.assert_allclose(a, b, rtol=1e-6, err_msg='call %d' % call)
        assert a.flags.writeable and a.flags.c_contiguous
        a[...] = -1


def test_an_output_and_its_view_are_both_read():
    """Two outputs over one buffer (the second a view of the first): neither is handed
    over alone, and both keep their call's values."""
    def build(mode):
        x = theano.shared(np.linspace(0, 1, 120000).astype('float32'), 'x')
        k = theano.shared(np.float32(0), 'k')
        y = T.exp(x) + k
        return theano.function([], [y, y.reshape((300, 400)).T],
                               updates=[(k, k + 1)], mode=mode)
    f, g = build(theano_ocl.OCLMode(**OFF)), build('FAST_RUN')
    got = [f() for _ in range(4)]
    want = [g() for _ in range(4)]
    for (a, at), (b, bt) in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
        np.testing.assert_allclose(at, bt, rtol=1e-6)


def test_run_steps_probes_agree_with_calls():
    """A simulator's probes of such an output (its passes hand nothing over) agree with
    plain calls of the same function, step by step, and with Theano C."""
    f = _stepping(theano_ocl.OCLMode(**OFF), (90000,), 'float32')
    g = _stepping('FAST_RUN', (90000,), 'float32')
    want = np.array([g() for _ in range(6)])
    sim = SimulatorOCL(f)
    k = [i.variable for i in f.maker.inputs if i.variable.name == 'k'][0]
    calls = np.array([sim() for _ in range(3)])
    probed = sim.run_steps(3, probes=[0])[0]
    np.testing.assert_allclose(calls, want[:3], rtol=1e-6)
    np.testing.assert_allclose(probed, want[3:], rtol=1e-6)
    k.set_value(np.float32(0))
    again = np.array([sim() for _ in range(6)])
    np.testing.assert_allclose(again, want, rtol=1e-6)
