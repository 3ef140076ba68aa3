"""BLAS family (ops/blas.py): Dot, Dot22, Dot22Scalar, Gemm, Gemv, Ger, BatchedDot on every
backend the device can run (host BLAS on mapped buffers, the tiled kernel, CLBlast where
pyclblast is installed), against Theano's C backend."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.ops import blas, blas_clblast
from helpers import assert_close, assert_matches_c, rand, setting

BACKENDS = ['host', 'kernel', 'small'] + \
    (['clblast'] if blas_clblast.load_pyclblast() is not None else [])
TOL = {'float16': dict(rtol=1e-2, atol=1e-2), 'float32': dict(rtol=1e-4, atol=1e-4),
       'float64': dict(rtol=1e-10, atol=1e-10)}


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    setting(monkeypatch, 'blas', request.param)
    return request.param


def _backends_used(f):
    return {impl.rsplit('(', 1)[-1].rstrip(')') for node, where, impl in theano_ocl.placements(f)
            if where == 'device' and type(node.op).__module__.startswith('theano.tensor.blas')
            or type(node.op).__name__ == 'Dot'}


def _vals(rng, shapes, dtype):
    # small magnitudes keep float16 sums representable
    return [rand(s, dtype, rng, low=-2, high=2) for s in shapes]


# in-graph operand views: each maps a stored (base) matrix to the (rows, cols) operand
VIEWS = {
    'plain': (lambda r, c: (r, c), lambda x: x),
    'T': (lambda r, c: (c, r), lambda x: x.T),
    'rev': (lambda r, c: (r, c), lambda x: x[::-1]),
    'step': (lambda r, c: (r, 2 * c), lambda x: x[:, ::2]),
}


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16'])
@pytest.mark.parametrize('va,vb', [('plain', 'plain'), ('T', 'plain'), ('plain', 'T'), ('T', 'T'),
                                   ('rev', 'step'), ('step', 'rev')])
def test_dot22_views(backend, dtype, va, vb):
    if dtype == 'float16' and backend not in ('kernel', 'small'):
        pytest.skip('float16 runs on the kernel (or the forced small kernel)')
    rng = np.random.RandomState(1)
    m, k, n = 13, 17, 9
    sa, fa = VIEWS[va]
    sb, fb = VIEWS[vb]
    x, y = T.matrix('x', dtype), T.matrix('y', dtype)
    xv, yv = _vals(rng, [sa(m, k), sb(k, n)], dtype)
    f = assert_matches_c([x, y], T.dot(fa(x), fb(y)), [xv, yv], **TOL[dtype])
    assert _backends_used(f) == {'kernel' if dtype == 'float16' and backend != 'small' else backend}


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_gemm_gemv_ger_dot22scalar(backend, dtype):
    rng = np.random.RandomState(2)
    z, x, y = T.matrix('z', dtype), T.matrix('x', dtype), T.matrix('y', dtype)
    u, v = T.vector('u', dtype), T.vector('v', dtype)
    a, b = T.scalar('a', dtype), T.scalar('b', dtype)
    zv, xv, yv = _vals(rng, [(6, 5), (6, 8), (8, 5)], dtype)
    uv, vv = _vals(rng, [(8,), (5,)], dtype)
    av, bv = np.asarray(1.5, dtype), np.asarray(-0.5, dtype)
    outs = [b * z + a * T.dot(x, y),            # Gemm, device scalars
            z - 0.25 * T.dot(x.T[::-1].T, y),  # Gemm, constant scalars, reversed operand
            a * T.dot(x, y),                    # Dot22Scalar
            b * u[:6] + a * T.dot(x[:, :5], v),     # Gemv
            T.dot(x.T, z[:, 0]),                    # Gemv, transposed matrix, strided vector
            z + a * T.outer(u[:6], v),          # Ger
            z + 0.3 * T.outer(u[:6], v[::-1]),  # Ger, constant alpha (small products take it)
            T.dot(u, u[::-1])]                  # vector . vector
    f = assert_matches_c([z, x, y, u, v, a, b], outs, [zv, xv, yv, uv, vv, av, bv], **TOL[dtype])
    ops = {type(n.op).__name__ for n in f.maker.fgraph.toposort()}
    assert {'Gemm', 'Dot22Scalar', 'Gemv', 'ScipyGer'} <= ops, ops
    assert _backends_used(f) == {backend}


@pytest.mark.parametrize('dtypes', [('int32', 'int32'), ('int64', 'int64'), ('int8', 'int8'),
                                    ('uint8', 'int8'), ('int16', 'float32'), ('uint32', 'int32')])
def test_integer_and_mixed_dot(dtypes):
    rng = np.random.RandomState(3)
    x, y = T.matrix('x', dtypes[0]), T.matrix('y', dtypes[1])
    u = T.vector('u', dtypes[1])
    xv = rand((7, 300), dtypes[0], rng, low=0 if dtypes[0][0] == 'u' else -100, high=100)
    yv = rand((300, 5), dtypes[1], rng, low=-100, high=100)
    uv = rand((300,), dtypes[1], rng, low=-100, high=100)
    # int8 sums wrap, as numpy's do: the results must still match exactly
    f = assert_matches_c([x, y, u], [T.dot(x, y), T.dot(x[::-1], u), T.dot(u, y), T.dot(u, u)],
                       [xv, yv, uv])
    if not any(dt.startswith('float') for dt in dtypes):
        assert _backends_used(f) == {'kernel'}
    big = np.full((2, 3), 2 ** 40, 'int64')
    xi, yi = T.lmatrix(), T.lmatrix()
    assert_matches_c([xi, yi], T.dot(xi, yi), [big, big.T.copy()])     # int64 wraps, exactly


@pytest.mark.parametrize('shapes', [((0, 4), (4, 3)), ((3, 0), (0, 5)), ((3, 4), (4, 0)),
                                    ((1, 1), (1, 1))])
def test_empty_and_tiny(backend, shapes):
    rng = np.random.RandomState(4)
    x, y, z = T.matrix('x'), T.matrix('y'), T.matrix('z')
    xv, yv = _vals(rng, shapes, 'float64')
    zv = rand((shapes[0][0], shapes[1][1]), 'float64', rng)
    assert_matches_c([x, y, z], [T.dot(x, y), z * 2 + 3 * T.dot(x, y)], [xv, yv, zv])


def test_shape_errors(backend):
    x, y = T.matrix('x'), T.matrix('y')
    u = T.vector('u')
    f = theano.function([x, y, u], [T.dot(x, y), T.dot(x, u)], mode=theano_ocl.OCLMode())
    with pytest.raises(ValueError, match=r'\(3, 4\).*\(5, 2\)'):
        f(np.ones((3, 4)), np.ones((5, 2)), np.ones(4))
    with pytest.raises(ValueError, match=r'A: \(3, 4\).*x: \(7,\)'):
        f(np.ones((3, 4)), np.ones((4, 2)), np.ones(7))
    z = T.matrix('z')
    g = theano.function([z, x, y], z + 2 * T.dot(x, y), mode=theano_ocl.OCLMode())
    with pytest.raises(ValueError, match=r'gemm.*\(2, 2\)'):
        g(np.ones((2, 2)), np.ones((3, 4)), np.ones((4, 2)))


def test_sgd_update_in_place(backend):
    """W <- W - lr * x.T @ g on a resident shared variable: Gemm destroys W's buffer."""
    rng = np.random.RandomState(5)
    W0 = rand((8, 4), 'float32', rng)
    x, g = T.matrix('x', 'float32'), T.matrix('g', 'float32')
    vals = _vals(rng, [(16, 8), (16, 4)], 'float32')
    results = []
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        W = theano.shared(W0.copy(), 'W')
        f = theano.function([x, g], T.sum(W), updates=[(W, W - np.float32(0.1) * T.dot(x.T, g))],
                            mode=mode)
        for _ in range(3):
            f(*vals)
        results.append(W.get_value())
    assert not theano_ocl.fallback_nodes(f)
    assert_close(results[1], results[0], **TOL['float32'])


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32'])
def test_batched_dot(backend, dtype):
    # Theano's BatchedDot C code needs a linked BLAS (blas.ldflags is empty here: its module
    # fails to load), so the reference is Theano's Python implementation.
    rng = np.random.RandomState(6)
    x3, y3 = T.tensor3('x3', dtype), T.tensor3('y3', dtype)
    x2, y2 = T.matrix('x2', dtype), T.matrix('y2', dtype)
    vals = _vals(rng, [(3, 4, 5), (3, 5, 2), (3, 5), (3, 5)], dtype)
    outs = [T.batched_dot(x3, y3), T.batched_dot(x3[::-1], y3.dimshuffle(0, 2, 1)[:, :, ::-1].dimshuffle(0, 2, 1)),
            T.batched_dot(x3, y2), T.batched_dot(x2, y3), T.batched_dot(x2, y2)]
    ref = theano.function([x3, y3, x2, y2], outs, mode=theano.compile.Mode(linker='py', optimizer='fast_run'))
    f = theano.function([x3, y3, x2, y2], outs, mode=theano_ocl.OCLMode())
    assert not theano_ocl.fallback_nodes(f)
    for _ in range(2):
        for k, (got, want) in enumerate(zip(f(*vals), ref(*vals))):
            assert_close(got, want, what='output %d' % k, **(TOL.get(dtype) or {}))


