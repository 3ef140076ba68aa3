"""Step 0 after ``set_value``: the calls that come back to their frame find the shared
variables set on the host since (``shared.ResidentTable``, from the frame's steady-state
guard) and upload those alone, packed; every result, and every shared value after it, is
Theano C's for the same sequence of ``set_value``, calls and ``run_steps``.

Each test steps two copies of one model: Theano C (``mode='FAST_RUN'``) and theano_ocl
(``SimulatorOCL`` or ``theano.function`` with ``OCLMode``, on the device: the host tier
off), each with shared variables of its own, and does the same things to both.
"""
import weakref

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import faults
from helpers import assert_close, setting

#: (dtype, shape) of the state variables; 16 of them, so that setting them all packs
#: them into one transfer (runtime/uploads.py GROUP_MIN is 8)
STATE = [('float32', (7,)), ('float64', (3, 4)), ('int32', (5,)), ('bool', (6,)),
         ('float32', ()), ('float64', (1,)), ('int32', (2, 3)), ('bool', (3,)),
         ('float32', (0,)), ('float32', (33,)), ('int32', ()), ('float64', (9,)),
         ('bool', (1,)), ('float32', (4, 4)), ('int32', (11,)), ('float64', (2,))]


@pytest.fixture(autouse=True)
def on_the_device(monkeypatch):
    setting(monkeypatch, 'host_tier', 'off')       # (tiny frames would run on Theano's VM)


def _value(dt, shape, rng):
    v = rng.uniform(-2, 2, shape)
    if dt == 'bool':
        return np.asarray(v > 0)
    return np.asarray(v).astype(dt)


class Model(object):
    """The state variables of ``STATE`` (plus a parameter per state variable, never set),
    updated every step from a per-step input ``x``; the output reads them all."""

    def __init__(self, seed, mode):
        rng = np.random.RandomState(seed)
        x = T.scalar('x', dtype='float32')
        self.state = [theano.shared(_value(dt, shape, rng), name='s%d' % k)
                      for k, (dt, shape) in enumerate(STATE)]
        self.params = [theano.shared(np.asarray(rng.uniform(0, 1)).astype('float32'),
                                     name='w%d' % k) for k in range(len(STATE))]
        upd, total = [], T.constant(np.float64(0))
        for s, w in zip(self.state, self.params):
            if s.dtype == 'bool':
                new = T.xor(s, T.gt(x * w, 0.5))
            elif s.dtype == 'int32':
                new = s + T.cast(T.gt(x, w), 'int32') * 3 - 1
            else:
                new = s * T.cast(0.9, s.dtype) + T.cast(x * w, s.dtype)
            upd.append((s, new))
            total = total + T.cast(s, 'float64').sum()
        self.f = theano.function([x], total, updates=upd, mode=mode)

    def values(self):
        return [s.get_value() for s in self.state]


def _twins(seed=0):
    """(Theano C model, device model with a SimulatorOCL of its function)."""
    c = Model(seed, 'FAST_RUN')
    d = Model(seed, 'FAST_RUN')
    d.sim = theano_ocl.SimulatorOCL(d.f)
    return c, d


def _run(c, d, xs, what):
    """``len(xs)`` steps on both: the C function in a loop, ``run_steps`` on the device;
    the outputs and every state value after them compared."""
    want = [c.f(x) for x in xs]
    got = d.sim.run_steps(len(xs), inputs={'x': xs}, probes=[0])[0]
    assert_close(got, np.array(want), rtol=1e-6, atol=1e-6, what='%s: outputs' % what)
    _same_state(c, d, what)


def _same_state(c, d, what):
    for k, (w, g) in enumerate(zip(c.values(), d.values())):
        assert_close(g, w, rtol=1e-6, atol=1e-6, what='%s: state s%d' % (what, k))


def _set(models, k, value, borrow=False):
    for m in models:
        m.state[k].set_value(value.copy(), borrow=borrow)


def _last_call(d):
    return theano_ocl.stats(d.sim)['last_call']


def _xs(rng, n):
    return rng.uniform(0, 1, n).astype('float32')


