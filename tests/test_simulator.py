"""SimulatorOCL: sim, run_steps, add_method, coherence, pickling, errors -- against Theano C.

Graphs are elementwise-only (other op families may still run on the host) except where
a test is about host steps. Reference: the same compiled C function called in a loop.
"""
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.simulator import SimulatorError
from helpers import assert_close

F32 = np.float32


def _net(n_state=4, size=6, dtype='float32', seed=0):
    """Several states updated every step from a per-step input; two outputs."""
    rng = np.random.RandomState(seed)
    x = T.vector('x', dtype=dtype)
    ss = [theano.shared(rng.uniform(-1, 1, size).astype(dtype), name='s%d' % k)
          for k in range(n_state)]
    c, c1 = np.dtype(dtype).type(0.9), np.dtype(dtype).type(0.1)
    upd = [(s, s * c + c1 * T.tanh(x + s)) for s in ss]
    out_a = T.sqr(ss[0]) + x
    out_b = ss[1] * ss[2] - x
    out_a.name, out_b.name = 'a', 'b'
    f = theano.function([x], [out_a, out_b], updates=upd, mode='FAST_RUN')
    xs = rng.uniform(-1, 1, (9, size)).astype(dtype)
    return f, ss, xs


def _reference(f, ss, xs):
    """Outputs of f called once per step and the final state; the state is restored."""
    init = [s.get_value() for s in ss]
    outs = [f(x) for x in xs]
    final = [s.get_value() for s in ss]
    for s, v in zip(ss, init):
        s.set_value(v)
    return [np.array([o[j] for o in outs]) for j in range(len(outs[0]))], final


@pytest.mark.parametrize('batch,feed', [(False, 'copy'), (False, 'rebind'), (True, 'copy'),
                                        ('auto', 'auto')])
def test_run_steps_matches_c(batch, feed):
    f, ss, xs = _net()
    want, final = _reference(f, ss, xs)
    sim = theano_ocl.SimulatorOCL(f)
    got = sim.run_steps(len(xs), inputs={'x': xs}, batch=batch, feed=feed)
    assert len(got) == 2
    for j in range(2):
        assert_close(got[j], want[j], what='probe %d' % j)
    for s, w in zip(ss, final):
        assert_close(s.get_value(), w, what=s.name)
    st = sim.stats
    assert st['launches_per_step'] <= st['launches_per_step_unbatched']
    if batch is True:
        assert st['batched'] and st['launches_per_step'] < st['launches_per_step_unbatched']


def _ensembles(E=6, N=20, D=2, seed=1):
    """A smooth Nengo-like network: per ensemble encoders (dot), rate neurons, decoders
    (dot), a lowpass synapse into the next ensemble; all state in shared variables."""
    rng = np.random.RandomState(seed)
    u = T.fvector('u')
    syn = [theano.shared(np.zeros(D, F32), name='syn%d' % e) for e in range(E)]
    upd, probes = [], []
    for e in range(E):
        enc = theano.shared(rng.randn(N, D).astype(F32), name='enc%d' % e)
        dec = theano.shared((rng.randn(D, N) * 0.1).astype(F32), name='dec%d' % e)
        gain = theano.shared(rng.uniform(0.5, 2, N).astype(F32), name='gain%d' % e)
        v = theano.shared(np.zeros(N, F32), name='v%d' % e)
        x = syn[e] + (u if e == 0 else 0)
        J = gain * T.dot(enc, x) + F32(0.1)
        v_new = v + F32(0.2) * (T.tanh(J) - v)
        upd.append((v, v_new))
        out = T.dot(dec, v_new)
        tgt = syn[(e + 1) % E]
        upd.append((tgt, tgt * F32(0.8) + out * F32(0.2)))
        if e == E - 1:
            probes.append(out)
    f = theano.function([u], probes, updates=upd, mode='FAST_RUN')
    state = [i.variable for i in f.maker.inputs[1:]]
    us = rng.uniform(-1, 1, (15, D)).astype(F32)
    return f, state, us