def test_default_backend_choice():
    dev = theano_ocl.get_device()
    want = 'host' if (dev.is_cpu or dev.unified_memory) and not dev.is_gpu else (
        'clblast' if blas_clblast.load_pyclblast() is not None else 'kernel')
    assert blas.choose_backend(dev, ['float32', 'float32']) == want
    assert blas.choose_backend(dev, ['int32', 'int32']) == 'kernel'
    assert blas.choose_backend(dev, ['float16', 'float16']) == 'kernel'
    assert blas.choose_backend(dev, ['float32', 'float64']) == 'kernel'


@pytest.mark.parametrize('auto', [True, False])
def test_ger_updating_a_shared_matrix_with_strides(backend, auto, monkeypatch):
    # Theano's TestBlasStrides.test_ger_strides pattern: a <- a + l * outer(b, c) with the
    # shared values set to reversed / stepped views between calls (auto: the backend the
    # device would choose, small products included)
    if auto:
        setting(monkeypatch, 'blas', None)
    rng = np.random.RandomState(7)
    av, bv, cv = rng.rand(3, 5), rng.rand(3), rng.rand(5)
    a, b, c = theano.shared(av), theano.shared(bv), theano.shared(cv)
    f = theano.function([], [], updates=[(a, a + 0.2 * T.outer(b, c))], mode=theano_ocl.OCLMode())
    assert not theano_ocl.fallback_nodes(f)
    for s1, s2, sb, sc in [(1, 1, 1, 1), (-1, 1, 1, -1), (2, -2, -2, 2), (-2, 2, 2, -2)]:
        a.set_value(av.copy()[::s1, ::s2], borrow=True)
        b.set_value(bv.copy()[::sb], borrow=True)
        c.set_value(cv.copy()[::sc], borrow=True)
        f()
        want = av[::s1, ::s2] + 0.2 * np.outer(bv[::sb], cv[::sc])
        assert_close(a.get_value(), want, what='strides %s' % ((s1, s2, sb, sc),))