def test_set_value_on_a_subset_uploads_those_alone():
    rng = np.random.RandomState(1)
    c, d = _twins(1)
    for rep in range(3):                  # planned, batched, slab gathered: the steady state
        _run(c, d, _xs(rng, 4), 'warm %d' % rep)
    assert _last_call(d) == dict(steady=True, uploads=0, upload_bytes=0, upload_transfers=0)
    # every non-empty state variable set: one packed transfer of them all
    full = [k for k, (dt, shape) in enumerate(STATE) if np.prod(shape) > 0]
    for k in range(len(STATE)):
        _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
    _run(c, d, _xs(rng, 5), 'all set')
    nbytes = sum(d.state[k].get_value().nbytes for k in full)
    assert _last_call(d) == dict(steady=True, uploads=len(full), upload_bytes=nbytes,
                                 upload_transfers=1)
    # a subset of every dtype: those, and only those, go to the device
    subset = [0, 1, 2, 3, 6, 7, 9, 11, 13]
    for k in subset:
        _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
    _run(c, d, _xs(rng, 5), 'subset set')
    nbytes = sum(d.state[k].get_value().nbytes for k in subset)
    assert _last_call(d) == dict(steady=True, uploads=len(subset), upload_bytes=nbytes,
                                 upload_transfers=1)
    # fewer than GROUP_MIN: each on its own; then nothing set: nothing uploaded
    for k in (3, 10):
        _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
    _run(c, d, _xs(rng, 3), 'two set')
    assert _last_call(d) == dict(steady=True, uploads=2, upload_bytes=6 + 4,
                                 upload_transfers=2)
    _run(c, d, _xs(rng, 3), 'none set')
    assert _last_call(d) == dict(steady=True, uploads=0, upload_bytes=0, upload_transfers=0)


def test_runs_and_calls_with_no_value_read_between_them():
    """Runs and calls back to back, nothing read or set between them (the commits' flags
    are left as the last one set them), then a value read in the middle of a sequence (its
    flag cleared: the next commit sets it again): each value read is Theano C's."""
    rng = np.random.RandomState(6)
    c, d = _twins(6)
    for rep in range(3):
        _run(c, d, _xs(rng, 4), 'warm %d' % rep)
    for rep in range(3):
        xs = _xs(rng, 3)
        for x in xs:
            c.f(x)
        d.sim.run_steps(3, inputs={'x': xs})
        x = _xs(rng, 1)[0]
        assert_close(d.sim(x), c.f(x), rtol=1e-6, atol=1e-6, what='call %d' % rep)
    _same_state(c, d, 'after runs and calls')
    for k in (0, 2, 3):                   # read: their host copies are the newer ones now
        assert_close(d.state[k].get_value(), c.state[k].get_value(), rtol=1e-6, atol=1e-6,
                     what='s%d read' % k)
        xs = _xs(rng, 2)
        for x in xs:
            c.f(x)
        d.sim.run_steps(2, inputs={'x': xs})
    _same_state(c, d, 'after reads between runs')


def test_set_value_of_the_same_values_again():
    """``set_value`` of values equal to the device's (the bench's reset to the start state
    with the arrays kept) is still an upload: the device state has stepped since."""
    rng = np.random.RandomState(2)
    c, d = _twins(2)
    start = d.values()
    full = [k for k, v in enumerate(start) if v.size]
    for rep in range(4):
        for m in (c, d):
            for s, v in zip(m.state, start):
                s.set_value(v)
        _run(c, d, _xs(rng, 3), 'reset %d' % rep)
        if rep:         # (planned by then: every value set goes to the device, each once)
            assert _last_call(d)['uploads'] == len(full), (rep, _last_call(d))


def test_runs_let_go_of_the_values_they_uploaded():
    """A run's step 0 uploads the values ``set_value`` put in the cells without waiting;
    once the run has ended, those arrays are the caller's and Theano's alone (a simulator
    reset in a loop must not keep every value it ever set alive): once values set again
    replace them on the device, they are freed, as after a call."""
    rng = np.random.RandomState(8)
    c, d = _twins(8)
    for rep in range(3):
        _run(c, d, _xs(rng, 3), 'warm %d' % rep)
    big = [k for k, (dt, shape) in enumerate(STATE) if np.prod(shape) > 1]
    for how in ('run', 'call'):
        for rep in range(3):
            for k in big[:2]:                 # (fewer than GROUP_MIN: each uploaded alone)
                _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
            gone = [weakref.ref(d.state[k].container.storage[0]) for k in big[:2]]
            if how == 'run':
                _run(c, d, _xs(rng, 2), '%s %d' % (how, rep))
                assert _last_call(d)['uploads'] == 2, _last_call(d)
            else:
                assert_close(d.f(np.float32(0.3)), c.f(np.float32(0.3)), rtol=1e-6,
                             atol=1e-6, what='call %d' % rep)
            for k in big[:2]:
                _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
            _run(c, d, _xs(rng, 2), '%s %d, then set again' % (how, rep))
            assert [w() is None for w in gone] == [True, True], (how, rep)


