"""complex64 / complex128 on the device (scalar/complex.py, the complex paths of the product
backends): every op against Theano's C backend (which runs numpy for most complex ops) on
random inputs, with broadcasting, mixed real/complex operands, strided and reversed views,
0-d and empty arrays; products on every backend this machine has."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.ops import blas_clblast
from helpers import assert_close, assert_matches_c, rand, setting

CDTYPES = ['complex64', 'complex128']
# transcendental functions: numpy's and OpenCL's libm differ in the last bits
TOL = {'complex64': dict(rtol=2e-5, atol=2e-5), 'complex128': dict(rtol=1e-11, atol=1e-11)}
REAL = {'complex64': 'float32', 'complex128': 'float64'}


def _vals(shapes, dtype, seed=0, low=-2, high=2):
    rng = np.random.RandomState(seed)
    return [rand(s, dtype, rng, low=low, high=high) for s in shapes]


UNARY = {
    'neg': lambda x: -x, 'sqr': T.sqr, 'inv': T.inv, 'conj': T.conj,
    'exp': T.exp, 'log': T.log, 'log2': T.log2, 'log10': T.log10, 'sqrt': T.sqrt,
    'sin': T.sin, 'cos': T.cos, 'tan': T.tan, 'sinh': T.sinh, 'cosh': T.cosh, 'tanh': T.tanh,
    'abs': abs, 'real': T.real, 'imag': T.imag, 'angle': T.angle,
    'pow3': lambda x: x ** 3, 'pow_neg2': lambda x: x ** -2, 'pow_half': lambda x: x ** 0.5,
}


@pytest.mark.parametrize('dtype', CDTYPES)
def test_unary(dtype):
    """Every unary op on a matrix, a stepped reversed view and a column (one function per
    dtype: Theano's C compilation is the slow part)."""
    x = T.matrix('x', dtype)
    xv, = _vals([(6, 7)], dtype)
    xv[0, 0] = 0                        # a complex zero: log, inv, pow, angle, sqrt
    xv[1, 1] = -1.5                     # the negative real axis: sqrt, log branch
    xv[2, 2] = 2.5j
    names = sorted(UNARY)
    outs = []
    for name in names:
        outs += [UNARY[name](x), UNARY[name](x[::2, ::-3]), UNARY[name](x[1:, 0])]
    f_c = theano.function([x], outs, mode='FAST_RUN')
    f_o = theano.function([x], outs, mode=theano_ocl.OCLMode())
    assert not theano_ocl.fallback_nodes(f_o)
    with np.errstate(all='ignore'):
        want = f_c(xv)
    got = f_o(xv)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, what='%s, output %d' % (names[k // 3], k % 3), **TOL[dtype])


BINARY = {
    'add': lambda a, b: a + b, 'sub': lambda a, b: a - b, 'mul': lambda a, b: a * b,
    'div': lambda a, b: a / b, 'pow': lambda a, b: a ** b,
    'switch': lambda a, b: T.switch(T.real(a) > 0, a, b),
    'eq': T.eq, 'neq': T.neq, 'lt': T.lt, 'le': T.le, 'gt': T.gt, 'ge': T.ge,
    'second': lambda a, b: T.second(a, b),
}


@pytest.mark.parametrize('dtype', CDTYPES)
@pytest.mark.parametrize('name', sorted(BINARY))
def test_binary_broadcasting(name, dtype):
    a, b, s = T.matrix('a', dtype), T.row('b', dtype), T.scalar('s', dtype)
    av, bv = _vals([(5, 4), (1, 4)], dtype, seed=1)
    sv = np.asarray(0.5 - 1.25j, dtype)
    av[0, :2] = bv[0, :2]               # equal elements for eq / neq
    av[1, :2] = bv[0, :2].real + 1j     # equal real parts: the order's second key
    fn = BINARY[name]
    outs = [fn(a, b), fn(b, a), fn(a[::-1], s), fn(a.T, b.T)]
    assert_matches_c([a, b, s], outs, [av, bv, sv], **TOL[dtype])


@pytest.mark.parametrize('real', ['float32', 'float64', 'int32', 'uint8', 'bool'])
@pytest.mark.parametrize('dtype', CDTYPES)
def test_mixed_real_and_complex(dtype, real):
    """Theano's upcasts: float64 + complex64 is complex128, int32 * complex64 complex128."""
    c, r = T.matrix('c', dtype), T.matrix('r', real)
    cv, = _vals([(3, 5)], dtype, seed=2)
    rv, = _vals([(3, 5)], real, seed=3)
    outs = [c + r, c * r, r - c, c / (r + 3), T.eq(c, r), T.switch(r, c, c * 2)]
    assert_matches_c([c, r], outs, [cv, rv], **TOL['complex64'])


@pytest.mark.parametrize('dtype', CDTYPES)
def test_construct_and_take_apart(dtype):
    R = REAL[dtype]
    re, im = T.matrix('re', R), T.matrix('im', R)
    rv, iv = _vals([(4, 3), (4, 3)], R, seed=4)
    z = T.complex(re, im)
    outs = [z, T.eye(3, dtype=dtype) * z[0, 0], T.complex_from_polar(abs(re), im), T.real(z * z), T.imag(z / (z + 1)),
            abs(T.exp(z)), T.angle(z.T)]
    f = assert_matches_c([re, im], outs, [rv, iv], **TOL[dtype])
    assert f(rv, iv)[0].dtype == np.dtype(dtype)


@pytest.mark.parametrize('dtype', CDTYPES)
def test_composite_and_inplace(dtype):
    """Theano's fusion makes one Composite of the chain; an inplace op writes an
    intermediate."""
    x, y = T.matrix('x', dtype), T.matrix('y', dtype)
    xv, yv = _vals([(8, 9), (8, 9)], dtype, seed=5)
    e = T.exp(x * 0.5j) * y + T.conj(x) / (y - 3) - x ** 2
    outs = [e, T.sqrt(e * e + 1)]
    f = assert_matches_c([x, y], outs, [xv, yv], **TOL[dtype])
    ops = [str(n.op) for n in f.maker.fgraph.toposort()]
    assert any('Composite' in o for o in ops)


@pytest.mark.parametrize('dtype', CDTYPES)
@pytest.mark.parametrize('shape', [(), (0,), (0, 3), (1,)])
def test_zero_d_and_empty(dtype, shape):
    x, y = T.TensorType(dtype, (False,) * len(shape))('x'), \
        T.TensorType(dtype, (False,) * len(shape))('y')
    xv, yv = _vals([shape, shape], dtype, seed=6)
    assert_matches_c([x, y], [x * y + 1j, T.exp(x) / y, abs(x)], [xv, yv], **TOL[dtype])


@pytest.mark.parametrize('dtype', CDTYPES)
def test_views_copies_and_subtensors(dtype):
    x, y = T.matrix('x', dtype), T.vector('y', dtype)
    xv, yv = _vals([(5, 6), (6,)], dtype, seed=7)
    outs = [T.set_subtensor(x[1:3], y), T.inc_subtensor(x[:, 2], y[:5] * 2j),
            T.concatenate([x, x[::-1] * 1j]), T.alloc(y[0] + 1, 2, 3),
            x.reshape((3, 10)).T * 1j, x.dimshuffle(1, 'x', 0) + 1]
    assert_matches_c([x, y], outs, [xv, yv], **TOL[dtype])


# ------------------------------------------------------------------------- products
BACKENDS = ['host', 'kernel'] + \
    (['clblast'] if blas_clblast.load_pyclblast() is not None else [])


@pytest.fixture(params=BACKENDS)
def backend(request, monkeypatch):
    setting(monkeypatch, 'blas', request.param)
    return request.param


@pytest.mark.parametrize('dtype', CDTYPES)
def test_products(backend, dtype):
    x, y, z = T.matrix('x', dtype), T.matrix('y', dtype), T.matrix('z', dtype)
    v = T.vector('v', dtype)
    a, b = T.scalar('a', dtype), T.scalar('b', dtype)
    xv, yv, zv, vv = _vals([(7, 9), (9, 5), (7, 5), (9,)], dtype, seed=8)
    av, bv = np.asarray(1.5 - 0.5j, dtype), np.asarray(-0.5 + 2j, dtype)
    outs = [T.dot(x, y),                           # Dot22
            T.dot(x, v), T.dot(v, y), T.dot(v, v),  # Gemv / a vector-vector product
            z + (0.25 + 1j) * T.dot(x, y),         # Gemm, constant alpha
            b * z + a * T.dot(x, y),               # device alpha and beta
            a * T.dot(y.T, x.T),                   # Dot22Scalar, transposed operands
            T.dot(x[:, ::-1], y[::-1, 1:4]),       # reversed, stepped operands
            T.outer(v, v) * 1j + T.dot(x.T, x)]
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == 'complex64' else dict(rtol=1e-10, atol=1e-10)
    f = assert_matches_c([x, y, z, v, a, b], outs, [xv, yv, zv, vv, av, bv], **tol)
    assert not theano_ocl.fallback_nodes(f)


@pytest.mark.parametrize('dtype', CDTYPES)
def test_batched_dot_and_mixed_product(backend, dtype):
    x, y = T.tensor3('x', dtype), T.tensor3('y', dtype)
    r = T.matrix('r', REAL[dtype])
    xv, yv = _vals([(3, 4, 5), (3, 5, 2)], dtype, seed=9)
    rv, = _vals([(5, 6)], REAL[dtype], seed=10)
    outs = [T.batched_dot(x, y), T.dot(x[0], r)]    # a real right operand: widened
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == 'complex64' else dict(rtol=1e-10, atol=1e-10)
    # Theano's C BatchedDot of complex values links ?gemm_ and fails to load without a
    # BLAS in blas.ldflags: the reference is Theano's Python implementation
    ref = theano.function([x, y, r], outs, mode=theano.Mode(linker='py', optimizer='fast_run'))
    f = theano.function([x, y, r], outs, mode=theano_ocl.OCLMode())
    assert not theano_ocl.fallback_nodes(f)
    for got, want in zip(f(xv, yv, rv), ref(xv, yv, rv)):
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, **tol)


@pytest.mark.parametrize('fast', [True, False])
@pytest.mark.parametrize('dtype', CDTYPES)
def test_sums_and_products(dtype, fast, monkeypatch):
    """Complex sums and products (accumulated in complex128, as Theano does) over any axes
    and strides, empty and long ranges; the fast paths' geometries and the generic kernel."""
    from theano_ocl.ops import reduce as ocl_reduce
    monkeypatch.setattr(ocl_reduce, 'FAST_PATHS', fast)
    x = T.tensor3('x', dtype)
    outs = [T.sum(x), T.sum(x, 0), T.sum(x, 1), T.sum(x, 2), T.prod(x, axis=(0, 2)),
            T.sum(x[::-1, :, ::2], 1), T.mean(x, 1)]
    rng = np.random.RandomState(12)
    f_c = theano.function([x], outs, mode='FAST_RUN')
    f_o = theano.function([x], outs, mode=theano_ocl.OCLMode())
    assert not theano_ocl.fallback_nodes(f_o)
    for shape in [(3, 4, 5), (40, 300, 7), (1, 1, 1), (0, 3, 2), (2, 5000, 3)]:
        xv = (rand(shape, dtype, rng, -1, 1) * 0.5).astype(dtype)
        for k, (g, w) in enumerate(zip(f_o(xv), f_c(xv))):
            assert_close(g, w, what='%s output %d' % (shape, k),
                         **(dict(rtol=1e-4, atol=1e-4) if dtype == 'complex64' else {}))


def test_unsupported_complex_ops_fall_back_with_the_reason():
    """Ops without complex code stay on the host, named [complex] in the counts."""
    x = T.matrix('x', 'complex64')
    xv, = _vals([(4, 5)], 'complex64', seed=11)
    f = assert_matches_c([x], [T.arctanh(x), T.arcsin(x)], [xv], device_only=False,
                         **TOL['complex64'])
    fb = theano_ocl.fallback_nodes(f)
    assert fb and len(fb) == 2
    reasons = [impl for node, where, impl in theano_ocl.placements(f) if where == 'host-fallback']
    assert len(reasons) == 2 and all('complex' in r for r in reasons), reasons


def test_complex128_needs_fp64():
    dev = theano_ocl.get_device()
    assert dev.supports_dtype('complex128') == dev.has_fp64
    assert dev.supports_dtype('complex64')


def test_casts_to_and_from_complex():
    """numpy's rules: the real part for real targets, either part nonzero for bool."""
    c = T.vector('c', 'complex64')
    cv = np.array([0, 1j, 2.5 - 1j, -3.75, 0.5j + 0.25], 'complex64')
    outs = [T.cast(T.cast(c, 'complex128') * 2, 'complex64'),
            T.neq(c, 0), T.cast(T.real(c), 'complex128') + c]
    assert_matches_c([c], outs, [cv], **TOL['complex64'])
    from theano_ocl import scalar as oscalar
    import theano.scalar as S
    support, body = oscalar.elemwise_code(S.identity, ['complex64'], ['bool'])
    assert '.y != 0' in body                  # the imaginary part counts
