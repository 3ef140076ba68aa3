"""The Theano Function contract under the OCL linker, and the VM's storage behaviour."""
import pickle
import resource
import gc

import numpy as np
import pytest
import theano
import theano.tensor as T
from theano import In, Out

import theano_ocl
from helpers import assert_close, assert_matches_c


def ocl(**kw):
    return theano_ocl.OCLMode(**kw)


def test_fgraph_is_unchanged():
    x = T.fmatrix('x')
    y = T.exp(x) * 2 + x.T
    f_c = theano.function([x], y, mode='FAST_RUN')
    f_o = theano.function([x], y, mode=ocl())
    assert [str(n.op) for n in f_c.maker.fgraph.toposort()] == \
        [str(n.op) for n in f_o.maker.fgraph.toposort()]
    assert type(f_o.maker.linker).__name__ == 'OCLLinker'
    assert not theano_ocl.fallback_nodes(f_o)


def test_default_and_named_inputs():
    x, y = T.dvectors('x', 'y')
    f = theano.function([x, In(y, value=np.ones(3), name='yy')], x + y, mode=ocl())
    g = theano.function([x, In(y, value=np.ones(3), name='yy')], x + y, mode='FAST_RUN')
    a = np.arange(3.0)
    assert_close(f(a), g(a))
    assert_close(f(a, yy=np.full(3, 2.0)), g(a, yy=np.full(3, 2.0)))
    assert_close(f(a, np.full(3, 5.0)), a + 5)


def test_output_subset_and_several_outputs():
    x = T.dvector('x')
    f = theano.function([x], [x * 2, x + 1, T.exp(x)], mode=ocl())
    a = np.arange(4.0)
    out = f(a, output_subset=[0, 2])
    assert len(out) == 2
    assert_close(out[0], a * 2)
    assert_close(out[1], np.exp(a))


def test_borrow_and_no_recycling():
    # returned arrays are never overwritten by the next call, borrowed or not
    x = T.dvector('x')
    for borrow in (False, True):
        f = theano.function([x], Out(x * 2, borrow=borrow), mode=ocl())
        r1 = f(np.arange(5.0))
        r2 = f(np.arange(5.0) + 10)
        assert_close(r1, np.arange(5.0) * 2)
        assert_close(r2, (np.arange(5.0) + 10) * 2)


def test_trust_input():
    x = T.dvector('x')
    f = theano.function([x], x * 3, mode=ocl())
    f.trust_input = True
    assert_close(f(np.arange(3.0)), np.arange(3.0) * 3)


def test_copy_and_share_memory():
    # Function.copy semantics (which storage is shared) are Theano's: mirror them with C
    results = []
    for mode in ('FAST_RUN', ocl()):
        s = theano.shared(np.zeros(3), 's')
        x = T.dvector('x')
        f = theano.function([x], s * 1, updates={s: s + x}, mode=mode)
        f(np.ones(3))
        g = f.copy(share_memory=True)
        h = f.copy(share_memory=False)
        seq = [g(np.ones(3)), s.get_value(), h(np.ones(3)), f(np.ones(3)), s.get_value(),
               h(np.ones(3))]
        results.append(seq)
    for k, (got, want) in enumerate(zip(results[1], results[0])):
        assert_close(got, want, what='step %d' % k)


def test_pickle_relinks():
    s = theano.shared(np.arange(4.0), 's')
    x = T.dvector('x')
    f = theano.function([x], x * s, updates={s: s + 1}, mode=ocl())
    f(np.ones(4))
    f2 = pickle.loads(pickle.dumps(f))
    assert type(f2.maker.linker).__name__ == 'OCLLinker'
    # the pickled state is the device state at pickling time
    assert_close(f2(np.ones(4)), np.arange(4.0) + 1)
    assert_close(f(np.ones(4)), np.arange(4.0) + 1)


def test_mode_clone_including_excluding():
    m = ocl(device=None)
    for m2 in (m.clone(), m.including('fast_run'), m.excluding('fusion'),
               pickle.loads(pickle.dumps(m))):
        assert isinstance(m2, theano_ocl.OCLMode)
        assert isinstance(m2.linker, theano_ocl.OCLLinker)
        x = T.dvector('x')
        f = theano.function([x], T.exp(x) + x, mode=m2)
        assert_close(f(np.arange(3.0)), np.exp(np.arange(3.0)) + np.arange(3.0))
    assert m.linker.clone(allow_gc=False).allow_gc is False


