"""Bounded memory (issue 15, items 4 and 6): frames, the pool, programs, the device's limits.

``theano_ocl.memory_info()`` reports what is held; these tests hold it to bounds: a large
call's buffers do not outlive it by more than the frame cache's budget, a deleted
function's buffers go back to the driver, the program memo is bounded, a buffer larger than
the device's largest allocation runs on the host (as Theano C would run it), and the device
size is respected even where the driver does not enforce it.
"""
import gc
import os
import warnings

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from helpers import assert_close, compile_both, rand

MiB = 1 << 20


def _dev():
    return theano_ocl.get_device()


def _rss():
    with open('/proc/self/statm') as f:
        return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def _device_bytes():
    info = theano_ocl.memory_info(collect=True)
    return info['in_use'] + info['held']


def _model(mode, k=0):
    """One of a few small graph templates (k picks it) with an update."""
    x = T.fmatrix('x')
    s = theano.shared(np.zeros(3, 'float32'), 's')
    exprs = [T.tanh(x * 2 + 1).sum(axis=0), T.exp(-x).mean(axis=0), (x ** 2).max(axis=0),
             (abs(x) + 1).min(axis=0)]
    y = exprs[k % len(exprs)]
    return theano.function([x], y.sum(), updates=[(s, s + y[:3])], mode=mode)


