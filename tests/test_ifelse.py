"""IfElse on the device, lazy (ops/basic.py IfElseImpl, linker.lazy_branches, the VM's
branch guards) against Theano C, whose VM runs IfElse lazily too.

Sizes are over the in-thread tier's 4096 elements so every call runs on the device. The
untaken branch carries what would fail if it ran (a device Assert, an index out of range)
and a host op counting its calls.
"""
import numpy as np
import pytest

import theano
import theano.tensor as T
from theano.ifelse import ifelse
from theano.tensor.opt import Assert

import theano_ocl
from helpers import assert_close, compile_both, rand

N = 4099                      # odd, over the in-thread tier's tiny size


class Count(theano.Op):
    """Passes its input through on the host and counts its calls (no device code)."""
    __props__ = ('tag',)
    calls = {}

    def __init__(self, tag):
        self.tag = tag

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return theano.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        Count.calls[self.tag] = Count.calls.get(self.tag, 0) + 1
        outputs[0][0] = inputs[0].copy()


def _calls(tag):
    return Count.calls.get(tag, 0)


def _run_both(inputs, outputs, calls, updates=None, device_nodes=()):
    """Compile with Theano C and OCL; call both with each argument list in ``calls``,
    comparing every output. ``device_nodes``: op class names that must be on the device."""
    f_c, f_o = compile_both(inputs, outputs, updates=updates)
    placed = {type(node.op).__name__ for node, where, _ in theano_ocl.placements(f_o)
              if where == 'device'}
    for name in ('IfElse',) + tuple(device_nodes):
        assert name in placed, '%s is not on the device: %s' % (name, sorted(placed))
    for k, args in enumerate(calls):
        want, got = f_c(*args), f_o(*args)
        for j, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, what='call %d output %d' % (k, j))
    return f_c, f_o


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'int64'])
def test_alternating_branches_shapes_and_dtypes(dtype):
    """Two outputs of different dtypes; the branches give different shapes; the
    condition comes from an input, alternating call by call."""
    x = T.vector('x', dtype=dtype)
    y = T.vector('y', dtype=dtype)
    c = T.iscalar('c')
    xs = x[::3]                                    # non-contiguous input view
    then = [xs * 2 + 1, T.cast(x.sum(), 'float64')]
    other = [(y + x)[5:], T.cast(y.max(), 'float64') * 3]
    outs = ifelse(c, then, other)
    xv, yv = rand((N,), dtype), rand((N,), dtype, np.random.RandomState(1))
    calls = [(xv, yv, cv) for cv in (1, 0, 1, 0, 7, -2, 0)]
    _, f_o = _run_both([x, y, c], outs + [outs[0].sum()], calls, device_nodes=('Elemwise',))
    # one key, each branch planned once: the flips run the other branch's alternate frame
    counts = theano_ocl.stats(f_o)
    assert (counts['frames'], counts['alternates'], counts['replans']) == (1, 1, 1), counts


def test_condition_computed_on_device_and_on_host():
    """A condition from a device reduction (one scalar read), and one from shape
    arithmetic (decided by the frame's key: no read at all)."""
    x = T.dvector('x')
    thr = T.dscalar('thr')
    a = ifelse(T.gt(x.sum(), thr), T.exp(x), T.log1p(abs(x)) * 2)
    b = ifelse(T.gt(x.shape[0], N), x[:N] * 3, T.concatenate([x, x])[::2] - 1)
    xv = rand((N + 2,), 'float64')
    calls = [(xv, -1e9), (xv, 1e9), (xv[:N], -1e9), (xv[:N], 1e9), (xv, 1e9)]
    _, f_o = _run_both([x, thr], [a, b], calls, device_nodes=('Sum', 'Join'))
    # two keys (the shapes decide b's branch), each planned once per outcome of a's
    # device condition: the last call, back to the first shape, plans nothing
    counts = theano_ocl.stats(f_o)
    assert counts['frames'] == 2 and counts['replans'] == 2, counts