def test_mode_string_ocl():
    x = T.fvector('x')
    f = theano.function([x], x + 1, mode='OCL')
    assert isinstance(f.maker.linker, theano_ocl.OCLLinker)
    assert_close(f(np.zeros(2, 'f4')), np.ones(2, 'f4'))


def test_profile_reports_device_time():
    x = T.fvector('x')
    f = theano.function([x], T.exp(x) * 2, mode=ocl(), profile=True)
    for _ in range(3):
        f(np.ones(10000, 'f4'))
    prof = f.profile
    assert prof.fct_callcount == 3
    times = list(prof.apply_time.values())
    assert times and all(t > 0 for t in times)
    assert all(c == 3 for c in prof.apply_callcount.values())


def test_shared_coherence():
    s = theano.shared(np.zeros(4, 'float32'), 's')
    f = theano.function([], s * 2, updates={s: s + 1}, mode=ocl())
    f()
    f()
    # the device holds the value; every host view sees it
    assert_close(s.get_value(), np.full(4, 2, 'f4'))
    assert_close(s.get_value(borrow=True), np.full(4, 2, 'f4'))
    g = theano.function([], s + 0, mode='FAST_RUN')           # a non-OCL reader
    f()
    assert_close(g(), np.full(4, 3, 'f4'))
    h = theano.function([], [], updates={s: s * 10}, mode='FAST_RUN')   # a non-OCL writer
    h()
    assert_close(f(), np.full(4, 60, 'f4'))
    s.set_value(np.arange(4, dtype='f4'))
    assert_close(f(), np.arange(4, dtype='f4') * 2)
    assert_close(s.get_value(), np.arange(4, dtype='f4') + 1)
    s.set_value(np.arange(6, dtype='f4'))                      # new shape
    assert_close(f(), np.arange(6, dtype='f4') * 2)
    state = pickle.loads(pickle.dumps(s))
    assert_close(state.get_value(), np.arange(6, dtype='f4') + 1)


def test_updates_swap_and_alias():
    a = theano.shared(np.arange(3.0), 'a')
    b = theano.shared(np.arange(3.0) + 10, 'b')
    f = theano.function([], [a, b], updates=[(a, b), (b, a)], mode=ocl())
    f_c_a = theano.shared(np.arange(3.0), 'a')
    f_c_b = theano.shared(np.arange(3.0) + 10, 'b')
    f_c = theano.function([], [f_c_a, f_c_b], updates=[(f_c_a, f_c_b), (f_c_b, f_c_a)])
    for _ in range(3):
        for g, w in zip(f(), f_c()):
            assert_close(g, w)
    assert_close(a.get_value(), f_c_a.get_value())
    assert_close(b.get_value(), f_c_b.get_value())


def test_device_arrays_in_and_out():
    import pyopencl.array as cla
    x = T.fvector('x')
    f = theano.function([x], T.exp(x) + 1, mode=ocl(outputs='device'))
    dev = theano_ocl.get_device()
    a = np.random.RandomState(0).rand(1000).astype('f4')
    r = f(a)
    assert isinstance(r, cla.Array)
    assert_close(r.get(), np.exp(a) + 1)
    d1 = cla.to_device(dev.queue, a)
    d2 = cla.to_device(dev.queue, a * 2)
    r1 = f(d1)
    r2 = f(d2)                          # another buffer: the frame re-binds, no re-plan
    assert_close(r1.get(), np.exp(a) + 1)
    assert_close(r2.get(), np.exp(a * 2) + 1)
    g = theano.function([x], x * 2, mode=ocl())
    assert_close(g(d2), a * 4)          # device input, host output
    with pytest.raises(TypeError, match='dtype float32, got float64'):
        g(cla.to_device(dev.queue, a.astype('f8')))
    with pytest.raises(TypeError, match='1 dimensions, got shape'):
        g(cla.to_device(dev.queue, a.reshape(10, 100)))