def test_runs_let_go_of_their_per_step_inputs():
    """A run uploads its per-step host inputs without waiting (the kernels read them on
    the device); once the run has returned, the arrays are the caller's alone."""
    rng = np.random.RandomState(9)
    c, d = _twins(9)
    for rep in range(6):
        xs = _xs(rng, 3)
        gone = weakref.ref(xs)
        _run(c, d, xs, 'run %d' % rep)
        del xs
        assert gone() is None, rep


def test_set_value_with_another_shape_goes_the_general_path():
    rng = np.random.RandomState(3)
    c, d = _twins(3)
    for rep in range(3):
        _run(c, d, _xs(rng, 3), 'warm %d' % rep)
    # (s9 is summed: its length does not reach the output's shape)
    _set((c, d), 9, rng.uniform(0, 1, 50).astype('float32'))
    _set((c, d), 0, _value('float32', (7,), rng))
    _run(c, d, _xs(rng, 4), 'longer s9')
    assert _last_call(d)['steady'] is False       # (a new frame for the new shape)
    _run(c, d, _xs(rng, 4), 'longer s9 again')
    _set((c, d), 9, rng.uniform(0, 1, 33).astype('float32'))
    _run(c, d, _xs(rng, 4), 'back to 33')
    assert _last_call(d)['steady'] is False
    _set((c, d), 0, _value('float32', (7,), rng))
    _run(c, d, _xs(rng, 2), 'set after the shape came back')
    assert _last_call(d)['steady'] is True


def test_failed_and_interrupted_calls_leave_the_values_set():
    """A call that uploads the values set and then fails (a device check: Theano's Assert)
    or is interrupted (before its commit) changes no shared variable: ``get_value`` gives
    what ``set_value`` put there, and the next calls compute from it, as Theano C does."""
    rng = np.random.RandomState(4)
    models = []
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        m = Model(4, 'FAST_RUN')
        x = T.scalar('x', dtype='float32')
        total = sum(T.cast(s, 'float64').sum() for s in m.state)
        checked = T.opt.Assert('x must be below 1')(total, T.lt(x, 1))
        m.g = theano.function([x], checked, mode=mode, updates=[
            (s, s * T.cast(2, s.dtype) if s.dtype != 'bool' else ~s) for s in m.state])
        models.append(m)
    c, d = models
    for x in (0.1, 0.2, 0.3):
        assert_close(d.g(np.float32(x)), c.g(np.float32(x)), rtol=1e-6, atol=1e-6, what='warm')
    _same_state(c, d, 'warm')
    for k in range(len(STATE)):
        _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
    want = c.values()
    for m in (c, d):
        with pytest.raises(AssertionError):
            m.g(np.float32(2))
    for k, (w, g) in enumerate(zip(want, d.values())):
        assert_close(g, w, rtol=1e-6, atol=1e-6, what='after the failed call: s%d' % k)
    for x in (0.4, 0.5):
        assert_close(d.g(np.float32(x)), c.g(np.float32(x)), rtol=1e-6, atol=1e-6, what='after the failed call')
    _same_state(c, d, 'after the failed call')

    def interrupt(where):
        if where == 'outputs':
            raise KeyboardInterrupt
    for k in range(0, len(STATE), 2):
        _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
    want = c.values()
    with faults.injected(interrupt):
        with pytest.raises(KeyboardInterrupt):
            d.g(np.float32(0.6))
    for k, (w, g) in enumerate(zip(want, d.values())):
        assert_close(g, w, rtol=1e-6, atol=1e-6, what='after the interrupted call: s%d' % k)
    for x in (0.6, 0.7, 0.8):
        assert_close(d.g(np.float32(x)), c.g(np.float32(x)), rtol=1e-6, atol=1e-6, what='after the interrupt')
    _same_state(c, d, 'after the interrupt')


def test_borrowed_values_changed_in_place_after_set_value():
    """``set_value(a, borrow=True)`` then ``a`` changed in place before the next call: the
    call computes with the changed ``a``, as Theano C does; so does the value got with
    ``get_value(borrow=True)``, changed in place and set again (the same object), and a
    value written into the container's cell directly."""
    rng = np.random.RandomState(5)
    c, d = _twins(5)
    for rep in range(3):
        _run(c, d, _xs(rng, 3), 'warm %d' % rep)
    held = {}
    for k in range(len(STATE)):
        v = _value(STATE[k][0], STATE[k][1], rng)
        for m in (c, d):
            a = v.copy()
            m.state[k].set_value(a, borrow=True)
            held[id(m), k] = a
    for (_, k), a in held.items():              # changed after set_value
        if a.size:
            a[...] = np.logical_not(a) if a.dtype == bool else a * 2 + 1
    _run(c, d, _xs(rng, 4), 'borrowed, changed in place')
    # the same objects, changed in place again and set again: no new object in the cells
    for m in (c, d):
        for k, s in enumerate(m.state):
            a = s.get_value(borrow=True)
            if a.size:
                a[...] = np.logical_not(a) if a.dtype == bool else a - 3
            s.set_value(a, borrow=True)
    _run(c, d, _xs(rng, 4), 'get_value(borrow=True), changed, set again')
    assert _last_call(d)['uploads'] == sum(1 for dt, shape in STATE if np.prod(shape) > 0)
    # a write into the cell that bypasses the container
    for m in (c, d):
        m.state[1].container.storage[0] = np.full((3, 4), 7.0)
        m.state[2].container.storage[0] = np.arange(5, dtype='int32')
    _run(c, d, _xs(rng, 3), 'cells written directly')