@pytest.mark.parametrize('tile', blas.RB_TILES)
@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16', 'int32'])
def test_register_blocked_kernel(tile, dtype, monkeypatch):
    # the tiled kernel's register-blocked shape (products of at least 64 x 64 elements):
    # sizes that no tile divides, every operand layout (coalesced either way), alpha/beta
    setting(monkeypatch, 'blas', 'kernel')
    monkeypatch.setattr(blas, 'RB_TILES', (tile,))
    monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', True)
    monkeypatch.setattr(blas, 'RB_MIN_MACS', 0)
    shapes = []
    choose = blas.register_blocking
    monkeypatch.setattr(blas, 'register_blocking',
                        lambda *a: shapes.append(choose(*a)) or shapes[-1])
    rng = np.random.RandomState(11)
    m, k, n = 131, 67, 97
    x, y, z = T.matrix('x', dtype), T.matrix('y', dtype), T.matrix('z', dtype)
    xv, yv = _vals(rng, [(m, 2 * k), (k, n)], dtype)
    zv, = _vals(rng, [(m, n)], dtype)
    xs = x[:, ::2]
    outs = [T.dot(xs, y), T.dot(xs[::-1], y[:, ::-1]), T.dot(y.T, xs.T), T.dot(xs.T.T, y.T.T)]
    if dtype != 'int32':
        outs.append(z * np.asarray(0.5, dtype) + T.dot(xs, y) * np.asarray(2, dtype))
    tol = dict(TOL.get(dtype, {}))
    if dtype == 'float16':
        tol = dict(rtol=2e-2, atol=0.25)      # sums of 67 products, rounded to half once
    assert_matches_c([x, y, z], outs, [xv, yv, zv], on_unused_input='ignore', **tol)
    assert shapes and all(s is not None and s[:4] == tile for s in shapes), shapes
    layouts = {s[5:] for s in shapes}
    assert len(layouts) > 1, 'every operand layout took one load order: %s' % layouts


