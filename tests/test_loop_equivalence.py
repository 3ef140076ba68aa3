"""Every way of running a frame gives a plain call's answer, step by step.

A family of graphs runs three ways from the same initial state: Theano C called once per
step, the OCL function called once per step, and ``SimulatorOCL(f).run_steps(n)`` with
every output probed. Each step's outputs and the final shared values must agree with
Theano C's. The graphs are the ones where a loop may go wrong where a call does not:
integer and float counters of every width read directly and through casts (host shape
arithmetic on the host, their readers on the device), per-step scalar and vector inputs of
every dtype, updates reading other updates' variables, IfElse, a scan inside, and an
error flag raised on a chosen step. And one step function run as calls, by ``run_steps``
and as a device Scan, batched and not: every pass of each is run by the one loop driver.
"""
import warnings

import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.ifelse import ifelse

import theano_ocl
from helpers import assert_close

INTS = ['int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64']
FLOATS = ['float32', 'float64']


def assert_three_ways_agree(build, steps, n=None):
    """Run ``build()`` (-> inputs, outputs, updates, shared variables) three ways over the
    per-step input values ``steps`` (a list, one tuple of input values per step, or
    ``n`` steps of a function without inputs) and compare with Theano C."""
    n = len(steps) if steps else n
    steps = steps or [()] * n
    runs = {}
    for way in ('c', 'ocl', 'sim'):
        inputs, outputs, updates, shared = build()
        mode = 'OCL' if way == 'ocl' else 'FAST_RUN'
        f = theano.function(inputs, outputs, updates=updates, mode=mode)
        if way == 'sim':
            sim = theano_ocl.SimulatorOCL(f)
            feeds = {k: np.array([s[k] for s in steps]) for k in range(len(inputs))}
            got = []
            # two runs: the first's step 0 is a call, the second's (the frame replayed) a
            # step of its loop (runtime/executor.py, Executor._steady_frame)
            for a, b in ((0, min(2, n)), (min(2, n), n)):
                if b == a:
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter('ignore')        # host steps are expected here
                    per_output = sim.run_steps(b - a, inputs={k: v[a:b] for k, v in feeds.items()},
                                               probes=list(range(len(outputs))))
                got += [[per_output[j][t] for j in range(len(outputs))] for t in range(b - a)]
        else:
            got = [f(*s) for s in steps]
        runs[way] = got, [v.get_value() for v in shared], [v.name for v in shared]
    want, final, names = runs['c']
    for way in ('ocl', 'sim'):
        got, got_final, _ = runs[way]
        for t in range(n):
            for j, (g, w) in enumerate(zip(got[t], want[t])):
                assert_close(g, w, what='%s: output %d (%s) at step %d' % (
                    way, j, outputs[j], t))
        for name, g, w in zip(names, got_final, final):
            assert_close(g, w, what='%s: shared variable %s after %d steps' % (way, name, n))
    return runs


def test_counters_of_every_width_read_directly_and_through_casts():
    # run_steps gave [0, 0, 0, 0, 0] for cast(k) and left w at 0: the counter's update ran
    # on the host and its device copy, read by the cast, was never refreshed
    def build():
        outs, upd, shared = [], [], []
        for dt in INTS + FLOATS:
            k = theano.shared(np.asarray(0, dt), name='k_' + dt)
            w = theano.shared(np.float32(0), name='w_' + dt)
            kf = T.cast(k, 'float64')
            outs += [k, T.cast(k, 'float32'), kf + 1, 0.9 ** kf, k * 2, T.cast(k + 1, 'float32')]
            upd += [(k, k + np.asarray(1, dt)), (w, w + T.cast(k, 'float32'))]
            shared += [k, w]
        return [], outs, upd, shared
    assert_three_ways_agree(build, None, n=5)


