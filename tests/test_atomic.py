"""A call commits all of its updates or none: interrupts and failures injected everywhere.

The runtime calls ``theano_ocl.runtime.faults.hook`` at every step boundary of every
executor (planning, replay, the steady state, the batched plan, the in-thread tier,
``run_steps``, the commit itself). Each test first counts the boundaries of one call, then
for every boundary k makes a fresh call that is interrupted at k (a KeyboardInterrupt
raised there, or a real SIGINT delivered there) and checks that the shared variables hold
either the state before the call or the state after it -- all of them the same one -- and
that the function then goes on giving Theano C's results. Theano C, with its own shared
variables, gives the states to compare with.
"""
import signal
import sys

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import faults
from helpers import assert_close


class Model(object):
    """Several kinds of state updated by one call: a matrix and its velocity (device), a
    bias, an int64 counter (host shape arithmetic), and a float32 scalar."""

    def __init__(self, mode, n_vec=6, seed=0):
        rng = np.random.RandomState(seed)
        x = T.fmatrix('x')
        self.W = theano.shared(rng.randn(5, 3).astype('float32'), 'W')
        self.vel = theano.shared(np.zeros((5, 3), 'float32'), 'vel')
        self.b = theano.shared(np.zeros(3, 'float32'), 'b')
        self.c = theano.shared(np.int64(7), 'c')
        self.acc = theano.shared(np.float32(0), 'acc')
        self.vecs = [theano.shared(rng.randn(4).astype('float32'), 'v%d' % k)
                     for k in range(n_vec)]
        h = T.tanh(T.dot(x, self.W) + self.b)
        loss = T.sqr(h).mean()
        gW, gb = T.grad(loss, [self.W, self.b])
        f9, f1 = np.float32(0.9), np.float32(0.1)
        vel_new = f9 * self.vel - f1 * gW
        upd = [(self.vel, vel_new), (self.W, self.W + vel_new), (self.b, self.b - f1 * gb),
               (self.c, self.c + 1), (self.acc, self.acc + loss)]
        # same-kernel updates the batched executor merges into one launch
        upd += [(v, v * np.float32(0.5) + T.cast(self.c, 'float32')) for v in self.vecs]
        self.f = theano.function([x], loss, updates=upd, mode=mode)
        self.shared = [self.W, self.vel, self.b, self.c, self.acc] + self.vecs

    def state(self):
        return [np.array(s.get_value()) for s in self.shared]

    def set_state(self, values):
        for s, v in zip(self.shared, values):
            s.set_value(np.array(v, copy=True))


def _same(a, b):
    return all(x.shape == y.shape and np.allclose(x, y, rtol=1e-5, atol=1e-6)
               for x, y in zip(a, b))


def _inputs(rows):
    return np.random.RandomState(rows).randn(rows, 5).astype('float32')


class Interrupt(object):
    """A hook interrupting the call at boundary ``k`` (counting from 0), by raising
    KeyboardInterrupt there or by sending SIGINT to this process there."""

    def __init__(self, k, how):
        self.k = k
        self.how = how
        self.seen = []

    def __call__(self, where):
        self.seen.append(where)
        if len(self.seen) - 1 == self.k:
            if self.how == 'signal':
                signal.raise_signal(signal.SIGINT)
            else:
                raise KeyboardInterrupt('injected at %s' % where)


def _boundaries(call):
    seen = []
    with faults.injected(seen.append):
        call()
    return seen


def _check_every_boundary(ocl, ref, prepare, x, how, expect=None):
    """``prepare()`` puts the function in the state whose executor is under test;
    interrupts each boundary of the next call ``ocl.f(x)``. Returns the (interrupted,
    committed) outcomes seen."""
    start = ocl.state()
    ref.set_state(start)
    ref.f(x)
    after = ref.state()
    prepare()
    ocl.set_state(start)
    n = len(_boundaries(lambda: ocl.f(x)))
    assert n > 0, 'no boundary reported'
    if expect is not None:
        assert any(expect in w for w in _boundaries(lambda: (prepare(), ocl.set_state(start),
                                                            ocl.f(x)))), expect
    outcomes = set()
    for k in range(n):
        prepare()
        ocl.set_state(start)
        hook = Interrupt(k, how)
        interrupted = False
        try:
            with faults.injected(hook):
                ocl.f(x)
                # a signal raised by the last boundary arrives at the next bytecode check
                for _ in range(3):
                    pass
        except KeyboardInterrupt:
            interrupted = True
        state = ocl.state()
        whole = _same(state, after)
        none = _same(state, start)
        assert whole or none, 'interrupt at %s (%d of %d, %s) left a partial update' % (
            hook.seen[-1] if hook.seen else '?', k, n, how)
        outcomes.add((interrupted, whole))
        # still usable: the next call gives Theano C's result
        ocl.set_state(start)
        ref.set_state(start)
        assert_close(ocl.f(x), ref.f(x), what='call after an interrupt at %d' % k)
        assert _same(ocl.state(), ref.state()), 'state after the call following %d' % k
    return outcomes


