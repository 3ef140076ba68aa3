"""Elementwise producers fused into their one consumer (ops.fusion.fuse_producers): reductions,
argmax and small products compute the producer's values in their own kernel. Each case is
checked against Theano's C backend, fused and unfused, with the per-call size rules both
honoured and overridden (so the fused kernels run on every device, whatever pays there)."""
import os
import sys

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.ops import fusion
from theano_ocl.ops import gemm_small
from theano_ocl.ops import reduce as ocl_reduce
from helpers import assert_close, compile_both, rand, setting


@pytest.fixture(params=['sized', 'always'])
def fuse_rule(request, monkeypatch):
    """'sized': the devices' own rules; 'always': every fused producer runs fused."""
    if request.param == 'always':
        monkeypatch.setattr(ocl_reduce, 'fuse_pays', lambda *args: True)
        monkeypatch.setattr(gemm_small, 'FUSED_MAX_K', 1 << 30)
    return request.param


def _fused_pairs(f):
    """(producer, consumer) per producer computed in another node's kernel (the first
    consumer where several kernels compute it): ``f`` a Function or a SimulatorOCL."""
    return [(node, into[0]) for node, into, _ in theano_ocl.stats(f)['fused']]


def _check(inputs, outputs, values, rtol=None, atol=None, **kwargs):
    """Compare the fused function, the same without fusion and Theano C on ``values``;
    return the (producer, consumer) pairs fused."""
    f_c, f_o = compile_both(inputs, outputs, **kwargs)
    assert not theano_ocl.fallback_nodes(f_o)
    pairs = _fused_pairs(f_o)
    f_u = theano.function(inputs, outputs, mode=theano_ocl.OCLMode(fuse=False), **kwargs)
    assert not _fused_pairs(f_u)
    for vals in values:
        want = f_c(*vals)
        for f in (f_o, f_u, f_o):
            got = f(*vals)
            if not isinstance(want, list):
                want, got = [want], [got]
            for k, (g, w) in enumerate(zip(got, want)):
                assert_close(g, w, rtol=rtol, atol=atol, what='output %d' % k)
            want = want if len(want) > 1 else want[0]
    return pairs


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'uint8', 'int64', 'float16'])
def test_reductions_of_a_producer(dtype, fuse_rule):
    x = T.matrix('x', dtype=dtype)
    m = T.vector('m', dtype=dtype)
    two = np.asarray(2, dtype)
    outs = [T.sum(x * two + m, axis=1), T.max(abs(x - m), axis=0), T.argmax(x * two - m, axis=1),
            T.sum(T.sqr(x - m)), T.sum(x > m, axis=0)]
    rng = np.random.RandomState(3)
    shapes = [(5, 7), (70, 90), (1, 9), (6, 1)]
    values = [[rand(s, dtype, rng), rand(s[1:], dtype, rng)] for s in shapes]
    # float16 outputs are stored rounded: their producers stay unfused; x > m is bool
    expect = 1 if dtype == 'float16' else 3
    pairs = _check([x, m], outs, values, atol=1e-3 if dtype == 'float16' else None)
    # at least: which producers fuse depends on Theano's graph (an inplace op destroying a
    # producer's input before the consumer runs keeps it unfused)
    assert len(pairs) >= expect, pairs


@pytest.mark.parametrize('n', [8, 100, 4096])
def test_small_full_reductions_of_a_producer_take_one_launch(n):
    """A product reduced to one value (a Nengo probe's decoded output: 100 products) is
    computed in the reduction's kernel on every device: every launch is a reduction's.
    On a CPU device that is one launch each (the launch saved costs more than the scalar
    loop loses at these sizes); a GPU reduces a fused producer of 4,096 elements in two
    passes (its reduction of a stored array takes one)."""
    x, y = T.fvector('x'), T.fvector('y')
    f_c, f_o = compile_both([x, y], [(x * y).sum(), T.max(x - y)])
    rng = np.random.RandomState(n)
    xv, yv = rand((n,), 'float32', rng), rand((n,), 'float32', rng)
    for g, w in zip(f_o(xv, yv), f_c(xv, yv)):
        assert_close(g, w)
    stats = theano_ocl.stats(f_o)
    assert stats['launches'] >= 2
    assert all(name.startswith('reduce') for _, name, _ in stats['kernels']), stats['kernels']
    if theano_ocl.get_device().is_cpu:
        assert stats['launches'] == 2
    assert len(_fused_pairs(f_o)) == 2


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'uint8', 'float16'])
def test_reductions_over_length_one_axes_take_one_launch(dtype):
    # a Nengo ensemble's one-dimensional encoders: (E, N, 1) * (E, 1, 1) summed over the
    # last axis, and others whose reduced axes all have length 1 at run time (not in the
    # graph's broadcast pattern): the fused kernel is an elementwise pass whose results
    # equal Theano C's bit for bit (signs of zeros included: C's x + 0 turns -0 into +0)
    a = T.tensor3('a', dtype=dtype)
    x = T.matrix('x', dtype=dtype)
    outs = [(a * x[:, None, :]).sum(axis=2), T.max(a - x[:, None, :], axis=(1, 2)),
            T.prod(abs(a) - x[:, None, :], axis=2)]
    rng = np.random.RandomState(7)
    neg0 = np.asarray(-0.0, dtype) if dtype.startswith('float') else np.asarray(0, dtype)
    for shape in [(5, 7, 1), (3, 1, 1), (0, 4, 1)]:
        av = rand(shape, dtype, rng)
        av.flat[::3] = neg0
        xv = rand((shape[0], 1), dtype, rng)
        xv.flat[::2] = neg0
        f_c, f_o = compile_both([a, x], outs)
        want, got = f_c(av, xv), f_o(av, xv)
        for k, (g, w) in enumerate(zip(got, want)):
            if shape[1] > 1 and k == 1:
                continue        # the max over axes (1, 2) then reduces 7 elements an output
            assert g.dtype == w.dtype and g.shape == w.shape
            assert np.array_equal(g, w) and np.array_equal(np.signbit(g), np.signbit(w)), \
                (k, shape, g, w)
        if dtype != 'float16' and shape == (3, 1, 1):
            # one launch an output (float16 stores the producer rounded first: two)
            assert theano_ocl.stats(f_o)['launches'] == 3