def _gpu_shapes_recorded(monkeypatch):
    """The kernel backend with the GPU shapes on this device (132 compute units, every
    product register-blocked where its sides allow); returns the lists that the shapes and
    splits the planner picks are appended to."""
    setting(monkeypatch, 'blas', 'kernel')
    monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', True)
    monkeypatch.setattr(blas, 'RB_MIN_MACS', 0)
    monkeypatch.setattr(theano_ocl.device.get_device(), 'compute_units', 132)
    shapes, splits = [], []
    rb, sp = blas.register_blocking, blas.split_sum
    monkeypatch.setattr(blas, 'register_blocking', lambda *a: shapes.append(rb(*a)) or shapes[-1])
    monkeypatch.setattr(blas, 'split_sum', lambda *a: splits.append(sp(*a)) or splits[-1])
    return shapes, splits


def test_thin_products_take_the_ts_kernel_split(monkeypatch):
    # a C with a side shorter than RB_MIN_SIDE never takes a register-blocked tile (it would
    # mostly compute padding), transposed A or not; a sum from SPLIT_MIN_K long is split
    shapes, splits = _gpu_shapes_recorded(monkeypatch)
    rng = np.random.RandomState(13)
    k = blas.SPLIT_MIN_K + 37
    h, d, w = T.fmatrix('h'), T.fmatrix('d'), T.fmatrix('w')
    hv, dv, wv = [rand(s, 'float32', rng) for s in [(k, 100), (k, 50), (100, k)]]
    # h.T @ d (100 x 50, A transposed) and w @ d (100 x 50, A row-major)
    assert_matches_c([h, d, w], [T.dot(h.T, d), T.dot(w, d)], [hv, dv, wv],
                     rtol=1e-4, atol=2e-3)
    assert shapes and all(s is None for s in shapes), shapes
    used = [s for s in splits if s is not None]
    assert len(used) == 2 and all(S >= 2 for S, _ in used), splits


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16', 'int32'])
def test_register_blocked_split_sum(dtype, monkeypatch):
    # C with few 64x64 tiles and a long sum: the register-blocked kernel over chunks of the
    # sum, then the launch adding the partials (alpha, beta, Z there); sizes no tile or
    # chunk divides, transposed, reversed and stepped operands. Integer sums are never
    # split (they wrap in the unsigned accumulator; partials would not be integers' sums)
    shapes, splits = _gpu_shapes_recorded(monkeypatch)
    rng = np.random.RandomState(14)
    m, k, n = 131, 1003, 97
    x, y, z = T.matrix('x', dtype), T.matrix('y', dtype), T.matrix('z', dtype)
    lo = dict(low=-0.3, high=0.3) if dtype == 'float16' else dict(low=-1, high=1)
    xv, yv, zv = [rand(s, dtype, rng, **lo) for s in [(m, 2 * k), (k, n), (m, n)]]
    xs = x[:, ::2]
    outs = [T.dot(xs, y), T.dot(xs[::-1], y[:, ::-1]), T.dot(y.T, xs.T)]
    if dtype != 'int32':
        outs.append(z * np.asarray(0.5, dtype) + T.dot(xs, y) * np.asarray(2, dtype))
    tol = {'float16': dict(rtol=1e-2, atol=0.05), 'float32': dict(rtol=1e-4, atol=2e-3),
           'float64': TOL['float64'], 'int32': {}}[dtype]
    assert_matches_c([x, y, z], outs, [xv, yv, zv], on_unused_input='ignore', **tol)
    assert shapes and all(s is not None and s[:4] == blas.RB_TILES[0] for s in shapes), shapes
    used = [s for s in splits if s is not None]
    if dtype == 'int32':
        assert not used, splits
    else:
        assert len(used) == len(outs), splits
        for S, KC in used:
            assert S >= 2 and (S - 1) * KC < k <= S * KC and KC % blas.RB_DEPTH == 0, (S, KC)