def test_inputs_with_strides():
    x = T.dmatrix('x')
    a = np.random.RandomState(1).rand(6, 8)
    for view in (a[::-1], a[:, ::2], a.T, a[::2, ::-3]):
        assert_matches_c([x], [T.exp(x) + x], [view])


def _rss_kb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_memory_is_flat_over_many_calls():
    x = T.fvector('x')
    s = theano.shared(np.zeros(8192, 'f4'), 's')
    f = theano.function([x], (x * 2).sum() if False else x * 2 + s, updates={s: s + x},
                        mode=ocl())
    a = np.ones(8192, 'f4')
    for _ in range(200):
        f(a)
    pool = theano_ocl.get_device().pool
    gc.collect()          # other tests' functions may still free buffers into the pool
    active, managed = pool.active_blocks, pool.managed_bytes
    rss = _rss_kb()
    for _ in range(3000):
        f(a)
    assert pool.active_blocks <= active and pool.managed_bytes <= managed
    st = theano_ocl.stats(f)
    assert st['frames'] == 1 and st['replans'] == 0, st
    assert _rss_kb() - rss < 20000
    assert_close(s.get_value(), np.full(8192, 3200, 'f4'))


def test_hot_tiny_calls_run_in_thread_and_agree():
    x = T.dscalar('x')
    s = theano.shared(np.float64(0), 's')
    f = theano.function([x], x * 2 + s, updates={s: s + x}, mode=ocl())
    g_s = theano.shared(np.float64(0), 's')
    g = theano.function([x], x * 2 + g_s, updates={g_s: g_s + x}, mode='FAST_RUN')
    for k in range(60):
        v = np.float64(k) / 7
        assert_close(f(v), g(v))
    assert_close(s.get_value(), g_s.get_value())


def test_hot_tiny_calls_never_overwrite_returned_arrays():
    # in-thread calls reuse no storage: an inplace consumer (mul into the sum's output)
    # must not turn an array returned earlier into scratch space for a later call
    t = T.dvector('t')
    r = theano.shared(np.asarray(0.75), 'r')
    f = theano.function([t], T.sum(t[[0, 2]]) * r, mode=ocl())
    g = theano.function([t], T.sum(t[[0, 2]]) * r, mode='FAST_RUN')
    vals = [np.arange(4.0) + k for k in range(40)]
    got = [f(v) for v in vals]
    for v, out in zip(vals, got):
        assert_close(out, g(v))


def test_hot_commits_run_as_one_batched_copy():
    """Once a frame is hot, its update copies into shared variables run as one batched
    launch (planner.CommitPlan); values, coherence flags, set_value and failed calls behave as
    before."""
    def build(mode):
        rng = np.random.RandomState(4)
        a = theano.shared(rng.rand(5000).astype('f4'), 'a')
        a2 = theano.shared(rng.rand(5000).astype('f4'), 'a2')
        b = theano.shared(rng.rand(7, 3), 'b')
        c = theano.shared(np.arange(10, dtype='int32'), 'c')
        idx = T.ivector('idx')
        ups = [(a, a2), (a2, a * 0.5 + 1), (b, b * 0.9 + b[::-1] * 0.1),
               (c, c[::-1] + 1)]
        f = theano.function([idx], [a[idx], b.sum(), c.sum()], updates=ups, mode=mode)
        return f, [a, a2, b, c]

    f_c, sh_c = build('FAST_RUN')
    f_o, sh_o = build(ocl(host_tier='off'))
    idx = np.array([0, 4999, 7], 'int32')
    for call in range(6):
        for g, w in zip(f_o(idx), f_c(idx)):
            assert_close(g, w, what='call %d' % call)
    counts = theano_ocl.stats(f_o)
    assert counts['batched_update_launches'] < counts['update_launches'], counts
    for s_o, s_c in zip(sh_o, sh_c):
        assert_close(s_o.get_value(), s_c.get_value(), what=s_o.name)
    # a host write between calls wins, as without the plan
    for sh in (sh_o, sh_c):
        sh[1].set_value(np.full(5000, 3, 'f4'))
    for g, w in zip(f_o(idx), f_c(idx)):
        assert_close(g, w, what='after set_value')
    for s_o, s_c in zip(sh_o, sh_c):
        assert_close(s_o.get_value(), s_c.get_value(), what=s_o.name + ' after set_value')
    # a failed call (bad index, found after the steps ran) commits nothing
    before = [s.get_value() for s in sh_o]
    with pytest.raises(IndexError):
        f_o(np.array([5000], 'int32'))
    for s, v in zip(sh_o, before):
        assert_close(s.get_value(), v, what=s.name + ' after a failed call')
    # another shape: re-placed shared variable, the plan is not used stale
    for sh in (sh_o, sh_c):
        sh[0].set_value(np.ones(6000, 'f4'))
        sh[1].set_value(np.ones(6000, 'f4'))
    for call in range(5):
        for g, w in zip(f_o(idx), f_c(idx)):
            assert_close(g, w, what='new shape, call %d' % call)
    for s_o, s_c in zip(sh_o, sh_c):
        assert_close(s_o.get_value(), s_c.get_value(), what=s_o.name + ' new shape')


