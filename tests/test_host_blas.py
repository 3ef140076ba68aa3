"""The host VM's ``Gemm``, ``Dot22`` and ``Dot22Scalar`` on NumPy's BLAS (``ops/host_blas.py``):
where Theano's VM runs a function's calls on the host, these nodes run Theano's own C code
calling the BLAS NumPy links (Theano C, with ``blas.ldflags`` empty, runs NumPy-based
stand-ins). Checked through the public API and ``theano_ocl.stats(f)['host_thunks']``
against Theano C: float32 and float64, transposed, strided and reversed inputs, empty
dimensions, products accumulated into an input and into a shared variable in place, wrong
shapes (Theano C's error type, state unchanged); ``host_math='c'`` keeps Theano C's ops and
bits."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.ops import host_blas

pytestmark = pytest.mark.skipif(host_blas.pointers() is None,
                                reason="NumPy's BLAS was not found in this process")

TINY = dict(host_tier='any', host_tier_after=0, cost_model='off')


def _thunks(f):
    return theano_ocl.stats(f)['host_thunks'] or {}


def _bound(a, b, dtype, c=None):
    """The rounding bound of a product over ``k`` terms (Higham: k eps |a||b|), doubled
    for two summation orders, plus a rounding of ``c`` where it is added."""
    eps = np.finfo(dtype).eps
    k = a.shape[1] if a.ndim == 2 else 1
    bound = 2 * (k + 1) * eps * (np.abs(a).astype('float64') @ np.abs(b).astype('float64'))
    if c is not None:
        bound = bound + 2 * eps * np.abs(c)
    return bound + np.finfo(dtype).tiny


def _layouts(rng, dtype, m, k, n):
    def r(*shape):
        return rng.uniform(-1, 1, shape).astype(dtype)
    return [
        ('contiguous', r(m, k), r(k, n)),
        ('transposed', r(k, m).T, r(n, k).T),
        ('strided', r(m, 2 * k)[:, ::2], r(2 * k, n)[::2]),
        ('reversed', r(m, k)[::-1, ::-1], r(k, n)[::-1]),
    ]


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('kind', ['dot', 'scaled', 'plus'])
def test_products_agree_with_theano_c_over_layouts(kind, dtype):
    """``dot(a, b)`` (Dot22), ``dot(a, b) * s`` (Dot22Scalar), ``dot(a, b) + c`` (Gemm)
    over four layouts each, twice: within the product's rounding bound of Theano C's, and
    the host's VM ran them on NumPy's BLAS."""
    a, b, c = T.matrix('a', dtype=dtype), T.matrix('b', dtype=dtype), T.matrix('c', dtype=dtype)
    s = np.asarray(0.37, dtype)
    out = {'dot': T.dot(a, b), 'scaled': T.dot(a, b) * s, 'plus': T.dot(a, b) + c}[kind]
    f = theano.function([a, b, c], out, mode=theano_ocl.OCLMode(**TINY),
                        on_unused_input='ignore')
    g = theano.function([a, b, c], out, mode='FAST_RUN', on_unused_input='ignore')
    rng = np.random.RandomState(7)
    cv = rng.uniform(-1, 1, (40, 24)).astype(dtype)
    for name, av, bv in _layouts(rng, dtype, 40, 30, 24) * 2:
        got, want = f(av, bv, cv), g(av, bv, cv)
        assert got.dtype == want.dtype == dtype and got.shape == want.shape
        scale = abs(float(s)) if kind == 'scaled' else 1.0
        bound = _bound(av, bv, dtype, cv if kind == 'plus' else None) * max(scale, 1.0)
        assert np.all(np.abs(got.astype('float64') - want) <= bound), name
    made = _thunks(f)
    assert sum(made.values()) >= 1, made
    assert set(made) <= {'Gemm', 'Dot22', 'Dot22Scalar'}, made


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_sgd_on_shared_weights_in_place(dtype):
    """A linear model's SGD step (the weights' update a Gemm on the shared variable, run in
    place): 30 steps agree with Theano C's within a bound grown from one step's; the
    weights never alias a returned array."""
    rng = np.random.RandomState(3)
    w0 = rng.uniform(-0.1, 0.1, (30, 10)).astype(dtype)
    fns = []
    for mode in (theano_ocl.OCLMode(**TINY), 'FAST_RUN'):
        W = theano.shared(w0.copy(), 'W')
        x, y = T.matrix('x', dtype=dtype), T.matrix('y', dtype=dtype)
        err = T.dot(x, W) - y
        loss = T.mean(err ** 2)
        fns.append((theano.function([x, y], [loss, err], mode=mode,
                                    updates=[(W, W - np.asarray(0.05, dtype) *
                                              T.grad(loss, W))]), W))
    (f, wf), (g, wg) = fns
    eps = np.finfo(dtype).eps
    xs = rng.uniform(-1, 1, (30, 16, 30)).astype(dtype)
    ys = rng.uniform(-1, 1, (30, 16, 10)).astype(dtype)
    for step in range(30):
        (lf, ef), (lg, eg) = f(xs[step], ys[step]), g(xs[step], ys[step])
        tol = 64 * (step + 1) * eps
        np.testing.assert_allclose(lf, lg, rtol=tol, atol=tol)
        np.testing.assert_allclose(wf.get_value(), wg.get_value(), rtol=tol, atol=tol)
        assert not np.shares_memory(ef, wf.get_value(borrow=True))
    assert 'Gemm' in _thunks(f) or 'Dot22' in _thunks(f), _thunks(f)


@pytest.mark.parametrize('shape', [(0, 5, 4), (6, 0, 4), (6, 5, 0)])
def test_empty_dimensions(shape):
    """A dimension of 0 rows, 0 inner terms or 0 columns: ``a @ b + c`` as NumPy computes it
    (Theano C raises "some matrix has no unit stride" here: its C Gemm refuses the zero
    strides of NumPy's empty arrays, Theano's own ``t_gemm.test_shape_0`` failing; the
    host's thunk computes the empty product as ``b * c``, NumPy's result)."""
    m, k, n = shape
    a, b, c = T.dmatrix('a'), T.dmatrix('b'), T.dmatrix('c')
    out = T.dot(a, b) + c
    f = theano.function([a, b, c], out, mode=theano_ocl.OCLMode(**TINY))
    rng = np.random.RandomState(1)
    av, bv, cv = rng.randn(m, k), rng.randn(k, n), rng.randn(m, n)
    for _ in range(3):
        got = f(av, bv, cv)
        assert got.shape == (m, n)
        np.testing.assert_array_equal(got, av @ bv + cv)
    assert _thunks(f).get('Gemm', 0) >= 1, _thunks(f)


def _outcome(fn, *args):
    try:
        return 'ok', fn(*args)
    except Exception as e:           # noqa: BLE001 (compared with Theano C's)
        return 'error', e


def test_wrong_shapes_raise_as_theano_c_and_leave_the_state():
    """Inner dimensions that disagree, and an added matrix of another shape: Theano C's
    error type, the shared weights unchanged; good shapes work after."""
    rng = np.random.RandomState(5)
    w0 = rng.randn(8, 6)
    outs = []
    for mode in (theano_ocl.OCLMode(**TINY), 'FAST_RUN'):
        W = theano.shared(w0.copy(), 'W')
        x, c = T.dmatrix('x'), T.dmatrix('c')
        out = T.dot(x, W) + c
        outs.append((theano.function([x, c], out, mode=mode,
                                     updates=[(W, W * 0.5 + T.dot(x.T, out)[:, :6])]), W))
    (f, wf), (g, wg) = outs
    good = (rng.randn(4, 8), rng.randn(4, 6))
    for _ in range(3):
        np.testing.assert_allclose(f(*good), g(*good), rtol=1e-12)
    for args in [(rng.randn(4, 7), rng.randn(4, 6)), (rng.randn(4, 8), rng.randn(4, 5)),
                 (rng.randn(4, 8), rng.randn(3, 6))]:
        before = wf.get_value()
        want, got = _outcome(g, *args), _outcome(f, *args)
        assert want[0] == got[0] == 'error', (want, got)
        assert type(got[1]) is type(want[1]), (want, got)
        np.testing.assert_array_equal(wf.get_value(), before)
    np.testing.assert_allclose(f(*good), g(*good), rtol=1e-12)
    np.testing.assert_allclose(wf.get_value(), wg.get_value(), rtol=1e-12)


def test_the_c_setting_keeps_theano_cs_ops_and_bits():
    """Under ``host_math='c'`` no node is given NumPy's BLAS; the host's calls give Theano
    C's bits."""
    a, b, c = T.dmatrix('a'), T.dmatrix('b'), T.dmatrix('c')
    out = T.dot(a, b) + c
    f = theano.function([a, b, c], out, mode=theano_ocl.OCLMode(host_math='c', **TINY))
    g = theano.function([a, b, c], out, mode='FAST_RUN')
    rng = np.random.RandomState(2)
    args = (rng.randn(40, 70), rng.randn(70, 30), rng.randn(40, 30))
    f(*args)                    # (the first call runs on the device: a GPU's own bits)
    for _ in range(3):
        np.testing.assert_array_equal(f(*args), g(*args))
    assert theano_ocl.stats(f)['host_thunks'] == {}