def test_strided_views_broadcasting_and_empty(fuse_rule):
    x = T.tensor3('x')
    r = T.row('r')
    outs = [T.sum(T.exp(x[::-1, :, ::2]) * r.dimshuffle('x', 0, 1)[:, :, ::2], axis=(0, 2)),
            T.min(T.tanh(x.dimshuffle(2, 0, 1)) - 1, axis=1),
            T.prod(x[:, ::-1] * 0.5 + 1, axis=None)]
    rng = np.random.RandomState(0)
    values = [[rand((4, 5, 6), 'float64', rng, -1, 1), rand((1, 6), 'float64', rng)],
              [rand((3, 1, 8), 'float64', rng, -1, 1), rand((1, 8), 'float64', rng)]]
    assert len(_check([x, r], outs, values)) == 3
    # an empty reduction of a fused producer: the identity (sum/prod) as Theano gives it
    y = T.matrix('y')
    assert len(_check([y], [T.sum(T.exp(y), axis=0), T.prod(y + 1, axis=1)],
                      [[np.zeros((0, 3))], [np.zeros((3, 0))]])) == 2


def test_max_of_an_empty_fused_producer_raises_like_theano():
    y = T.matrix('y')
    f_c, f_o = compile_both([y], T.max(T.exp(y), axis=0))
    assert _fused_pairs(f_o)
    for f in (f_c, f_o):
        with pytest.raises(ValueError):
            f(np.zeros((0, 3)))
    assert_close(f_o(np.ones((2, 3))), f_c(np.ones((2, 3))))


def test_shape_errors_of_the_producer_are_raised_by_the_consumer():
    x = T.matrix('x')
    m = T.vector('m')
    f_c, f_o = compile_both([x, m], T.sum(x + m, axis=1))
    assert _fused_pairs(f_o)
    bad = [np.ones((2, 3)), np.ones(4)]
    with pytest.raises(ValueError, match='mis-match|shape'):
        f_o(*bad)
    good = [np.ones((2, 3)), np.arange(3.)]
    assert_close(f_o(*good), f_c(*good))


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32'])
def test_small_products_of_a_producer(dtype, fuse_rule, monkeypatch):
    A = T.matrix('A', dtype=dtype)
    v = T.vector('v', dtype=dtype)
    B = T.matrix('B', dtype=dtype)
    one = np.asarray(1, dtype)
    outs = [T.dot(A, v * v + one), T.dot(A, T.maximum(B, one)), T.dot(v + one, B)]
    rng = np.random.RandomState(1)
    values = [[rand((3, 4), dtype, rng), rand((4,), dtype, rng), rand((4, 5), dtype, rng)],
              [rand((40, 300), dtype, rng), rand((300,), dtype, rng),
               rand((300, 2), dtype, rng)]]
    # float32 sums of 300 products in another order than the host BLAS: rounding
    tol = dict(rtol=1e-4, atol=1e-3) if dtype == 'float32' else {}
    pairs = _check([A, v, B], outs, values, **tol)
    # dot(v + 1, B): ints keep Dot, whose left operand is not fused
    assert len(pairs) >= 2 and all(isinstance(c.op, (T.basic.Dot, T.blas.Gemv, T.blas.Dot22))
                                   for _, c in pairs), pairs


def test_fused_products_batch_in_run_steps():
    """Many decoders of spikes computed from state: the batched small-product kernel with
    fused operands (slab and pointer tables), against Theano C over several steps."""
    rng = np.random.RandomState(5)
    updates, outs = [], []
    for e in range(6):
        n = 7 + e
        v = theano.shared(rng.rand(n).astype('float32') * 2, name='v%d' % e)
        dec = theano.shared(rng.randn(2, n).astype('float32'), name='dec%d' % e)
        acc = theano.shared(np.zeros(2, 'float32'), name='acc%d' % e)
        spikes = T.cast(v > 1, 'float32') * np.float32(10)
        out = T.dot(dec, spikes)
        updates += [(v, v * np.float32(0.9) + np.float32(0.25)), (acc, acc + out)]
        outs.append(out)
    f = theano.function([], outs, updates=updates)

    def check(sim, batch):
        assert len(_fused_pairs(sim)) == 6
        assert sim.stats['batched'] is batch
    _steps_match_f(f, updates, 9, check)


def _steps_match_f(f, updates, steps, check):
    """``SimulatorOCL(f).run_steps(steps)``, batched and not, ends in the state ``steps``
    calls of ``f`` (Theano's C backend) reach from the same start; ``check(sim, batch)``
    looks at each simulator after its run."""
    state0 = [s.get_value() for s, _ in updates]
    for batch in (False, True):
        for (s, _), val in zip(updates, state0):
            s.set_value(val)
        sim = theano_ocl.SimulatorOCL(f)
        sim.run_steps(steps, batch=batch)
        check(sim, batch)
        sim.sync_to_theano()
        got = [s.get_value() for s, _ in updates]
        for (s, _), val in zip(updates, state0):
            s.set_value(val)
        for _ in range(steps):
            f()
        want = [s.get_value() for s, _ in updates]
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_no_fusion_across_a_destroyer():
    """The producer's input is destroyed in place between the producer and the consumer:
    the value must be read before, so nothing is fused (and results match)."""
    x = T.vector('x')
    a = x * 2
    e = T.exp(a)                         # producer reading a
    d = T.inc_subtensor(a[0:2], 5.)      # destroys a (inplace after optimisation)
    outs = [T.sum(e), d]
    f_c, f_o = compile_both([x], outs)
    order = [node for node, _, _ in theano_ocl.placements(f_o)]
    pairs = _fused_pairs(f_o)
    for prod, cons in pairs:
        between = order[order.index(prod) + 1:order.index(cons) + 1]
        assert not any(getattr(n.op, 'destroy_map', None) for n in between), between
    v = np.linspace(-1, 1, 7)
    for g, w in zip(f_o(v), f_c(v)):
        assert_close(g, w)


def test_outputs_and_shared_producers_are_not_fused():
    x = T.matrix('x')
    p = T.exp(x)
    f_c, f_o = compile_both([x], [T.sum(p, axis=1), p])        # p is also an output
    assert not _fused_pairs(f_o)
    q = T.tanh(x)
    f2_c, f2_o = compile_both([x], [T.sum(q, axis=1), T.max(q, axis=0)])   # two clients
    assert not _fused_pairs(f2_o)
    v = rand((4, 5), 'float64')
    for fo, fc in ((f_o, f_c), (f2_o, f2_c)):
        for g, w in zip(fo(v), fc(v)):
            assert_close(g, w)