def test_small_products_run_on_device_and_batch():
    f, state, us = _ensembles()
    want, final = _reference(f, state, us)
    sim = theano_ocl.SimulatorOCL(f)
    for batch in (False, True):
        init = [s.get_value() for s in state]
        got = sim.run_steps(len(us), inputs={'u': us}, batch=batch)
        assert_close(got[0], want[0], what='probe (batch=%s)' % batch)
        for s, w in zip(state, final):
            assert_close(s.get_value(), w, what='%s (batch=%s)' % (s.name, batch))
        st = sim.stats
        assert st['host_steps'] == 0, st          # the encoders/decoders run on the device
        if batch:
            assert st['launches_per_step'] * 3 < st['launches_per_step_unbatched'], st
            # intermediates and shared state were gathered into one slab buffer, so each
            # batched launch binds its operands once
            assert sim._main.vm.last_frame.slab, 'no slab'
        for s, v in zip(state, init):
            s.set_value(v)


def test_probe_every_and_names_and_list_inputs():
    f, ss, xs = _net()
    want, final = _reference(f, ss, xs)
    sim = theano_ocl.SimulatorOCL(f)
    got = sim.run_steps(len(xs), inputs=[xs], probes=['b', 0], probe_every=4)
    assert got[0].shape == (2, 6)
    assert_close(got[0], want[1][[3, 7]])
    assert_close(got[1], want[0][[3, 7]])
    one = sim.run_steps(0, inputs=[xs[:0]], probes='a')
    assert one.shape[0] == 0
    for s, w in zip(ss, final):
        assert_close(s.get_value(), w)


def test_call_protocol_and_coherence_with_f():
    f, ss, xs = _net()
    want, final = _reference(f, ss, xs)
    sim = theano_ocl.optimize(f)
    # alternate: sim, f, sim by keyword, f ... the state is one
    for i, x in enumerate(xs):
        if i % 2:
            got = f(x)
        else:
            got = sim(x) if i % 4 else sim(x=x)
        assert_close(got[0], want[0][i], what='step %d output a' % i)
        assert_close(got[1], want[1][i], what='step %d output b' % i)
    for s, w in zip(ss, final):
        assert_close(s.get_value(), w)
    # f unchanged: still the C linker (stats() takes OCL functions only)
    with pytest.raises(TypeError, match='not compiled with the OCL linker'):
        theano_ocl.stats(f)
    assert theano_ocl.stats(sim)['planned']


def test_run_steps_then_f_continues():
    f, ss, xs = _net()
    want, final = _reference(f, ss, xs)
    sim = theano_ocl.SimulatorOCL(f)
    sim.run_steps(5, inputs={'x': xs[:5]}, probes=[])
    rest = [f(x) for x in xs[5:]]
    for k, r in enumerate(rest):
        assert_close(r[0], want[0][5 + k])
    for s, w in zip(ss, final):
        assert_close(s.get_value(), w)


def test_float64_default_input_and_host_steps():
    """An input with a default value; a reduction (may run on the host) feeding an update."""
    x = T.dvector('x')
    k = T.dscalar('k')
    s = theano.shared(np.linspace(-1, 1, 5), name='s')
    upd = s * 0.5 + T.sum(s) * 0.1 + x * k
    f = theano.function([x, theano.In(k, value=2.0)], T.exp(s) - x, updates=[(s, upd)])
    xs = np.random.RandomState(1).rand(6, 5)
    init = s.get_value()
    want = np.array([f(v) for v in xs])
    final = s.get_value()
    s.set_value(init)
    sim = theano_ocl.SimulatorOCL(f)
    import warnings
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        got = sim.run_steps(6, inputs={'x': xs})
    assert_close(got[0], want)
    assert_close(s.get_value(), final)
    # the frame's host steps are what the run reports, and what stats() reports of a call
    counts = theano_ocl.stats(sim)
    assert counts['run_steps']['host_steps'] == counts['host_steps'], counts
    assert counts['launches'] > 0 and counts['run_steps']['steps'] == 6, counts


