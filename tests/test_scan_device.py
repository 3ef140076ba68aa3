"""Scan on the device (ops/scan.py) against Theano C (its Python loop, what the start-up
hook gives on Python 3.11): sequences with taps, mit-sot/sit-sot/nit-sot, non-sequences,
symbolic n_steps, go_backwards, shared variables updated inside, the gradient (mit-mot),
truncate_gradient, until, nested scans, MRG streams inside, and a small LSTM trained by SGD.
"""
import io
import os
import sys

import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.sandbox.rng_mrg import MRG_RandomStreams
from theano.scan_module.scan_op import Scan

import theano_ocl
from helpers import assert_close, compile_both, setting

DTYPES = ['float32', 'float64']


def scan_tasks(f):
    """The linked Scan nodes of ``f`` and where each runs."""
    return [(node, where) for node, where, _ in theano_ocl.placements(f)
            if isinstance(node.op, Scan)]


def on_device(f):
    rows = scan_tasks(f)
    assert rows, 'no Scan node in the graph'
    assert all(where == 'device' for _, where in rows), rows
    assert not theano_ocl.fallback_nodes(f), [str(n) for n in theano_ocl.fallback_nodes(f)]
    from theano_ocl.report import inner_functions
    for node, inner in inner_functions(f):        # the nodes inside each device Scan too
        assert not theano_ocl.fallback_nodes(inner), (
            node, [str(n) for n in theano_ocl.fallback_nodes(inner)])


def compare(inputs, outputs, calls, updates=None, rtol=None, atol=None, device=True):
    """Compile under C and OCL; for each argument list in ``calls``, compare the outputs
    (and the shared variables ``updates`` change, after each call). Returns the OCL
    function and the list of disagreements (empty when every value matched)."""
    shared = [v for v, _ in (updates or {}).items()] if isinstance(updates, dict) else \
        [v for v, _ in (updates or [])]
    start = [s.get_value() for s in shared]
    f_c, f_o = compile_both(inputs, outputs, updates=updates)
    if device:
        on_device(f_o)
    want_sh = []
    want = []
    for s, v in zip(shared, start):
        s.set_value(v)
    for args in calls:
        want.append(f_c(*args))
        want_sh.append([s.get_value() for s in shared])
    for s, v in zip(shared, start):
        s.set_value(v)
    failures = []

    def check(a, b, what):
        try:
            assert_close(a, b, rtol=rtol, atol=atol, what=what)
        except AssertionError as e:
            failures.append(str(e))
    for c, (args, w, wsh) in enumerate(zip(calls, want, want_sh)):
        g = f_o(*args)
        if len(g) != len(w):
            failures.append('call %d: %d outputs, Theano C gives %d' % (c, len(g), len(w)))
        for k, (a, b) in enumerate(zip(g, w)):
            check(a, b, 'call %d, output %d' % (c, k))
        for k, (s, b) in enumerate(zip(shared, wsh)):
            check(s.get_value(), b, 'call %d, shared %d' % (c, k))
    return f_o, failures


@pytest.mark.parametrize('dtype', DTYPES)
def test_taps_states_and_non_sequences(dtype):
    # sequence taps -2, 0, 1; a mit-sot with taps -3, -1; a sit-sot; a nit-sot; W fixed
    x = T.matrix('x', dtype=dtype)
    y0 = T.matrix('y0', dtype=dtype)
    s0 = T.vector('s0', dtype=dtype)

    def c(v):
        return np.asarray(v, dtype)
    W = T.matrix('W', dtype=dtype)

    def step(xm2, x0, xp1, ym3, ym1, s, W):
        y = T.tanh(T.dot(x0, W) + xm2 - c(0.5) * xp1) + c(0.3) * ym3 - c(0.2) * ym1
        return y, s + y * x0, (y * s).sum()

    (ys, ss, zs), _ = theano.scan(
        step, sequences=dict(input=x, taps=[-2, 0, 1]),
        outputs_info=[dict(initial=y0, taps=[-3, -1]), s0, None], non_sequences=W)
    rng = np.random.RandomState(1)
    n = 5
    calls = []
    for T_ in (9, 4, 9):      # a second length re-plans; back to the first one replays
        calls.append([rng.uniform(-1, 1, (T_, n)).astype(dtype),
                      rng.uniform(-1, 1, (3, n)).astype(dtype),
                      rng.uniform(-1, 1, n).astype(dtype),
                      rng.uniform(-1, 1, (n, n)).astype(dtype)])
    _, failures = compare([x, y0, s0, W], [ys, ss, zs, ys[-1]], calls)
    assert not failures, failures


@pytest.mark.parametrize('dtype', DTYPES)
def test_n_steps_go_backwards_one_step(dtype):
    x = T.vector('x', dtype=dtype)
    a = T.scalar('a', dtype=dtype)
    k = T.iscalar('k')
    back, _ = theano.scan(lambda v, acc: acc * np.asarray(0.5, dtype) + v, sequences=x, outputs_info=a,
                          go_backwards=True)
    powers, _ = theano.scan(lambda p: p * a, outputs_info=T.ones_like(a), n_steps=k)
    xv = np.arange(1, 8).astype(dtype)
    _, failures = compare([x, a, k], [back, powers],
            [[xv, np.asarray(1.5, dtype), 6], [xv[:1], np.asarray(-2, dtype), 1],
             [xv[:3], np.asarray(0.5, dtype), 3]])
    assert not failures, failures