def test_a_large_call_does_not_keep_its_buffers(monkeypatch):
    from theano_ocl.runtime import frames
    # this test's budget for the frames besides the one in use (default: 256 MiB)
    monkeypatch.setattr(frames, 'MAX_CACHED_FRAME_BYTES', 4 * MiB)
    f = _model(theano_ocl.OCLMode())
    small = np.ones((8, 3), 'float32')
    f(small)
    base = theano_ocl.memory_info(collect=True)['in_use']
    big = np.ones((16 * MiB // 12, 3), 'float32')            # 16 MiB in, more in between
    f(big)
    during = theano_ocl.memory_info()['in_use']
    assert during - base >= 16 * MiB
    for _ in range(100):
        f(small)
    after = theano_ocl.memory_info(collect=True)
    assert after['in_use'] - base < 4 * MiB, after
    assert after['held'] <= theano_ocl.device.TRIM_KEEP


def test_a_deleted_function_gives_its_buffers_back():
    before = _device_bytes()
    f = _model(theano_ocl.OCLMode(), 1)
    f(np.ones((1 << 20, 3), 'float32'))      # 12 MiB input, frame buffers of that size
    assert _device_bytes() - before >= 12 * MiB
    del f
    after = _device_bytes()
    assert after - before <= theano_ocl.device.TRIM_KEEP, (before, after)
    assert theano_ocl.memory_info()['in_use'] <= before


def test_the_program_memo_is_bounded(monkeypatch):
    dev = _dev()
    monkeypatch.setattr(dev, 'max_programs', 4)
    x = T.fvector('x')
    xv = np.linspace(0.1, 0.9, 3).astype('float32')
    # ten distinct kernels (a constant factor is an argument, not part of the source)
    ops = [(T.exp, np.exp), (T.log1p, np.log1p), (T.tanh, np.tanh), (T.sin, np.sin),
           (T.cos, np.cos), (T.sqrt, np.sqrt), (T.arctan, np.arctan), (T.sinh, np.sinh),
           (T.cosh, np.cosh), (T.expm1, np.expm1)]
    builds = dev.program_builds
    for op, ref in ops:
        f = theano.function([x], op(x) * 3, mode=theano_ocl.OCLMode())
        assert_close(f(xv), ref(xv) * np.float32(3))
    assert dev.program_builds - builds > dev.max_programs      # the memo had to drop some
    assert theano_ocl.memory_info()['programs'] <= 4


def test_soak_rotating_shapes_and_dropped_functions():
    """10^4 calls over rotating shapes (one of them large) and 1,000 OCL functions linked,
    called and dropped: device and host memory end within 10% of where they started.

    The functions are re-linked from four compiled graphs (``SimulatorOCL``: a new
    ``theano.function`` with the OCL linker on the optimized graph, ~7 ms each) rather than
    optimized from scratch each time (~60 ms of Theano's optimizer each), so the test spends
    its time in theano_ocl's own linking, planning and release."""
    mode = theano_ocl.OCLMode()
    shapes = [(7, 3), (64, 3), (5, 3), (1 << 16, 3), (33, 3)]
    inputs = [np.full(shape, 0.5, 'float32') for shape in shapes]
    plain = [_model('FAST_RUN', k) for k in range(4)]

    def round_of_calls(f, n):
        for k in range(n):
            f(inputs[k % len(inputs)])

    def round_of_functions(n):
        for k in range(n):
            f = theano_ocl.SimulatorOCL(plain[k % len(plain)])
            f(inputs[k % 3])
            del f
    # warm up: Theano's compiled modules, the programs of each template, the pool's bins,
    # and the caches that fill once and stay (pyopencl's kernel invokers, PoCL's
    # work-group specializations: +13 MiB over the first 2,000 calls of five shapes that
    # take turns in four frames, +1.3 over the next 2,000, then nothing); and the functions
    # linked after those calls: the first few hundred took +32 MiB of RSS, the next 1,500
    # +0.4 (the 2-core Xeon, 2026-12-01; with 50 here the test failed when run alone,
    # 383 -> 432 MiB, and passed in the suite, whose earlier tests had warmed the same)
    f = _model(mode)
    round_of_calls(f, 4000)
    round_of_functions(300)
    gc.collect()
    dev0, rss0 = _device_bytes(), _rss()
    round_of_calls(f, 10000)
    round_of_functions(1000)
    del f
    dev1, rss1 = _device_bytes(), _rss()
    assert dev1 <= dev0 * 1.1 + MiB, 'device memory %d -> %d bytes' % (dev0, dev1)
    assert rss1 <= rss0 * 1.1, 'host memory (RSS) %.1f -> %.1f MiB' % (rss0 / MiB, rss1 / MiB)


def test_a_buffer_over_the_largest_allocation_runs_on_the_host(monkeypatch):
    dev = _dev()
    monkeypatch.setattr(dev, 'max_alloc', 64 * 1024)
    x = T.fvector('x')
    s = theano.shared(np.zeros(100000, 'float32'), 's')     # 400 KB: over the limit
    f_c = theano.function([x], (s * 2).sum() + x.sum(), updates=[(s, s + x[0])],
                          mode='FAST_RUN')
    f_o = theano.function([x], (s * 2).sum() + x.sum(), updates=[(s, s + x[0])],
                          mode=theano_ocl.OCLMode())
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        got = [f_o(np.full(3, 1.5, 'float32')) for _ in range(3)]
    assert any('runs on the host' in str(m.message) for m in w)
    assert_close(s.get_value(), np.full(100000, 4.5, 'float32'))
    # the values Theano C computes from the same states
    s.set_value(np.zeros(100000, 'float32'))
    want = [f_c(np.full(3, 1.5, 'float32')) for _ in range(3)]
    assert_close(np.array(got), np.array(want))
    # small shapes of another function stay on the device
    g = theano.function([x], T.exp(x), mode=theano_ocl.OCLMode())
    assert_close(g(np.ones(4, 'float32')), np.exp(np.ones(4, 'float32')))
    counts = theano_ocl.stats(g)
    assert counts['planned'] and not counts['on_host'], counts


def test_device_outputs_of_a_call_run_on_the_host_keep_their_values(monkeypatch):
    """A function with device outputs that runs on the host (a value over the largest
    allocation) hands over device arrays made by queued copies of its host results: read
    only after 20 calls, each still holds its own call's values (the host array a copy
    reads outlives the call), as Theano C computes them."""
    dev = _dev()
    monkeypatch.setattr(dev, 'max_alloc', 64 * 1024)
    x = T.fvector('x')

    def build(mode):
        s = theano.shared(np.zeros(100000, 'float32'), 's')     # 400 KB: over the limit
        return theano.function([x], [(s * 2).sum() + x.sum(), x * s[:3] + 1],
                               updates=[(s, s + x[0])], mode=mode)
    f_c = build('FAST_RUN')
    f_o = build(theano_ocl.OCLMode(outputs='device'))
    vals = [np.arange(3, dtype='float32') + k for k in range(20)]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        got = [f_o(v) for v in vals]
    assert theano_ocl.stats(f_o)['on_host'] is True
    for v, outs in zip(vals, got):
        for a, b in zip(outs, f_c(v)):
            assert hasattr(a, 'get'), type(a)
            assert_close(a.get(), b)


def test_the_device_size_is_held_to_and_the_function_survives(monkeypatch):
    dev = _dev()
    x = T.fvector('x')
    f = theano.function([x], T.exp(x) + 1, mode=theano_ocl.OCLMode())
    assert_close(f(np.ones(4, 'float32')), np.exp(np.ones(4, 'float32')) + 1)
    limit = dev.pool.active_bytes + 1 * MiB
    monkeypatch.setattr(dev, 'memory_limit', limit)
    with pytest.raises(MemoryError, match='out of memory allocating 4.0 MiB'):
        f(np.ones(MiB, 'float32'))
    monkeypatch.undo()
    assert_close(f(np.ones(MiB, 'float32')), np.exp(np.ones(MiB, 'float32')) + 1)


def test_an_empty_device_array_is_an_input_like_any_other():
    import pyopencl.array as cla
    x = T.fvector('x')
    f = theano.function([x], [T.exp(x) * 2, x.sum()], mode=theano_ocl.OCLMode())
    q = _dev().queue
    for a in (np.zeros(0, 'float32'), np.ones(3, 'float32'), np.zeros(0, 'float32')):
        out, total = f(cla.to_device(q, a))
        assert_close(out, np.exp(a) * 2)
        assert_close(total, a.sum())


def test_minibatch_index_replays_one_plan():
    """f(i) over a slice X[i*bs:(i+1)*bs] of a shared dataset (the tutorials' minibatch
    pattern): the slice's bounds are read at every call, so every full batch replays one
    plan, and the short last batch one more (its length differs); results and updates as
    Theano C, epoch after epoch."""
    rng = np.random.RandomState(0)
    data = rng.rand(125, 5).astype('float32')          # 12 batches of 10, one of 5
    w0 = rng.rand(5, 2).astype('float32')
    fs = []
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        X = theano.shared(data)
        W = theano.shared(w0.copy())
        i = T.lscalar('i')
        loss = T.sqr(T.dot(X[i * 10:(i + 1) * 10], W)).mean()
        fs.append((theano.function([i], loss, updates=[(W, W - np.float32(0.1) *
                                                         T.grad(loss, W))], mode=mode), W))
    (f_c, W_c), (f_o, W_o) = fs
    for epoch in range(3):
        for k in range(13):
            assert_close(f_o(k), f_c(k), what='epoch %d, batch %d' % (epoch, k))
        if epoch == 0:
            counts = theano_ocl.stats(f_o)
            replans = counts['replans']
            assert replans <= 1, counts                 # the short batch's plan
            assert counts['frames'] == 1, counts
    assert theano_ocl.stats(f_o)['replans'] == replans
    assert_close(W_o.get_value(), W_c.get_value())


def test_input_shapes_cycling_keep_their_plans():
    """A function called with inputs of 12 different shapes in turn keeps each shape's
    plan (up to ``max_frames``): the second round replays them all."""
    x = T.matrix('x')
    f_c, f_o = compile_both([x], [T.tanh(x).sum(axis=0) * 2])
    shapes = [(n, 3) for n in range(1, 13)]
    values = [rand(s, 'float32', rng=np.random.RandomState(n)) for n, s in enumerate(shapes)]
    from theano_ocl.runtime import faults
    for round_ in range(2):
        seen = []           # the step boundaries of the round's calls (planning: 'plan task')
        with faults.injected(seen.append):
            for v in values:
                assert_close(f_o(v)[0], f_c(v)[0], what='shape %s' % (v.shape,))
        planning = [w for w in seen if w.startswith('plan task')]
        if round_ == 0:
            assert planning and theano_ocl.stats(f_o)['frames'] == 12, theano_ocl.stats(f_o)
    assert not planning, planning           # none re-planned
    assert theano_ocl.stats(f_o)['frames'] == 12


def test_a_runs_kept_probe_buffers_go_back_when_the_device_needs_memory(monkeypatch):
    """The probe buffers a run keeps for the next run like it (``stats['loop_kept']``)
    are let go with the cached frames when an allocation would not fit: another
    function's call then gets their memory, and the simulator runs again after it."""
    dev = _dev()
    s = theano.shared(np.zeros(1024, 'float32'), 's')
    step = theano.function([], s + 1, updates=[(s, s + 1)],
                           mode=theano_ocl.OCLMode(cost_model='off', host_tier='off'))
    sim = theano_ocl.SimulatorOCL(step)
    for _ in range(3):
        got = sim.run_steps(1000, probes=[0])[0]        # 4 MiB of probe buffer, kept
    assert sim.stats['loop_kept'], sim.stats
    assert_close(got[-1], np.full(1024, 3000, 'float32'))
    x = T.fvector('x')
    f = theano.function([x], T.exp(x) + 1, mode=theano_ocl.OCLMode())
    f(np.ones(4, 'float32'))
    limit = dev.pool.active_bytes + 1 * MiB
    monkeypatch.setattr(dev, 'memory_limit', limit)
    dev.free_held()
    assert_close(f(np.ones(MiB // 2, 'float32')), np.exp(np.ones(MiB // 2, 'float32')) + 1)
    monkeypatch.undo()
    got = sim.run_steps(1000, probes=[0])[0]
    assert_close(got[-1], np.full(1024, 4000, 'float32'))
    assert not sim.stats['loop_kept'], sim.stats