def test_add_method_shares_state():
    f, ss, xs = _net()
    s0 = ss[0]
    g = theano.function([], s0.sum(), updates=[(s0, s0 * F32(2))])
    h = theano.function([], T.sqr(s0))          # reads only
    sim = theano_ocl.SimulatorOCL(f)
    sim.add_method('double', g)
    sim.add_method('square', h)
    v0 = s0.get_value()
    total = sim.double()
    assert_close(np.asarray(total), np.asarray(v0.sum(), F32), rtol=1e-5)
    assert_close(sim.square(), np.square(v0 * 2))
    assert_close(s0.get_value(), v0 * 2)
    # the main function sees the doubled state
    out = sim(xs[0])
    assert_close(out[0], np.square(v0 * 2) + xs[0])
    # run_steps of a method: output k is the sum before the k-th doubling
    w = s0.get_value()
    res = sim.double.run_steps(3, probes=0)
    assert_close(res, np.array([(w * 2 ** k).sum(dtype=F32) for k in range(3)], F32), rtol=1e-5)
    assert_close(s0.get_value(), w * 8)


def test_add_method_state_after_steps():
    f, ss, xs = _net()
    s0 = ss[0]
    g = theano.function([], [], updates=[(s0, s0 + F32(1))])
    sim = theano_ocl.SimulatorOCL(f)
    sim.add_method('bump', g)
    v0 = s0.get_value()
    sim.bump.run_steps(4, probes=[])
    assert_close(s0.get_value(), v0 + 4)
    sim.bump()
    assert_close(s0.get_value(), v0 + 5)


def test_add_method_conflicts():
    f, ss, xs = _net()
    other = theano.shared(np.zeros(6, 'float64'), name='s0')       # same name, other dtype
    g = theano.function([], other * 2)
    sim = theano_ocl.SimulatorOCL(f)
    with pytest.raises(SimulatorError, match="'s0'.*dtype float64.*float32"):
        sim.add_method('g', g)
    other2 = theano.shared(np.zeros(3, 'float32'), name='s1')       # same name, other shape
    with pytest.raises(SimulatorError, match=r"'s1'.*shape \(3,\).*\(6,\)"):
        sim.add_method('g', theano.function([], other2 * 2))
    fine = theano.shared(np.ones(6, 'float32'), name='s2')          # same name, same type
    sim.add_method('g', theano.function([], fine * 2))
    assert_close(sim.g(), np.full(6, 2, F32))
    with pytest.raises(SimulatorError, match='already has'):
        sim.add_method('g', theano.function([], fine * 3))


def test_sync_to_and_from_theano():
    f, ss, xs = _net()
    want, final = _reference(f, ss, xs)
    sim = theano_ocl.SimulatorOCL(f)
    sim.run_steps(len(xs), inputs={'x': xs}, probes=[])
    cell = ss[0].container.storage
    assert not np.allclose(cell[0], final[0])        # host view stale until read
    sim.sync_to_theano()
    assert_close(cell[0], final[0])
    # an in-place host change is invisible until sync_from_theano
    ss[3].get_value(borrow=True)[:] = 7
    sim.sync_from_theano()
    got = sim.run_steps(1, inputs={'x': xs[:1]}, probes=[])
    c, c1 = F32(0.9), F32(0.1)
    assert_close(ss[3].get_value(), (np.full(6, 7, F32) * c + c1 * np.tanh(xs[0] + 7)).astype(F32))
    assert got == []