def test_zero_steps_and_wrong_shapes_raise_as_theano():
    x = T.matrix('x')
    h0 = T.vector('h0')
    W = T.matrix('W')
    k = T.iscalar('k')
    hs, _ = theano.scan(lambda v, h, W: T.tanh(v + T.dot(h, W)), sequences=x,
                        outputs_info=h0, non_sequences=W, n_steps=k)
    f_c, f_o = compile_both([x, h0, W, k], hs)
    on_device(f_o)
    rng = np.random.RandomState(3)
    good = [rng.rand(4, 3), rng.rand(3), rng.rand(3, 3)]
    assert_close(f_o(*good, 4), f_c(*good, 4))
    for args in ([good[0], good[1], good[2], 0],                   # zero steps
                 [good[0], rng.rand(2), good[2], 4],               # state of the wrong size
                 [good[0], good[1], rng.rand(3, 2), 4],            # output shape changes
                 [good[0], good[1], good[2], -1]):                 # negative n_steps
        errors = []
        for f in (f_c, f_o):
            with pytest.raises(Exception) as e:
                f(*args)
            errors.append(type(e.value))
        assert errors[1] is errors[0] or issubclass(errors[1], errors[0]), (args[3], errors)
    assert_close(f_o(*good, 2), f_c(*good, 2))        # still good after the errors


@pytest.mark.parametrize('dtype', DTYPES)
def test_shared_variable_updated_inside(dtype):
    rng = np.random.RandomState(4)
    acc = theano.shared(rng.rand(3).astype(dtype), name='acc')
    count = theano.shared(np.int64(0), name='count')
    x = T.matrix('x', dtype=dtype)

    def step(v):
        return (v * acc).sum(), {acc: acc * np.asarray(0.9, dtype) + v, count: count + 1}
    outs, upd = theano.scan(step, sequences=x)
    _, failures = compare([x], [outs], [[rng.rand(5, 3).astype(dtype)], [rng.rand(2, 3).astype(dtype)]],
            updates=upd)
    assert not failures, failures


@pytest.mark.parametrize('dtype', DTYPES)
def test_gradient_mit_mot_and_truncate_gradient(dtype):
    x = T.matrix('x', dtype=dtype)
    y0 = T.matrix('y0', dtype=dtype)
    W = T.matrix('W', dtype=dtype)

    def step(v, ym2, ym1, W):
        return T.tanh(T.dot(ym1, W) + v) - np.asarray(0.5, dtype) * ym2
    ys, _ = theano.scan(step, sequences=x, outputs_info=dict(initial=y0, taps=[-2, -1]),
                        non_sequences=W)
    ts, _ = theano.scan(lambda v, h, W: T.tanh(T.dot(h, W) + v), sequences=x,
                        outputs_info=y0[0], non_sequences=W, truncate_gradient=3)
    cost = (ys ** 2).sum() + (ts ** 3).sum()
    grads = T.grad(cost, [x, y0, W])
    rng = np.random.RandomState(5)
    n = 4
    args = [rng.uniform(-1, 1, (7, n)).astype(dtype), rng.uniform(-1, 1, (2, n)).astype(dtype),
            rng.uniform(-1, 1, (n, n)).astype(dtype)]
    f, failures = compare([x, y0, W], [cost] + grads, [args],
                rtol=1e-4 if dtype == 'float32' else None,
                atol=1e-5 if dtype == 'float32' else None)
    assert not failures, failures
    assert len(scan_tasks(f)) >= 3       # forward scans and their gradient scans
    assert any(n.op.n_mit_mot for n, _ in scan_tasks(f))


def test_until_condition_read_every_few_steps(monkeypatch):
    x = T.vector('x')
    lim = T.scalar('lim')

    def step(v, acc):
        new = acc + v
        return [new, new * 2], theano.scan_module.until(new > lim)
    (sums, dbl), _ = theano.scan(step, sequences=x, outputs_info=[T.zeros_like(lim), None])
    xv = np.arange(1, 301).astype('float64')
    # stops after 5 steps (twice: planned, then replayed), 8, never, 100, at once
    limits = [10, 10, 30, 1e9, 5000, 5000, 0.5]
    f, failures = compare([x, lim], [sums, dbl, sums.shape[0]], [[xv, np.float64(v)] for v in limits])
    assert not failures, failures
    # a replay reads the device's stop flag after 4, 8, 16, ... steps, not at every step
    # (the call after 0.5 runs the frame planned for 100 steps: an alternate of its key)
    assert f(xv, np.float64(5000))[2] == 100
    from theano_ocl.ops import scan as scan_family
    reads = []
    real = scan_family.download
    monkeypatch.setattr(scan_family, 'download', lambda *a: reads.append(1) or real(*a))
    assert f(xv, np.float64(5000))[2] == 100
    assert 1 <= len(reads) <= 6, len(reads)