def _view(shape, strides, dtype='float32'):
    """What the planner reads of a 3-d view (shape, strides in elements, dtype)."""
    import types
    dt = np.dtype(dtype)
    return types.SimpleNamespace(shape=shape, strides=tuple(s * dt.itemsize for s in strides),
                                 itemsize=dt.itemsize, dtype=dt)


def _product(M, N, K, at=False, dtypes=('float32',) * 3):
    """Views A, B, C of an (M, N, K) product, contiguous (A transposed where ``at``)."""
    A = _view((1, M, K), (M * K, 1, M) if at else (M * K, K, 1), dtypes[0])
    return (A, _view((1, K, N), (K * N, N, 1), dtypes[1]),
            _view((1, M, N), (M * N, N, 1), dtypes[2]))


def test_gpu_products_take_the_kernel_up_to_its_bound(monkeypatch):
    # on a GPU with CLBlast: a product the kernel register-blocks takes the kernel up to
    # KERNEL_MAX_MACS multiply-adds; thin ones keep the CLBlast rule; offsets within a
    # tile are 32-bit only where they fit
    import types
    monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', True)
    dev = types.SimpleNamespace(compute_units=132, max_work_group_size=1024, is_gpu=True)
    view, product = _view, _product
    assert not blas.takes_clblast(dev, *product(256, 1000, 1000))        # MLP layer
    assert not blas.takes_clblast(dev, *product(1000, 1000, 256, at=True))
    assert not blas.takes_clblast(dev, *product(1024, 1024, 1024))
    assert blas.takes_clblast(dev, *product(2048, 2048, 2048))           # past the bound
    assert blas.takes_clblast(dev, *product(8192, 50, 500))              # thin: CLBlast rule
    assert not blas.takes_clblast(dev, *product(64, 1024, 256))          # small: TS kernel
    A, B, C = product(256, 1000, 1000)
    assert blas._index_type(A, B, C) == 'int'
    wide = view((1, 256, 1000), (0, 1 << 24, 1))                     # rows 16M elements apart
    assert blas._index_type(wide, B, C) == 'long'
    S, KC = blas.split_sum(dev, C, 1000, 16, blas.register_blocking(dev, A, B, C))
    assert S >= 2 and (S - 1) * KC < 1000 <= S * KC


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16'])
def test_split_sum(dtype, monkeypatch):
    # few elements of C and a long sum: the TS x TS kernel in chunks of the sum, then a
    # launch adding the partial products (alpha, beta, Z applied there), batched too
    setting(monkeypatch, 'blas', 'kernel')
    monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', True)
    # as many compute units as a GPU's: a 20 x 25 C is then too few work-groups
    monkeypatch.setattr(theano_ocl.device.get_device(), 'compute_units', 132)
    splits = []
    choose = blas.split_sum
    monkeypatch.setattr(blas, 'split_sum', lambda *a: splits.append(choose(*a)) or splits[-1])
    rng = np.random.RandomState(12)
    m, k, n = 20, 3001, 25
    x, y, z = T.matrix('x', dtype), T.matrix('y', dtype), T.matrix('z', dtype)
    x3, y3 = T.tensor3('x3', dtype), T.tensor3('y3', dtype)
    lo = dict(low=-0.3, high=0.3) if dtype == 'float16' else dict(low=-1, high=1)
    xv, yv, zv = [rand(s, dtype, rng, **lo) for s in [(m, k), (n, k), (m, n)]]
    x3v, y3v = [rand(s, dtype, rng, **lo) for s in [(3, 7, k), (3, k, 9)]]
    outs = [T.dot(x, y.T), T.dot(x[::-1], y.T[:, ::-1]),
            z * np.asarray(0.5, dtype) + T.dot(x, y.T) * np.asarray(2, dtype)]
    # sums of 3001 products: float32 rounding reaches ~1e-4 of terms of magnitude 1
    tol = {'float16': dict(rtol=1e-2, atol=0.05), 'float32': dict(rtol=1e-4, atol=2e-3),
           'float64': TOL['float64']}[dtype]
    assert_matches_c([x, y, z], outs, [xv, yv, zv], **tol)
    # BatchedDot's C code needs a linked BLAS: Theano's Python implementation is the reference
    ref = theano.function([x3, y3], T.batched_dot(x3, y3),
                          mode=theano.compile.Mode(linker='py', optimizer='fast_run'))
    f = theano.function([x3, y3], T.batched_dot(x3, y3), mode=theano_ocl.OCLMode())
    assert_close(f(x3v, y3v), ref(x3v, y3v), **tol)
    used = [s for s in splits if s is not None]
    assert len(used) >= 3, splits
    for S, KC in used:
        assert S >= 2 and (S - 1) * KC < k <= S * KC, (S, KC)