def test_report_names_the_fusion(capsys):
    x = T.matrix('x')
    f = theano.function([x], T.sum(T.exp(x), axis=1), mode=theano_ocl.OCLMode())
    theano_ocl.report(f)
    text = capsys.readouterr().out
    assert 'fused into Sum' in text and '(with Elemwise{exp' in text


def test_fused_kernels_follow_rebound_device_inputs():
    """Device-array inputs passed in other buffers on later calls: the fused kernels'
    arguments are re-pointed like any other launch's."""
    import pyopencl.array as cla
    x = T.matrix('x')
    m = T.vector('m')
    f = theano.function([x, m], [T.sum(T.exp(x) * m, axis=1), T.dot(x, m * 2)],
                        mode=theano_ocl.OCLMode())
    assert len(_fused_pairs(f)) == 2
    queue = theano_ocl.stats(f)['device'].queue
    rng = np.random.RandomState(2)
    for _ in range(3):
        hx, hm = rng.rand(4, 6), rng.rand(6)
        got = f(cla.to_device(queue, hx), cla.to_device(queue, hm))
        assert_close(got[0], (np.exp(hx) * hm).sum(axis=1))
        assert_close(got[1], hx.dot(hm * 2))


# ------------------------------------------------------------------ epilogues (consumer side)
@pytest.fixture(autouse=False)
def epilogues_always(monkeypatch):
    """Epilogues on every device (by default GPUs only), so PoCL runs their kernels too."""
    setting(monkeypatch, 'epilogues', 'always')


def _epilogue_pairs(f):
    return [(p, c) for p, c in _fused_pairs(f)
            if isinstance(p.op, (T.basic.Dot, T.blas.Gemv, T.blas.Dot22, T.blas.Dot22Scalar))]


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32'])
def test_epilogues_of_small_products(dtype, epilogues_always):
    """An elementwise consumer of a product is computed in the small product kernel (the
    product's value never stored); large products compute it first and the consumer runs."""
    A, B = T.matrix('A', dtype=dtype), T.matrix('B', dtype=dtype)
    v, b = T.vector('v', dtype=dtype), T.vector('b', dtype=dtype)
    two = np.asarray(2, dtype)
    outs = [T.maximum(T.dot(A, v) * two + b, b),          # Gemv / Dot, vector bias
            T.dot(A, B) - b[0],                           # Dot22, a broadcast scalar
            T.minimum(T.dot(v, B), two) * T.dot(A[0], v)]   # two products, one consumer
    if dtype != 'int32':
        outs.append(T.tanh(T.dot(A.T[::-1], A[:, 0])))    # reversed, strided operands
    rng = np.random.RandomState(2)
    values = [[rand((3, 4), dtype, rng), rand((4, 5), dtype, rng), rand((4,), dtype, rng),
               rand((3,), dtype, rng)],
              # 300 x 400 products: not small, the consumer runs after them
              [rand((300, 400), dtype, rng), rand((400, 300), dtype, rng),
               rand((400,), dtype, rng), rand((300,), dtype, rng)]]
    tol = dict(rtol=1e-4, atol=1e-3) if dtype == 'float32' else {}
    pairs = _check([A, B, v, b], outs, values, on_unused_input='ignore', **tol)
    epis = _epilogue_pairs(theano.function([A, B, v, b], outs, mode=theano_ocl.OCLMode(),
                                           on_unused_input='ignore'))
    assert len(epis) >= 2, pairs
    assert all(isinstance(c.op, T.elemwise.Elemwise) for _, c in epis)


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'float16'])
def test_epilogues_of_reductions(dtype, epilogues_always, monkeypatch):
    """A reduction of a fused producer computes its one elementwise consumer in its kernel
    (the Nengo synapse update reading its decoders' sum): one launch, the same bits as the
    reduction and the consumer apart, Theano C's results; over broadcast, strided and
    reversed inputs of the consumer, a wrong shape raised where Theano raises it, empty
    arrays; float16 and reductions in several parts run apart."""
    monkeypatch.setattr(ocl_reduce, 'fuse_pays', lambda *args: True)
    dec = T.tensor3('dec', dtype=dtype)
    s = T.matrix('s', dtype=dtype)
    y = T.matrix('y', dtype=dtype)
    b = T.vector('b', dtype=dtype)
    two, three = np.asarray(2, dtype), np.asarray(3, dtype)
    outs = [two * (dec * s[:, None, :]).sum(axis=2) + three * y,   # (E, D) + (E, D)
            T.maximum((dec - s[:, None, :]).max(axis=2), b[0]),   # a broadcast scalar
            (abs(dec) + two).sum(axis=(0, 2)) * b[::-1][:dec.shape[1]]]   # reversed
    rng = np.random.RandomState(4)

    def values(E, D, N):
        return [rand((E, D, N), dtype, rng, 0, 3), rand((E, N), dtype, rng, 0, 3),
                rand((E, D), dtype, rng, 0, 3), rand((max(D, 1) + 2,), dtype, rng, 0, 3)]
    ins = [dec, s, y, b]
    f_c = theano.function(ins, outs, mode='FAST_RUN')
    f_o = theano.function(ins, outs, mode=theano_ocl.OCLMode(cost_model='off'))
    f_a = theano.function(ins, outs, mode=theano_ocl.OCLMode(cost_model='off', epilogues='0'))
    tol = dict(atol=2e-2, rtol=1e-2) if dtype == 'float16' else \
        dict(rtol=1e-5) if dtype == 'float32' else {}
    for shape in [(49, 1, 100), (5, 3, 7), (4, 2, 1), (0, 3, 5)]:
        vals = values(*shape)
        want = f_c(*vals)
        got, apart = f_o(*vals), f_a(*vals)
        for k, (g, a, w) in enumerate(zip(got, apart, want)):
            assert np.array_equal(g, a), (k, shape)
            assert_close(g, w, what='output %d' % k, **tol)
    vals = values(49, 1, 100)
    f_o(*vals)
    f_a(*vals)
    epis = [(p, c) for p, c in _fused_pairs(f_o) if isinstance(p.op, T.elemwise.CAReduce)]
    if dtype == 'float16':
        assert not epis          # a float16 result is rounded where it is stored
    else:
        assert len(epis) == 3, epis
        assert theano_ocl.stats(f_o)['launches'] < theano_ocl.stats(f_a)['launches']
    bad = values(5, 3, 7)
    bad[2] = rand((5, 4), dtype, rng)
    for f in (f_c, f_o):
        with pytest.raises(ValueError):
            f(*bad)
        with pytest.raises(ValueError):      # the max over an empty axis
            f(*values(4, 2, 0))
    vals = values(5, 3, 7)
    for k, (g, w) in enumerate(zip(f_o(*vals), f_c(*vals))):
        assert_close(g, w, what='output %d after the errors' % k, **tol)


