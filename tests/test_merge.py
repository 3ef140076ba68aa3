"""Independent elementwise launches of one size run as one launch (the ``merge`` setting:
``runtime.planner.merge_frame``, ``ops/elemwise_merge.py``): the same results as each
launch apart, and as Theano C, over dtypes, broadcasting, strides and loops."""
import sys
import os

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from helpers import assert_close, rand

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'bench'))

DTYPES = ['bool', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32', 'int64',
          'float16', 'float32', 'float64']


def _mode(merge):
    # the cost model would run these small functions on Theano's VM on a CPU device
    return theano_ocl.OCLMode(merge=merge, cost_model='off')


def _outputs_of(dtype, x, y, z):
    """Independent elementwise outputs of one size (91 elements): x (7, 13), y (13,) a
    broadcast row, z (13, 7) read transposed, x read reversed."""
    if dtype == 'bool':
        return [T.and_(x, y), T.or_(x, z.T), T.xor(x[::-1], y), T.invert(z.T)]
    if dtype.startswith('float'):
        return [x * 2 + y, T.tanh(z.T) - 1, T.exp(x[::-1] * 0.25) * y,
                T.maximum(x, z.T), T.sqr(y) + 0 * x]
    return [x * 2 + y, z.T - 1, x[::-1] * 3, T.maximum(x, z.T), T.bitwise_and(x, y)]


@pytest.mark.parametrize('dtype', DTYPES)
def test_independent_launches_merge_with_the_results_of_separate_ones(dtype):
    x = T.matrix('x', dtype=dtype)
    y = T.vector('y', dtype=dtype)
    z = T.matrix('z', dtype=dtype)
    outs = _outputs_of(dtype, x, y, z)
    rng = np.random.RandomState(3)
    vals = [rand((7, 13), dtype, rng, 0, 5), rand((13,), dtype, rng, 0, 5),
            rand((13, 7), dtype, rng, 0, 5)]
    fs = {m: theano.function([x, y, z], outs, mode=_mode(m)) for m in (False, True)}
    c = theano.function([x, y, z], outs, mode='FAST_RUN')
    want = c(*vals)
    for _ in range(3):                   # the first call builds the frame, the next replay it
        got = {m: fs[m](*vals) for m in fs}
        for k, w in enumerate(want):
            assert got[True][k].dtype == w.dtype
            assert np.array_equal(got[True][k], got[False][k]), k
            assert_close(got[True][k], w, what='output %d' % k)
    merged, apart = theano_ocl.stats(fs[True]), theano_ocl.stats(fs[False])
    assert merged['launches'] < apart['launches'], (merged['launches'], apart['launches'])
    # a wrong shape fails where Theano C fails, and the function stays usable
    bad = [vals[0], rand((12,), dtype, rng, 0, 5), vals[2]]
    with pytest.raises(ValueError):
        c(*bad)
    with pytest.raises(ValueError):
        fs[True](*bad)
    for k, g in enumerate(fs[True](*vals)):
        assert np.array_equal(g, want[k]) or dtype.startswith('float')


def test_a_launch_reading_what_another_writes_runs_after_it():
    """A dependent launch is not merged with the one it reads from: results as apart."""
    x = T.matrix('x')
    a = T.tanh(x) * 2                  # one launch
    b = T.inc_subtensor(a[:, 1:3], 5)  # reads and writes a's buffer
    c = T.exp(x[::-1]) + 1            # independent of both
    vals = [rand((9, 6), 'float64')]
    want = theano.function([x], [a, b, c], mode='FAST_RUN')(*vals)
    f = theano.function([x], [a, b, c], mode=_mode(True))
    for _ in range(3):
        for g, w in zip(f(*vals), want):
            assert_close(g, w)


def test_zero_d_and_empty_operands():
    s = T.scalar('s')
    e = T.matrix('e')
    outs = [s * 2, T.exp(s), s - 1, e * 2, T.tanh(e)]
    vals = [np.asarray(0.7), np.zeros((0, 4))]
    want = theano.function([s, e], outs, mode='FAST_RUN')(*vals)
    fs = {m: theano.function([s, e], outs, mode=_mode(m)) for m in (False, True)}
    for _ in range(3):
        for m in fs:
            for g, w in zip(fs[m](*vals), want):
                assert g.shape == w.shape
                assert_close(g, w)
    launches = [theano_ocl.stats(fs[m])['launches'] for m in (True, False)]
    assert launches[0] < launches[1], launches