def test_several_functions_share_the_values_set():
    """Two simulator methods and a plain OCL function read and update the same shared
    variables: after ``set_value`` on some, whichever runs first uploads them, and the
    others see its updates, not the host values again."""
    rng = np.random.RandomState(6)
    c, d = _twins(6)
    for m, mode in ((c, 'FAST_RUN'), (d, theano_ocl.OCLMode())):
        s0, s1, s9 = m.state[0], m.state[1], m.state[9]
        y = T.scalar('y', dtype='float32')
        m.g = theano.function([y], s0.sum() + s9.sum(), mode='FAST_RUN',
                              updates=[(s0, s0 + y), (s9, s9 * np.float32(0.5))])
        m.h = theano.function([y], T.cast(s1.sum(), 'float32') * y + s0.sum(), mode=mode,
                              updates=[(s1, s1 - T.cast(y, 'float64'))])
    d.sim.add_method('g', d.g)

    def both(what, x):
        assert_close(d.sim.g(np.float32(x)), c.g(np.float32(x)), rtol=1e-6, atol=1e-6, what='%s: g' % what)
        assert_close(d.h(np.float32(x)), c.h(np.float32(x)), rtol=1e-6, atol=1e-6, what='%s: h' % what)
        _run(c, d, _xs(rng, 2), '%s: run_steps' % what)

    for rep in range(3):
        both('warm %d' % rep, 0.1 * rep)
    for rep in range(3):
        for k in (0, 1, 9, 3):
            _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng) if k != 9
                 else rng.uniform(0, 1, 33).astype('float32'))
        both('set %d' % rep, 0.3 + 0.1 * rep)
        # the same variables set again; this time the plain function runs first
        for k in (0, 1):
            _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
        assert_close(d.h(np.float32(0.7)), c.h(np.float32(0.7)), rtol=1e-6, atol=1e-6, what='h first')
        _run(c, d, _xs(rng, 2), 'run_steps after h')
        assert_close(d.sim.g(np.float32(0.2)), c.g(np.float32(0.2)), rtol=1e-6, atol=1e-6, what='g after')
        _same_state(c, d, 'set %d, all ran' % rep)


def test_a_cell_written_directly_then_updated_on_the_device():
    """A value written into a shared variable's cell directly (bypassing its container):
    the first function to run uploads it and updates the variable on the device; the
    other function then reads that update, not the cell's value again."""
    rng = np.random.RandomState(7)
    got = {}
    start = rng.uniform(0, 1, 12).astype('float32')
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        s = theano.shared(start.copy(), name='s')
        t = theano.shared(np.zeros(12, 'float32'), name='t')
        y = T.scalar('y', dtype='float32')
        step = theano.function([y], s.sum(), updates=[(s, s * np.float32(2) + y)], mode=mode)
        read = theano.function([y], (s * y).sum(), updates=[(t, t + s)], mode=mode)
        out = []
        for k in range(4):
            out += [step(np.float32(k)), read(np.float32(k))]
            if k % 2:
                s.container.storage[0] = np.full(12, k, 'float32')
        out += [s.get_value(), t.get_value()]
        got[str(mode)] = out
    want, have = got.values()
    for k, (w, g) in enumerate(zip(want, have)):
        assert_close(g, w, what='result %d' % k)


