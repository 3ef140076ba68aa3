"""theano_ocl's loop for the Scans the host's VM runs (``runtime/host_scan.py``): the same
inner function over the same values as Theano's ``Scan.execute``, so Theano C's results to
the bit (``host_math='c'``: Theano C's elementwise code too).

Every call on the host from the first: the cost model's host choice, forced (CPU devices);
one case through the host tier of tiny hot frames, on every device. Covered: sequences
(matrices, scalars, taps), sit-sot and mit-sot states (matrix and 0-d), nit-sot outputs,
non-sequences, ``n_steps`` shorter than the sequences, states kept in a ring (only the last
values used: rotated at the end), the gradients (mit-mot states, preallocated and not),
training over several calls, a truncated gradient (rows zeroed), and the Scans left to ``Scan.execute`` (a ``while``
condition; updated shared variables), counted in ``theano_ocl.stats(f)['host_scan']``."""
import os
import sys

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl

C_BITS = dict(host_math='c')
cpu_only = pytest.mark.skipif(not theano_ocl.get_device().is_cpu,
                              reason='the cost model chooses the host on CPU devices only')


@pytest.fixture
def on_host(monkeypatch):
    """OCL modes whose functions run every call on the host's VM (cost model forced)."""
    from theano_ocl.runtime import cost
    monkeypatch.setattr(cost, 'MARGIN', 1e9)
    return lambda **kw: theano_ocl.OCLMode(cost_model='on', **dict(C_BITS, **kw))


def _same(got, want, what=''):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.shape, want.shape)
    np.testing.assert_array_equal(got, want, err_msg=what)


def _scan_stats(f):
    got = theano_ocl.stats(f)['host_scan']
    assert got is not None
    return got


def _both(build, mode):
    return build(mode), build('FAST_RUN')


def _rnn_grad(mode):
    """A tanh RNN (sit-sot), its last state, and the gradients of a cost of every state
    (mit-mot, the gradient Scan)."""
    X = T.tensor3('X')
    W = T.matrix('W')
    h0 = T.matrix('h0')
    hs, _ = theano.scan(lambda x, h, w: T.tanh(T.dot(x, w) + h.sum() * 0.01 + h),
                        sequences=X, outputs_info=h0, non_sequences=W)
    cost = (hs ** 2).sum() + hs[-1].sum()
    return theano.function([X, W, h0], [hs, hs[-1]] + T.grad(cost, [W, h0]), mode=mode)


def _mit_sot(mode):
    """A mit-sot state of taps -3 and -1 over matrices, a sequence read at taps -1, 0 and 2,
    a nit-sot output, and the gradient (mit-mot of several taps)."""
    S = T.tensor3('S')
    init = T.tensor3('init')
    a = T.matrix('a')

    def step(s_m1, s0, s2, y_m3, y_m1, a):
        y = T.tanh(y_m1 * 0.5 + y_m3 * 0.25 + s_m1 - s2) + s0 * a
        return y, (y * y).sum(axis=0)
    (ys, zs), _ = theano.scan(step, sequences=dict(input=S, taps=[-1, 0, 2]),
                              outputs_info=[dict(initial=init, taps=[-3, -1]), None],
                              non_sequences=a)
    cost = ys.sum() + (zs ** 2).sum()
    return theano.function([S, init, a], [ys, zs] + T.grad(cost, [init, a]), mode=mode)


def _scalars(mode):
    """0-d states and sequence values (Scan's vector_seqs, vector_outs), ``n_steps``
    shorter than the sequence."""
    v = T.dvector('v')
    n = T.iscalar('n')
    (acc, prod), _ = theano.scan(lambda x, s, p: [s + x * x, p * (1 + x)],
                                 sequences=v, outputs_info=[T.constant(np.float64(0)),
                                                            T.constant(np.float64(1))],
                                 n_steps=n)
    return theano.function([v, n], [acc, prod, T.grad(acc[-1] + prod[-1], v)], mode=mode)


def _last_only(mode):
    """Only the last states used: Theano keeps them in a ring of a few rows (and rotates
    it at the end) for the forward loop."""
    X = T.tensor3('X')
    h0 = T.matrix('h0')
    hs, _ = theano.scan(lambda x, h: T.tanh(x + h), sequences=X, outputs_info=h0)
    return theano.function([X, h0], [hs[-1], hs[-2:].sum(axis=0)], mode=mode)


