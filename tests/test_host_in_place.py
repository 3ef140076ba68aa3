"""The host tier's in-place updates (``runtime/host_tail.py``): where the nodes that
overwrite shared variables cannot fail for the shapes they last ran with, a call writes the
shared values in place instead of into private copies; elsewhere it copies. Either way a
call gives Theano C's outputs and states, commits all of its updates or none (the
interrupts at every boundary are ``test_atomic.py``'s ``test_in_thread_tier``), and raises
where Theano C raises.

``host_tier='any'`` makes the tier take these float functions once hot (its default takes
them only after probes agree bit for bit with the device)."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from helpers import assert_close

HOT = 30        # calls of one shape: past the tier's threshold (host_tier_after, 20)


class Sgd(object):
    """Softmax regression with momentum: every parameter and velocity updated in place."""

    def __init__(self, mode, dtype, rows=False):
        rng = np.random.RandomState(3)
        x, y = T.matrix('x', dtype=dtype), T.ivector('y')
        self.W = theano.shared(rng.randn(6, 4).astype(dtype), 'W')
        self.b = theano.shared(np.zeros(4, dtype), 'b')
        self.vW = theano.shared(np.zeros((6, 4), dtype), 'vW')
        self.calls = theano.shared(np.int64(0), 'calls')
        p = T.nnet.softmax(T.dot(x, self.W) + self.b)
        loss = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
        gW, gb = T.grad(loss, [self.W, self.b])
        lr, mu = np.asarray(0.1, dtype), np.asarray(0.9, dtype)
        vW = mu * self.vW - lr * gW
        updates = [(self.vW, vW), (self.b, self.b - lr * gb), (self.calls, self.calls + 1)]
        if rows:            # (a value-dependent write: rows picked by an index input)
            idx = T.lvector('idx')
            updates.append((self.W, T.inc_subtensor(self.W[idx], vW[idx])))
            inputs = [x, y, idx]
        else:
            updates.append((self.W, self.W + vW))
            inputs = [x, y]
        self.shared = [self.W, self.b, self.vW, self.calls]
        self.f = theano.function(inputs, loss, updates=updates, mode=mode)

    def state(self):
        return [np.array(s.get_value()) for s in self.shared]


def _pair(dtype, **kw):
    return (Sgd(theano_ocl.OCLMode(host_tier='any'), dtype, **kw),
            Sgd('FAST_RUN', dtype, **kw))


def _data(rows, dtype, seed):
    rng = np.random.RandomState(seed)
    return rng.randn(rows, 6).astype(dtype), rng.randint(0, 4, rows).astype('int32')


def _agree(ocl, ref, args, calls):
    for k in range(calls):
        assert_close(ocl.f(*args), ref.f(*args), what='loss at call %d' % k)
    for got, want, s in zip(ocl.state(), ref.state(), ocl.shared):
        assert_close(got, want, what=s.name)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_updates_in_place_agree_with_c_across_shape_changes(dtype):
    ocl, ref = _pair(dtype)
    counts = []
    for rows in (4, 7, 4):
        _agree(ocl, ref, _data(rows, dtype, rows), HOT)
        counts.append(theano_ocl.stats(ocl.f)['host_in_place'])
    assert counts[-1]['why_not'] is None, counts
    # every batch size: its first call in the tier copies (new shapes), the next write in
    # place; a return to known shapes after another copies once more
    assert [c['copied'] for c in counts] == [1, 2, 3], counts
    ins = [c['in_place'] for c in counts]
    assert 0 < ins[0] < ins[1] < ins[2], counts


def test_a_write_that_can_fail_for_its_values_copies_and_fails_whole():
    ocl, ref = _pair('float64', rows=True)
    x, y = _data(5, 'float64', 0)
    idx = np.array([0, 2, 5])
    _agree(ocl, ref, (x, y, idx), HOT)
    stats = theano_ocl.stats(ocl.f)['host_in_place']
    assert stats['in_place'] == 0 and stats['copied'] == 0, stats
    assert 'Subtensor1 can fail for its values' in stats['why_not'], stats
    before = ocl.state()
    bad = np.array([0, 2, 6])               # W has 6 rows
    with pytest.raises(IndexError):
        ref.f(x, y, bad)
    with pytest.raises(IndexError):
        ocl.f(x, y, bad)
    for got, want, s in zip(ocl.state(), before, ocl.shared):
        np.testing.assert_array_equal(got, want, err_msg='%s after the failed call' % s.name)
    for s, value in zip(ref.shared, before):   # (Theano C may have written part of it)
        s.set_value(value)
    _agree(ocl, ref, (x, y, idx), 3)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_wrong_shapes_raise_as_c_and_leave_the_state(dtype):
    ocl, ref = _pair(dtype)
    args = _data(4, dtype, 1)
    _agree(ocl, ref, args, HOT)
    done = theano_ocl.stats(ocl.f)['host_in_place']['in_place']
    assert done > 0
    before = ocl.state()
    x, y = args
    for bad in [(x[:, :5], y), (x, y[:3]), (x[0], y)]:
        with pytest.raises((ValueError, TypeError)) as want:
            ref.f(*bad)
        with pytest.raises(type(want.value)):
            ocl.f(*bad)
        for got, was, s in zip(ocl.state(), before, ocl.shared):
            np.testing.assert_array_equal(got, was, err_msg=s.name)
    for s, value in zip(ref.shared, before):
        s.set_value(value)
    _agree(ocl, ref, args, 3)
    assert theano_ocl.stats(ocl.f)['host_in_place']['in_place'] > done


def test_an_input_aliasing_a_destroyed_shared_value():
    """The input is the shared variable's own array (borrowed): Theano copies one of two
    aliased inputs before the call; the in-place write must not change what x reads."""
    dtype = 'float64'
    rng = np.random.RandomState(5)
    results = []
    for mode in (theano_ocl.OCLMode(host_tier='any'), 'FAST_RUN'):
        A = theano.shared(rng.randn(4, 4), 'A')
        x = T.dmatrix('x')
        f = theano.function([x], T.dot(x, A).sum(), updates=[(A, A * 0.5 + x)], mode=mode)
        out = []
        for k in range(HOT):
            out.append(f(A.get_value(borrow=True)))
        out.append(A.get_value())
        results.append(out)
        rng = np.random.RandomState(5)
    for k, (got, want) in enumerate(zip(*results)):
        assert_close(np.asarray(got, dtype), np.asarray(want, dtype), what='call %d' % k)