def test_updates_and_run_steps_agree_with_calls():
    """Shared variables updated by merged launches: calls, and run_steps, as apart."""
    from theano_ocl import SimulatorOCL
    x = T.vector('x')
    results = {}
    for merge in (False, True):
        a = theano.shared(np.linspace(-1, 1, 64), name='a')
        b = theano.shared(np.linspace(2, 3, 64), name='b')
        f = theano.function([x], [a.sum()], updates=[(a, T.tanh(a + x)), (b, b * 0.5 + x)],
                            mode=_mode(merge))
        xs = rand((6, 64), 'float64')
        outs = [f(v)[0] for v in xs]
        sim = SimulatorOCL(f)
        probes = sim.run_steps(6, inputs=[xs])
        sim.sync_to_theano()
        results[merge] = (outs, np.asarray(probes), a.get_value(), b.get_value())
    for k in range(4):
        assert np.array_equal(np.asarray(results[True][k]), np.asarray(results[False][k])), k
    # Theano C from the same start
    a = theano.shared(np.linspace(-1, 1, 64))
    b = theano.shared(np.linspace(2, 3, 64))
    g = theano.function([x], [a.sum()], updates=[(a, T.tanh(a + x)), (b, b * 0.5 + x)],
                        mode='FAST_RUN')
    c_outs = [g(v)[0] for v in xs]
    c_outs += [g(v)[0] for v in xs]
    assert_close(np.asarray(results[True][0] + list(results[True][1].ravel())),
                 np.asarray(c_outs))
    assert_close(results[True][2], a.get_value())
    assert_close(results[True][3], b.get_value())


def _lif_step(dtype, mode, E=200, N=100):
    """A Nengo LIF step (bench's nengo_compare): three updates of one size reading the
    voltage ``v1`` that the last of them overwrites in place (Theano's inplace pass), with
    constants broadcast over all of it; ``f(J) -> spikes``. At this size the arena hands
    the spikes a buffer the refractory time's launch reads last (smaller ones share a slab)."""
    F = np.dtype(dtype).type
    rng = np.random.RandomState(5)
    v = theano.shared(rand((E, N), dtype, rng, 0, 1), name='v')
    w = theano.shared(rand((E, N), dtype, rng, -0.002, 0.002), name='w')
    J = T.matrix('J', dtype=dtype)
    dt, tau, ref = F(0.001), F(0.02), F(0.002)
    w1 = w - dt
    v1 = v - (J - v) * T.expm1(-T.clip(dt - w1, F(0), dt) / tau)
    spiked = v1 > F(1)
    t_spike = dt + tau * T.log1p(-(v1 - F(1)) / (J - F(1)))
    s = T.cast(spiked, dtype) * F(1000)
    updates = [(v, T.switch(spiked, F(0), T.maximum(v1, F(0)))),
               (w, T.switch(spiked, ref + t_spike, w1))]
    return theano.function([J], s, updates=updates, mode=mode), (v, w), rng


@pytest.mark.parametrize('dtype', ['float16', 'float32', 'float64'])
def test_launches_writing_in_place_what_the_others_read_merge(dtype):
    """Writes after reads element for element (an update in place of a value the other
    launches read, a buffer the arena hands on) do not keep launches apart: the LIF step's
    three launches after the voltage's run as one, with the results of the launches apart
    (bit for bit), of Theano C, in calls and in run_steps."""
    from theano_ocl import SimulatorOCL
    got = {}
    for merge in (False, True, 'c'):
        f, state, rng = _lif_step(dtype, 'FAST_RUN' if merge == 'c' else _mode(merge))
        Js = [rand((200, 100), dtype, rng, 0.5, 3) for _ in range(8)]
        outs = [f(J) for J in Js[:4]]
        if merge != 'c':
            sim = SimulatorOCL(f)
            outs += list(sim.run_steps(4, inputs=[np.asarray(Js[4:])])[0])
            sim.sync_to_theano()
            got[merge, 'launches'] = theano_ocl.stats(f)['launches']
        else:
            outs += [f(J) for J in Js[4:]]
        got[merge] = [np.asarray(o) for o in outs] + [s.get_value() for s in state]
    for k, (a, b, c) in enumerate(zip(got[True], got[False], got['c'])):
        assert np.array_equal(a, b), k
        assert_close(a, c, what='output %d' % k)
    # apart: the voltage, the refractory time, the spikes, the voltage's update in place
    # (which the other three read, and which overwrites the first's value): one launch
    assert got[True, 'launches'] <= got[False, 'launches'] - 3, \
        (got[True, 'launches'], got[False, 'launches'])


