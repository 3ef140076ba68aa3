"""A device Scan's steps run by the runtime's loop driver (ops/scan_lower.py,
runtime/loop.py): the steps after a run's first are one declared loop over the inner
frame, not a pass of the inner function each. Observed through ``theano_ocl.stats(f)``
(``scans``), against Theano C: every step's values, a bad index at a chosen step (the
error where Theano raises it, the function usable after), loops with an ``until``
condition (stopping at their first step, in the middle, at the last, never).
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


def _until_scan(dtype):
    """A scan whose ``until`` condition reads a sequence value (``stop``) and a state
    (``acc`` past ``lim``): a mit-sot with taps -3 and -1, a sit-sot of which only the
    last value is used, a nit-sot, and two shared variables updated each step (one an
    integer count)."""
    x = T.matrix('x', dtype=dtype)
    stop = T.bvector('stop')
    lim = T.scalar('lim', dtype=dtype)
    y0 = T.matrix('y0', dtype=dtype)
    c = np.asarray(2 if dtype.startswith('int') else 0.5, dtype)
    tot = theano.shared(np.zeros(3, dtype), name='tot')
    hits = theano.shared(np.zeros(3, 'int64'), name='hits')

    def step(v, s, ym3, ym1, acc):
        new = acc + v.sum()
        return ([ym1 - ym3 * c + v, new, v * c],
                {tot: tot + v * c, hits: hits + T.cast(v > c, 'int64')},
                theano.scan_module.until((s > 0) | (new > lim)))
    (ys, accs, dbl), upd = theano.scan(step, sequences=[x, stop], outputs_info=[
        dict(initial=y0, taps=[-3, -1]), T.zeros_like(lim), None])
    return [x, stop, lim, y0], [ys, ys[-1], accs[-1], dbl, accs.shape[0]], upd, [tot, hits]


def _until_args(rng, dtype, n, where):
    """Arguments stopping the loop of ``_until_scan`` at step ``where`` (by the sequence
    value; None: never), and by the state once ``where == 'state'``; the expected steps."""
    if dtype.startswith('int'):
        x = rng.randint(0, 4, (n, 3)).astype(dtype)
        y0 = rng.randint(-3, 4, (3, 3)).astype(dtype)
    else:
        x = rng.uniform(0, 1, (n, 3)).astype(dtype)
        y0 = rng.uniform(-1, 1, (3, 3)).astype(dtype)
    stop = np.zeros(n, 'int8')
    lim = np.asarray(10 ** 6, dtype)
    if where == 'state':
        sums = np.cumsum(x.sum(axis=1), dtype=dtype)
        k = n // 2
        lim = np.asarray((sums[k - 1] + sums[k]) / 2, dtype)
        if not sums[k - 1] < lim < sums[k]:        # (ties of an integer sequence)
            lim = np.asarray(sums[k - 1], dtype)
        k = int(np.argmax(sums > lim))
    elif where is not None:
        stop[where] = 1
        k = where
    else:
        k = n - 1
    return [x, stop, lim, y0], k + 1


@pytest.mark.parametrize('masked', [False, True])
@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int64'])
def test_until_loops_run_by_the_driver(dtype, masked, monkeypatch):
    """An ``until`` loop (ops/scan_lower.py: the stop flag counted on the device, read
    every step in the run that plans the node, else every few steps; writes past the stop
    masked or cut): stopping at step 0, in the middle, at the last step, never, and by
    its state, in an order that re-plans, replays and switches frames. Each call's
    outputs (cut to the steps done), its number of steps and the shared variables'
    updates equal Theano C's; the steps after the first ran in the driver. ``masked``:
    every output written by the kernels masked by the stop flag (as a circular buffer's
    slots are), not only those a later step would write again."""
    if masked:
        from theano_ocl.ops import scan_lower
        monkeypatch.setattr(scan_lower, '_reached_again', lambda *a: True)
    ins, outs, upd, shared = _until_scan(dtype)
    f_c, f_o = compile_both(ins, outs, updates=upd)
    rng = np.random.RandomState(7)
    n = 12
    for where in [None, 5, 5, 0, n - 1, None, 'state', 'state', 0, 5, n - 1, 3, 3, 0, 0]:
        args, steps = _until_args(rng, dtype, n, where)
        start = [rng.randint(-3, 4, 3).astype(dtype), rng.randint(0, 9, 3).astype('int64')]
        for v, s0 in zip(shared, start):
            v.set_value(s0)
        want = f_c(*args)
        want_sh = [v.get_value() for v in shared]
        for v, s0 in zip(shared, start):
            v.set_value(s0)
        got = f_o(*args)
        what = 'stop at %s' % (where,)
        assert int(want[-1]) == steps, (what, want[-1], steps)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, what='%s, output %d' % (what, k))
        for v, w in zip(shared, want_sh):
            assert_close(v.get_value(), w, what='%s, %s' % (what, v.name))
        s, = theano_ocl.stats(f_o)['scans']
        assert s['steps'] == steps, (what, s)
        assert s['lowered_steps'] == steps - 1, (what, s)
        if steps > 1:
            assert s['launches_per_step'] >= 2, (what, s)   # (the stop flag's one of them)


def test_until_loop_stats_report_lowered_steps():
    """``theano_ocl.stats(f)['scans']`` of an until loop: its steps (as Theano counts
    them), the steps after the first run by the driver, its launches per step; on the
    call that plans it and on the replays, stopping earlier and later."""
    x = T.vector('x')
    lim = T.scalar('lim')

    def step(h, x):
        h2 = h * 2 + x
        return h2, theano.scan_module.until(T.gt(h2.sum(), lim))
    hs, _ = theano.scan(step, outputs_info=T.zeros_like(x), non_sequences=x, n_steps=200)
    f_c, f_o = compile_both([x, lim], hs)
    v = np.ones(3)
    for limit in (50, 50, 1e5, 1e300, 50, 0, 1e300):
        want = f_c(v, limit)
        assert_close(f_o(v, limit), want, what='lim %s' % limit)
        s, = theano_ocl.stats(f_o)['scans']
        assert s['steps'] == len(want), (limit, s)
        assert s['lowered_steps'] == len(want) - 1, (limit, s)
        if len(want) > 1:
            assert s['lowered_steps'] > 0 and s['launches_per_step'] >= 1, (limit, s)
            assert s['loop_s'] > 0, (limit, s)


@pytest.mark.parametrize('cond', ['device', 'host'])
def test_until_loop_bad_index_before_and_after_the_stop(cond):
    """An index out of bounds at a step before the stop raises IndexError, as Theano C; one
    at a step past it does not (a condition computed on the device: the lowered loop ran
    that step before it read the stop flag, then the run went again as passes reading it
    every step; on the host, from the index: read every step): the values equal Theano
    C's, and the next calls run through the driver again."""
    idx = T.lvector('idx')
    E = T.matrix('E')
    h0 = T.vector('h0')

    def step(i, h, E):
        h2 = T.tanh(E[i] + h)
        stop = T.eq(i, 0)
        if cond == 'device':
            stop = stop | T.gt(h2.sum(), 1e9)
        return h2, theano.scan_module.until(stop)
    hs, _ = theano.scan(step, sequences=idx, outputs_info=h0, non_sequences=E)
    f_c, f_o = compile_both([idx, E, h0], [hs, hs[-1]])
    rng = np.random.RandomState(3)
    e = rng.uniform(-1, 1, (5, 4))
    h = rng.uniform(-1, 1, 4)
    for bad_at in (None, 6, 2, 6, None, 7):
        good = rng.randint(1, 5, 20)
        good[4] = 0      # stops after 5 steps (a replay reads the flag after 4, then 8)
        if bad_at is not None:
            good[bad_at] = 50
        if bad_at is not None and bad_at < 5:
            with pytest.raises(IndexError):
                f_c(good, e, h)
            with pytest.raises(IndexError):
                f_o(good, e, h)
            continue
        for k, (g, w) in enumerate(zip(f_o(good, e, h), f_c(good, e, h))):
            assert_close(g, w, what='bad index at %s, output %d' % (bad_at, k))
        s, = theano_ocl.stats(f_o)['scans']
        assert s['steps'] == 5, s
        if bad_at is None:
            assert s['lowered_steps'] == 4, s


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_gradient_through_an_until_loop(dtype):
    """The gradient of a cost through an until loop, whatever Theano makes of it: both
    loops on the device (the forward one lowered with its stop flag), values as Theano
    C's for several stopping steps."""
    x = T.vector('x', dtype=dtype)
    lim = T.scalar('lim', dtype=dtype)

    def step(v, acc):
        new = acc + v
        return new, theano.scan_module.until(new > lim)
    accs, _ = theano.scan(step, sequences=x, outputs_info=T.zeros_like(lim))
    try:
        g = theano.grad((accs ** 2).sum(), x)
    except Exception as e:                  # pragma: no cover - Theano's own limit
        pytest.skip('Theano does not differentiate this until loop: %s' % e)
    f_c, f_o = compile_both([x, lim], [accs, g])
    rng = np.random.RandomState(5)
    tol = 1e-5 if dtype == 'float32' else 1e-10
    xv = rng.uniform(0, 1, 30).astype(dtype)
    sums = np.cumsum(xv)
    mid = (sums[:-1] + sums[1:]) / 2        # (stops at step k + 1: mid[k])
    for limit in (mid[9], -1, mid[2], mid[9], mid[27]):
        limit = np.asarray(limit, dtype)
        for k, (got, want) in enumerate(zip(f_o(xv, limit), f_c(xv, limit))):
            assert_close(got, want, rtol=tol, atol=tol, what='lim %s, output %d' % (limit, k))
    assert any(s['lowered_steps'] > 0 for s in theano_ocl.stats(f_o)['scans'])
    # a loop that runs all its steps: Theano's gradient allocates -1 rows; Theano C fails
    # to allocate them (MemoryError), the device says why (numpy's ValueError), both at
    # the Alloc node
    for f, kind in ((f_c, MemoryError), (f_o, ValueError)):
        with pytest.raises(kind) as info:
            f(xv, np.asarray(sums[-1] + 1, dtype))
        assert 'Apply node that caused the error: Alloc' in str(info.value)
    limit = np.asarray(mid[4], dtype)               # and the function goes on
    for got, want in zip(f_o(xv, limit), f_c(xv, limit)):
        assert_close(got, want, rtol=tol, atol=tol, what='after the error')