def _truncated(mode):
    """A gradient truncated to the last 3 steps (``truncate_gradient``): the gradient
    Scan runs 3 steps, the rows of the sequence's gradient it does not reach are zeros."""
    X = T.tensor3('X')
    h0 = T.matrix('h0')
    hs, _ = theano.scan(lambda x, h: T.tanh(x + h * 0.5), sequences=X, outputs_info=h0,
                        truncate_gradient=3)
    return theano.function([X, h0], T.grad((hs ** 2).sum(), [X, h0]), mode=mode)


CASES = [
    ('rnn and gradient', _rnn_grad,
     lambda r: (r.randn(7, 5, 6), r.randn(6, 6) * 0.3, r.randn(5, 6))),
    ('mit-sot taps, sequence taps, nit-sot', _mit_sot,
     lambda r: (r.randn(9, 4, 3), r.randn(3, 4, 3), r.randn(4, 3))),
    ('0-d values and n_steps', _scalars,
     lambda r: (r.rand(11) * 0.5, np.int32(r.randint(3, 12)))),
    ('last states only', _last_only,
     lambda r: (r.randn(10, 4, 5), r.randn(4, 5))),
    ('truncated gradient', _truncated,
     lambda r: (r.randn(8, 3, 4), r.randn(3, 4))),
]


@cpu_only
@pytest.mark.parametrize('name,build,args', CASES, ids=[c[0] for c in CASES])
def test_results_are_theano_cs_to_the_bit(name, build, args, on_host):
    f, g = _both(build, on_host())
    rng = np.random.RandomState(11)
    for call in range(3):
        a = args(rng)
        got, want = f(*a), g(*a)
        for k, (x, y) in enumerate(zip(got, want)):
            _same(x, y, '%s: call %d, output %d' % (name, call, k))
    stats = _scan_stats(f)
    assert stats['scans'] >= 1 and stats['runs'] >= 3 and stats['plain_runs'] == 0, stats


@cpu_only
def test_training_over_calls_is_theano_cs_to_the_bit(on_host):
    """The tutorial RNN's SGD step (bench/rnn.py) for 6 calls: the losses and every
    parameter, Theano C's bits."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'bench'))
    try:
        import rnn
    finally:
        sys.path.pop(0)
    f = rnn.build_rnn(on_host(), 16, 24, 4, seed=3)
    g = rnn.build_rnn('FAST_RUN', 16, 24, 4, seed=3)
    rng = np.random.RandomState(5)
    for call in range(6):
        X, y = rng.rand(9, 8, 16), rng.rand(8, 4)
        _same(f(X, y), g(X, y), 'loss, call %d' % call)
    params = lambda fn: [i.variable.get_value() for i in fn.maker.inputs if i.update]  # noqa
    for k, (p, q) in enumerate(zip(params(f), params(g))):
        _same(p, q, 'parameter %d' % k)
    assert _scan_stats(f)['runs'] >= 12


@cpu_only
def test_while_loops_and_shared_updates_are_left_to_scan_execute(on_host):
    """A ``while`` condition and a Scan updating a shared variable run Theano's own loop:
    the same results, counted as ``plain_runs``."""
    x = T.dscalar('x')
    powers, _ = theano.scan(lambda p: (p * 2, theano.scan_module.until(p > 50)),
                            outputs_info=x, n_steps=20)
    count = theano.shared(np.float64(0), 'count')
    v = T.dvector('v')
    sums, upd = theano.scan(lambda e: (e * 3, {count: count + e}), sequences=v)

    def build(mode):
        return theano.function([x, v], [powers, sums], updates=upd, mode=mode)
    f, g = _both(build, on_host())
    for call in range(3):
        a = (np.float64(1.5 + call), np.arange(4.0) + call)
        for k, (p, q) in enumerate(zip(f(*a), g(*a))):
            _same(p, q, 'call %d, output %d' % (call, k))
    stats = _scan_stats(f)
    assert stats['plain_runs'] >= 3, stats
    assert stats['runs'] + stats['plain_runs'] >= 6, stats


def test_the_host_tier_runs_a_small_scan_on_any_device():
    """A tiny hot frame (``host_tier='any'``, taken after its first call) with a Scan:
    calls after the first run the loop, Theano C's bits."""
    f, g = _both(_last_only, theano_ocl.OCLMode(host_tier='any', host_tier_after=0,
                                                 cost_model='off', **C_BITS))
    rng = np.random.RandomState(2)
    a = (rng.randn(10, 4, 5), rng.randn(4, 5))
    f(*a)                               # (on the device)
    for call in range(3):
        a = (rng.randn(10, 4, 5), rng.randn(4, 5))
        for k, (p, q) in enumerate(zip(f(*a), g(*a))):
            _same(p, q, 'call %d, output %d' % (call, k))
    assert _scan_stats(f)['runs'] >= 3