def _tuned_tile(monkeypatch, tile):
    """Every product takes the tiled kernel with ``tile`` as a tuned choice gives it (GPU
    shapes on this device); returns the list the planner's ``fast_variant`` answers are
    appended to."""
    from theano_ocl.ops import gemm_tune
    setting(monkeypatch, 'blas', 'kernel')
    monkeypatch.setattr(blas, 'GPU_SHAPES_ON_CPU', True)
    monkeypatch.setattr(blas, 'tuned_choice', lambda *a: gemm_tune.Choice('kernel', tile, 64))
    seen = []
    fv = blas.fast_variant
    monkeypatch.setattr(blas, 'fast_variant', lambda *a: seen.append(fv(*a)) or seen[-1])
    return seen


@pytest.mark.parametrize('tile,dtype', [((16, 16, 4, 4, 16, blas.FAST_DOUBLE), 'float32'),
                                        ((8, 16, 4, 8, 16, blas.FAST_SINGLE), 'float64')])
def test_fast_register_blocked_variant(tile, dtype, monkeypatch):
    # the register-blocked kernel's variant for NVIDIA-like GPUs against numpy: whole tiles
    # (no bounds checks) and not, 4-element loads (aligned, and from a view whose corner
    # is not: vload4) and not, A and B transposed, stepped, reversed, a split sum, alpha
    # and beta
    seen = _tuned_tile(monkeypatch, tile)
    splits = []
    sp = blas.split_sum
    monkeypatch.setattr(blas, 'split_sum', lambda *a: splits.append(sp(*a)) or splits[-1])
    tx, ty, rm, rn, bk = tile[:5]
    M, N = 2 * ty * rm, 2 * tx * rn                 # whole tiles
    rng = np.random.RandomState(15)
    x, y, z = T.matrix('x', dtype), T.matrix('y', dtype), T.matrix('z', dtype)
    w, v = T.matrix('w', dtype), T.matrix('v', dtype)
    K = 2 * blas.RB_SPLIT_CHUNK                     # a multiple of the tiles' depths
    xv, yv = [rand(s, dtype, rng, low=-1, high=1) for s in [(M, K + 4), (K, N)]]
    zv = rand((M, N), dtype, rng, low=-1, high=1)
    m, k, n = 131, 67, 97                           # no multiple of any tile
    wv, vv = [rand(s, dtype, rng, low=-1, high=1) for s in [(m, 2 * k), (k, n)]]
    xa, xm = x[:, 4:], x[:, 1:K + 1]                # corners aligned / not (strides of 4)
    ws = w[:, ::2]
    outs = [T.dot(xa, y), T.dot(y.T, xa.T), T.dot(xm, y[:, ::-1]),
            z * np.asarray(0.5, dtype) + T.dot(xa, y) * np.asarray(2, dtype),
            T.dot(ws[::-1], v), T.dot(v.T, ws.T),
            T.dot(x[:ty * rm, 4:], y[:, :tx * rn])]     # one tile of a long sum: split
    wants = [a.astype('f8') @ b.astype('f8') for a, b in [
        (xv[:, 4:], yv), (yv.T, xv[:, 4:].T), (xv[:, 1:K + 1], yv[:, ::-1]), (xv[:, 4:], yv),
        (wv[::-1, ::2], vv), (vv.T, wv[:, ::2].T), (xv[:ty * rm, 4:], yv[:, :tx * rn])]]
    wants[3] = 0.5 * zv + 2 * wants[3]
    f = theano.function([x, y, z, w, v], outs, mode=theano_ocl.OCLMode(),
                        on_unused_input='ignore')
    assert not theano_ocl.fallback_nodes(f)
    tol = TOL[dtype] if dtype == 'float64' else dict(rtol=1e-4, atol=1e-4)
    for got, want in zip(f(xv, yv, zv, wv, vv), wants):
        np.testing.assert_allclose(got, want, **tol)
    assert seen and None not in seen, seen
    db = tile[5] == blas.FAST_DOUBLE
    assert {s[0] for s in seen} == {db}
    assert {s[1] for s in seen} == {True, False}            # whole tiles and edges
    assert (True, True) in {s[2:] for s in seen} and (False, False) in {s[2:] for s in seen}
    assert [s for s in splits if s is not None], splits