def test_keras_style_adam_counter():
    # t = cast(iterations) + 1 decides the bias correction of every step
    rng = np.random.RandomState(0)
    X = rng.randn(16, 5).astype('float32')
    Y = rng.randn(16, 3).astype('float32')
    W0 = (rng.randn(5, 3) * 0.1).astype('float32')

    def build():
        W = theano.shared(W0.copy(), name='W')
        it = theano.shared(np.int64(0), name='iterations')
        m = theano.shared(np.zeros_like(W0), name='m')
        v = theano.shared(np.zeros_like(W0), name='v')
        x, y = T.matrix('x', 'float32'), T.matrix('y', 'float32')
        loss = T.mean(T.sqr(T.dot(x, W) - y))
        g = T.grad(loss, W)
        t = T.cast(it, 'float32') + 1
        lr = np.float32(0.01) * T.sqrt(1 - np.float32(0.999) ** t) / (1 - np.float32(0.9) ** t)
        m1 = np.float32(0.9) * m + np.float32(0.1) * g
        v1 = np.float32(0.999) * v + np.float32(0.001) * T.sqr(g)
        upd = [(it, it + 1), (m, m1), (v, v1), (W, W - lr * m1 / (T.sqrt(v1) + np.float32(1e-7)))]
        return [x, y], [loss], upd, [W, it, m, v]
    assert_three_ways_agree(build, [(X, Y)] * 20)


@pytest.mark.parametrize('dt', INTS + FLOATS + ['bool'])
def test_per_step_scalar_and_vector_inputs(dt):
    rng = np.random.RandomState(1)
    n = 4

    def build():
        s = T.scalar('s', dtype=dt)
        x = T.vector('x', dtype=dt)
        acc = theano.shared(np.zeros(3, 'float64'), name='acc')
        total = theano.shared(np.float64(0), name='total')
        outs = [s, x, T.cast(x, 'float64') * T.cast(s, 'float64') + 1]
        upd = [(acc, acc + T.cast(x, 'float64')), (total, total + T.cast(s, 'float64'))]
        return [s, x], outs, upd, [acc, total]
    if dt == 'bool':
        vals = rng.rand(n, 4) > 0.5
    elif dt.startswith('float'):
        vals = rng.uniform(-3, 3, (n, 4)).astype(dt)
    else:
        vals = rng.randint(0, 100, (n, 4)).astype(dt)
    assert_three_ways_agree(build, [(vals[t, 0], vals[t, 1:]) for t in range(n)])


def test_per_step_integer_index_input():
    # run_steps fed a numpy scalar to Theano's C code for a host-read index
    def build():
        v = theano.shared(np.zeros(4, 'float32'), name='v')
        idx = T.lscalar('idx')
        return [idx], [v.sum(), v[idx]], [(v, T.inc_subtensor(v[idx], 1))], [v]
    assert_three_ways_agree(build, [(np.int64(i),) for i in (0, 3, 1, 3, 2)])


def test_updates_read_other_updates_variables_ifelse_and_scan():
    rng = np.random.RandomState(2)
    xs = rng.uniform(-1, 1, (5, 3)).astype('float64')

    def build():
        a = theano.shared(np.arange(3, dtype='float64'), name='a')
        b = theano.shared(np.ones(3, 'float64'), name='b')
        k = theano.shared(np.int32(0), name='k')
        x = T.vector('x', dtype='float64')
        # a scan inside: a running sum of x scaled by b's current value
        run, _ = theano.scan(lambda xi, acc, bi: acc + xi * bi, sequences=[x, b],
                             outputs_info=[T.zeros((), 'float64')])
        branch = ifelse(T.eq(k % 2, 0), a * 2, b - a)
        outs = [run, branch, a + b]
        # every update reads variables that other updates write (the old values)
        upd = [(a, b + x), (b, a * 0.5 + run[-1]), (k, k + 1)]
        return [x], outs, upd, [a, b, k]
    assert_three_ways_agree(build, [(x,) for x in xs])