@pytest.mark.parametrize('dtype', DTYPES)
def test_launches_reading_what_another_writes_element_for_element_merge(dtype):
    """A launch reading another's output at the elements it computes takes the value in
    the merged kernel (float16 apart: its store rounds); one reading it transposed or
    reversed runs after it. The same bits as apart, Theano C's results, fewer launches."""
    x = T.matrix('x', dtype=dtype)
    y = T.matrix('y', dtype=dtype)
    if dtype == 'bool':
        a = T.or_(x, y)
        outs = [a, T.and_(a, x), T.xor(a.T, y), T.and_(a[::-1], y), T.invert(a)]
    else:
        a = x + y
        outs = [a, a * x, a.T - y, a[::-1] * y, abs(a) + x * y]
    rng = np.random.RandomState(11)
    fs = {m: theano.function([x, y], outs, mode=theano_ocl.OCLMode(
        merge=m, fuse=False, cost_model='off')) for m in (False, True)}
    f_c = theano.function([x, y], outs, mode='FAST_RUN')
    for _ in range(4):
        # new values each call: a value left in a buffer by the last call would not do
        vals = [rand((9, 9), dtype, rng, 0, 5), rand((9, 9), dtype, rng, 0, 5)]
        want = f_c(*vals)
        got = {m: fs[m](*vals) for m in fs}
        for k, w in enumerate(want):
            assert np.array_equal(got[True][k], got[False][k]), k
            assert_close(got[True][k], w, what='output %d' % k)
    merged, apart = (theano_ocl.stats(fs[m])['launches'] for m in (True, False))
    assert merged < apart, (merged, apart)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_an_lstm_gradient_step_merges_its_gates_and_trains_as_apart(dtype):
    """bench/lstm.py's training step (a scan and its gradient, a device Scan each): the
    gradient's step makes fewer launches, and the losses and parameters are the same
    bits as with each launch apart, and Theano C's within tolerance."""
    import lstm
    X, y = lstm.make_data(6, 4, 3, dtype=dtype)
    runs = {}
    for name, mode in (('c', 'FAST_RUN'), (False, _mode(False)), (True, _mode(True))):
        train, params = lstm.build_lstm(mode, 3, 5, dtype=dtype)
        losses = [float(train(X, y)) for _ in range(4)]
        runs[name] = (losses, [p.get_value() for p in params], train)
    merged, apart, c = runs[True], runs[False], runs['c']
    assert merged[0] == apart[0]
    for p, q, r in zip(merged[1], apart[1], c[1]):
        assert np.array_equal(p, q)
        assert_close(p, r, rtol=1e-4 if dtype == 'float32' else 1e-10)
    assert_close(np.asarray(merged[0]), np.asarray(c[0]), rtol=1e-4 if dtype == 'float32' else 1e-10)
    per_step = [s['launches_per_step'] for s in theano_ocl.stats(merged[2])['scans']]
    apart_step = [s['launches_per_step'] for s in theano_ocl.stats(apart[2])['scans']]
    assert per_step[-1] < apart_step[-1], (per_step, apart_step)


@pytest.mark.parametrize('why', ['arguments', 'build'])
def test_launches_that_cannot_merge_run_apart(why, monkeypatch):
    """Launches whose merged kernel would take more argument bytes than the device takes,
    or whose merged kernel does not build (a defect, said in a warning), run apart, with
    the same results."""
    from theano_ocl.ops import elemwise_merge
    x = T.matrix('x')
    outs = [x * 2, T.tanh(x), T.exp(x[::-1])]
    vals = [rand((5, 8), 'float64')]
    if why == 'arguments':
        monkeypatch.setattr(elemwise_merge, '_parameter_bytes', lambda dev: 64)
    else:
        real = elemwise_merge.merged_source

        def broken(*a):
            src, name = real(*a)
            return src.replace('const long gi', 'const long gi = nonsense;', 1), name
        monkeypatch.setattr(elemwise_merge, 'merged_source', broken)
    apart = theano.function([x], outs, mode=_mode(False))
    f = theano.function([x], outs, mode=_mode(True))
    want = theano.function([x], outs, mode='FAST_RUN')(*vals)
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for _ in range(3):
            for g, w in zip(f(*vals), want):
                assert_close(g, w)
            apart(*vals)
    said = [str(c.message) for c in caught if 'merged elementwise kernel' in str(c.message)]
    assert bool(said) == (why == 'build'), said
    assert theano_ocl.stats(f)['launches'] == theano_ocl.stats(apart)['launches']