def test_untaken_branch_never_runs():
    """What would raise in the branch not taken never runs: an Assert and an index out
    of range on the device, and a host node whose calls are counted (as Theano C's)."""
    x = T.dvector('x')
    idx = T.lvector('idx')
    c = T.bscalar('c')
    guarded = Assert('then-branch assert')(x * 2, T.all(T.lt(x, 10)))
    then = Count('then')(guarded[idx] + 1)
    other = Count('else')(T.sqrt(abs(x[::2])) + x[1::2].sum())
    out = ifelse(c, then, other)
    f_c, f_o = compile_both([x, idx, c], out)
    placed = {type(node.op).__name__ for node, where, _ in theano_ocl.placements(f_o)
              if where == 'device'}
    assert {'Assert', 'AdvancedSubtensor1', 'IfElse'} <= placed, placed
    small, big = rand((N,), 'float64'), rand((N,), 'float64') + 100
    fine = np.array([0, N - 1, -1, 5], dtype='int64')
    bad = np.array([0, 10 * N], dtype='int64')
    # else branch with the then-branch's Assert false and its index out of range
    for f in (f_c, f_o):
        Count.calls.clear()
        for _ in range(3):
            r = f(big, bad, 0)
        assert (_calls('then'), _calls('else')) == (0, 3)
        assert_close(r, np.sqrt(abs(big[::2])) + big[1::2].sum())
    # then branch: as Theano C, including its errors
    for f in (f_c, f_o):
        Count.calls.clear()
        assert_close(f(small, fine, 1), small[fine] * 2 + 1)
        assert (_calls('then'), _calls('else')) == (1, 0)
        with pytest.raises(AssertionError, match='then-branch assert'):
            f(big, fine, 1)
        with pytest.raises(IndexError):
            f(small, bad, 1)
    # alternating afterwards: still right, the else branch still never sees the then's
    Count.calls.clear()
    for k in range(6):
        cv = k % 2
        assert_close(f_o(small if cv else big, fine if cv else bad, cv),
                     f_c(small if cv else big, fine if cv else bad, cv), what='call %d' % k)
    assert (_calls('then'), _calls('else')) == (6, 6)       # 3 each, both functions


def test_alternating_calls_do_not_replan():
    """Each key keeps a frame per branch: a condition flipping every call re-plans once."""
    x = T.dvector('x')
    c = T.dscalar('c')
    out = ifelse(T.lt(c, 0.5), T.exp(x[::-1]) + x.sum(), T.tanh(x) * x.max())
    xv = rand((N,), 'float64')
    f_c, f_o = _run_both([x, c], [out], [(xv, 0.0), (xv, 1.0)])
    before = theano_ocl.stats(f_o)['replans']
    for k in range(8):
        assert_close(f_o(xv, k % 2), f_c(xv, k % 2), what='call %d' % k)
    assert theano_ocl.stats(f_o)['replans'] == before
    # a condition from an integer input (host arithmetic): its values do not key frames
    n = T.iscalar('n')
    out = ifelse(T.lt(n % 7, 3), T.exp(x) * n, T.tanh(x) - n)
    f_c, f_o = _run_both([x, n], [out], [(xv, 0)])
    for k in range(1, 15):
        assert_close(f_o(xv, k), f_c(xv, k), what='n=%d' % k)
    counts = theano_ocl.stats(f_o)
    assert counts['frames'] == 1 and counts['replans'] == 1, counts


def test_shared_branch_values_nested_and_updates():
    """A value both branches use (computed once, eagerly), an IfElse nested in a branch,
    an IfElse output as an update, the taken branch's value also an output."""
    x = T.fvector('x')
    c1 = T.iscalar('c1')
    c2 = T.iscalar('c2')
    s = theano.shared(np.zeros(N, dtype='float32'), name='s')
    common = T.exp(x) * 0.5
    inner = ifelse(c2, common + x[::-1], T.sqr(x) - common)
    outer = ifelse(c1, inner * 2, common - 1)
    new_s = ifelse(T.gt(c1 + c2, 1), s + outer, s - x)
    calls = [(rand((N,), 'float32', np.random.RandomState(k)), k % 2, (k // 2) % 2)
             for k in range(8)]
    f_c, f_o = compile_both([x, c1, c2], [outer, common], updates=[(s, new_s)])
    s0 = s.get_value()
    results = {}
    for f in (f_c, f_o):
        s.set_value(s0)
        results[f] = [[np.asarray(v).copy() for v in f(*args)] for args in calls] + \
            [[s.get_value()]]
    for k, (got, want) in enumerate(zip(results[f_o], results[f_c])):
        for g, w in zip(got, want):
            assert_close(g, w, what='call %d' % k)
    assert not theano_ocl.fallback_nodes(f_o)


def test_profile_counts_only_the_taken_branch():
    """profile=True: the nodes of a branch count the calls that took it (as Theano C's)."""
    x = T.dvector('x')
    c = T.iscalar('c')
    out = ifelse(c, T.exp(x) * 2, T.log1p(abs(x)) - x.max())
    xv = rand((N,), 'float64')
    counts = {}
    for name, mode in (('c', 'FAST_RUN'), ('ocl', theano_ocl.OCLMode())):
        f = theano.function([x, c], out, mode=mode, profile=True)
        for cv in (1, 1, 0, 1, 0):
            f(xv, cv)
        calls = f.profile.apply_callcount
        counts[name] = sorted((str(n.op), calls.get(n, 0)) for n in f.maker.fgraph.toposort())
        assert any(n == 3 and 'exp' in op for op, n in counts[name]), counts
        assert any(n == 2 and 'log1p' in op for op, n in counts[name]), counts
    # Theano's lazy VM counts the IfElse itself twice a call (once to ask for a branch)
    ifelse_c = [n for op, n in counts['c'] if op.startswith('if{')]
    assert ifelse_c == [10] and [n for op, n in counts['ocl'] if op.startswith('if{')] == [5]
    assert [r for r in counts['c'] if not r[0].startswith('if{')] == \
        [r for r in counts['ocl'] if not r[0].startswith('if{')]