@pytest.mark.parametrize('shapes', ['ts', 'gpu'])
@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'float16'])
def test_epilogues_of_tiled_products(dtype, shapes, epilogues_always, monkeypatch):
    """A product too large for the small kernel computes its elementwise consumer in the
    tiled kernel's store of C (in the split sum's second launch where the sum is split):
    the consumer has no launch of its own. 'ts': the TS x TS kernel whole; 'gpu': the GPU
    shapes (register-blocked, split over chunks of a long sum) on this device. Against
    Theano C and the same function without epilogues, broadcast and strided operands,
    transposed and reversed products; float16 products store no epilogue (C is half)."""
    from theano_ocl.ops import blas
    setting(monkeypatch, 'blas', 'kernel')
    if shapes == 'gpu':
        monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', True)
        monkeypatch.setattr(blas, 'RB_MIN_MACS', 0)
        monkeypatch.setattr(theano_ocl.device.get_device(), 'compute_units', 132)
    A, B, W = T.matrix('A', dtype=dtype), T.matrix('B', dtype=dtype), T.matrix('W', dtype=dtype)
    b, Z = T.vector('b', dtype=dtype), T.matrix('Z', dtype=dtype)
    two = np.asarray(2, dtype)
    outs = [T.maximum(T.dot(A, B) * two + b, b),                 # a broadcast row
            T.sqr(T.dot(A[::-1], W[:, ::2]) - two) if dtype != 'int32' else
            T.dot(A[::-1], W[:, ::2]) * Z[::2, ::3],             # strided operands
            T.dot(B.T, A.T) + b.dimshuffle(0, 'x')]               # a broadcast column
    if dtype != 'int32':
        outs.append(T.tanh(T.dot(A, B) + b))
    rng = np.random.RandomState(21)
    m, k, n = 67, 700, 71
    lo = dict(low=-0.2, high=0.2) if dtype == 'float16' else {}
    vals = [rand(s, dtype, rng, **lo) for s in [(m, k), (k, n), (k, 2 * n), (n,), (2 * m, 3 * n)]]
    ins = [A, B, W, b, Z]
    f_c = theano.function(ins, outs, mode='FAST_RUN', on_unused_input='ignore')
    f_o = theano.function(ins, outs, mode=theano_ocl.OCLMode(), on_unused_input='ignore')
    f_n = theano.function(ins, outs, mode=theano_ocl.OCLMode(epilogues='0'),
                          on_unused_input='ignore')
    assert not theano_ocl.fallback_nodes(f_o)
    tol = {'float16': dict(rtol=2e-2, atol=0.1), 'float32': dict(rtol=1e-4, atol=2e-3)}.get(dtype, {})
    for _ in range(2):
        for k_, (g, w) in enumerate(zip(f_o(*vals), f_c(*vals))):
            assert_close(g, w, what='output %d' % k_, **tol)
    for g, w in zip(f_n(*vals), f_c(*vals)):
        assert_close(g, w, **tol)
    epis = _epilogue_pairs(f_o)
    taken = theano_ocl.stats(f_n)['launches'] - theano_ocl.stats(f_o)['launches']
    if dtype == 'float16':
        assert taken == 0
    else:
        assert len(epis) >= 3, _fused_pairs(f_o)
        assert taken == len(epis), (taken, epis)


def test_epilogue_products_batch_in_run_steps(epilogues_always):
    """Nengo's encoders: J = gain * dot(E, x) + bias, then the voltage update, per ensemble;
    the batched small-product kernel with epilogues (and fused producers) against Theano C
    over several steps, batched and not."""
    rng = np.random.RandomState(7)
    updates = []
    for e in range(5):
        n = 6 + e
        E = theano.shared(rng.randn(n, 2).astype('float32'), name='E%d' % e)
        x = theano.shared(rng.randn(2).astype('float32'), name='x%d' % e)
        v = theano.shared(np.zeros(n, 'float32'), name='v%d' % e)
        D = theano.shared(rng.randn(2, n).astype('float32') * 0.1, name='D%d' % e)
        gain, bias = np.float32(1.5 + e), rng.rand(n).astype('float32')
        J = gain * T.dot(E, x) + bias
        vn = v + (J - v) * np.float32(0.2)
        spikes = T.cast(vn > 1, 'float32')
        updates += [(v, T.switch(vn > 1, np.float32(0), vn)),
                    (x, x * np.float32(0.9) + T.dot(D, spikes))]
    f = theano.function([], [], updates=updates)

    def check(sim, batch):
        assert len(_epilogue_pairs(sim)) >= 5, _fused_pairs(sim)
        assert sim.stats['batched'] is batch
    _steps_match_f(f, updates, 8, check)


def test_epilogue_not_taken_for_outputs_and_shared_values(epilogues_always):
    A, v = T.matrix('A', 'float32'), T.vector('v', 'float32')
    p = T.dot(A, v)
    f_c, f_o = compile_both([A, v], [T.tanh(p), p])            # the product is an output
    assert not _epilogue_pairs(f_o)
    q = T.dot(A, v * 2)
    f2_c, f2_o = compile_both([A, v], [T.tanh(q), T.exp(q)])   # two consumers
    assert not _epilogue_pairs(f2_o)
    vals = [rand((3, 4), 'float32'), rand((4,), 'float32')]
    for fo, fc in ((f_o, f_c), (f2_o, f2_c)):
        for g, w in zip(fo(*vals), fc(*vals)):
            assert_close(g, w)