def test_error_flag_on_a_chosen_step():
    # step 3 indexes out of range: every way raises IndexError there with steps 0..2
    # committed and nothing of step 3
    rng = np.random.RandomState(3)
    table0 = rng.uniform(-1, 1, (5, 2)).astype('float32')
    idx = np.array([[0, 1], [4, 2], [3, 3], [1, 5], [2, 0]], 'int32')
    finals = {}
    for way in ('c', 'ocl', 'sim'):
        table = theano.shared(table0.copy(), name='table')
        acc = theano.shared(np.zeros(2, 'float32'), name='acc')
        i = T.ivector('i')
        f = theano.function([i], table[i].sum(), updates=[(acc, acc + table[i].sum(0))],
                            mode='OCL' if way == 'ocl' else 'FAST_RUN')
        with pytest.raises(IndexError):
            if way == 'sim':
                theano_ocl.SimulatorOCL(f).run_steps(len(idx), inputs={'i': idx})
            else:
                for t in range(len(idx)):
                    f(idx[t])
        finals[way] = acc.get_value()
    want = table0[idx[:3]].sum(axis=(0, 1))
    for way, got in finals.items():
        assert_close(got, want, what='%s: acc after the failing step' % way, rtol=1e-6)


@pytest.mark.parametrize('way', ['apart', 'batched', 'merged'])
def test_a_call_run_steps_and_a_device_scan_agree(way):
    """One step function run on the device three ways, each a loop of the one driver
    (``runtime.loop.drive``): called once per step (a call's pass is a loop of one step),
    ``SimulatorOCL.run_steps`` (steps 1..n-1 one loop) and a device Scan of the same step
    (its steps after the first lowered). Every step's values equal Theano C's. Batched:
    the step's three like updates are one launch in the calls' hot pass too; merged: one
    launch in every pass (the ``merge`` setting, once the frame is built)."""
    n, m = 7, 6
    rng = np.random.RandomState(5)
    xs = rng.uniform(-1, 1, (n, m)).astype('float32')
    h0 = [rng.uniform(-1, 1, m).astype('float32') for _ in range(3)]
    batched = way == 'batched'
    mode = theano_ocl.OCLMode(batch_after=1, batch_min_launches=2, merge=False) if batched \
        else theano_ocl.OCLMode(batch_after='never', merge=way == 'merged')

    def step(x, *hs):
        return [T.tanh(h * np.float32(0.5) + x) for h in hs]

    def stepper(mode):
        hs = [theano.shared(v.copy(), name='h%d' % k) for k, v in enumerate(h0)]
        x = T.vector('x', dtype='float32')
        new = step(x, *hs)
        return theano.function([x], new, updates=list(zip(hs, new)), mode=mode)
    f_c = stepper('FAST_RUN')
    want = np.array([f_c(x) for x in xs])                   # (step, state, m)
    f_call = stepper(mode)
    got = {'calls': np.array([f_call(x) for x in xs])}
    sim = theano_ocl.SimulatorOCL(stepper(mode))
    got['run_steps'] = np.stack(sim.run_steps(n, inputs={'x': xs}, probes=[0, 1, 2]), axis=1)
    X = T.matrix('X', dtype='float32')
    H = [T.vector('h%d' % k, dtype='float32') for k in range(3)]
    outs, _ = theano.scan(step, sequences=X, outputs_info=H)
    f_scan = theano.function([X] + H, outs, mode=mode)
    got['scan'] = np.stack(f_scan(xs, *h0), axis=1)
    for path, values in got.items():
        for t in range(n):
            assert_close(values[t], want[t], what='%s: step %d' % (path, t))
    call = theano_ocl.stats(f_call)
    assert call['frames'] == 1 and call['replans'] == 0, call
    assert (call['launches'] == 1) if way == 'merged' else (call['launches'] >= 3), call
    if batched:
        assert call['batched_launches'] < call['launches'], call
    else:
        assert call['batched_launches'] == call['launches'], call
    run = theano_ocl.stats(sim)['run_steps']
    assert run['steps_done'] == n and run['call_steps'] == 0, run
    scans = theano_ocl.stats(f_scan)['scans']
    assert len(scans) == 1 and scans[0]['steps'] == n, scans
    assert scans[0]['lowered_steps'] == n - 1, scans