@pytest.mark.parametrize('until', [False, True])
@pytest.mark.parametrize('counter', ['int64', 'int32'])
def test_states_computed_on_the_host_run_in_the_driver(counter, until):
    """States the inner function computes and reads on the host (integer counters: a
    one-deep count, a Fibonacci pair with taps -2 and -1 whose whole sequence is an
    output, a shared variable's count) beside a device state, with and without an
    ``until`` condition on a counter: each call's outputs and updates equal Theano C's,
    and every step after the first ran in the driver, fed from and written into the run's
    host buffers (before, every step was a pass of the inner function)."""
    x = T.vector('x')
    k = T.scalar('k', dtype=counter)
    hits = theano.shared(np.asarray(0, counter), name='hits')
    one = np.asarray(1, counter)

    def step(f2, f1, c, h, x, k):
        c2 = c + one
        h2 = T.tanh(h * 0.9 + x)
        outs = [f1 + f2, c2, h2]
        upd = {hits: hits + T.cast(c2 > 2, counter)}
        if until:
            return outs, upd, theano.scan_module.until(c2 >= k)
        return outs, upd
    (fib, cs, hs), upd = theano.scan(step, outputs_info=[
        dict(initial=T.as_tensor_variable(np.asarray([0, 1], counter)), taps=[-2, -1]),
        T.constant(np.asarray(0, counter)), T.zeros_like(x)],
        non_sequences=[x, k], n_steps=12)
    f_c, f_o = compile_both([x, k], [fib, cs[-1], hs, hs[-1]], updates=upd)
    v = np.linspace(-1, 1, 5)
    for limit in (5, 1, 12, 40, 5, 7):
        hits.set_value(np.asarray(3, counter))
        want = f_c(v, limit)
        want_hits = hits.get_value()
        hits.set_value(np.asarray(3, counter))
        got = f_o(v, limit)
        steps = min(limit, 12) if until else 12
        assert len(want[0]) == steps, (limit, len(want[0]))
        for j, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, what='limit %d, output %d' % (limit, j))
        assert_close(hits.get_value(), want_hits, what='limit %d, hits' % limit)
        s, = theano_ocl.stats(f_o)['scans']
        assert s['steps'] == steps, (limit, s)
        assert s['lowered_steps'] == steps - 1, (limit, s)
