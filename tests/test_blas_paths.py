"""ops/blas.py backends' special paths, against Theano's C backend: host steps sharing one
mapping, operands in every BLAS layout (transposes, leading dimensions, column-major
outputs), Z apart from C, device scalars, the f2py fallback of the host backend, and the
CLBlast call sequence (one library call per plain product)."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.ops import blas, blas_clblast, blas_host
from helpers import assert_matches_c, rand, setting

# 'host': the host BLAS as a command of the device's queue where the device runs native
# kernels (ops/blas_queued.py), else mapped; 'host-mapped': always mapped (blas_host.py)
BACKENDS = ['host', 'host-mapped'] + (['clblast'] if blas_clblast.load_pyclblast() is not None
                                      else [])
TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    setting(monkeypatch, 'blas', request.param.split('-')[0])
    if request.param == 'host-mapped':
        setting(monkeypatch, 'host_blas', 'mapped')
    return request.param


def _vals(shapes, dtype='float32', seed=0):
    rng = np.random.RandomState(seed)
    return [rand(s, dtype, rng, low=-2, high=2) for s in shapes]


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_layouts_and_z(backend, dtype):
    x, y, z = T.matrix('x', dtype), T.matrix('y', dtype), T.matrix('z', dtype)
    a, b = T.scalar('a', dtype), T.scalar('b', dtype)
    xv, yv, zv = _vals([(7, 9), (9, 5), (7, 5)], dtype)
    av, bv = np.asarray(1.5, dtype), np.asarray(-0.5, dtype)
    outs = [z + 0.25 * T.dot(x, y),                  # Gemm, Z is an input (not destroyed)
            (z * 2).T + 0.5 * T.dot(y.T, x.T),       # Gemm in place on a transposed intermediate
            b * z + a * T.dot(x, y),                 # device alpha and beta
            T.dot(x[:, 1:8], y[1:8, ::-1]),          # leading dimensions; a reversed operand
            T.dot(x.T[::2], z[:, :3]),               # a stepped operand (copied), ld 5
            a * T.dot(y.T, x.T)]                     # Dot22Scalar with transposed operands
    f = assert_matches_c([x, y, z, a, b], outs, [xv, yv, zv, av, bv], **TOL)
    assert not theano_ocl.fallback_nodes(f)


def test_consecutive_host_steps_share_a_mapping(monkeypatch):
    """Products recorded one after another map their buffers once (one session)."""
    setting(monkeypatch, 'blas', 'host')
    setting(monkeypatch, 'host_blas', 'mapped')
    x, g = T.matrix('x', 'float32'), T.matrix('g', 'float32')
    W = theano.shared(_vals([(6, 4)], seed=1)[0], 'W')
    outs = [T.dot(g, W.T), T.dot(x.T, g), T.dot(x, W)]
    vals = _vals([(5, 6), (5, 4)], seed=2)
    f = assert_matches_c([x, g], outs, vals, calls=3, **TOL)
    log = []            # (what, mapping) of each map and unmap of a replayed call
    for what in ('open', 'release'):
        real = getattr(blas_host._Mapped, what)
        monkeypatch.setattr(blas_host._Mapped, what,
                            lambda self, *a, real=real, what=what:
                            log.append((what, id(self))) or real(self, *a))
    f(*vals)
    opened = [m for what, m in log if what == 'open']
    assert 1 <= len(opened) < len(outs), log       # fewer mappings than products
    last = {}
    for what, m in log:
        last[m] = what
    assert set(last.values()) == {'release'}, log      # all unmapped after the call


@pytest.mark.parametrize('host_blas', ['queued', 'mapped'])
def test_training_updates_through_shared_sessions(monkeypatch, host_blas):
    """SGD with momentum on a 2-layer net: products back to back in the backward pass."""
    setting(monkeypatch, 'blas', 'host')
    setting(monkeypatch, 'host_blas', host_blas)
    xv, yv = _vals([(16, 8), (16, 3)], seed=3)
    results = []
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        rng = np.random.RandomState(4)
        W1 = theano.shared(rng.randn(8, 6).astype('float32'), 'W1')
        W2 = theano.shared(rng.randn(6, 3).astype('float32'), 'W2')
        V1 = theano.shared(np.zeros((8, 6), 'float32'), 'V1')
        x, y = T.matrix('x', 'float32'), T.matrix('y', 'float32')
        loss = T.mean((T.dot(T.tanh(T.dot(x, W1)), W2) - y) ** 2)
        g1, g2 = T.grad(loss, [W1, W2])
        upd = [(V1, np.float32(0.9) * V1 - np.float32(0.1) * g1), (W1, W1 + V1),
               (W2, W2 - np.float32(0.1) * g2)]
        f = theano.function([x, y], loss, updates=upd, mode=mode)
        losses = [float(f(xv, yv)) for _ in range(5)]
        results.append((losses, W1.get_value(), W2.get_value()))
    np.testing.assert_allclose(results[1][0], results[0][0], **TOL)
    np.testing.assert_allclose(results[1][1], results[0][1], **TOL)
    np.testing.assert_allclose(results[1][2], results[0][2], **TOL)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_host_f2py_fallback(monkeypatch, dtype):
    """Without the ctypes ?gemm the host backend goes through scipy's f2py wrappers."""
    setting(monkeypatch, 'blas', 'host')
    monkeypatch.setattr(blas_host, '_GEMM', {'float32': None, 'float64': None})
    x, y, z = T.matrix('x', dtype), T.matrix('y', dtype), T.matrix('z', dtype)
    a = T.scalar('a', dtype)
    xv, yv, zv = _vals([(7, 9), (9, 5), (7, 5)], dtype)
    outs = [T.dot(x, y), z + a * T.dot(x, y), T.dot(x[::-1], y[:, ::2]), T.dot(y.T, x.T)]
    assert_matches_c([x, y, z, a], outs, [xv, yv, zv, np.asarray(0.5, dtype)], **TOL)