def test_a_run_whose_step_0_replays_the_last_frame_runs_it_in_its_loop():
    """A second ``run_steps`` whose inputs replay the frame the first one left runs step 0
    as a step of its loop (``stats['loop_steps']`` is every step), not as a call; with
    the probes every step and every other step, a state carried across runs, shared
    variables set between runs (uploaded before step 0) and counters, every output and
    shared value is Theano C's."""
    def build(mode):
        x = T.fvector('x')
        s = theano.shared(np.zeros(3, 'float32'), name='s')
        k = theano.shared(np.int64(0), name='k')
        v = theano.shared(np.float64(1), name='v')
        y = T.tanh(s * 0.5 + x) + T.cast(k, 'float32')
        f = theano.function([x], [y, y.sum() * v], mode=mode,
                            updates=[(s, y), (k, k + 1), (v, v * 0.9)])
        return f, (s, k, v)
    g, cs = build('FAST_RUN')
    f, ds = build('FAST_RUN')
    sim = theano_ocl.SimulatorOCL(f)
    rng = np.random.RandomState(3)
    for run, (n, every, reset) in enumerate([(3, 1, False), (4, 1, False), (4, 2, False),
                                             (5, 1, True), (2, 2, True)]):
        xs = rng.randn(n, 3).astype('float32')
        if reset:
            value = rng.randn(3).astype('float32')
            for shared in (cs[0], ds[0]):
                shared.set_value(value)
        want = [g(x) for x in xs]
        got = sim.run_steps(n, inputs={'x': xs}, probes=[0, 1], probe_every=every)
        for j in range(2):
            assert_close(got[j], np.array([w[j] for w in want])[every - 1::every],
                         what='run %d: output %d' % (run, j))
        for c, d in zip(cs, ds):
            assert_close(d.get_value(), c.get_value(), what='run %d: %s' % (run, c.name))
        if run:
            assert sim.stats['loop_steps'] == n, (run, sim.stats)