@pytest.mark.parametrize('launch_us', [1.0, 200.0])
def test_cpu_devices_fuse_more_where_launches_cost_more(launch_us, monkeypatch):
    """A CPU device reduces a fused producer of up to ``dispatch x cores / FUSED_LOSS_S``
    elements (at least ``FUSE_MAX_CPU``): 499 sums of 100 products (a Nengo synapse) are
    one launch where a launch costs 200 us, two where it costs 1 us; the
    results are Theano C's either way. The cost is measured once per device."""
    from theano_ocl.runtime.dispatch import dispatch_s
    dev = theano_ocl.get_device()
    if not dev.is_cpu:
        pytest.skip('the CPU devices\' rule')
    measured = dispatch_s(dev)
    assert 0 < measured < 0.01 and dispatch_s(dev) == measured
    monkeypatch.setattr(dev, '_dispatch_s', launch_us * 1e-6)
    limit = ocl_reduce.fuse_max_cpu(dev)
    assert limit >= ocl_reduce.FUSE_MAX_CPU
    dear = limit >= 499 * 100
    assert dear is (launch_us == 200.0)
    d, s_ = T.matrix('d', 'float32'), T.vector('s', 'float32')
    f_c, f_o = compile_both([d, s_], [(d * s_).sum(axis=1)])
    rng = np.random.RandomState(4)
    dv, sv = rand((499, 100), 'float32', rng), rand((100,), 'float32', rng)
    assert_close(f_o(dv, sv)[0], f_c(dv, sv)[0])
    assert theano_ocl.stats(f_o)['launches'] == (1 if dear else 2)


@pytest.mark.parametrize('launch_us', [None, 1.0, 100.0])
def test_epilogues_follow_the_device_rule(launch_us, monkeypatch):
    """'1' (the default): GPUs, and CPU devices whose launches cost at least
    ``EPILOGUE_CPU_DISPATCH_S`` (``runtime.dispatch``: as measured, and as if cheap or
    dear); '0': never; 'always': every device."""
    from theano_ocl.runtime.dispatch import dispatch_s
    A, v, b = T.matrix('A', 'float32'), T.vector('v', 'float32'), T.vector('b', 'float32')
    out = T.tanh(T.dot(A, v) + b)
    dev = theano_ocl.get_device()
    if launch_us is not None:
        monkeypatch.setattr(dev, '_dispatch_s', launch_us * 1e-6, raising=False)
    dear = dispatch_s(dev) >= fusion.EPILOGUE_CPU_DISPATCH_S
    assert dear is (launch_us == 100.0) or launch_us is None or not dev.is_cpu
    for value, expect in (('1', not dev.is_cpu or dear), ('0', False), ('always', True)):
        setting(monkeypatch, 'epilogues', value)
        f = theano.function([A, v, b], out, mode=theano_ocl.OCLMode())
        assert bool(_epilogue_pairs(f)) is expect, value
        # the same as a mode argument, and by name as Theano users exclude optimizations
        g = theano.function([A, v, b], out, mode=theano_ocl.OCLMode(epilogues=value))
        assert bool(_epilogue_pairs(g)) is expect, value
        A_, v_, b_ = rand((5, 3), 'float32'), rand((3,), 'float32'), rand((5,), 'float32')
        want = theano.function([A, v, b], out, mode='FAST_RUN')(A_, v_, b_)
        assert_close(g(A_, v_, b_), want)
    setting(monkeypatch, 'epilogues', 'always')
    h = theano.function([A, v, b], out, mode=theano_ocl.OCLMode().excluding('ocl_epilogues'))
    assert not _epilogue_pairs(h)


def test_folded_reads_live_until_the_consumer(epilogues_always, monkeypatch):
    """A folded product reads its operands at its consumer's place: a task between the two
    that was the last to read an operand must not release it (its buffer reused or taken in
    place before the consumer runs). Found by an MLP step with every product on the small
    kernel: the hidden layer's delta (dot(delta1, W1.T) * (1 - h1**2)) read a recycled W1.T."""
    from test_training import _build, _data
    setting(monkeypatch, 'blas', 'small')
    sizes = [78, 500, 500, 10]            # 64x500 float32 values: buffers the frame recycles
    x, y = _data('float32', n=64, n_in=sizes[0])
    f_c, p_c, _ = _build('FAST_RUN', sizes, T.tanh, 'float32')
    f_o, p_o, _ = _build(theano_ocl.OCLMode(), sizes, T.tanh, 'float32')
    # (the linked program's release points, against the fusion pass's moved reads: what
    # no public number says, a check of the two passes' agreement)
    prog = f_o.fn.program
    order = {t.node: k for k, t in enumerate(prog.tasks)}
    read_between = []
    for t in prog.tasks:
        if t.fused_into is None:
            continue
        lo, hi = order[t.node], order[t.fused_into.node]
        for u in fusion._reads(t):
            if any(u in prog.tasks[k].node.inputs for k in range(lo + 1, hi)):
                read_between.append(u)
                assert order[prog.last_use[u].node] >= hi, (u, t.node, t.fused_into.node)
    assert read_between and _epilogue_pairs(f_o)
    for step in range(3):
        assert_close(f_o(x, y), f_c(x, y), rtol=1e-5, what='loss %d' % step)
        for a, b in zip(p_o, p_c):
            assert_close(a.get_value(), b.get_value(), rtol=1e-4, atol=1e-6,
                         what='%s after step %d' % (a.name, step))


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'uint8', 'int64', 'float16'])
def test_producers_fold_into_updates_of_a_view(dtype):
    """``inc_subtensor``/``set_subtensor`` compute y's elementwise producer in the update's
    launch: column slices, reversed and stepped views, y broadcast along a dimension and
    with a dimension less, empty views; a producer's shape error and a y that does not fit
    the view are raised as Theano raises them."""
    x = T.matrix('x', dtype=dtype)
    a = T.matrix('a', dtype=dtype)
    b = T.matrix('b', dtype=dtype)
    r = T.row('r', dtype=dtype)
    v = T.vector('v', dtype=dtype)
    two = np.asarray(2, dtype)
    outs = [T.inc_subtensor(x[:, 1:4], a * two + b), T.set_subtensor(x[::-1, ::2], a - b),
            T.inc_subtensor(x[1:, :3], r * two), T.inc_subtensor(x[:, 2:5], v * v)]
    rng = np.random.RandomState(5)
    values = [[rand((n, 5), dtype, rng), rand((n, 3), dtype, rng), rand((n, 3), dtype, rng),
               rand((1, 3), dtype, rng), rand((3,), dtype, rng)] for n in (4, 1, 0)]
    pairs = _check([x, a, b, r, v], outs, values, atol=1e-2 if dtype == 'float16' else None)
    folded = [c for _, c in pairs if isinstance(c.op, T.subtensor.IncSubtensor)]
    # float16 values are stored rounded: their producers stay unfused
    assert len(folded) == (0 if dtype == 'float16' else 4), pairs
    f_c, f_o = compile_both([x, a, b, r, v], outs)
    good = values[0]
    for k, bad in ((1, rand((4, 2), dtype, rng)), (2, rand((3, 3), dtype, rng))):
        args = list(good)
        args[k] = bad            # a producer's mismatch, then a y wider than its view...
        for f in (f_c, f_o):
            with pytest.raises(ValueError):
                f(*args)
    args = list(good)
    args[1], args[2] = rand((4, 2), dtype, rng), rand((4, 2), dtype, rng)
    for f in (f_c, f_o):                       # ...and a y narrower than its view
        with pytest.raises(ValueError):
            f(*args)
    for g, w in zip(f_o(*good), f_c(*good)):   # still usable after the errors
        assert_close(g, w, atol=1e-2 if dtype == 'float16' else None)