@pytest.mark.skipif(blas_clblast.load_pyclblast() is None, reason='pyclblast is not installed')
def test_clblast_plain_product_is_one_call(monkeypatch):
    """A Dot22 of contiguous float32 matrices enqueues one CLBlast call and nothing else."""
    import pyclblast
    import pyopencl as cl
    setting(monkeypatch, 'blas', 'clblast')
    setting(monkeypatch, 'launch', 'pyopencl')       # every kernel launch seen by the spy
    calls = []
    for mod, name in ((pyclblast, 'gemm'), (cl, 'enqueue_nd_range_kernel'), (cl, 'enqueue_copy'),
                      (cl, 'enqueue_fill_buffer')):
        orig = getattr(mod, name)

        def wrapped(*args, _orig=orig, _name=name, **kwargs):
            calls.append(_name)
            return _orig(*args, **kwargs)
        monkeypatch.setattr(mod, name, wrapped)
    av, bv = _vals([(33, 17), (17, 20)])
    A, B = theano.shared(av, 'A'), theano.shared(bv, 'B')
    f = theano.function([], T.dot(A, B), mode=theano_ocl.OCLMode(outputs='device'))
    f()
    del calls[:]
    for _ in range(3):
        out = f()
    assert calls == ['gemm'] * 3
    np.testing.assert_allclose(out.get(), av.dot(bv), **TOL)


