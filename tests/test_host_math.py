"""Vector functions for the elementwise nodes of the host's VM (``runtime/host_math.py``,
the ``host_math`` setting): where Theano's VM runs a function's calls on the host (the
in-thread tier of tiny hot frames, on every device; the cost model's host choice, on CPU
devices), an elementwise node computing tanh, exp, log ... over 1,024 elements or more is
computed by NumPy's vector functions (AVX-512) or glibc's libmvec (``host_vecmath.py``):
each test runs under every backend this machine has.

Checked through the public API and ``theano_ocl.stats(f)['host_math']`` against Theano C:
results within a few units in the last place over float32 and float64, broadcast, strided,
reversed and transposed inputs, the sigmoid's limits, infinities and NaN; single-op nodes
equal to Theano's own Python implementation (the same NumPy functions) to the bit under
NumPy's backend, every libmvec function within 8 ulp of the exact result (specials as
Theano C's); the same errors as Theano C for mismatched shapes; below 1,024 elements, and
under ``host_math='c'``, Theano C's bits; a Scan's inner function the same way."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import host_math

from theano_ocl.runtime import host_vecmath

BACKENDS = [
    pytest.param('numpy', marks=pytest.mark.skipif(
        not host_math.available(), reason="this NumPy has no vector functions (AVX-512)")),
    pytest.param('libmvec', marks=pytest.mark.skipif(
        not host_vecmath.available(), reason='no glibc libmvec, or no compiler to build its '
                                             'loops')),
]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


def tiny(backend):
    """Every call after the first on the host's VM, with ``backend``'s functions."""
    return dict(host_tier='any', host_tier_after=0, cost_model='off', host_math=backend)
EPS = {'float32': np.finfo(np.float32).eps, 'float64': np.finfo(np.float64).eps}


def _host(mode_args, inputs, out, warm=None, **kw):
    """A function whose calls run on the host's VM after its first (:func:`tiny`: the first
    runs on the device; ``warm``: its arguments, called once here)."""
    f = theano.function(inputs, out, mode=theano_ocl.OCLMode(**mode_args), **kw)
    if warm is not None:
        f(*warm)
    return f


def _math(f, backend=None):
    got = theano_ocl.stats(f)['host_math']
    if backend is not None:
        assert got is not None and got['backend'] == backend, got
    return got


def _close(got, want, dtype, ulps=32):
    np.testing.assert_allclose(got, want, rtol=ulps * EPS[dtype], atol=ulps * EPS[dtype])


def _sigmoid(x):
    return T.nnet.sigmoid(x)


EXPRS = [
    ('tanh', lambda x, y: T.tanh(x)),
    ('exp', lambda x, y: T.exp(x)),
    ('log', lambda x, y: T.log(x)),
    ('log1p', lambda x, y: T.log1p(x)),
    ('expm1', lambda x, y: T.expm1(x)),
    ('sin cos', lambda x, y: T.sin(x) * T.cos(y)),
    ('arctan sinh', lambda x, y: T.arctan(x) + T.sinh(y)),
    ('cosh arcsinh', lambda x, y: T.cosh(x) - T.arcsinh(y)),
    ('sigmoid', lambda x, y: _sigmoid(x)),
    ('tanh(x + row)', lambda x, y: T.tanh(x + y[0])),
    ('constants', lambda x, y: T.exp(-2 * x) / (4 + T.log(y))),
    ('three terms', lambda x, y: T.tanh(x + y + x * y)),
]


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('name,expr', EXPRS, ids=[e[0] for e in EXPRS])
def test_results_agree_with_theano_c_over_layouts(name, expr, dtype, backend):
    """40x50 inputs, contiguous, every other column of 40x100, reversed rows, transposed:
    the host's calls agree with Theano C's within 32 ulp and the backend computed them."""
    x, y = T.matrix('x', dtype=dtype), T.matrix('y', dtype=dtype)
    out = expr(x, y)
    f = _host(tiny(backend), [x, y], out, on_unused_input='ignore')
    g = theano.function([x, y], out, mode='FAST_RUN', on_unused_input='ignore')
    rng = np.random.RandomState(3)

    def positive(*shape):
        return (rng.rand(*shape) * 2.5 + 0.05).astype(dtype)
    layouts = [
        (positive(40, 50), positive(40, 50)),
        (positive(40, 100)[:, ::2], positive(40, 100)[:, 1::2]),
        (positive(40, 50)[::-1], positive(40, 50)[::-1, ::-1]),
        (positive(50, 40).T, positive(40, 50)),
    ]
    before = None
    for k, (a, b) in enumerate(layouts * 2):
        got, want = f(a, b), g(a, b)
        assert got.dtype == want.dtype == dtype and got.shape == want.shape
        _close(got, want, dtype)
        if k == 0:
            before = dict(_math(f) or {'runs': 0})
    after = _math(f, backend)
    assert after['nodes'] >= 1, after
    assert after['runs'] > before['runs'], (before, after)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('name', ['tanh', 'exp', 'log1p', 'arcsinh'])
@pytest.mark.skipif(not host_math.available(), reason="this NumPy has no vector functions")
def test_a_single_function_is_theano_pythons_to_the_bit(name, dtype):
    """A node of one scalar op: the same NumPy function Theano's Python implementation
    (``Elemwise.perform``) calls, so the same bits."""
    x = T.vector('x', dtype=dtype)
    out = getattr(T, name)(x)
    v = (np.random.RandomState(5).rand(3000) * 3 + 0.01).astype(dtype)
    f = _host(tiny('numpy'), [x], out, warm=[v])
    g = theano.function([x], out, mode=theano.compile.Mode(linker='py', optimizer='fast_run'))
    for _ in range(3):
        np.testing.assert_array_equal(f(v), g(v))
    assert _math(f)['runs'] >= 1


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_sigmoid_limits_infinities_and_nan(dtype, backend):
    """Theano C's sigmoid is 0 below its lower limit and 1 above its upper one (float32
    -88 and 15, float64 -709 and 19), 1 / (1 + exp(-x)) between: the values around both
    limits, the infinities and NaN agree."""
    x = T.vector('x', dtype=dtype)
    f = _host(tiny(backend), [x], _sigmoid(x), warm=[np.zeros(2048, dtype)])
    g = theano.function([x], _sigmoid(x), mode='FAST_RUN')
    lo, hi = {'float32': (-88.0, 15.0), 'float64': (-709.0, 19.0)}[dtype]
    edges = [lo, hi]
    values = []
    for e in edges:
        values += list(np.nextafter(np.asarray(e, dtype), np.asarray(-np.inf, dtype),
                                    dtype=dtype) * np.ones(1, dtype))
        values += [e, np.nextafter(np.asarray(e, dtype), np.asarray(np.inf, dtype))]
    values += [-np.inf, np.inf, np.nan, 0.0, -800.0, 800.0, 1e-30]
    v = np.resize(np.asarray(values, dtype), 2048)
    v[len(values):] = np.linspace(-900, 900, 2048 - len(values))
    for _ in range(3):
        got, want = f(v), g(v)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        _close(np.nan_to_num(got), np.nan_to_num(want), dtype)
        # outside the limits exactly Theano C's 0 and 1
        outside = ~np.isnan(v) & ((v < lo) | (v > hi))
        np.testing.assert_array_equal(got[outside], want[outside])
    assert _math(f, backend)['runs'] >= 1


def test_small_calls_and_the_c_setting_keep_theano_cs_bits(backend):
    """Below 1,024 elements NumPy does not run (Theano C's code, its bits); under
    ``host_math='c'`` it never does."""
    x = T.dvector('x')
    out = T.tanh(x) * T.exp(x)
    g = theano.function([x], out, mode='FAST_RUN')
    small = np.linspace(-3, 3, host_math.MIN_ELEMENTS - 1)
    f = _host(tiny(backend), [x], out, warm=[small])
    for _ in range(3):
        np.testing.assert_array_equal(f(small), g(small))
    assert _math(f)['runs'] == 0
    large = np.linspace(-3, 3, host_math.MIN_ELEMENTS)
    f(large)                        # (a new signature: its first call on the device)
    f(large)
    assert _math(f)['runs'] == 1
    c = _host(dict(tiny(backend), host_math='c'), [x], out, warm=[large])
    for _ in range(3):
        np.testing.assert_array_equal(c(large), g(large))
    assert _math(c) is None


def test_an_intermediate_destroyed_in_place_and_the_inputs_left_alone(backend):
    """``tanh(dot(a, b) + c)``: Theano computes the sum in the product's buffer; the
    results agree and the caller's arrays are unchanged."""
    a, b, c = T.dmatrix('a'), T.dmatrix('b'), T.dvector('c')
    out = T.tanh(T.dot(a, b) + c)
    f = _host(tiny(backend), [a, b, c], out)
    g = theano.function([a, b, c], out, mode='FAST_RUN')
    rng = np.random.RandomState(9)
    av, bv, cv = rng.randn(40, 30), rng.randn(30, 60), rng.randn(60)
    keep = [av.copy(), bv.copy(), cv.copy()]
    for _ in range(4):
        _close(f(av, bv, cv), g(av, bv, cv), 'float64')
    for v, k in zip((av, bv, cv), keep):
        np.testing.assert_array_equal(v, k)
    assert _math(f, backend)['runs'] >= 1


def _outcome(fn, *args):
    try:
        return 'ok', fn(*args)
    except Exception as e:           # noqa: BLE001 (compared with Theano C's)
        return 'error', e


@pytest.mark.skipif(not theano_ocl.get_device().is_cpu,
                    reason='the cost model chooses the host on CPU devices only')
def test_mismatched_shapes_raise_as_theano_c(monkeypatch, backend):
    """Every call on the host's VM from the first (the cost model's host choice, forced):
    a matrix against one of other lengths, or a non-broadcastable length 1 against 40,
    raises Theano C's ValueError (the device frame's planning checks the shapes before
    the host's VM runs); the good shapes still work after it."""
    from theano_ocl.runtime import cost
    monkeypatch.setattr(cost, 'MARGIN', 1e9)
    x, y = T.dmatrix('x'), T.dmatrix('y')
    out = T.tanh(x + y)
    f = theano.function([x, y], out, mode=theano_ocl.OCLMode(cost_model='on',
                                                              host_math=backend))
    g = theano.function([x, y], out, mode='FAST_RUN')
    rng = np.random.RandomState(2)
    good = (rng.randn(40, 60), rng.randn(40, 60))
    bad = [(rng.randn(40, 60), rng.randn(40, 61)), (rng.randn(40, 60), rng.randn(39, 60)),
           (rng.randn(1, 60), rng.randn(40, 60))]
    _close(f(*good), g(*good), 'float64')
    for args in bad:
        want, got = _outcome(g, *args), _outcome(f, *args)
        assert want[0] == got[0] == 'error', (want, got)
        assert type(got[1]) is type(want[1]) is ValueError, (want, got)
        assert 'Input dimension mis-match' in str(got[1]), got[1]
    _close(f(*good), g(*good), 'float64')
    assert theano_ocl.stats(f)['on_host'] is True
    assert _math(f, backend)['runs'] >= 2


@pytest.mark.skipif(not theano_ocl.get_device().is_cpu,
                    reason='the cost model chooses the host on CPU devices only')
def test_a_scans_inner_function_and_its_gradient(monkeypatch, backend):
    """The tutorial RNN's training step on the host (the cost model's choice, forced): the
    inner function's ``tanh(x + y)`` over 32x64 is NumPy's; the loss and every parameter
    after 5 steps agree with Theano C's."""
    from theano_ocl.runtime import cost
    monkeypatch.setattr(cost, 'MARGIN', 1e9)
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', 'bench'))
    try:
        import rnn
    finally:
        sys.path.pop(0)
    f = rnn.build_rnn(theano_ocl.OCLMode(cost_model='on', host_math=backend), 16, 64, 4)
    g = rnn.build_rnn('FAST_RUN', 16, 64, 4)
    rng = np.random.RandomState(4)
    for step in range(5):
        X, y = rng.rand(12, 32, 16), rng.rand(32, 4)
        _close(f(X, y), g(X, y), 'float64', ulps=256)
    params = lambda fn: [i.variable.get_value() for i in fn.maker.inputs if i.update]  # noqa
    for p, q in zip(params(f), params(g)):
        _close(p, q, 'float64', ulps=256)
    got = _math(f, backend)
    assert got['nodes'] >= 1 and got['runs'] >= 5 * 12, got


def test_the_thunk_checks_shapes_as_theano_c(backend):
    """The program's own check (every call path of a function plans its device frame
    first, whose shape checks raise before the host's VM runs: the test above cannot
    reach it): a node's thunk given a non-broadcastable length 1 against 40, or 60
    against 61, raises Theano C's ValueError; a broadcastable row is taken."""
    x, y, r = T.dmatrix('x'), T.dmatrix('y'), T.drow('r')
    cases_of = {y: [((1, 60), False), ((40, 61), False), ((40, 60), True)],
                r: [((1, 60), True), ((1, 61), False)]}
    for other, cases in cases_of.items():
        fused = theano.function([x, other], T.tanh(x + other), mode='FAST_RUN')
        loops = host_math.vector_loops(backend)
        fast = host_math.fast_names(loops)
        node = [n for n in fused.maker.fgraph.toposort()
                if host_math.plan(n, fast) is not None][0]
        storage = {v: [None] for v in node.inputs + node.outputs}
        done = {v: [False] for v in node.inputs + node.outputs}
        counts = [0, 0]
        run = host_math.thunk(node, storage, done, lambda: None, host_math.plan(node, fast),
                              counts, loops)
        xv = np.random.RandomState(1).randn(40, 60)
        for shape, ok in cases:
            ov = np.ones(shape)
            storage[node.inputs[0]][0], storage[node.inputs[1]][0] = xv, ov
            if ok:
                run()
                _close(storage[node.outputs[0]][0], fused(xv, ov), 'float64')
            else:
                with pytest.raises(ValueError, match='Input dimension mis-match'):
                    run()
        assert counts[1] == sum(ok for _, ok in cases)


# (the domain each function is sampled over: where it is finite)
DOMAINS = {'log': (1e-3, 60), 'log1p': (-0.9, 60), 'log2': (1e-3, 60), 'log10': (1e-3, 60),
           'arcsin': (-1, 1), 'arccos': (-1, 1), 'arccosh': (1, 60), 'arctanh': (-0.999, 0.999),
           'exp': (-60, 60), 'exp2': (-60, 60), 'expm1': (-20, 20), 'sinh': (-20, 20),
           'cosh': (-20, 20), 'tan': (-1.5, 1.5)}
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 1e-30, -1e-30, 1e30, -1e30, 5e-324]