@pytest.mark.parametrize('batched', [True, False], ids=['batched', 'unbatched'])
def test_runs_alike_take_the_last_runs_loop_and_agree_with_calls(batched):
    """A run like the one before it (same steps and probes, nothing fed per step) takes the
    loop that run declared, its probe buffers included (``stats['loop_kept']``); across
    runs of one and of several steps, values set between them (the same shape: uploaded
    into place; another shape: a new frame), a plain call between them and probes taken
    every other step, every probed value and every shared value is Theano C's, and a run
    after any of those that moves a variable declares its loop afresh."""
    mode = theano_ocl.OCLMode(batch_after=1, batch_min_launches=2) if batched else \
        theano_ocl.OCLMode(batch_after='never')
    rng = np.random.RandomState(11)
    a0 = rng.uniform(-1, 1, (4, 5)).astype('float32')
    b0 = rng.uniform(-1, 1, 5).astype('float32')

    def build(mode):
        a = theano.shared(a0.copy(), name='a')
        b = theano.shared(b0.copy(), name='b')
        k = theano.shared(np.int32(0), name='k')
        a1 = T.tanh(a * np.float32(0.9) + b)
        b1 = b * np.float32(0.5) + a1.sum(axis=0) * np.float32(0.1)
        # a strided probe (a1.T), a state probed in place (b1), a counter read on the device
        outs = [a1.T, b1, T.cast(k, 'float32') * b1.sum()]
        f = theano.function([], outs, updates=[(a, a1), (b, b1), (k, k + 1)], mode=mode)
        return f, (a, b, k)
    g, cs = build('FAST_RUN')
    f, ds = build(mode)
    sim = theano_ocl.SimulatorOCL(f)
    kept = []
    # (steps, probe_every, what happens before the run)
    plan = [(1, 1, None), (1, 1, None), (1, 1, 'set'), (1, 1, None), (3, 1, None),
            (3, 1, None), (3, 1, 'call'), (3, 1, None), (4, 2, None), (4, 2, 'set'),
            (1, 1, 'reshape'), (1, 1, None), (1, 1, None)]
    for run, (n, every, before) in enumerate(plan):
        if before == 'set':
            value = rng.uniform(-1, 1, 5).astype('float32')
            for shared in (cs[1], ds[1]):
                shared.set_value(value)
        elif before == 'reshape':
            value = rng.uniform(-1, 1, (2, 5)).astype('float32')
            for shared in (cs[0], ds[0]):
                shared.set_value(value)
        elif before == 'call':
            for want, got in zip(g(), f()):
                assert_close(got, want, what='run %d: the call before it' % run)
        want = [g() for _ in range(n)]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')         # (the counter's host steps)
            got = sim.run_steps(n, probes=[0, 1, 2], probe_every=every)
        for j in range(3):
            assert_close(got[j], np.array([w[j] for w in want])[every - 1::every],
                         what='run %d: output %d' % (run, j))
        for c, d in zip(cs, ds):
            assert_close(d.get_value(), c.get_value(), what='run %d: %s' % (run, c.name))
        kept.append(sim.stats['loop_kept'])
    # the second of each pair of alike runs, after nothing, a value set in place or a call
    for run in (1, 2, 3, 5, 6, 7, 9, 12):
        assert kept[run], (run, kept)
    # the first run, the first of another length or probe rate, the first of a new frame
    for run in (0, 4, 8, 10):
        assert not kept[run], (run, kept)
    # probes left on the device (the executor's ``probes_on``, as test_executor.py runs it)
    # are the caller's arrays: a run alike after them writes into other buffers
    runs = [f.fn.run(2, probes=[0, 1, 2], probes_on='device') for _ in range(2)]
    want = [g() for _ in range(4)]
    for r, got in enumerate(runs):
        for j in range(3):
            assert_close(got[j].get(), np.array([w[j] for w in want[2 * r:2 * r + 2]]),
                         what='device probes, run %d of 2: output %d' % (r, j))


@pytest.mark.parametrize('feed', ['copy', 'rebind'])
def test_runs_alike_with_per_step_inputs_read_each_runs_own(feed):
    """Runs alike with per-step inputs (a vector the kernels read; an integer that decides
    a shape, read on the host) take the last run's loop and step through their own
    arrays, copied into the staging buffer or with the kernels pointed at each row: every
    step's output and the state are Theano C's (on the device: the cost model off, these
    are small). (Device arrays fed: test_executor.py.)"""
    n, m = 3, 5
    rng = np.random.RandomState(12)

    def build(mode):
        s = theano.shared(np.zeros(m, 'float32'), name='s')
        x = T.fvector('x')
        j = T.iscalar('j')
        s1 = T.tanh(s * np.float32(0.5) + x)
        out = T.concatenate([s1, T.zeros((j,), 'float32')]).sum() + s1[0]
        return theano.function([x, j], [s1, out], updates=[(s, s1)], mode=mode), s
    g, cs = build('FAST_RUN')
    f, ds = build(theano_ocl.OCLMode(cost_model='off'))
    sim = theano_ocl.SimulatorOCL(f)
    kept = []
    for run in range(6):
        xs = rng.uniform(-1, 1, (n, m)).astype('float32')
        js = np.full(n, 2 + run // 3, 'int32')      # (from run 3 on another shape decided)
        want = [g(x, j) for x, j in zip(xs, js)]
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            got = sim.run_steps(n, inputs={'x': xs, 'j': js}, probes=[0, 1], feed=feed)
        for o in range(2):
            assert_close(got[o], np.array([w[o] for w in want]),
                         what='run %d: output %d' % (run, o))
        assert_close(ds.get_value(), cs.get_value(), what='run %d: s' % run)
        kept.append(sim.stats['loop_kept'])
    # the first run of each frame declares its loop; the third takes the second's
    assert not kept[0] and not kept[3] and kept[2] and kept[5], kept