@pytest.mark.parametrize('be', BACKENDS + ['kernel'])
@pytest.mark.parametrize('scalars', ['plain', 'in place', 'device'])
def test_plan_gemm_column_major_output(monkeypatch, be, scalars):
    """plan_gemm into a column-major (transposed) C, which no BLAS op produces today (Gemm
    in place on a transposed intermediate could): CLBlast computes C^T = B^T A^T into it,
    the host ?gemm takes it as column-major. Reference: Theano C."""
    from theano_ocl.runtime.context import Frame, PlanContext
    from theano_ocl.runtime.memory import download, upload
    if be == 'host-mapped':
        setting(monkeypatch, 'host_blas', 'mapped')
    be = be.split('-')[0]
    setting(monkeypatch, 'blas', be)     # no automatic small-product path
    used = []
    for name in ('plan_host', 'plan_clblast', 'plan_kernel'):
        monkeypatch.setattr(blas, name, lambda *a, _f=getattr(blas, name), _n=name, **k: (
            used.append(_n), _f(*a, **k))[1])
    dev = theano_ocl.get_device()
    q = dev.queue
    av, bv, zv = _vals([(6, 4), (4, 5), (6, 5)], seed=5)
    x, y, z = T.fmatrix('x'), T.fmatrix('y'), T.fmatrix('z')
    s_al, s_be = T.fscalar('al'), T.fscalar('be')
    want = theano.function([x, y, z, s_al, s_be], s_al * T.dot(x, y) + s_be * z,
                           mode='FAST_RUN')(av, bv, zv, 1.5, 0.5)

    class _VM(object):
        pass
    vm = _VM()
    vm.dev = dev
    ctx = PlanContext(vm, Frame(None), 0, q)

    def dev_array(v):
        d = ctx.alloc(v.shape, v.dtype)
        upload(dev, q, d, np.ascontiguousarray(v), blocking=True)
        return d
    A, B = dev_array(av), dev_array(bv)
    Ct = dev_array(zv.T)                                   # C^T stored row-major: C column-major
    C = Ct.view((6, 5), (Ct.itemsize, 6 * Ct.itemsize))
    # as Scalar.of makes them: a constant also has its value on the device
    kind = 'dev' if scalars == 'device' else 'const'
    alpha = blas.Scalar(kind, 1.5, dev_array(np.asarray(1.5, 'float32')))
    beta = blas.Scalar(kind, 0.5, dev_array(np.asarray(0.5, 'float32')))
    if scalars == 'plain':
        beta = blas.NONE
        want = theano.function([x, y], np.float32(1.5) * T.dot(x, y), mode='FAST_RUN')(av, bv)
    blas.plan_gemm(ctx, be, blas.as_batch(A), blas.as_batch(B), blas.as_batch(C), alpha, beta,
                   None if scalars == 'plain' else blas.as_batch(C))
    for st in ctx.new_steps:
        st.fn()
    got = download(dev, q, Ct).T
    assert used == [{'host': 'plan_host', 'clblast': 'plan_clblast', 'kernel': 'plan_kernel'}[be]]
    np.testing.assert_allclose(got, want, **TOL)


def test_clblast_tuning_applies_only_to_the_named_device(monkeypatch, tmp_path):
    """clblast_tuned.json entries are applied (once) to a device of that exact name, and
    CLBlast's products stay correct with them."""
    if blas_clblast.load_pyclblast() is None:
        pytest.skip('pyclblast is not installed')
    import json
    dev = theano_ocl.get_device()
    params = dict(GEMMK=0, KREG=1, KWG=16, KWI=2, MDIMA=8, MDIMC=8, MWG=64, NDIMB=8, NDIMC=8,
                  NWG=64, SA=1, SB=1, STRM=1, STRN=0, VWM=4, VWN=4)
    table = {'Xgemm32': [dict(device='no such device', params=params),
                         dict(device=dev.name, params=params)]}
    path = tmp_path / 'tuned.json'
    path.write_text(json.dumps(table))
    monkeypatch.setattr(blas_clblast, 'TUNED_FILE', str(path))
    monkeypatch.setattr(blas_clblast, '_tuned', {})
    setting(monkeypatch, 'blas', 'clblast')
    x, y = T.matrix('x', 'float32'), T.matrix('y', 'float32')
    xv, yv = _vals([(520, 600), (600, 530)], seed=3)     # large enough for CLBlast's Xgemm
    assert_matches_c([x, y], [T.dot(x, y)], [xv, yv], rtol=1e-3, atol=1e-3)
    applied = blas_clblast.clblast_tuning(dev)
    assert [(e['device'], e['kernel'], e['precision']) for e in applied] == \
        [(dev.name, 'Xgemm', 32)]
    assert blas_clblast.clblast_tuning(dev) is applied                  # once per device
    monkeypatch.setattr(blas_clblast, '_tuned', {})
    monkeypatch.setenv('THEANO_OCL_CLBLAST_TUNED', '0')
    assert blas_clblast.clblast_tuning(dev) == []