def test_steady_state_calls_follow_every_change_of_their_inputs():
    """Calls that come back to the last call's frame skip its key and lookup (vm.py
    runtime.frames.make_guard): set_value, a write into the cell, another shape, another
    function's update and re-placement of a shared variable, a device output handed back
    earlier, and a value-dependent shape met inside such a call all behave as before."""
    def want(v):
        return np.exp(np.asarray(v, 'f4') * np.float32(1e-4))
    x = theano.shared(np.arange(5000, dtype='f4'), 'x')
    f = theano.function([], T.exp(x * np.float32(1e-4)), updates={x: x + 1},
                        mode=ocl(outputs='device'))
    rs = [f() for _ in range(8)]
    assert theano_ocl.stats(f)['last_call']['steady'], theano_ocl.stats(f)
    for k, r in enumerate(rs):                      # donated outputs are never overwritten
        assert_close(r.get(), want(np.arange(5000) + k), what='call %d' % k)
    for new, what in ((np.full(5000, 2, 'f4'), 'set_value'), (np.ones(70, 'f4'), 'new shape')):
        x.set_value(new)
        for k in range(3):
            assert_close(f().get(), want(new + k), what='%s, call %d' % (what, k))
    x.container.storage[0] = np.full(70, 5, 'f4')     # bypasses the container
    assert_close(f().get(), want(np.full(70, 5)))
    g = theano.function([], [], updates={x: T.concatenate([x, x])}, mode=ocl())
    h = theano.function([], [], updates={x: x * 2}, mode=ocl())
    for k in range(3):
        h()                                         # the device copy changes under f
        assert_close(f().get(), want(x.get_value() - 1), what='after h %d' % k)
    g()                                             # re-placed: another shape and buffer
    assert_close(f().get(), want(x.get_value() - 1), what='after g')
    assert_close(x.get_value()[:70], x.get_value()[70:])
    # an input of the same shape whose selection changes size: replanned inside such calls
    w = T.fvector('w')
    nz = theano.function([w], T.exp(w[(w > 0).nonzero()]), mode=ocl())
    nz_c = theano.function([w], T.exp(w[(w > 0).nonzero()]), mode='FAST_RUN')
    base = np.tile(np.array([1, -1, 2, -2], 'f4'), 2000)
    for k in range(10):
        a = base * (1 if k % 4 else -1)
        a[:k] = 3
        assert_close(nz(a), nz_c(a), what='nonzero, call %d' % k)
    assert theano_ocl.stats(nz)['replans'] >= 2, theano_ocl.stats(nz)