@pytest.mark.parametrize('nested', ['device rule', 'forced'])
def test_gradient_of_slices_folds_every_producer(nested, monkeypatch):
    """The LSTM gradient's step assembles the gate gradient from four slices, each
    ``inc_subtensor(zeros[:, a:b], f(...))``: every f is computed in its update's launch.
    Two of them read a sigmoid that Theano overwrites in place before the updates run;
    that node writes a fresh output instead. The value four nodes read is stored by the
    first one's kernel, and the four updates cover the zeros, whose fill is dropped. The
    recomputed gates are composed into their readers' kernels on GPUs ('forced': on CPU
    devices too), else launched or stored by their first reader. Losses equal Theano C's."""
    if nested == 'forced':
        monkeypatch.setattr(fusion, 'NESTED', True)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), 'bench'))
    try:
        from lstm import build_lstm, make_data
    finally:
        sys.path.pop(0)
    from theano_ocl.report import inner_functions
    # (merge off: each node's own launch is what is checked, not the merged launches that
    # run several of them once the frame is built, tests/test_merge.py)
    f_o, _ = build_lstm(theano_ocl.OCLMode(merge=False), 6, 16)
    f_c, _ = build_lstm('FAST_RUN', 6, 16)
    grads = [inner for node, inner in inner_functions(f_o) if 'grad' in node.op.name]
    assert len(grads) == 1
    nodes = [node for node, _, _ in theano_ocl.placements(grads[0])]
    fused = theano_ocl.stats(grads[0])['fused']
    takers = {c for _, into, _ in fused for c in into}
    incs = [n for n in nodes if isinstance(n.op, T.subtensor.IncSubtensor)]
    assert len(incs) == 4 and all(n in takers for n in incs), (incs, fused)
    # (no public number says which node writes a fresh output: the fusion pass's decision)
    assert any(t.kind == 'dev' and t.impl.writes_fresh for t in grads[0].fn.program.tasks)
    X, y = make_data(7, 5, 6)
    for _ in range(3):
        np.testing.assert_allclose(f_o(X, y), f_c(X, y), rtol=1e-5)
    gates = {n for n in nodes if 'sigmoid' in str(n.op) or 'Tanh' in str(n.op)}
    fill = {n for n in nodes if isinstance(n.op, T.Alloc)}
    assert len(gates) == 4 and len(fill) == 1, gates | fill
    counts = theano_ocl.stats(grads[0])
    launched = {node for node, _, _ in counts['kernels']}
    stored = {node for node, _, s in counts['fused'] if s}
    assert not launched & fill
    if nested == 'forced' or counts['device'].is_gpu:
        assert not launched & gates, launched & gates
    else:           # each launched, or stored by its first reader's kernel: none computed twice
        assert all(n in launched or n in stored for n in gates) and launched & gates
    assert stored


def _momentum_step(dtype, shape):
    """An SGD-with-momentum step: ``m = mu * v`` read by both updates (Theano's fusion
    leaves it a node of its own, made in place over v; the velocity's update is made in
    place over m)."""
    g = T.TensorType(dtype, (False,) * len(shape))('g')
    rng = np.random.RandomState(3)
    W = theano.shared(rand(shape, dtype, rng), 'W')
    v = theano.shared(rand(shape, dtype, rng), 'v')
    ints = np.dtype(dtype).kind in 'iu'
    mu, lr = np.asarray(3 if ints else 0.9, dtype), np.asarray(2 if ints else 0.1, dtype)
    updates = [(v, mu * v - lr * g), (W, W + mu * v - lr * g)]
    return g, W, v, updates


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'int64', 'uint8'])
def test_shared_producer_folds_into_every_consumer(dtype):
    """Every step of both functions (fused and not) against Theano C's, from the same state:
    a wrong order of the in-place velocity update against the parameter's read of the
    momentum shows at the second step."""
    shape = (7, 5)
    results = {}
    for label, mode in (('c', 'FAST_RUN'), ('fused', theano_ocl.OCLMode()),
                        ('unfused', theano_ocl.OCLMode(fuse=False))):
        g, W, v, updates = _momentum_step(dtype, shape)
        f = theano.function([g], [], updates=updates, mode=mode)
        if label == 'fused':
            folded = [(p, c) for p, c in _fused_pairs(f) if p.op.scalar_op.__class__.__name__ == 'Mul']
            consumers = {c for _, into, _ in theano_ocl.stats(f)['fused'] for c in into}
            assert folded and len(consumers) >= 2, _fused_pairs(f)
        results[label] = _four_steps(f, W, v, shape, dtype, np.random.RandomState(5))
    _steps_match(results)


def _four_steps(f, W, v, shape, dtype, rng):
    """(W, v) after each of four calls of ``f`` on random gradients."""
    steps = []
    for _ in range(4):
        f(rand(shape, dtype, rng))
        steps.append((W.get_value(), v.get_value()))
    return steps