@pytest.mark.parametrize('dtype', DTYPES)
def test_until_stopping_elsewhere_from_call_to_call(dtype):
    # a frame per number of steps, kept as alternates of one key: calls whose until
    # condition alternates between two stopping steps plan no more frames, and each runs
    # the loop once (the frame planned for those steps takes the run's results); a
    # mit-sot with taps -3, -1 and its last value only (a circular buffer put in order)
    x = T.vector('x', dtype=dtype)
    lim = T.scalar('lim', dtype=dtype)
    y0 = T.vector('y0', dtype=dtype)
    c = np.asarray(0.5, dtype)

    def step(v, ym3, ym1, acc):
        new = acc + v
        return [ym3 * c + new, new, new * 2], theano.scan_module.until(new > lim)
    (ys, sums, dbl), _ = theano.scan(step, sequences=x, outputs_info=[
        dict(initial=y0, taps=[-3, -1]), T.zeros_like(lim), None])
    xv = np.arange(1, 41).astype(dtype)
    y0v = np.asarray([1, -2, 3], dtype)
    # stops after 4, 8, 4, 8, ...; then after 2, 13, 27, 40 (more than the VM keeps)
    limits = [6, 30, 6, 30, 6, 30, 2, 80, 350, 6, 1e9, 30, 6, 30]
    f, failures = compare([x, y0, lim], [ys, ys[-1], sums[-1], dbl, sums.shape[0]],
                          [[xv, y0v, np.asarray(v, dtype)] for v in limits])
    assert not failures, failures
    plans = theano_ocl.stats(f)['replans']
    calls = []
    passes = []         # steps run as passes of the inner function, per call
    for v in (6, 30) * 4:
        calls.append(f(xv, y0v, np.asarray(v, dtype))[-1])
        scan, = theano_ocl.stats(f)['scans']
        assert scan['steps'] == calls[-1], scan
        passes.append(scan['steps'] - scan['lowered_steps'])
    assert calls == [4, 8] * 4
    assert theano_ocl.stats(f)['replans'] == plans, (plans, theano_ocl.stats(f))
    # (one pass a call: its first step; the steps after it run by the loop driver)
    assert passes == [1] * 8, passes


def test_nested_scans():
    X = T.tensor3('X')
    W = T.matrix('W')

    def outer(m, acc, W):
        rows, _ = theano.scan(lambda r, h, W: T.tanh(T.dot(h, W) + r), sequences=m,
                              outputs_info=acc, non_sequences=W)
        return rows[-1]
    res, _ = theano.scan(outer, sequences=X, outputs_info=T.zeros_like(X[0, 0]),
                         non_sequences=W)
    rng = np.random.RandomState(7)
    f, failures = compare([X, W], [res, T.grad(res.sum(), W)],
                [[rng.uniform(-1, 1, (3, 4, 5)), rng.uniform(-1, 1, (5, 5))]])
    assert not failures, failures
    out = io.StringIO()
    theano_ocl.report(f, file=out)
    assert out.getvalue().count('inner of') >= 2      # the inner Scan listed, and its inner


def test_mrg_random_streams_inside():
    srng = MRG_RandomStreams(seed=123)
    x = T.matrix('x')

    def step(v):
        return v * srng.uniform(v.shape)
    outs, upd = theano.scan(step, sequences=x)
    rng = np.random.RandomState(8)
    _, failures = compare([x], [outs], [[rng.rand(4, 6)], [rng.rand(4, 6)]], updates=upd)
    assert not failures, failures


def test_device_outputs_viewing_one_buffer():
    # runtime/steps.donate_output: a scan gradient's inner function returns ViewOp(m) and
    # m.dimshuffle('x', 0); handing m's buffer to the first left the second reading a fresh one
    a = T.vector('a')
    b = T.vector('b')
    m = a * b
    f = theano.function([a, b], [theano.Out(m, borrow=True),
                                 theano.Out(m.dimshuffle('x', 0), borrow=True)],
                        mode=theano_ocl.OCLMode(outputs='device'))
    av, bv = np.arange(1, 4.), np.arange(3.)
    for _ in range(2):
        one, two = [o.get() for o in f(av, bv)]
        assert_close(one, av * bv)
        assert_close(two, (av * bv)[None])


def test_profiled_function_and_pickle():
    # a profiled function plans on its own queue: the loop waits for it, and it for the loop
    import pickle
    x = T.matrix('x')
    W = T.matrix('W')
    hs, _ = theano.scan(lambda v, h, W: T.tanh(v + T.dot(h, W)), sequences=x[::-1],
                        outputs_info=x[0], non_sequences=W)
    rng = np.random.RandomState(10)
    args = [rng.rand(6, 3), rng.rand(3, 3)]
    want = theano.function([x, W], hs, mode='FAST_RUN')(*args)
    f = theano.function([x, W], hs, mode=theano_ocl.OCLMode(), profile=True)
    on_device(f)
    for _ in range(2):
        assert_close(f(*args), want)
    g = pickle.loads(pickle.dumps(theano.function([x, W], hs, mode='OCL')))
    on_device(g)
    assert_close(g(*args), want)


def test_profile_flag_summary_with_a_device_scan():
    """Under Theano's ``profile`` flag the inner function has a Scan profile, as Theano's
    Scan gives it (its summary of the outer function reads the loop's call time): the
    summary prints, counting the loop's runs and steps."""
    x = T.matrix('x')
    W = T.matrix('W')
    hs, _ = theano.scan(lambda v, h, W: T.tanh(v + T.dot(h, W)), sequences=x,
                        outputs_info=x[0], non_sequences=W)
    with theano.configparser.change_flags(profile=True):
        f = theano.function([x, W], hs, mode='OCL')
    on_device(f)
    rng = np.random.RandomState(2)
    for n in (5, 7):
        f(rng.rand(n, 3), rng.rand(3, 3))
    from theano_ocl.report import inner_functions
    (node, inner), = inner_functions(f)
    assert (inner.profile.callcount, inner.profile.nbsteps) == (2, 12)
    # both calls planned a frame (new shapes): the node's time holds their loops, which
    # the inner profile's call time measures inside it (Theano's "Scan overhead" <= 100%)
    assert f.profile.apply_time[node] >= inner.profile.call_time > 0, (
        f.profile.apply_time[node], inner.profile.call_time)
    text = io.StringIO()
    f.profile.summary(file=text)
    assert 'Scan overhead' in text.getvalue()