def test_values_set_after_the_state_moved_into_a_slab():
    """``run_steps`` unbatched first (the frame hot, its shared variables each in a buffer
    of its own), then batched (which gathers them into one slab buffer), then
    ``set_value``: the values go where the state is now."""
    rng = np.random.RandomState(8)
    c, d = _twins(8)

    def run(xs, batch, what):
        want = [c.f(x) for x in xs]
        got = d.sim.run_steps(len(xs), inputs={'x': xs}, probes=[0], batch=batch)[0]
        assert_close(got, np.array(want), rtol=1e-6, atol=1e-6, what=what)
        _same_state(c, d, what)
    for rep in range(3):
        run(_xs(rng, 3), False, 'unbatched %d' % rep)
    for k in range(0, len(STATE), 3):
        _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
    run(_xs(rng, 3), False, 'set, unbatched')
    run(_xs(rng, 3), True, 'batched: gathered into a slab')
    for rep in range(2):
        for k in range(len(STATE)):
            _set((c, d), k, _value(STATE[k][0], STATE[k][1], rng))
        run(_xs(rng, 3), True, 'set, then batched %d' % rep)


@pytest.mark.parametrize('dt', ['float32', 'int64'])
def test_set_value_sends_a_large_value_at_once(dt):
    """``set_value`` without ``borrow`` of a value over ``uploads.VALUE_MAX`` that fits its
    place sends it to the device at once: the next call finds it there (no upload of its
    own); with ``borrow=True`` the array waits for the next call, which uploads it as it
    is then (written in place after ``set_value``, as Theano C sees it). A profiled
    function (its own queue) reading the variable right after ``set_value`` gets the
    value sent. Every result and value is Theano C's."""
    n = 40000                                  # (160 or 320 KB: over VALUE_MAX)
    rng = np.random.RandomState(21)

    def build(mode):
        s = theano.shared(np.zeros(n, dt), name='s')
        x = T.scalar('x', dtype=dt)
        f = theano.function([x], [(s * x).sum(), s[::997]], updates=[(s, s + x)], mode=mode)
        return f, s
    g, cs = build('FAST_RUN')
    f, ds = build(theano_ocl.OCLMode(host_tier='off', cost_model='off'))

    def both(x, what):
        for want, got in zip(g(x), f(x)):
            assert_close(got, want, what=what)
        assert_close(ds.get_value(), cs.get_value(), what='%s: s' % what)
        return theano_ocl.stats(f)['last_call']
    for rep in range(3):
        both(np.asarray(rep, dt), 'warm %d' % rep)
    for rep in range(3):
        value = (rng.uniform(-100, 100, n)).astype(dt)
        cs.set_value(value)
        ds.set_value(value)
        last = both(np.asarray(2, dt), 'set_value %d' % rep)
        assert last['uploads'] == 0 and last['steady'], last
    value = (rng.uniform(-100, 100, n)).astype(dt)
    mine, theirs = value.copy(), value.copy()
    cs.set_value(mine, borrow=True)
    ds.set_value(theirs, borrow=True)
    mine *= 3
    theirs *= 3                                 # (after set_value: the next call sees it)
    last = both(np.asarray(1, dt), 'borrowed, written in place')
    assert last['uploads'] == 1, last
    # a profiled function on the same variable (the device's profiling queue)
    p_c = theano.function([], (cs * 2).sum(), mode='FAST_RUN')
    p_o = theano.function([], (ds * 2).sum(), profile=True,
                          mode=theano_ocl.OCLMode(host_tier='off', cost_model='off'))
    for rep in range(3):
        value = (rng.uniform(-100, 100, n)).astype(dt)
        cs.set_value(value)
        ds.set_value(value)
        assert_close(p_o(), p_c(), what='profiled, after set_value %d' % rep)


def test_set_value_while_another_thread_holds_the_device_waits_for_the_next_call():
    """While a call in another thread holds the device (its ``call_lock``), ``set_value``
    of a large value does not enqueue on the device's queue: the next call uploads it,
    and gives Theano C's values."""
    import threading
    n = 40000
    rng = np.random.RandomState(22)

    def build(mode):
        s = theano.shared(np.zeros(n, 'float32'), name='s')
        return theano.function([], (s * 2).sum(), updates=[(s, s + 1)], mode=mode), s
    g, cs = build('FAST_RUN')
    f, ds = build(theano_ocl.OCLMode(host_tier='off', cost_model='off'))
    for _ in range(3):
        assert_close(f(), g(), what='warm')
    held, done = threading.Event(), threading.Event()

    def call_in_flight():
        with theano_ocl.get_device().call_lock:
            held.set()
            done.wait(30)
    t = threading.Thread(target=call_in_flight)
    t.start()
    try:
        assert held.wait(30)
        value = rng.uniform(-1, 1, n).astype('float32')
        cs.set_value(value)
        ds.set_value(value)
    finally:
        done.set()
        t.join()
    assert_close(f(), g(), what='after set_value')
    assert theano_ocl.stats(f)['last_call']['uploads'] == 1, theano_ocl.stats(f)['last_call']
    assert_close(ds.get_value(), cs.get_value(), what='s')