def _steps_match(results):
    for label in ('fused', 'unfused'):
        for k, (got, want) in enumerate(zip(results[label], results['c'])):
            for a, b, what in zip(got, want, ('W', 'v')):
                assert_close(a, b, what='%s %s after step %d' % (label, what, k + 1))


def test_shared_producer_broadcast_strided_and_launches():
    """A producer of a broadcast row read by two consumers of transposed (strided) inputs:
    one launch less than unfused, results equal to Theano C's; a producer reading two
    full arrays stays a launch of its own (duplicating it would read more memory)."""
    x, y = T.fmatrices('x', 'y')
    r = T.frow('r')
    p = T.exp(r) * np.float32(2)                     # reads one array (a row)
    q = x * y                                        # two full arrays: never duplicated
    outs = [x + p, y * p - x, T.tanh(q) + x, q * y]
    f_c, f_o = compile_both([x, y, r], outs)
    f_u = theano.function([x, y, r], outs, mode=theano_ocl.OCLMode(fuse=False))
    pairs = _fused_pairs(f_o)
    prods = {str(prod.op) for prod, _ in pairs}
    assert any('exp' in s for s in prods), pairs
    assert not any(c.op.scalar_op.__class__.__name__ == 'Mul' and len(c.inputs) == 2 and
                   x in c.inputs and y in c.inputs for c, _ in pairs)
    rng = np.random.RandomState(0)
    xv = rand((6, 4), 'float32', rng).T                  # strided (transposed)
    yv = rand((4, 6), 'float32', rng)[:, ::-1]           # negative strides
    rv = rand((1, 6), 'float32', rng)
    for fo in (f_o, f_u):
        for g, w in zip(fo(xv, yv, rv), f_c(xv, yv, rv)):
            assert_close(g, w)
    assert theano_ocl.stats(f_o)['launches'] < theano_ocl.stats(f_u)['launches']
    rows = [desc for node, where, desc in theano_ocl.placements(f_o) if 'exp' in str(node.op)]
    assert rows and 'computed in each of their kernels' in rows[0], rows
    # empty, and a shape mismatch raised where Theano raises it
    e = np.zeros((0, 6), 'float32')
    for g, w in zip(f_o(e, e, rv), f_c(e, e, rv)):
        assert g.shape == w.shape
    with pytest.raises(ValueError):
        f_c(xv, yv, rand((1, 5), 'float32', rng))
    with pytest.raises(ValueError):
        f_o(xv, yv, rand((1, 5), 'float32', rng))


def _stored(f):
    """The (producer, consumer) pairs where the consumer's kernel stores the producer's kept
    value (``fusion.fuse_kept_producers``)."""
    return [(node, into[0]) for node, into, stored in theano_ocl.stats(f)['fused'] if stored]


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'uint8'])
def test_kept_producer_is_stored_by_its_consumer(dtype):
    """An LSTM cell's shape: ``c`` is an output (kept) and ``o * tanh(c)`` reads it. The
    consumer's kernel computes ``c``, uses it and stores it: one launch less than unfused,
    both outputs equal to Theano C's, a later reader of ``c`` (a sum) reads the stored value;
    over strided and negative-stride inputs, empty arrays, and a shape mismatch raised
    where Theano raises it."""
    M = T.TensorType(dtype, (False, False))
    i, f, u, c0, o = [M(n) for n in ('i', 'f', 'u', 'c0', 'o')]
    if dtype.startswith('float'):
        c = T.nnet.sigmoid(f) * c0 + T.nnet.sigmoid(i) * T.tanh(u)
        h = T.nnet.sigmoid(o) * T.tanh(c)
    else:
        c = f * c0 + i * u
        h = (o + c) // 3
    outs = [c, h, c.sum(axis=0)]
    ins = [i, f, u, c0, o]
    f_c, f_o = compile_both(ins, outs)
    # unfused and unmerged (the planner would merge c's launch and h's, which reads c
    # element for element, into one)
    f_u = theano.function(ins, outs, mode=theano_ocl.OCLMode(fuse=False, merge=False))
    stored = _stored(f_o)
    assert len(stored) == 1 and stored[0][0].outputs[0] in f_o.maker.fgraph.outputs, stored
    assert not _stored(f_u)
    rng = np.random.RandomState(1)

    def values(shape, flip=False):
        vals = [rand(shape, dtype, rng) for _ in ins]
        if flip:
            vals[0] = rand(shape[::-1], dtype, rng).T          # strided
            vals[3] = vals[3][::-1, ::-1]                      # negative strides
        return vals
    for vals in (values((5, 7)), values((6, 3), flip=True), values((0, 4))):
        want = f_c(*vals)
        for fo in (f_o, f_u):
            for k, (g, w) in enumerate(zip(fo(*vals), want)):
                assert_close(g, w, what='output %d' % k)
    for fo in (f_o, f_u):
        fo(*values((5, 7)))
    assert theano_ocl.stats(f_o)['launches'] < theano_ocl.stats(f_u)['launches']
    rows = [desc for node, where, desc in theano_ocl.placements(f_o) if node is stored[0][0]]
    assert rows and 'computed and stored by the kernel of' in rows[0], rows
    bad = values((5, 7))
    bad[4] = rand((5, 6), dtype, rng)
    with pytest.raises(ValueError):
        f_c(*bad)
    with pytest.raises(ValueError):
        f_o(*bad)
    for g, w in zip(f_o(*values((5, 7))), f_c(*values((5, 7)))):      # usable after it
        assert g.shape == w.shape


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32'])
def test_kept_comparison_is_stored_by_its_consumer(dtype):
    """A kept comparison (``x < 0``, an output, a Theano variable that refuses ``bool()``)
    read by a ``switch``: the switch's kernel stores it. The planner tells the folded value
    by its type, never by the truth of what it holds (``T_local_erfc`` of Theano's
    test_opt raised "Variables do not support boolean operations" here). Also the graph
    of that test: ``log(erfc(x))`` with Theano's fusion off, whose kept comparisons select
    between a series and ``log(erfc)`` (float64 as there: in float32 ``erfc(10)`` is a
    denormal, which devices may flush)."""
    x = T.TensorType(dtype, (False,))('x')
    m = x < 0
    outs = [m, T.switch(m, -x, x * 3)]
    f_c, f_o = compile_both([x], outs)
    stored = _stored(f_o)
    assert [p.outputs[0] for p, _ in stored] == [f_o.maker.fgraph.outputs[0]], stored
    xv = np.array([-3, -1, 0, 2, 5], dtype)
    for _ in range(2):
        for k, (g, w) in enumerate(zip(f_o(xv), f_c(xv))):
            assert_close(g, w, what='output %d' % k)
    if dtype == 'float64':
        y = T.dvector('y')
        f_c, f_o = compile_both([y], T.log(T.erfc(y)), excluding=('fusion',))
        assert _stored(f_o)
        yv = np.array([-30, -11, -3, 0, 1, 3, 10, 11, 26, 30], dtype)
        for _ in range(2):
            assert_close(f_o(yv), f_c(yv))