def test_scans_that_stay_on_the_host_say_why():
    A = T.vector('A')
    k = T.iscalar('k')
    seen = []
    mode = theano.compile.MonitorMode(post_func=lambda i, node, fn: seen.append(node))
    res, _ = theano.scan(lambda p, A: p * A, outputs_info=T.ones_like(A), non_sequences=A,
                         n_steps=k, mode=mode)
    # int8 states added on the host, compared with a float on the device each step
    lim = T.scalar('lim')
    (vals, steps), _ = theano.scan(
        lambda v, s: ([v + s, s + 1], theano.scan_module.until(v + s > lim)),
        outputs_info=[0, 0], n_steps=k)
    f, failures = compare([A, k, lim], [res[-1], vals, steps],
                [[np.arange(1, 5.), 4, np.float64(20)], [np.arange(1, 5.), 3, np.float64(5)]],
                device=False)
    assert not failures, failures
    assert seen                                  # MonitorMode's linker ran the inner nodes
    rows = [(where, impl) for node, where, impl in theano_ocl.placements(f)
            if isinstance(node.op, Scan)]
    assert [where for where, _ in rows] == ['host-fallback'] * 2, rows
    text = ' '.join(impl for _, impl in rows)
    assert 'theano.scan(mode=...) asks for the WrapLinker linker' in text, text
    assert 'on the host at every step' in text, text


@pytest.mark.parametrize('dtype', DTYPES)
def test_inner_host_fallback_reading_a_sequence_keeps_the_loop_on_the_device(dtype):
    """An inner op without device code that reads a sequence row (MatrixInverse) falls back
    inside the device loop, its rows read from a host copy of the sequence taken once per
    run; the Scan itself stays on the device, and a value read on the host at every step
    that decides the inner plan still keeps a Scan on the host (test above)."""
    from theano.tensor import nlinalg
    from theano_ocl.report import inner_functions
    x = T.tensor3('x', dtype=dtype)
    W = T.matrix('W', dtype=dtype)

    def step(m, acc, W):
        return acc + T.dot(nlinalg.matrix_inverse(m), W)
    out, _ = theano.scan(step, sequences=x, outputs_info=T.zeros_like(W), non_sequences=W)
    rng = np.random.RandomState(8)
    calls = [[(rng.rand(n, 3, 3) + 3 * np.eye(3)).astype(dtype), rng.rand(3, 3).astype(dtype)]
             for n in (5, 1, 5)]
    f, failures = compare([x, W], [out, out[-1]], calls, device=False,
                          rtol=1e-5 if dtype == 'float32' else None)
    assert not failures, failures
    assert [where for _, where in scan_tasks(f)] == ['device'], scan_tasks(f)
    inner = [type(n.op).__name__ for _, fn in inner_functions(f)
             for n in theano_ocl.fallback_nodes(fn)]
    assert inner == ['MatrixInverse'], inner


@pytest.mark.parametrize('dtype', DTYPES)
def test_sequence_element_as_an_index(dtype):
    """A sequence element indexing a non-sequence (an embedding lookup), with the gradient:
    the index is read on the host at every step without deciding the inner plan, so the
    Scan and its gradient run on the device, every index value through one plan."""
    from theano_ocl.report import inner_functions
    idx = T.lvector('idx')
    E = T.matrix('E', dtype=dtype)
    h0 = T.vector('h0', dtype=dtype)

    def step(i, h, E):
        return T.tanh(E[i] + h[::-1]) * E[i - 1, ::-1]
    hs, _ = theano.scan(step, sequences=idx, outputs_info=h0, non_sequences=E)
    cost = (hs ** 2).sum()
    rng = np.random.RandomState(5)
    e = rng.uniform(-1, 1, (7, 4)).astype(dtype)
    h = rng.uniform(-1, 1, 4).astype(dtype)
    calls = [[np.array(v), e, h] for v in ([3, 0, -1, 3, 6], [-6, 2], [5, 5, 5, 1, 0, -2, 4])]
    f, failures = compare([idx, E, h0], [hs, theano.grad(cost, E), theano.grad(cost, h0)],
                          calls, rtol=1e-5 if dtype == 'float32' else None)
    assert not failures, failures
    kinds = [impl for _, fn in inner_functions(f)
             for node, where, impl in theano_ocl.placements(fn) if 'Subtensor' in str(node.op)]
    assert any('index read every call' in k for k in kinds), kinds
    for _, fn in inner_functions(f):
        assert theano_ocl.stats(fn)['replans'] == 0, theano_ocl.stats(fn)
    with pytest.raises(IndexError):
        f(np.array([1, 7]), e, h)
    got = f(*calls[0])
    assert_close(got[0], f(*calls[0])[0], what='after the error')


def test_report_lists_inner_placements():
    x = T.matrix('x')
    hs, _ = theano.scan(lambda v, h: T.tanh(v + h), sequences=x, outputs_info=x[0])
    f = theano.function([x], hs, mode='OCL')
    out = io.StringIO()
    theano_ocl.report(f, file=out)
    text = out.getvalue()
    assert 'device loop over scan_fn' in text
    assert 'inner of' in text and 'Elemwise' in text.split('inner of')[1], text