def test_run_steps_errors():
    f, ss, xs = _net()
    sim = theano_ocl.SimulatorOCL(f)
    with pytest.raises(SimulatorError, match="input 'x' needs a value per step"):
        sim.run_steps(3)
    with pytest.raises(SimulatorError, match=r"input 'x'.*shape \(n=3.*got shape \(2, 6\)"):
        sim.run_steps(3, inputs={'x': xs[:2]})
    with pytest.raises(SimulatorError, match="no input named 'y'"):
        sim.run_steps(3, inputs={'y': xs[:3]})
    with pytest.raises(SimulatorError, match="no output 'zz'"):
        sim.run_steps(3, inputs={'x': xs[:3]}, probes=['zz'])
    with pytest.raises(SimulatorError, match=r"n must be an integer >= 0, got 10\.5"):
        sim.run_steps(10.5, inputs={'x': xs[:3]})
    with pytest.raises(SimulatorError, match=r"n must be an integer >= 0, got -1"):
        sim.run_steps(-1)
    with pytest.raises(SimulatorError, match=r"probe_every must be an integer >= 1, got 0"):
        sim.run_steps(3, inputs={'x': xs[:3]}, probe_every=0)
    with pytest.raises(SimulatorError, match=r"batch must be True, False or 'auto', got 'nonsense'"):
        sim.run_steps(3, inputs={'x': xs[:3]}, batch='nonsense')
    with pytest.raises(SimulatorError, match=r"batch must be True, False or 'auto'"):
        theano_ocl.SimulatorOCL(f, batch='nonsense')
    # nothing ran: the state is the initial one
    want, _ = _reference(f, ss, xs)
    assert_close(sim(xs[0])[0], want[0][0])


def test_shape_changing_update_is_an_error():
    s = theano.shared(np.ones(3, 'float32'), name='grow')
    f = theano.function([], s.sum(), updates=[(s, T.concatenate([s, s[:1]]))])
    sim = theano_ocl.SimulatorOCL(f)
    with pytest.raises(SimulatorError, match=r"shared variable 'grow': shape \(3,\) before.*\(4,\) after"):
        sim.run_steps(3)
    assert s.get_value().shape == (4,)     # one step ran


def test_no_opencl_platform(monkeypatch):
    f, ss, xs = _net()
    sim = theano_ocl.SimulatorOCL(f)
    blob = pickle.dumps(sim)
    monkeypatch.setattr(theano_ocl.device, 'list_devices', lambda: [])
    with pytest.raises(theano_ocl.NoOpenCLPlatform, match='No OpenCL platform'):
        theano_ocl.SimulatorOCL(f)
    with pytest.raises(theano_ocl.NoOpenCLPlatform, match='pickled SimulatorOCL needs an OpenCL'):
        pickle.loads(blob)