def test_input_arrays_may_change_once_the_call_returns():
    """A call returning device arrays (or nothing) has waited for its input uploads: the
    caller may write into the arrays it passed right after, and host nodes' outputs are
    uploaded from a snapshot (their thunks may reuse the same array next time)."""
    x = T.fvector('x')
    i = T.lscalar('i')
    f = theano.function([x], T.exp(x * np.float32(1e-3)) + 1, mode=ocl(outputs='device'))
    s = theano.shared(np.zeros(3, 'f4'), 's')
    g = theano.function([x], [], updates={s: s + x[:3]}, mode=ocl())
    # a host fallback node (Unique: no device kernel) whose output feeds a device kernel
    h = theano.function([x, i], T.exp(T.extra_ops.Unique()(x)[:i] * np.float32(1e-3)),
                        mode=ocl(outputs='device'))
    assert theano_ocl.fallback_nodes(h)
    rng = np.random.RandomState(3)
    for k in range(6):
        v = rng.uniform(-3, 3, 1 << 20).astype('f4')
        want = np.exp(v * np.float32(1e-3)) + 1
        r = f(v)
        v[:] = np.nan                                 # the caller reuses its array at once
        assert_close(r.get(), want, what='call %d' % k)
        v = rng.uniform(-3, 3, 1 << 16).astype('f4')
        before = s.get_value()
        g(v)
        third = v[:3].copy()
        v[:] = np.nan
        assert_close(s.get_value(), before + third, what='update, call %d' % k)
        u = np.round(rng.uniform(0, 1000, 1 << 16)).astype('f4')
        r = h(u, 500)
        assert_close(r.get(), np.exp(np.unique(u)[:500] * np.float32(1e-3)), what='host node, call %d' % k)


def test_inputs_read_only_for_their_shape_are_read_every_call():
    # an input only shape nodes read stays on the host and is not part of the frame key:
    # its shape must be read on every call (Theano's test_opt test_equality_shapes and
    # test_dot_allocs_0 found a frame replaying the first call's shape)
    from theano.tensor.opt import Shape_i
    x = T.vector('x', dtype='float64')
    for g in [x.shape[0], Shape_i(0)(x)]:
        f = theano.function([x], [T.eq(g, 0), g * 2], mode=ocl())
        f_c = theano.function([x], [T.eq(g, 0), g * 2], mode='FAST_RUN')
        for v in ([3, 3], [], [1.0], [], np.zeros(5)):
            for got, want in zip(f(v), f_c(v)):
                assert_close(got, want, what='x of shape %s' % (np.shape(v),))
    v1, v2 = T.vector('v1'), T.vector('v2')
    f = theano.function([v1, v2], T.dot(T.zeros_like(v1), v2), mode=ocl())
    assert_close(f(np.zeros(2), np.ones(2)), np.asarray(0.0))
    with pytest.raises((ValueError, AssertionError)):
        f(np.zeros(2), np.ones(3))                 # the shape error is not optimized away


@pytest.mark.parametrize('calls', [1, 25])
def test_inputs_destroyed_in_place_hold_the_result_as_under_c(calls):
    """accept_inplace graphs (Theano's *_inplace ops on inputs): the caller's array holds
    the destroyed value after every call, device frames and the hot host tier alike."""
    from theano.tensor import inplace
    x = T.matrix('x')
    y = T.matrix('y')
    outs = [inplace.exp_inplace(x), inplace.add_inplace(y, T.ones_like(y))]
    fns = [theano.function([x, y], outs, mode=m, accept_inplace=True)
           for m in ('FAST_RUN', theano_ocl.OCLMode())]
    fg = fns[1].maker.fgraph                    # both inputs destroyed: the case under test
    assert {fg.inputs.index(n.inputs[j]) for n in fg.apply_nodes
            for js in getattr(n.op, 'destroy_map', {}).values() for j in js
            if n.inputs[j] in fg.inputs} == {0, 1}
    rng = np.random.RandomState(0)
    for shape in [(3, 4), (70, 80)]:
        for _ in range(calls):
            a, b = rng.rand(*shape), rng.rand(*shape)
            res = []
            for f in fns:
                aa, bb = a.copy(), b.copy()
                outs = f(aa, bb)
                res.append((aa, bb) + tuple(np.array(o) for o in outs))
            for got, want in zip(res[1], res[0]):
                np.testing.assert_allclose(got, want, rtol=1e-12)
            np.testing.assert_allclose(res[1][0], np.exp(a), rtol=1e-12)
            np.testing.assert_allclose(res[1][1], b + 1, rtol=1e-12)