def test_lstm_training_matches_c():
    """bench/lstm.py's model, 50 time steps, 20 SGD steps (the issue's program): no host fallback,
    losses and parameters as C's."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), 'bench'))
    try:
        from lstm import build_lstm, make_data
    finally:
        sys.path.pop(0)
    f_c, params_c = build_lstm('FAST_RUN', 6, 16)
    f_o, params_o = build_lstm('OCL', 6, 16)
    on_device(f_o)
    assert len(scan_tasks(f_o)) == 2           # the LSTM's scan and its gradient's
    X, y = make_data(50, 8, 6)
    for _ in range(20):
        np.testing.assert_allclose(f_o(X, y), f_c(X, y), rtol=1e-4)
    for pc, po in zip(params_c, params_o):
        np.testing.assert_allclose(po.get_value(), pc.get_value(), rtol=1e-4, atol=1e-6)


def scan_op(f):
    ops = [node.op for node in f.maker.fgraph.apply_nodes if isinstance(node.op, Scan)]
    assert len(ops) == 1, ops
    return ops[0]


def inner_ops(op):
    """The computations of ``op.fn``'s graph (Theano's keeps its outputs from being
    computed in place, for its output preallocation: in-place or not is left out)."""
    return [(type(n.op).__name__, type(getattr(n.op, 'scalar_op', None)).__name__)
            for n in op.fn.maker.fgraph.toposort()]


def cells_empty(fn):
    return all(c.storage[0] is None for c in fn.input_storage + fn.output_storage)


@pytest.mark.parametrize('dtype', DTYPES)
def test_op_fn_is_the_inner_function_as_with_theano(dtype):
    # Theano's make_thunk sets op.fn; code inspects op.fn.maker.fgraph (what the optimizer
    # did inside: W1 + W2 is pushed out of the loop) and op.fn's storage (empty between
    # calls, as Scan.execute leaves it); the function pickles after a call
    import pickle
    h0 = T.vector('h0', dtype=dtype)
    W1 = T.matrix('W1', dtype=dtype)
    W2 = T.matrix('W2', dtype=dtype)
    hs, _ = theano.scan(lambda h, W1, W2: T.tanh(T.dot(h, W1 + W2)), outputs_info=h0,
                        non_sequences=[W1, W2], n_steps=5)
    f_c, f_o = compile_both([h0, W1, W2], hs)
    on_device(f_o)
    op_c, op_o = scan_op(f_c), scan_op(f_o)
    assert op_o.fn is not op_c.fn
    assert inner_ops(op_o) == inner_ops(op_c)
    assert ('Gemv', 'NoneType') in inner_ops(op_o)
    assert ('Elemwise', 'Add') not in inner_ops(op_o), inner_ops(op_o)
    assert cells_empty(op_o.fn)
    rng = np.random.RandomState(3)
    for n in (4, 7):
        args = [rng.uniform(-1, 1, n).astype(dtype),
                rng.uniform(-1, 1, (n, n)).astype(dtype),
                rng.uniform(-1, 1, (n, n)).astype(dtype)]
        assert_close(f_o(*args), f_c(*args))
        assert cells_empty(op_o.fn), [c.storage[0] for c in op_o.fn.input_storage]
    g = pickle.loads(pickle.dumps(f_o))
    on_device(g)
    assert_close(g(*args), f_c(*args))
    assert inner_ops(scan_op(g)) == inner_ops(op_c)


def test_theano_loops_of_the_same_op_keep_their_own_inner_function():
    # a Scan op linked by Theano (its loop reads op.fn at every call) and on the device:
    # the plain function SimulatorOCL re-links keeps its op.fn, and Theano's VM running a
    # device-linked graph (the host tier of a small, hot function) builds its own
    x = T.matrix('x')
    hs, _ = theano.scan(lambda v, h: T.tanh(v + 0.5 * h), sequences=x, outputs_info=x[0])
    rng = np.random.RandomState(4)
    f_c = theano.function([x], hs, mode='FAST_RUN')
    theano_fn = scan_op(f_c).fn
    sim = theano_ocl.SimulatorOCL(f_c)
    assert scan_op(f_c).fn is theano_fn
    f_o = theano.function([x], hs, mode=theano_ocl.OCLMode(host_tier='any'))
    on_device(f_o)
    for _ in range(30):          # past the host tier's threshold (vm.host_tier_after)
        xv = rng.uniform(-1, 1, (5, 3))
        want = np.tanh(xv[0] + 0.5 * xv[0])
        assert_close(f_o(xv), f_c(xv))
        assert_close(sim(xv), f_c(xv))
        assert_close(f_c(xv)[0], want)


@pytest.mark.parametrize('case', ['taps', 'mit_mot', 'until', 'nested', 'lstm'])
def test_a_steps_row_copies_in_one_launch_each_way(monkeypatch, case):
    """The ``scan_rows`` setting (ops/scan_rows.py: a step's staged rows, and its outputs
    into their slots, each in one launch): the same programs against Theano C, and the
    launches really ran."""
    from theano_ocl.ops import scan_rows
    setting(monkeypatch, 'scan_rows', '1')
    runs = []
    real = scan_rows.RowCopies.run
    monkeypatch.setattr(scan_rows.RowCopies, 'run',
                        lambda self, *a: runs.append(len(self.entries)) or real(self, *a))
    {'taps': lambda: test_taps_states_and_non_sequences('float64'),
     'mit_mot': lambda: test_gradient_mit_mot_and_truncate_gradient('float32'),
     'until': lambda: test_until_condition_read_every_few_steps(monkeypatch),
     'nested': test_nested_scans,
     'lstm': test_lstm_training_matches_c}[case]()
    assert runs and max(runs) > 1, runs       # several copies went as one launch


def _count_placements(monkeypatch):
    """Spy on the rows a loop follows: the number of roots each step pointed at its rows,
    in the steps run as passes (ops/scan_bind.py) and in those the runtime's loop driver
    runs (ops/scan_lower.py: its ``Follow`` feeds)."""
    from theano_ocl.ops import scan, scan_bind
    placed = []
    real = scan_bind.RowBinding.place
    monkeypatch.setattr(scan_bind.RowBinding, 'place',
                        lambda self, i, pos: placed.append(len(self.live)) or real(self, i, pos))
    drive = scan.drive

    def spy(loop, first, n, *args, **kwargs):
        done = drive(loop, first, n, *args, **kwargs)
        if loop.follows:
            placed.extend([len(loop.follows)] * (done - first))
        return done
    monkeypatch.setattr(scan, 'drive', spy)
    return placed


@pytest.mark.parametrize('bind', ['1', '0'])
@pytest.mark.parametrize('case', ['taps', 'backwards', 'mit_mot', 'nested', 'lstm'])
def test_inner_frame_follows_the_rows(monkeypatch, case, bind):
    """The ``scan_bind`` setting (ops/scan_bind.py): on (the default), from a run's second
    step the inner frame reads its sequence rows and state taps, and writes its outputs, in
    the outer buffers; off, every row is copied. Both against Theano C, over calls that
    re-plan and replay; on, roots really followed the rows (several per step)."""
    setting(monkeypatch, 'scan_bind', bind)
    placed = _count_placements(monkeypatch)
    {'taps': lambda: test_taps_states_and_non_sequences('float32'),
     'backwards': lambda: test_n_steps_go_backwards_one_step('float64'),
     'mit_mot': lambda: test_gradient_mit_mot_and_truncate_gradient('float64'),
     'nested': test_nested_scans,
     'lstm': test_lstm_training_matches_c}[case]()
    if bind == '1':
        assert placed and max(placed) >= 2, placed
    else:
        assert not placed, placed



def test_inner_frame_following_rows_still_batches(monkeypatch):
    """A frame that follows the rows (scan_bind on) merges its own independent launches
    that touch no root the loop re-points: the LSTM gradient's step recomputes sigmoids of
    slices of one product, whose launches run as one batched launch at every step of the
    loop (the merged launch once a step, the sigmoid's own kernel never). Losses equal
    those with the rows copied (scan_bind off)."""
    import collections
    import pyopencl as cl
    from theano_ocl.ops import fusion
    from theano_ocl.report import inner_functions
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), 'bench'))
    try:
        from lstm import build_lstm, make_data
    finally:
        sys.path.pop(0)
    setting(monkeypatch, 'launch', 'pyopencl')
    # the batched plan is what is tested: no launch merged once the frame is built
    setting(monkeypatch, 'merge', '0')
    # (on GPUs the sigmoids are composed into their readers' kernels: ops/fusion.py)
    monkeypatch.setattr(fusion, 'NESTED', False)
    names = collections.Counter()
    real = cl.enqueue_nd_range_kernel

    def spy(queue, kernel, *a, **k):
        names[kernel.function_name] += 1
        return real(queue, kernel, *a, **k)
    monkeypatch.setattr(cl, 'enqueue_nd_range_kernel', spy)
    losses = {}
    for bind in ('1', '0'):
        setting(monkeypatch, 'scan_bind', bind)
        f, _ = build_lstm('OCL', 6, 16)
        on_device(f)
        for steps in (12, 4):
            X, y = make_data(steps, 8, 6)
            for k in range(6):          # past OCLFunction.batch_after
                losses[bind, steps, k] = f(X, y)
            names.clear()
            losses[bind, steps, 'counted'] = f(X, y)
            if bind == '1':
                grad = theano_ocl.stats([inner for node, inner in inner_functions(f)
                                         if 'grad' in node.op.name][0])
                assert grad['batched_launches'] < grad['launches'], grad
                batched = {name for _, name, _ in grad['batched_kernels']}
                merged = {name for name in batched if name.startswith('batched_')}
                alone = {name for _, name, _ in grad['kernels']} - batched
                assert merged and alone, (merged, alone)
                assert [names[m] for m in merged] == [steps] * len(merged), (names, steps)
                assert not any(names[a] for a in alone), (names, alone)
    for key in losses:
        if key[0] == '1':
            np.testing.assert_allclose(losses[key], losses[('0',) + key[1:]], rtol=1e-6)


@pytest.mark.parametrize('dtype', DTYPES)
def test_inner_branch_flip_mid_run(dtype, monkeypatch):
    """An IfElse inside the step whose branch changes from step to step: another frame of
    the inner function runs at those steps, reading staging arrays that a step following the
    rows did not fill; the loop notices and copies that step's rows. Against Theano C."""
    from theano.ifelse import ifelse
    from theano_ocl.report import inner_functions
    placed = _count_placements(monkeypatch)
    x = T.matrix('x', dtype=dtype)
    h0 = T.vector('h0', dtype=dtype)
    half = np.asarray(0.5, dtype)

    def step(v, h):
        return ifelse(T.gt(v.sum(), 0), T.tanh(h + v), h * half - v)
    hs, _ = theano.scan(step, sequences=x, outputs_info=h0)
    rng = np.random.RandomState(3)
    calls = []
    for signs in ([1, 1, 1, -1, -1, 1, -1, 1, 1], [-1, -1, 1, 1, 1, 1, -1, -1, -1]):
        xv = np.abs(rng.uniform(0.1, 1, (len(signs), 4))) * np.array(signs)[:, None]
        calls.append([xv.astype(dtype), rng.uniform(-1, 1, 4).astype(dtype)])
    f, failures = compare([x, h0], hs, calls)
    assert not failures, failures
    assert placed, 'the inner frame never followed the rows'
    (_, inner), = inner_functions(f)
    assert theano_ocl.stats(inner)['alternates'], 'one branch only: the test no longer flips'


@pytest.mark.parametrize('dtype', DTYPES)
def test_error_mid_run_leaves_the_inner_frame_as_planned(dtype, monkeypatch):
    """A bad index at a late step of a run whose inner frame follows the rows: IndexError
    as Theano raises it; the roots go back, so the next calls (new inputs, other
    lengths) equal Theano C's."""
    placed = _count_placements(monkeypatch)
    idx = T.lmatrix('idx')
    E = T.matrix('E', dtype=dtype)
    h0 = T.vector('h0', dtype=dtype)

    def step(i, h, E):
        return T.tanh(E[i].sum(axis=0) + h[::-1])
    hs, _ = theano.scan(step, sequences=idx, outputs_info=h0, non_sequences=E)
    f_c, f_o = compile_both([idx, E, h0], hs)
    on_device(f_o)
    rng = np.random.RandomState(4)
    e = rng.uniform(-1, 1, (6, 3)).astype(dtype)
    h = rng.uniform(-1, 1, 3).astype(dtype)
    good = rng.randint(-6, 6, (7, 2))
    assert_close(f_o(good, e, h), f_c(good, e, h), what='first call')
    bad = good.copy()
    bad[5, 1] = 6
    with pytest.raises(IndexError):
        f_c(bad, e, h)
    with pytest.raises(IndexError):
        f_o(bad, e, h)
    assert placed, 'the inner frame never followed the rows'
    for n in (7, 4, 7):
        other = rng.randint(-6, 6, (n, 2))
        h2 = rng.uniform(-1, 1, 3).astype(dtype)
        assert_close(f_o(other, e, h2), f_c(other, e, h2), what='after the error, %d steps' % n)


@pytest.mark.parametrize('dtype', DTYPES)
def test_outputs_never_written_over_the_rows_a_step_reads(dtype, monkeypatch):
    """A state kept one step deep (only its last value is used: Theano stores one row, which
    every step reads and writes), computed by a product that reads other elements than it
    writes; and the gradient's mit-mot accumulators (read at taps 0 and 1, written at 1).
    A step's outputs must not be written over its inputs. Against Theano C."""
    x = T.matrix('x', dtype=dtype)
    h0 = T.vector('h0', dtype=dtype)
    W = T.matrix('W', dtype=dtype)

    def step(v, h, W):
        return T.dot(h[::-1], W) * np.asarray(0.5, dtype) + v
    hs, _ = theano.scan(step, sequences=x, outputs_info=h0, non_sequences=W)
    cost = (T.tanh(hs) ** 2).sum()
    rng = np.random.RandomState(6)
    calls = [[rng.uniform(-1, 1, (n, 5)).astype(dtype), rng.uniform(-1, 1, 5).astype(dtype),
              rng.uniform(-1, 1, (5, 5)).astype(dtype)] for n in (8, 3, 8)]
    tol = 1e-5 if dtype == 'float32' else None
    # Theano's default keeps one row more than the taps need (scan.allow_output_prealloc);
    # without it, the buffer of a state used only at its last step is one row deep
    from theano_ocl.ops import scan_bind
    stores = []
    build = scan_bind.RowBinding.build.__func__
    monkeypatch.setattr(scan_bind.RowBinding, 'build', classmethod(
        lambda cls, loop, *a: stores.append(list(loop.store)) or build(cls, loop, *a)))
    with theano.configparser.change_flags(**{'scan.allow_output_prealloc': False}):
        f, failures = compare([x, h0, W], hs[-1], calls, rtol=tol)
    assert not failures, failures
    assert stores and all(st == [1] for st in stores), stores
    _, failures = compare([x, h0, W], [theano.grad(cost, W), theano.grad(cost, h0)], calls,
                          rtol=tol)
    assert not failures, failures


@pytest.mark.parametrize('dtype', ['float32', pytest.param('float64', marks=pytest.mark.full)])
def test_gradient_state_written_over_the_row_it_reads(dtype, monkeypatch):
    """A gradient scan's mit-mot state is read (tap 1) and written (tap 1) in one row: the
    inner frame writes it there directly where every read of that row comes first or
    in the writing launch at the same element (ops/scan_bind.reads_first). Steps of
    several kinds (elementwise, a product, a reversed and a rolled state) against Theano
    C; in the LSTM's gradient loop no row is copied after step 0."""
    from theano_ocl.ops import scan_rows
    x = T.matrix('x', dtype=dtype)
    h0 = T.vector('h0', dtype=dtype)
    W = T.matrix('W', dtype=dtype)
    half = np.asarray(0.5, dtype)
    steps = [lambda v, h, W: T.tanh(h * half + v),
             lambda v, h, W: T.tanh(T.dot(h, W) + v),
             lambda v, h, W: T.tanh(h[::-1] * v),
             lambda v, h, W: T.concatenate([h[1:], h[:1]]) * half + v * h]
    rng = np.random.RandomState(4)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == 'float32' else {}
    cpu = theano_ocl.get_device().is_cpu
    # on a CPU device also with every product on the host BLAS: host steps that map the
    # rows their roots are pointed at (ops/blas_host.py)
    for blas_setting in ((None, 'host') if cpu else (None,)):
        setting(monkeypatch, 'blas', blas_setting)
        for step in steps:
            hs, _ = theano.scan(step, sequences=x, outputs_info=h0, non_sequences=W)
            cost = (hs ** 2).sum()
            calls = [[rng.uniform(-1, 1, (n, 5)).astype(dtype),
                      rng.uniform(-1, 1, 5).astype(dtype),
                      rng.uniform(-0.6, 0.6, (5, 5)).astype(dtype)] for n in (6, 11, 6)]
            grads = T.grad(cost, [x, h0, W], disconnected_inputs='ignore')
            f, failures = compare([x, h0, W], [cost] + grads, calls, **tol)
            assert not failures, (blas_setting, failures)
    setting(monkeypatch, 'blas', None)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), 'bench'))
    try:
        from lstm import build_lstm, make_data
    finally:
        sys.path.pop(0)
    copies = []
    real = scan_rows.LoopCopies._copy

    def spy(self, dst, src):
        copies.append(self.fn.name)
        return real(self, dst, src)
    monkeypatch.setattr(scan_rows.LoopCopies, '_copy', spy)
    from theano_ocl.ops import blas, blas_host, blas_queued
    opened = []
    real_open = blas_host._Mapped.open
    monkeypatch.setattr(blas_host._Mapped, 'open',
                        lambda self, regions: opened.append(1) or real_open(self, regions))
    ltol = 1e-4 if dtype == 'float32' else 1e-9      # losses of a few SGD steps
    # (16 hidden: small products, launches of the device)
    cases = [('device', 8, 6, 16), ('gpu', 64, 32, 256)]
    if cpu:
        # every product on the host BLAS: host steps that declare what they touch and map
        # it where the roots are (ops/blas_host.py), so the rows are followed there too;
        # and queued on the device (ops/blas_queued.py): commands that read their roots'
        # places when they are enqueued, no map
        cases += [('host', 8, 6, 16), ('queued', 8, 6, 16)]
    references = {}                 # Theano C's function per (inputs, hidden): built once
    for shapes, batch, n_in, hidden in cases:
        if shapes == 'gpu':
            # the GPU's products (the tiled kernel, its launches declaring what they touch)
            # and an output's root that held an earlier value of the step
            monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', True)
            setting(monkeypatch, 'blas', 'kernel')
        elif shapes in ('host', 'queued'):
            monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', False)
            setting(monkeypatch, 'blas', 'host')
            setting(monkeypatch, 'host_blas', 'mapped' if shapes == 'host' else 'queued')
        f, _ = build_lstm('OCL', n_in, hidden, dtype=dtype)
        if (n_in, hidden) not in references:
            f_c, params = build_lstm('FAST_RUN', n_in, hidden, dtype=dtype)
            references[n_in, hidden] = f_c, params, [p.get_value() for p in params]
        f_c, params, initial = references[n_in, hidden]
        for p, value in zip(params, initial):       # (its updates trained them before)
            p.set_value(value)
        n, maps = {}, {}
        for length in (12, 4):
            X, y = make_data(length, batch, n_in, dtype=dtype)
            assert_close(f(X, y), f_c(X, y), rtol=ltol, what=(shapes, length))
            del copies[:], opened[:]
            assert_close(f(X, y), f_c(X, y), rtol=ltol, what=(shapes, length))
            n[length] = (copies.count('scan_fn'), copies.count('grad_of_scan_fn'))
            maps[length] = len(opened)
        assert n[12] == n[4], (shapes, n)           # a copy per step would add 8
        if shapes == 'host':
            assert maps[12] - maps[4] >= 3 * 8, maps      # three host products a step ran
        elif shapes == 'queued' and blas_queued.available(theano_ocl.get_device()):
            assert maps == {12: 0, 4: 0}, maps            # (mapped once, when planned)