def test_pickle_round_trip_in_subprocess(tmp_path):
    f, ss, xs = _net()
    g = theano.function([], T.sqr(ss[0]).sum())
    sim = theano_ocl.SimulatorOCL(f)
    sim.add_method('energy', g)
    want, final = _reference(f, ss, xs)
    sim.run_steps(4, inputs={'x': xs[:4]}, probes=[])
    path = tmp_path / 'sim.pkl'
    with open(str(path), 'wb') as fh:
        pickle.dump(dict(sim=sim, xs=xs), fh)
    script = textwrap.dedent('''
        import pickle, sys
        import numpy as np
        import theano_ocl
        d = pickle.load(open(sys.argv[1], 'rb'))
        sim, xs = d['sim'], d['xs']
        assert isinstance(sim, theano_ocl.SimulatorOCL)
        got = sim.run_steps(5, inputs={'x': xs[4:]})
        e = sim.energy()
        np.savez(sys.argv[2], a=got[0], b=got[1], e=e,
                 **{'s%d' % k: v.get_value() for k, v in enumerate(
                    [i.variable for i in sim.function.maker.inputs[1:]])})
    ''')
    out = tmp_path / 'out.npz'
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
                                        + [p for p in [env.get('PYTHONPATH')] if p])
    r = subprocess.run([sys.executable, '-c', script, str(path), str(out)], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    res = np.load(str(out))
    assert_close(res['a'], want[0][4:])
    assert_close(res['b'], want[1][4:])
    assert_close(res['e'], np.asarray(np.square(final[0]).sum(), F32), rtol=1e-5)
    for k in range(4):
        assert_close(res['s%d' % k], final[k], what='s%d' % k)


def test_index_checks_are_deferred_in_run_steps():
    # An out-of-range index is reported (IndexError, as Theano C) without making every
    # step a host round trip: the device flag is read once, after the steps.
    rng = np.random.RandomState(5)
    table = theano.shared(rng.uniform(-1, 1, (7, 3)).astype(F32), name='table')
    acc = theano.shared(np.zeros(3, F32), name='acc')
    i = T.ivector('i')
    f = theano.function([i], [T.sum(table[i])], updates=[(acc, acc + table[i].sum(0))],
                        mode='FAST_RUN')
    idx = rng.randint(0, 7, (6, 2)).astype('int32')
    want, final = _reference(f, [acc], idx)
    sim = theano_ocl.SimulatorOCL(f)
    got = sim.run_steps(len(idx), inputs={'i': idx})
    assert_close(got[0], want[0], what='probe')
    assert_close(acc.get_value(), final[0], what='acc')
    assert sim.stats['host_steps'] == 0, sim.stats
    bad = idx.copy()
    bad[3, 1] = 7
    with pytest.raises(IndexError, match='run_steps'):
        sim.run_steps(len(bad), inputs={'i': bad})
    # the flag was cleared: the simulator keeps working
    acc.set_value(np.zeros(3, F32))
    got = sim.run_steps(len(idx), inputs={'i': idx})
    assert_close(got[0], want[0], what='probe after the error')


def _slab_net(seed=3, n_small=20):
    """Large products (library BLAS: CLBlast or host BLAS on mapped memory) reading and
    writing state small enough to live in the simulator's slab, next to many small
    same-kernel updates that the planner batches."""
    rng = np.random.RandomState(seed)
    W = theano.shared(rng.uniform(-.1, .1, (256, 300)).astype(F32), name='W')
    X = theano.shared(rng.uniform(-1, 1, (300, 4)).astype(F32), name='X')
    B = theano.shared(np.zeros((256, 4), F32), name='B')
    small = [theano.shared(rng.uniform(-1, 1, 7 + k).astype(F32), name='q%d' % k)
             for k in range(n_small)]
    H = T.tanh(T.dot(W, X) + B)
    upd = [(B, B * F32(0.5) + F32(0.1) * H),
           (X, X * F32(0.99) + F32(0.01) * T.dot(W.T, H))]
    upd += [(q, q * F32(0.9) + F32(0.1) * T.tanh(q + F32(k))) for k, q in enumerate(small)]
    f = theano.function([], [H.sum(), small[0] * F32(2)], updates=upd, mode='FAST_RUN')
    g = theano.function([], T.dot(W, X).sum(), updates=[(B, B + F32(1))], mode='FAST_RUN')
    return f, g, [W, X, B] + small


def test_slab_regions_with_library_products_and_methods():
    """After run_steps gathers state into one slab (regions of one buffer, not OpenCL
    sub-buffers), every path that hands a buffer to OpenCL -- kernels, copies, library
    BLAS, uploads, downloads, another method's kernels -- uses the region's place."""
    f, g, state = _slab_net()
    init = [s.get_value() for s in state]
    # Theano C reference: 6 steps, g, 2 calls, a host set_value, 3 steps
    ref = [f() for _ in range(6)]
    ref_g = g()
    ref += [f() for _ in range(2)]
    state[3].set_value(np.full(7, 0.5, F32))
    ref += [f() for _ in range(3)]
    final = [s.get_value() for s in state]
    for s, v in zip(state, init):
        s.set_value(v)

    sim = theano_ocl.SimulatorOCL(f)
    sim.add_method('g', g)
    got = sim.run_steps(6, probes=[0, 1], batch=True)
    assert sim._main.vm.last_frame.slab, 'no slab'
    assert sim.stats['batched'] and sim.stats['launches_per_step'] < \
        sim.stats['launches_per_step_unbatched'], sim.stats
    for j in range(2):
        assert_close(got[j], np.array([r[j] for r in ref[:6]]), what='probe %d' % j, rtol=1e-4)
    assert_close(np.asarray(sim.g()), np.asarray(ref_g), rtol=1e-4, what='method g')
    for k in range(2):
        out = sim()
        assert_close(out[0], ref[6 + k][0], rtol=1e-4, what='call %d' % k)
        assert_close(out[1], ref[6 + k][1], what='call %d' % k)
    sim.sync_to_theano()
    state[3].set_value(np.full(7, 0.5, F32))
    sim.sync_from_theano()
    got = sim.run_steps(3, probes=[0, 1], batch=True)
    assert_close(got[1], np.array([r[1] for r in ref[8:]]), what='probe 1 after set_value')
    sim.sync_to_theano()
    for s, w in zip(state, final):
        assert_close(s.get_value(), w, rtol=1e-4, what=s.name)


def _probed_net(seed=4, size=5):
    """Outputs of every kind a probe may be: one only probed, one also read by an update's
    kernel in the same pass, one also an update's value, one probed twice."""
    rng = np.random.RandomState(seed)
    x = T.fvector('x')
    s = [theano.shared(rng.uniform(-1, 1, size).astype(F32), name='p%d' % k) for k in range(3)]
    only = T.tanh(s[0] + x)
    read = s[1] * F32(0.5) - T.sqr(x)
    new2 = s[2] * F32(0.9) + F32(0.1) * T.tanh(read)
    upd = [(s[0], s[0] * F32(0.8) + F32(0.2) * only),
           (s[1], s[1] + F32(0.1) * T.exp(-T.sqr(read))),
           (s[2], new2)]
    f = theano.function([x], [only, read, new2], updates=upd, mode='FAST_RUN')
    return f, s, rng.uniform(-1, 1, (10, size)).astype(F32)


@pytest.mark.parametrize('bind', [True, False])
@pytest.mark.parametrize('batch', [False, True])
@pytest.mark.parametrize('every', [1, 3])
def test_probes_written_into_their_slots_agree_with_calls(monkeypatch, bind, batch, every):
    # run_steps points the kernels computing a probed output at its slot instead of copying
    # the value there after each step (runtime/probe_places.py): an output read later in
    # the pass too, and steps past the last whole slot (10 steps, every 3: a spare slot),
    # must agree with calls; an update's value and an output probed twice are copied
    monkeypatch.setenv('THEANO_OCL_SCAN_BIND', '1' if bind else '0')
    f, state, xs = _probed_net()
    want, final = _reference(f, state, xs)
    sim = theano_ocl.SimulatorOCL(f)
    for run in range(2):         # the second run's step 0 is a step of its loop
        init = [s.get_value() for s in state]
        got = sim.run_steps(len(xs), inputs={'x': xs}, probes=[0, 1, 2, 1], batch=batch,
                            probe_every=every)
        for j, out in enumerate([0, 1, 2, 1]):
            assert_close(got[j], want[out][every - 1::every], what='probe %d (output %d), '
                         'run %d' % (j, out, run))
        for s, w in zip(state, final):
            assert_close(s.get_value(), w, what='%s, run %d' % (s.name, run))
        st = sim.stats
        assert st['host_steps'] == 0, st
        # output 0 only: output 1 is probed twice, output 2 is an update's value
        assert st['probes_in_place'] == (1 if bind else 0), st
        for s, v in zip(state, init):
            s.set_value(v)
    # the probed root went back where its frame planned it: calls agree after the runs
    for t in range(3):
        out = sim(xs[t])
        for j in range(3):
            assert_close(out[j], want[j][t], what='call %d, output %d' % (t, j))


def test_probe_placed_and_read_later_in_the_pass(monkeypatch):
    monkeypatch.setenv('THEANO_OCL_SCAN_BIND', '1')
    f, state, xs = _probed_net()
    want, final = _reference(f, state, xs)
    sim = theano_ocl.SimulatorOCL(f)
    got = sim.run_steps(len(xs), inputs={'x': xs}, probes=[1])
    assert_close(got[0], want[1], what='output 1, read by an update in the same pass')
    for s, w in zip(state, final):
        assert_close(s.get_value(), w, what=s.name)
    assert sim.stats['probes_in_place'] == 1, sim.stats


def _swap_net(seed=6, size=7):
    """State a loop may double-buffer (runtime/state_swap.py): updates computed by
    elementwise kernels and by a reduction, each state read by several kernels, one
    state's value probed, a Join of a constant row and a state (its constant part copied
    once per run: planner.invariant_copies)."""
    rng = np.random.RandomState(seed)
    x = T.fvector('x')
    v = theano.shared(rng.uniform(-1, 1, (3, size)).astype(F32), name='v')
    w = theano.shared(rng.uniform(-1, 1, (3, size)).astype(F32), name='w')
    y = theano.shared(rng.uniform(-1, 1, (2, size)).astype(F32), name='y')
    c = theano.shared(rng.uniform(-1, 1, (4, size, 3)).astype(F32), name='c')
    joined = T.concatenate([T.constant(np.linspace(-1, 1, size).astype(F32))[None, :], y],
                           axis=0)                                        # 3 x size
    v_new = v * F32(0.7) + F32(0.3) * T.tanh(joined + w + x)
    w_new = T.switch(v_new > F32(0.2), w * F32(0.5), w + F32(0.1) * v)
    y_new = F32(0.9) * y + F32(0.1) * (c[:2] * v_new.T[None, :, :]).sum(axis=2)
    out = (v_new * w).sum(axis=1)
    f = theano.function([x], [out, v_new], updates=[(v, v_new), (w, w_new), (y, y_new)],
                        mode='FAST_RUN')
    return f, [v, w, y], rng.uniform(-1, 1, (9, size)).astype(F32)


@pytest.mark.parametrize('bind', [True, False])
def test_state_double_buffered_agrees_with_calls(monkeypatch, bind):
    # each state lives in two places that trade every step (its commit copies nothing);
    # runs of odd and even lengths leave the last value home, and calls, set_value and
    # later runs find every state where it lives
    monkeypatch.setenv('THEANO_OCL_SCAN_BIND', '1' if bind else '0')
    f, state, xs = _swap_net()
    want, final = _reference(f, state, xs)
    sim = theano_ocl.SimulatorOCL(f)
    done = 0
    for n in (1, 2, 3, 1):              # 7 steps, in runs of odd and even lengths
        got = sim.run_steps(n, inputs={'x': xs[done:done + n]}, probes=[0], batch=True)
        assert_close(got[0], want[0][done:done + n], what='probe, steps %d..%d' % (
            done, done + n - 1))
        done += n
        st = sim.stats
        if n > 1:
            # v_new is an output too, never probed: v is double-buffered with the others
            assert st['states_swapped'] == (3 if bind else 0), st
            assert st['hoisted'] == 1, st
    for t in range(done, len(xs)):        # calls go on from where the runs left the state
        out = sim(xs[t])
        assert_close(out[0], want[0][t], what='call at step %d' % t)
    for s, w in zip(state, final):
        assert_close(s.get_value(), w, what=s.name)
    # a state set between runs is read from its home by the next run's first step
    f2, state2, _ = _swap_net()
    state2[0].set_value(state[0].get_value() * F32(0.5))
    state[0].set_value(state[0].get_value() * F32(0.5))
    for s2, s in zip(state2[1:], state[1:]):
        s2.set_value(s.get_value())
    want2 = [f2(xs[t]) for t in range(3)]
    got = sim.run_steps(3, inputs={'x': xs[:3]}, probes=[0, 1], batch=True)
    for t in range(3):
        assert_close(got[0][t], want2[t][0], what='after set_value, step %d' % t)
        assert_close(got[1][t], want2[t][1], what='after set_value, v_new at step %d' % t)
    for s2, s in zip(state2, state):
        assert_close(s.get_value(), s2.get_value(), what='%s after set_value' % s.name)