def test_fast_variant_only_where_it_applies(monkeypatch):
    # the planner takes the variant for products of one real dtype, float32 or float64,
    # with RM, RN multiples of 4; elsewhere the same tile's former kernel (results right)
    product = _product
    fast = (16, 16, 8, 8, 16, blas.FAST_DOUBLE)
    assert blas.fast_variant(fast, *product(256, 256, 256)) == (True, True, True, True)
    assert blas.fast_variant(fast[:5] + (blas.FAST_SINGLE,), *product(256, 256, 256)) == \
        (False, True, True, True)
    assert blas.fast_variant(fast, *product(256, 256, 256, True, ('float64',) * 3)) == \
        (True, True, True, True)
    assert blas.fast_variant(fast, *product(250, 256, 256)) == (True, False, True, True)
    assert blas.fast_variant(fast, *product(256, 256, 254)) == (True, False, False, True)
    assert blas.fast_variant(fast, *product(256, 254, 256)) == (True, False, True, False)
    assert blas.fast_variant(fast, *product(256, 256, 0))[:2] == (True, False)   # empty sum
    for dts in [('float16',) * 3, ('int32',) * 3, ('complex64',) * 3,
                ('float32', 'float32', 'float64'), ('float32', 'float64', 'float64')]:
        assert blas.fast_variant(fast, *product(256, 256, 256, dtypes=dts)) is None, dts
    for tile in [fast[:5], fast[:5] + (0,), (16, 16, 8, 2, 16, blas.FAST_DOUBLE), None]:
        assert blas.fast_variant(tile, *product(256, 256, 256)) is None, tile
    # through the planner: float16 and int32 with the variant's tile take the former kernel
    seen = _tuned_tile(monkeypatch, (16, 16, 4, 4, 8, blas.FAST_DOUBLE))
    rng = np.random.RandomState(16)
    for dtype, tol in [('float16', dict(rtol=2e-2, atol=0.25)), ('int32', {})]:
        x, y = T.matrix('x', dtype), T.matrix('y', dtype)
        xv, yv = _vals(rng, [(128, 64), (64, 64)], dtype)
        assert_matches_c([x, y], [T.dot(x, y)], [xv, yv], **tol)
    assert seen == [None, None], seen