def test_reads_first_rule():
    """The rule that lets a frame write a row that it also reads (ops/scan_bind.py), on
    plans made up for it: reads before the first write, or in the writing launch at the
    element written (declared pointwise, the same place), and nothing else."""
    from theano_ocl.darray import DArray, Root
    from theano_ocl.ops.scan_bind import reads_first
    from theano_ocl.runtime.plans import HostStep, Launch
    src, dst, other = Root(None, 64), Root(None, 64), Root(None, 64)
    a, b = DArray(src, (4,), 'float32'), DArray(dst, (4,), 'float32')
    o = DArray(other, (4,), 'float32')
    b_late = DArray(dst, (4,), 'float32', offset=16)
    a_bcast = DArray(src, (4,), 'float32', strides=(0,))

    def launch(reads, writes, pointwise=()):
        return Launch(None, 0, None, 'k', (4,), None, (), reads=reads, writes=writes,
                      pointwise=pointwise)
    assert reads_first([launch([a], [o]), launch([o], [b])], src, 0, dst)
    assert not reads_first([launch([o], [b]), launch([a], [o])], src, 0, dst)
    assert reads_first([launch([a, o], [b], pointwise=[a])], src, 0, dst)
    assert not reads_first([launch([a, o], [b])], src, 0, dst)                # not declared
    assert not reads_first([launch([a], [b_late], pointwise=[a])], src, 0, dst)  # elsewhere
    assert reads_first([launch([a], [b_late], pointwise=[a])], src, 16, dst)  # shifted there
    assert not reads_first([launch([a_bcast], [b], pointwise=[a_bcast])], src, 0, dst)
    assert not reads_first([launch([o], [a])], src, 0, dst)                   # src written
    assert not reads_first([HostStep(None, 0), launch([a], [b], [a])], src, 0, dst)
    assert reads_first([HostStep(None, 0, reads=[o], writes=[o]), launch([a], [b], [a])],
                       src, 0, dst)
