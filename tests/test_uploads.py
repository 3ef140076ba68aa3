"""Many shared variables set on the host, uploaded as one (runtime/uploads.py): the values
the device then computes with are the host's, against Theano C stepping the same state.

The shared variables of a simulator live in one slab buffer, so after ``set_value`` on all
of them the next run's uploads go through the packed transfer and the scatter launch.
"""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import uploads


def _model(seed=0):
    """Shared variables of several dtypes and sizes (odd byte counts, 0-d, empty), each
    updated every step from a per-step input; one output reads them all. (The empty one
    is also a commit of 0 bytes, which the batched commit plan once enqueued: an error.)"""
    rng = np.random.RandomState(seed)
    x = T.scalar('x', dtype='float32')
    specs = [('float32', (7,)), ('float32', (3, 5)), ('int8', (13,)), ('bool', (5,)),
             ('int32', ()), ('uint16', (3,)), ('float32', (0,)), ('int64', (4,)),
             ('float32', (1,)), ('uint8', (9,)), ('float16', (5,)), ('float32', (33,))]
    ss = []
    for k, (dt, shape) in enumerate(specs):
        v = rng.uniform(0, 3, shape)
        ss.append(theano.shared(np.asarray(v > 1 if dt == 'bool' else v).astype(dt),
                                name='s%d' % k))
    upd, total = [], T.constant(np.float32(0))
    for s in ss:
        if s.dtype == 'bool':
            new = T.xor(s, T.gt(x, 0.5))
        elif s.dtype.startswith(('int', 'uint')):
            new = s + T.cast(T.gt(x, 0.5), s.dtype)
        else:
            new = s + T.cast(x * 0.5, s.dtype)
        upd.append((s, new))
        total = total + T.cast(s, 'float32').sum()
    f = theano.function([x], total, updates=upd, mode='FAST_RUN')
    return f, ss, rng


def _values(ss, rng):
    out = []
    for s in ss:
        v = s.get_value()
        w = rng.uniform(0, 3, v.shape)
        out.append(np.asarray(w > 1 if v.dtype == bool else w).astype(v.dtype))
    return out


def _c_run(f, ss, start, xs):
    for s, v in zip(ss, start):
        s.set_value(v.copy())
    outs = [f(x) for x in xs]
    return np.array(outs), [s.get_value() for s in ss]


def test_set_values_uploaded_as_one(monkeypatch):
    f, ss, rng = _model()
    xs = rng.uniform(0, 1, 6).astype('float32')
    sim = theano_ocl.SimulatorOCL(f)
    sim.run_steps(3, inputs={'x': xs[:3]}, probes=[0])     # resident, gathered into a slab
    scatters = []
    real = uploads._scatter

    def spy(dev, queue, buf, values, offsets, sizes):
        scatters.append(len(values))
        return real(dev, queue, buf, values, offsets, sizes)
    monkeypatch.setattr(uploads, '_scatter', spy)
    for rep in range(2):
        start = _values(ss, rng)
        want, want_state = _c_run(f, ss, start, xs)
        for s, v in zip(ss, start):
            s.set_value(v.copy())
        got = sim.run_steps(len(xs), inputs={'x': xs}, probes=[0])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5)
        for s, w in zip(ss, want_state):
            assert s.get_value().dtype == w.dtype
            np.testing.assert_allclose(s.get_value().astype('float64'),
                                       w.astype('float64'), rtol=1e-3, err_msg=s.name)
    # the non-empty values went as one group each time (the empty one needs no upload)
    assert scatters == [len(ss) - 1] * 2


def test_failed_batch_leaves_the_host_value_newer(monkeypatch):
    """The packed transfer fails (device out of memory): the call raises, and the next run
    uploads the host values again rather than computing with stale device copies."""
    f, ss, rng = _model(1)
    xs = rng.uniform(0, 1, 4).astype('float32')
    sim = theano_ocl.SimulatorOCL(f)
    sim.run_steps(2, inputs={'x': xs[:2]}, probes=[0])
    start = _values(ss, rng)
    want, want_state = _c_run(f, ss, start, xs)

    def fail(*args):
        raise MemoryError('injected: staging buffer')
    with monkeypatch.context() as m:
        m.setattr(uploads, '_scatter', fail)
        for s, v in zip(ss, start):
            s.set_value(v.copy())
        with pytest.raises(MemoryError, match='injected'):
            sim.run_steps(len(xs), inputs={'x': xs}, probes=[0])
    for s, v in zip(ss, start):          # what set_value put there is still the value
        np.testing.assert_array_equal(s.get_value(), v)
    got = sim.run_steps(len(xs), inputs={'x': xs}, probes=[0])[0]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for s, w in zip(ss, want_state):
        np.testing.assert_allclose(s.get_value().astype('float64'), w.astype('float64'),
                                   rtol=1e-3, err_msg=s.name)