NOTHING_COMMITTED = (True, False)     # an interrupted call that left every update undone


@pytest.fixture(autouse=True)
def sigint_raises_keyboard_interrupt():
    """Python's own SIGINT handler for every test here: a process started in the
    background by a non-interactive shell (a CI job, ``make test &``) inherits SIGINT
    ignored, and Python then leaves it so -- the 'signal' cases would see no interrupt."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


BATCH_AFTER = 3      # calls of a frame after which its calls run its batched plan


@pytest.fixture(scope='module')
def models():
    # host_tier='any': the in-thread tier takes this float model too (every executor)
    return Model(theano_ocl.OCLMode(host_tier='any')), Model('FAST_RUN')


@pytest.fixture(scope='module')
def small_cache():
    """A model keeping no frame besides the one in use (``max_frames=0``: a call with
    another shape drops the last one's, so the next call plans) whose small frame is
    batched on every device (``batch_min_launches=2``), with the reference model."""
    return Model(theano_ocl.OCLMode(host_tier='any', max_frames=0, batch_min_launches=2,
                                    batch_after=BATCH_AFTER)), Model('FAST_RUN')


HOW = ['raise', 'signal']


@pytest.mark.parametrize('how', HOW)
def test_planning(small_cache, how):
    ocl, ref = small_cache
    x, other = _inputs(3), _inputs(9)

    def prepare():
        ocl.f(other)               # x's frame dropped: the call plans one while it runs
    outcomes = _check_every_boundary(ocl, ref, prepare, x, how, expect='plan task')
    assert NOTHING_COMMITTED in outcomes, 'no interrupt was seen to commit nothing'


@pytest.mark.parametrize('how', HOW)
def test_replay(models, how):
    ocl, ref = models
    x, other = _inputs(4), _inputs(6)

    def prepare():
        ocl.f(x)
        ocl.f(other)               # the next call with x finds its frame by key
    outcomes = _check_every_boundary(ocl, ref, prepare, x, how, expect='step')
    assert NOTHING_COMMITTED in outcomes, 'no interrupt was seen to commit nothing'


@pytest.mark.parametrize('how', HOW)
def test_steady_state(models, how):
    ocl, ref = models
    x = _inputs(5)

    def prepare():
        ocl.f(x)
        ocl.f(x)
    outcomes = _check_every_boundary(ocl, ref, prepare, x, how, expect='commit')
    assert NOTHING_COMMITTED in outcomes, 'no interrupt was seen to commit nothing'


def test_batched(small_cache):
    ocl, ref = small_cache
    x = _inputs(7)

    def prepare():
        for _ in range(BATCH_AFTER + 1):
            ocl.f(x)
    outcomes = _check_every_boundary(ocl, ref, prepare, x, 'raise', expect='batched step')
    assert NOTHING_COMMITTED in outcomes, 'no interrupt was seen to commit nothing'


@pytest.mark.parametrize('how', HOW)
def test_in_thread_tier(models, how):
    ocl, ref = models
    x = _inputs(2)
    after = theano_ocl.stats(ocl.f)['host_tier']['after']

    def prepare():
        for _ in range(after + 1):
            ocl.f(x)
    outcomes = _check_every_boundary(ocl, ref, prepare, x, how, expect='host tier tail')
    assert NOTHING_COMMITTED in outcomes, 'no interrupt was seen to commit nothing'


def test_interrupt_at_every_line_of_a_call(models):
    """A KeyboardInterrupt raised at each Python line theano_ocl executes during a steady-
    state call (a trace function stands for Ctrl-C arriving between any two lines)."""
    ocl, ref = models
    x = _inputs(8)
    start = ocl.state()
    ref.set_state(start)
    ref.f(x)
    after = ref.state()

    def prepare():
        ocl.set_state(start)
        ocl.f(x)
        ocl.set_state(start)

    lines = []

    def count(frame, event, arg):
        if event == 'line' and 'theano_ocl' in frame.f_code.co_filename:
            lines.append(1)
        return count
    prepare()
    sys.settrace(count)
    try:
        ocl.f(x)
    finally:
        sys.settrace(None)
    n = len(lines)
    assert n > 10
    partial = []
    lock = theano_ocl.device.get_device().call_lock
    for k in range(n):
        prepare()
        hits = [0]

        def trace(frame, event, arg, k=k):
            if event == 'line' and 'theano_ocl' in frame.f_code.co_filename:
                hits[0] += 1
                if hits[0] == k + 1:
                    raise KeyboardInterrupt
            return trace
        sys.settrace(trace)
        try:
            ocl.f(x)
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        # a trace function can raise where a signal cannot: at the line event of a with
        # statement's exit, before its __exit__ runs (CPython runs signal handlers only
        # after a call returns), which leaves the device's call lock held by this thread
        # (every other thread's call would wait on it); released as __exit__ would have
        while lock._is_owned():
            lock.release()
        state = ocl.state()
        if not (_same(state, start) or _same(state, after)):
            partial.append(k)
        ocl.set_state(start)
        ref.set_state(start)
        assert_close(ocl.f(x), ref.f(x), what='call after an interrupt at line %d' % k)
    assert not partial, 'partial updates after interrupts at %d of %d lines' % (
        len(partial), n)


def _gather_model(mode):
    idx = T.lvector('idx')
    W = theano.shared(np.arange(12, dtype='float32').reshape(4, 3), 'W')
    c = theano.shared(np.int64(0), 'c')
    f = theano.function([idx], W[idx].sum(), updates=[(W, W * np.float32(0.5) + 1),
                                                        (c, c + 1)], mode=mode)
    return f, W, c


def test_a_failing_device_check_commits_nothing():
    f_o, W_o, c_o = _gather_model(theano_ocl.OCLMode())
    f_c, W_c, c_c = _gather_model('FAST_RUN')
    good, bad = np.array([0, 3, 1]), np.array([0, 9, 1])
    for values in (good, bad, good, good, bad, good):
        outs = []
        for f in (f_c, f_o):
            try:
                outs.append(('value', f(values)))
            except IndexError:
                outs.append(('error', None))
        assert outs[0][0] == outs[1][0]
        if outs[0][0] == 'value':
            assert_close(outs[1][1], outs[0][1])
        assert_close(W_o.get_value(), W_c.get_value())
        assert int(c_o.get_value()) == int(c_c.get_value())


@pytest.mark.parametrize('batch', ['auto', True])
def test_run_steps_fails_at_the_failing_step_as_n_calls_would(batch):
    # batch=True: W is double-buffered (runtime/state_swap.py); the failing step is found
    # after the loop, whose last committed value is then put home, and the steps run again
    f_plain, W, c = _gather_model('FAST_RUN')
    f_c, W_c, c_c = _gather_model('FAST_RUN')
    sim = theano_ocl.SimulatorOCL(f_plain)
    steps = np.array([[0, 1, 2], [1, 1, 1], [3, 2, 0], [0, 4, 0], [1, 2, 3]])
    done = 0
    first = 2 if batch is True else 0
    if first:
        sim.run_steps(first, inputs={'idx': steps[:first]}, batch=True)
        assert sim.stats['states_swapped'] == 1, sim.stats
        for row in steps[:first]:
            f_c(row)
    with pytest.raises(IndexError, match='step %d' % (3 - first)):
        sim.run_steps(len(steps) - first, inputs={'idx': steps[first:]}, batch=batch)
    for row in steps[first:]:
        try:
            f_c(row)
            done += 1
        except IndexError:
            break
    assert done == 3 - first
    assert_close(W.get_value(), W_c.get_value())
    assert int(c.get_value()) == int(c_c.get_value()) == 3
    # the simulator goes on from there as Theano C does
    got = sim.run_steps(3, inputs={'idx': steps[[0, 1, 4]]}, batch=batch)[0]
    assert_close(got, [f_c(row) for row in steps[[0, 1, 4]]])
    assert_close(W.get_value(), W_c.get_value())


@pytest.mark.parametrize('batch', ['auto', True])
@pytest.mark.parametrize('how', HOW)
def test_run_steps_interrupted_holds_whole_steps(how, batch):
    # batch=True: s and t are double-buffered (runtime/state_swap.py), their commit a
    # point of each step's journal, their last committed value put home however the loop
    # ends
    rng = np.random.RandomState(3)
    x = T.fvector('x')
    s = theano.shared(np.zeros(4, 'float32'), 's')
    t = theano.shared(np.ones(4, 'float32'), 't')
    c = theano.shared(np.int64(0), 'c')
    f = theano.function([x], s.sum(), updates=[(s, s * np.float32(0.5) + x),
                                               (t, t + s), (c, c + 1)], mode='FAST_RUN')
    xs = rng.randn(6, 4).astype('float32')
    # the state after each number of steps, by Theano C
    states = [[s.get_value(), t.get_value(), c.get_value()]]
    for row in xs:
        f(row)
        states.append([s.get_value(), t.get_value(), c.get_value()])
    start = states[0]

    def reset():
        s.set_value(start[0])
        t.set_value(start[1])
        c.set_value(start[2])
    reset()
    sim = theano_ocl.SimulatorOCL(f)
    n = len(_boundaries(lambda: sim.run_steps(len(xs), inputs={'x': xs}, batch=batch)))
    assert n > len(xs)
    if batch is True:
        assert sim.stats['states_swapped'] == 2, sim.stats
    for k in range(n):
        reset()
        try:
            with faults.injected(Interrupt(k, how)):
                sim.run_steps(len(xs), inputs={'x': xs}, batch=batch)
                for _ in range(3):
                    pass
        except KeyboardInterrupt:
            pass
        got = [np.array(s.get_value()), np.array(t.get_value()), np.array(c.get_value())]
        steps = [j for j, want in enumerate(states)
                 if _same([np.asarray(w) for w in want], got)]
        assert steps, 'interrupt at boundary %d left a state of no whole number of steps' % k
        assert int(got[2]) == steps[0]
    reset()
    sim.run_steps(len(xs), inputs={'x': xs}, batch=batch)
    assert_close(s.get_value(), states[-1][0])