@pytest.mark.skipif(not host_vecmath.available(), reason='no glibc libmvec, or no compiler')
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('name', sorted(host_vecmath.C_NAMES))
def test_every_libmvec_function_near_the_exact_result(name, dtype):
    """Each function this glibc has a vector version of, through the public API (a
    function of one node, every call after the first on the host's VM): 4,096 values over
    its domain within 8 ulp of the exact result (computed in long double; the C library's
    own scalar functions, Theano C's, are within 3 here), and the special values (zeros,
    infinities, NaN, huge, denormal) finite, infinite or NaN where Theano C's are, equal
    where those are infinite or zero."""
    if name not in host_vecmath.names():
        pytest.skip('this glibc has no vector %s' % name)
    x = T.vector('x', dtype=dtype)
    out = getattr(T, name)(x)
    lo, hi = DOMAINS.get(name, (-10, 10))
    rng = np.random.RandomState(11)
    v = rng.uniform(lo, hi, 4096).astype(dtype)
    f = _host(tiny('libmvec'), [x], out, warm=[v])
    g = theano.function([x], out, mode='FAST_RUN')
    got = f(v)
    assert got.dtype == g(v).dtype == dtype
    exact = getattr(np, name)(v.astype(np.longdouble))
    ulp = np.spacing(np.abs(exact).astype(dtype)).astype(np.longdouble)
    err = np.abs(got.astype(np.longdouble) - exact) / ulp
    assert np.max(err) <= 8, (name, dtype, float(np.max(err)), v[np.argmax(err)])
    special = np.resize(np.asarray(SPECIAL, dtype), v.size)     # (the same signature)
    with np.errstate(all='ignore'):
        got, want = f(special), g(special)
    for kind in (np.isnan, np.isinf, np.isfinite):
        np.testing.assert_array_equal(kind(got), kind(want), err_msg=name)
    exact_ones = np.isinf(want) | (want == 0)
    np.testing.assert_array_equal(got[exact_ones], want[exact_ones])
    assert _math(f, 'libmvec')['runs'] >= 2