def test_few_values_go_one_by_one(monkeypatch):
    """Below GROUP_MIN values into a buffer: no scatter launch, the plain uploads."""
    x = T.scalar('x', dtype='float32')
    ss = [theano.shared(np.arange(5, dtype='float32') + k) for k in range(3)]
    f = theano.function([x], sum(s.sum() for s in ss) * x,
                        updates=[(s, s + x) for s in ss], mode='FAST_RUN')
    sim = theano_ocl.SimulatorOCL(f)
    sim.run_steps(2, inputs={'x': np.ones(2, 'float32')}, probes=[0])
    monkeypatch.setattr(uploads, '_scatter',
                        lambda dev, queue, buf, values, *a: pytest.fail(
                            'scatter for %d values' % len(values)))
    for s in ss:
        s.set_value(np.full(5, 2.0, 'float32'))
    got = sim.run_steps(1, inputs={'x': np.full(1, 3.0, 'float32')}, probes=[0])[0]
    np.testing.assert_allclose(got, [3 * 30.0])
    np.testing.assert_allclose(ss[0].get_value(), np.full(5, 5.0))


def test_step0_after_set_value_uploads_only_what_changed():
    """A simulator's reset of its state variables (``set_value`` on some shared variables,
    the same shapes) keeps step 0 of the next ``run_steps`` on the steady path: the values
    set, and only those, go to the device in one packed transfer; the parameters and the
    inputs of the frame are not looked at one by one (the general path computes the key,
    looks the frame up and re-binds every input: its cost grows with all the shared
    variables, changed or not)."""
    rng = np.random.RandomState(3)
    x = T.scalar('x', dtype='float32')
    params = [theano.shared(rng.uniform(0, 1, 16).astype('float32'), name='w%d' % k)
              for k in range(12)]
    state = [theano.shared(np.zeros(16, 'float32'), name='v%d' % k) for k in range(12)]
    upd = [(v, v * np.float32(0.9) + w * x) for v, w in zip(state, params)]
    f = theano.function([x], sum(v.sum() for v in state), updates=upd, mode='FAST_RUN')
    xs = rng.uniform(0, 1, 5).astype('float32')
    sim = theano_ocl.SimulatorOCL(f)
    sim.run_steps(5, inputs={'x': xs}, probes=[0])
    sim.run_steps(5, inputs={'x': xs}, probes=[0])
    start = [rng.uniform(0, 1, 16).astype('float32') for _ in state[:9]]
    for v, s0 in zip(state[:9], start):           # 9 of the 24 shared variables
        v.set_value(s0)
    kept = [v.get_value() for v in state[9:]]
    got = sim.run_steps(len(xs), inputs={'x': xs}, probes=[0])[0]
    last = theano_ocl.stats(sim)['last_call']     # step 0 is the simulator's last call
    assert last == dict(steady=True, uploads=9, upload_bytes=9 * 16 * 4, upload_transfers=1)
    # the values computed are those of the state set (Theano C from the same state)
    for v, s0 in zip(state, start + kept):
        v.set_value(s0)
    want = [f(xv) for xv in xs]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    # a value of another shape cannot stay in its place: the general path, planned anew
    state[0].set_value(np.zeros(8, 'float32'))
    with pytest.raises(ValueError):
        sim.run_steps(2, inputs={'x': xs[:2]}, probes=[0])   # (the graph's shapes differ)


def test_hot_calls_are_steady_on_the_device_and_on_the_host_tier():
    """Functions called again and again come back to their frame: their hot calls are
    steady (``stats(f)['last_call']``) and upload nothing, whether the device runs them (a
    softmax-regression step) or, once hot, Theano's VM in this thread (an integer counter:
    a tiny frame, ``on_host``); their results are Theano C's."""
    rng = np.random.RandomState(0)
    X = rng.randn(32, 20).astype('float32')
    Y = rng.randint(0, 10, 32)
    got, fns = {}, {}
    for mode in ('FAST_RUN', 'OCL'):
        W = theano.shared(np.zeros((20, 10), 'float32'))
        b = theano.shared(np.zeros(10, 'float32'))
        x, y = T.fmatrix('x'), T.lvector('y')
        p = T.nnet.softmax(T.dot(x, W) + b)
        loss = -T.mean(T.log(p)[T.arange(y.shape[0]), y])
        gW, gb = T.grad(loss, [W, b])
        step = theano.function([x, y], loss, mode=mode,
                               updates=[(W, W - np.float32(0.1) * gW),
                                        (b, b - np.float32(0.1) * gb)])
        k = theano.shared(np.int64(0))
        count = theano.function([], k * 3 - 1, updates=[(k, k + 1)], mode=mode)
        got[mode] = ([float(step(X, Y)) for _ in range(30)], [int(count()) for _ in range(40)])
        fns[mode] = step, count
    np.testing.assert_allclose(got['OCL'][0], got['FAST_RUN'][0], rtol=1e-5)
    assert got['OCL'][1] == got['FAST_RUN'][1]
    step, count = fns['OCL']
    quiet = dict(steady=True, uploads=0, upload_bytes=0, upload_transfers=0)
    assert theano_ocl.stats(step)['last_call'] == quiet
    assert theano_ocl.stats(count)['on_host'], theano_ocl.stats(count)
    assert theano_ocl.stats(count)['last_call'] == quiet