def test_host_outputs_and_error_flags_come_back_with_one_wait(monkeypatch):
    """A replayed call downloads its host outputs and reads its device error flags (a bad
    index, an integer division by zero) without waiting for each: one wait for all of
    them. Values as Theano C's; a flagged error still raises, the outputs of the next call
    are right."""
    def _same(got, want):
        assert len(got) == len(want)
        for j, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, what='output %d' % j)
    import pyopencl as cl
    from theano_ocl.runtime import steps
    x = T.fmatrix('x')
    idx = T.lvector('idx')
    k = T.lvector('k')
    outs = [T.exp(x[idx]).sum(axis=1), (x * 2).max(), idx // k, x.shape[0] * k]
    f_c = theano.function([x, idx, k], outs, mode='FAST_RUN')
    f_o = theano.function([x, idx, k], outs, mode=ocl())
    rng = np.random.RandomState(2)
    xv = rng.rand(6, 3).astype('float32')
    args = (xv, np.array([0, 5, -1, 2]), np.array([3, -2, 1, 5]))
    for _ in range(3):
        _same(f_o(*args), f_c(*args))
    checks = theano_ocl.stats(f_o)['checks']       # the bad-index flag, the division flag
    assert checks >= 2, checks
    # (every wait of the runtime goes through runtime/waits.py: polled on CPU devices,
    # clWaitForEvents elsewhere)
    from theano_ocl.runtime import waits as runtime_waits
    waits = []
    real_wait = runtime_waits.wait
    monkeypatch.setattr(runtime_waits, 'wait', lambda dev, evs: waits.append(len(evs)) or
                        real_wait(dev, evs))
    monkeypatch.setattr(steps, 'download', lambda *a, **kw: pytest.fail('a blocking download'))
    xv2 = rng.rand(6, 3).astype('float32')
    args = (xv2, np.array([1, 1, -6, 4]), np.array([2, 7, -3, 1]))
    _same(f_o(*args), f_c(*args))
    # four outputs and the flags: one wait (then the three inputs' uploads are settled)
    assert waits and waits[0] == 4 + checks and waits[1:] in ([], [3]), waits
    for bad, err in (((xv2, np.array([1, 6, 0, 0]), np.array([1, 1, 1, 1])), IndexError),
                     ((xv2, np.array([1, 1, 0, 2]), np.array([1, 0, 1, 1])), ZeroDivisionError)):
        with pytest.raises(err):
            f_c(*bad)
        with pytest.raises(err):
            f_o(*bad)
        _same(f_o(*args), f_c(*args))


def _tier_calls(f, args, calls):
    """How many of ``calls`` calls of ``f(*args)`` Theano's VM ran in this thread (the host
    tier; probes, where both ran, not counted), and the results of every call."""
    from theano_ocl.runtime import faults
    seen = []
    with faults.injected(seen.append):
        results = [f(*args) for _ in range(calls)]
    return sum(w == 'host tier run' for w in seen), results


def _same_bits_every_call(results):
    first = np.asarray(results[0])
    return all(np.asarray(r).tobytes() == first.tobytes() for r in results)


def test_a_float_function_moves_to_the_host_only_where_it_computes_the_same_bits(monkeypatch):
    # finite differences (verify_grad) compare a function's results across calls: a hot,
    # tiny float function handed to Theano's VM may round differently from its first calls
    # on a GPU (fused multiply-adds, its own tanh). The tier takes it after PROBES calls run
    # both ways agreed; here the host is made to differ by one ulp: it never does.
    from theano_ocl.runtime import host_tier
    x, y = T.dvectors('x', 'y')
    out = T.tanh(x * y + 0.5).sum() * x[0]
    rng = np.random.RandomState(7)
    args = (rng.uniform(-2, 2, 9), rng.uniform(-2, 2, 9))
    f_c = theano.function([x, y], out, mode='FAST_RUN')
    f_o = theano.function([x, y], out, mode=ocl())
    assert theano_ocl.stats(f_o)['host_tier']['probes'] == host_tier.PROBES
    dry = host_tier.HostTier.dry_run
    monkeypatch.setattr(host_tier.HostTier, 'dry_run', lambda self: (
        [np.nextafter(v, np.inf) for v in dry(self)[0]], []))
    ran, results = _tier_calls(f_o, args, 30)
    assert ran == 0, 'the host tier ran %d of 30 calls of a float function' % ran
    assert _same_bits_every_call(results)
    assert_close(results[0], f_c(*args))
    monkeypatch.undo()
    # x * 2 + 1 rounds once wherever it runs: the probes agree and the tier takes it
    f_two = theano.function([x], x * 2 + 1, mode=ocl())
    ran, results = _tier_calls(f_two, args[:1], 30)
    assert ran == 30 - theano_ocl.stats(f_two)['host_tier']['after'] - 1 - host_tier.PROBES, ran
    assert _same_bits_every_call(results)
    # opted in ('any'): the tier takes it right after its threshold, with C's results
    f_any = theano.function([x, y], out, mode=ocl(host_tier='any'))
    ran, results = _tier_calls(f_any, args, 30)
    assert ran == 30 - theano_ocl.stats(f_any)['host_tier']['after'] - 1, ran
    for r in results:
        assert_close(r, f_c(*args))
    i = T.lvector('i')
    f_off = theano.function([i], i * 2, mode=ocl(host_tier='off'))
    assert theano_ocl.stats(f_off)['host_tier'] is None
    with pytest.raises(ValueError, match='host_tier'):
        ocl(host_tier='fast')


def test_probes_that_disagree_on_an_update_keep_the_frame_on_the_device(monkeypatch):
    from theano_ocl.runtime import host_tier
    x = T.dscalar('x')
    s_c, s_o = theano.shared(np.float64(0.25)), theano.shared(np.float64(0.25))
    f_c = theano.function([x], x * 3, updates={s_c: s_c * 0.5 + x}, mode='FAST_RUN')
    f_o = theano.function([x], x * 3, updates={s_o: s_o * 0.5 + x}, mode=ocl())
    dry = host_tier.HostTier.dry_run
    monkeypatch.setattr(host_tier.HostTier, 'dry_run', lambda self: (
        dry(self)[0], [(i, np.nextafter(v, np.inf)) for i, v in dry(self)[1]]))
    ran, results = _tier_calls(f_o, (np.float64(0.75),), 30)
    for _ in range(30):
        f_c(np.float64(0.75))
    assert ran == 0
    assert s_o.get_value() == s_c.get_value()


def test_an_integer_function_moves_to_the_host_with_the_same_results():
    i, j = T.lvectors('i', 'j')
    count_c = theano.shared(np.int64(0))
    count_o = theano.shared(np.int64(0))
    out = ((i * 3 + j) % 7, T.maximum(i, j).sum())
    f_c = theano.function([i, j], out, updates={count_c: count_c + i.sum()}, mode='FAST_RUN')
    f_o = theano.function([i, j], out, updates={count_o: count_o + i.sum()}, mode=ocl())
    args = (np.arange(-5, 6), np.arange(11)[::-1].copy())
    ran, results = _tier_calls(f_o, args, 30)
    assert ran == 30 - theano_ocl.stats(f_o)['host_tier']['after'] - 1, ran
    for r in results:
        want = f_c(*args)
        for g, w in zip(r, want):
            assert g.dtype == w.dtype and np.array_equal(g, w)
    assert count_o.get_value() == count_c.get_value()


@pytest.mark.parametrize('build, exact', [
    (lambda x, i: [x[::-1].T, T.set_subtensor(x[0], x[1]), x.max(axis=0)], True),
    (lambda x, i: [T.cast(i, 'float32') * 2, i // 3], False),
    (lambda x, i: [T.cast(i, 'float32'), i // 3 + i % 5, (x > 0).sum()], True),
    (lambda x, i: [x + 1], False),
    (lambda x, i: [T.inc_subtensor(x[0], x[1])], False),
])
def test_which_functions_compute_exactly(build, exact):
    from theano_ocl.runtime.host_tier import computes_exactly
    x, i = T.dmatrix('x'), T.lvector('i')
    f = theano.function([x, i], build(x, i), mode=ocl(), on_unused_input='ignore')
    assert computes_exactly(f.maker.fgraph) is exact
    from theano_ocl.runtime.host_tier import PROBES
    assert theano_ocl.stats(f)['host_tier']['probes'] == (0 if exact else PROBES)