def test_kept_producer_over_what_its_consumer_overwrites():
    """The consumer is made in place over a product that the kept producer reads too: the
    merged kernel writes the consumer's output fresh (both read the product, one would
    overwrite it). A producer whose value has another broadcast pattern than its
    consumer's output is not merged. Results equal Theano C's, with and without fusion."""
    x, y = T.dmatrices('x', 'y')
    r = T.drow('r')
    a = T.dot(x, y)                          # not elementwise: stays a value of its own
    c = T.exp(a) - 1                         # kept (an output)
    h = a * c + 1                            # Theano makes it in place over a
    row = T.exp(r) + 1                       # a row, kept; its client broadcasts it
    outs = [c, h, row, x * row]
    f_c, f_o = compile_both([x, y, r], outs)
    assert any(n.inputs[j].owner is not None and
               isinstance(n.inputs[j].owner.op, T.blas.Dot22)
               for n in f_o.maker.fgraph.toposort()
               for js in (getattr(n.op, 'destroy_map', None) or {}).values() for j in js), \
        'Theano no longer makes the consumer in place over the product'
    stored = _stored(f_o)
    outputs = f_o.maker.fgraph.outputs
    assert [p.outputs[0] for p, _ in stored] == [outputs[0]], stored
    # (no public number says which node writes a fresh output: the fusion pass's decision)
    consumer = [t for t in f_o.fn.program.tasks if t.node is stored[0][1]][0]
    assert consumer.impl.writes_fresh
    rng = np.random.RandomState(2)
    for n, m in ((4, 6), (1, 3)):
        vals = [rand((n, m), 'float64', rng), rand((m, n), 'float64', rng) / 4,
                rand((1, m), 'float64', rng)]
        for _ in range(2):
            for k, (g, w) in enumerate(zip(f_o(*vals), f_c(*vals))):
                assert_close(g, w, what='output %d' % k)


def test_kept_update_stored_by_the_next_update():
    """An SGD-momentum step written the other way round (the parameter's update reads the
    new velocity): the velocity is an update, and the parameter's kernel stores it. Four
    steps against Theano C's from the same state."""
    shape = (6, 5)
    results = {}
    for label, mode in (('c', 'FAST_RUN'), ('fused', theano_ocl.OCLMode()),
                        ('unfused', theano_ocl.OCLMode(fuse=False))):
        rng = np.random.RandomState(3)
        W = theano.shared(rand(shape, 'float32', rng), 'W')
        v = theano.shared(rand(shape, 'float32', rng), 'v')
        g = T.fmatrix('g')
        v_new = np.float32(0.9) * v - np.float32(0.1) * T.tanh(g)
        f = theano.function([g], [], updates=[(v, v_new), (W, W + 2 * v_new - W * v_new)],
                            mode=mode)
        if label == 'fused':
            assert _stored(f), _fused_pairs(f)
        results[label] = _four_steps(f, W, v, shape, 'float32', rng)
    _steps_match(results)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_shared_producer_folds_into_a_folded_consumer(dtype, monkeypatch):
    """The LSTM gradient's gates: ``s = sigmoid(g[:, a:b])`` read by an elementwise node that
    is itself folded into an ``inc_subtensor`` of zeros, and by another elementwise node.
    ``s`` is computed in both kernels (composed into the folded one): no launch of its own,
    results equal Theano C's and the unfused function's, over strided input rows. (GPUs
    only by default: forced here on CPU devices too.)"""
    monkeypatch.setattr(fusion, 'NESTED', True)
    g, d, e = [T.TensorType(dtype, (False, False))(n) for n in ('g', 'd', 'e')]
    s = T.nnet.sigmoid(g[:, 2:5])
    t = T.tanh(g[:, 5:])
    z = T.zeros_like(g)
    z = T.inc_subtensor(z[:, 2:5], d * s * (1 - s))
    z = T.inc_subtensor(z[:, 5:], d * t * s)
    outs = [z, e * s + d]
    f_c, f_o = compile_both([g, d, e], outs)
    f_u = theano.function([g, d, e], outs, mode=theano_ocl.OCLMode(fuse=False))
    into = {node: nodes for node, nodes, _ in theano_ocl.stats(f_o)['fused']}
    sig = [node for node, _, _ in theano_ocl.placements(f_o) if 'sigmoid' in str(node.op)]
    assert sig and all(n in into for n in sig), (sig, into)
    # a taker of a sigmoid, folded itself into a consumer that is not
    folded = [n for n, nodes in into.items() if nodes[0] not in into and
              any(n in into[s] for s in sig)]
    assert folded, 'no taker of the sigmoid is itself folded'
    rng = np.random.RandomState(4)
    for n in (4, 1):
        gv = rand((8, n), dtype, rng).T[:, ::-1]        # (n, 8): strided, reversed
        vals = [gv, rand((n, 3), dtype, rng), rand((n, 3), dtype, rng)]
        want = f_c(*vals)
        for fo in (f_o, f_u):
            for k, (got, w) in enumerate(zip(fo(*vals), want)):
                assert_close(got, w, what='output %d' % k)
    vals = [rand((4, 8), dtype, rng), rand((4, 3), dtype, rng), rand((4, 3), dtype, rng)]
    for fo in (f_o, f_u):
        fo(*vals)
    assert theano_ocl.stats(f_o)['launches'] < theano_ocl.stats(f_u)['launches']