@pytest.mark.parametrize('big', [False, True])
def test_host_products_run_on_the_calling_thread_up_to_a_size(monkeypatch, big):
    # PoCL's threads share the cores with OpenBLAS's: a product of at most ONE_THREAD_MACS
    # runs on one BLAS thread, and the thread count is given back after it (the mapped
    # path: a queued product sets it on the device's thread, test_blas_queued.py)
    setting(monkeypatch, 'blas', 'host')
    setting(monkeypatch, 'host_blas', 'mapped')
    calls = []
    counts = [2]

    def local(n):
        calls.append(n)
        prev, counts[0] = counts[0], n
        return prev
    monkeypatch.setattr(blas_host, '_LOCAL', [local])
    monkeypatch.setattr(blas_host, 'ONE_THREAD_MACS', 0 if big else 1 << 27)
    rng = np.random.RandomState(3)
    x, y = T.fmatrix('x'), T.fmatrix('y')
    xv, yv = rand((30, 40), 'float32', rng), rand((40, 20), 'float32', rng)
    f = assert_matches_c([x, y], T.dot(x, y), [xv, yv], rtol=1e-4, atol=1e-4)
    assert f is not None
    if big:
        assert calls == []
    else:
        assert calls and calls[::2] == [1] * (len(calls) // 2) and calls[1::2] == [2] * (len(calls) // 2)
        assert counts[0] == 2


@pytest.mark.parametrize('way', ['mapped', 'in place'])
def test_host_steps_map_each_buffer_once_where_its_roots_are_now(monkeypatch, way):
    """ops/blas_host._Mapped: roots on one buffer (rows of one outer buffer, as a scan loop
    points them) get one map over the union of their spans, READ|WRITE where any is
    written; each view reads and writes its own root's place, read when the map opens
    (a root moved since the last open maps its new place). 'in place' (the ``host_blas``
    setting 'queued', on a device that runs queued products): pool buffers are not mapped
    at all once their address is known, the same views read and write the same places."""
    from theano_ocl.darray import DArray, Root
    from theano_ocl.ops import blas_queued
    dev = theano_ocl.get_device()
    cl = dev.cl
    monkeypatch.setenv('THEANO_OCL_HOST_BLAS', 'mapped' if way == 'mapped' else 'queued')
    if way == 'in place' and not blas_queued.available(dev):
        pytest.skip('the device runs no queued products (not a CPU device with native kernels)')
    host = np.arange(64, dtype='float32')
    other = np.arange(8, dtype='float32') + 100
    buf, buf2 = dev.alloc(host.nbytes), dev.alloc(other.nbytes)
    cl.enqueue_copy(dev.queue, buf, host)
    cl.enqueue_copy(dev.queue, buf2, other)
    roots = [Root(buf, 64), Root(buf, 64), Root(buf, 32), Root(buf2, 32)]
    for r, origin in zip(roots, (0, 64, 32, 0)):
        r.origin = origin
    views = [DArray(r, (r.nbytes // 4,), 'float32') for r in roots]
    maps = []
    real = cl.enqueue_map_buffer

    def spy(queue, b, flags, offset, shape, *a, **k):
        maps.append((b, int(flags), offset, shape))
        return real(queue, b, flags, offset, shape, *a, **k)
    monkeypatch.setattr(cl, 'enqueue_map_buffer', spy)
    m = blas_host._Mapped(dev, dev.queue)
    m.open([(r, 0, r.nbytes, w) for r, w in zip(roots, (False, True, False, True))])
    rw = int(cl.map_flags.READ | cl.map_flags.WRITE)
    if way == 'mapped':
        assert sorted((b is buf, fl, off, sh) for b, fl, off, sh in maps) == \
            [(False, rw, 0, (32,)), (True, rw, 0, (128,))]
    else:
        # at most the one look-up of each buffer's address (blas_queued.Addresses)
        assert all((off, sh) == (0, (1,)) for _, _, off, sh in maps) and len(maps) <= 2
    for d, start in zip(views, (0, 16, 8)):
        np.testing.assert_array_equal(m.view(d), host[start:start + d.size])
        assert m.address(d) == m.view(d).ctypes.data
    np.testing.assert_array_equal(m.view(views[3]), other)
    m.view(views[1])[:] = -1
    m.view(views[3])[::2] = -2
    m.release()
    back, back2 = np.empty_like(host), np.empty_like(other)
    cl.enqueue_copy(dev.queue, back, buf)
    cl.enqueue_copy(dev.queue, back2, buf2, is_blocking=True)
    want = host.copy()
    want[16:32] = -1
    want2 = other.copy()
    want2[::2] = -2
    np.testing.assert_array_equal(back, want)
    np.testing.assert_array_equal(back2, want2)
    # a root moved since: mapped at its new place
    del maps[:]
    roots[1].origin = 128
    m.open([(roots[1], 0, 64, False)])
    assert [(off, sh) for _, _, off, sh in maps] == ([(128, (64,))] if way == 'mapped' else [])
    np.testing.assert_array_equal(m.view(views[1]), host[32:48])
    m.release()
