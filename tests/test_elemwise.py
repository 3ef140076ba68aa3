"""Elementwise family through the OCL linker, against Theano's C backend.

One compiled function per (dtype, op group) keeps the C compilation count low;
each output is still compared separately.
"""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.tensor import nnet

from helpers import assert_close, assert_matches_c, compile_both, rand, setting
import theano_ocl
from theano_ocl import fallback_nodes

FLOATS = ['float16', 'float32', 'float64']
INTS = ['int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64']


def _float_unary(x):
    pos = abs(x) + 1            # domain >= 1
    unit = T.tanh(x) * 0.9      # domain (-1, 1)
    return [
        -x, abs(x), T.sgn(x), T.exp(x), T.exp2(x), T.expm1(x), T.log(pos), T.log2(pos),
        T.log10(pos), T.log1p(abs(x)), T.sqrt(pos), T.sqr(x), T.inv(pos), T.sin(x), T.cos(x),
        T.tan(unit), T.arcsin(unit), T.arccos(unit), T.arctan(x), T.sinh(x), T.cosh(x),
        T.tanh(x), T.arcsinh(x), T.arccosh(pos), T.arctanh(unit), T.floor(x), T.ceil(x),
        T.trunc(x), T.round(x, 'half_to_even'), T.round(x, 'half_away_from_zero'),
        T.erf(x), T.erfc(x), T.erfinv(unit), T.gamma(pos), T.gammaln(pos), T.psi(pos),
        nnet.sigmoid(x), nnet.ultra_fast_sigmoid(x), nnet.hard_sigmoid(x), nnet.softplus(x),
        T.deg2rad(x), T.rad2deg(x), T.isnan(T.log(x)), T.isinf(T.inv(x)),
        nnet.relu(x), nnet.elu(x) if hasattr(nnet, 'elu') else x * 1,
    ]


def _float_binary(x, y):
    ypos = abs(y) + 0.5
    return [x + y, x - y, x * y, x / ypos, x // ypos, x % ypos, abs(x) ** y, T.minimum(x, y),
            T.maximum(x, y), x < y, x > y, x <= y, x >= y, T.eq(x, y), T.neq(x, y),
            T.arctan2(x, y), T.clip(x, -1, 1.5), T.switch(x > y, x, y * 2),
            T.cast(x * 7, 'int32'), T.cast(x, 'bool'), T.cast(x, 'uint8') if False else x]


@pytest.mark.parametrize('dtype', FLOATS)
def test_float_ops(dtype):
    x = T.matrix('x', dtype=dtype)
    y = T.matrix('y', dtype=dtype)
    rng = np.random.RandomState(3)
    xv = rand((4, 7), dtype, rng)
    yv = rand((4, 7), dtype, rng)
    xv[0, :3] = [0, 0.5, -2.5]            # rounding ties
    tol = dict(rtol=5e-3, atol=5e-3) if dtype == 'float16' else \
        dict(rtol=2e-5, atol=2e-5) if dtype == 'float32' else dict(rtol=1e-10, atol=1e-10)
    assert_matches_c([x], _float_unary(x), [xv], **tol)
    assert_matches_c([x, y], _float_binary(x, y), [xv, yv], **tol)


def _int_ops(x, y, dtype):
    nz = T.switch(T.eq(y, 0), T.ones_like(y), y)
    ops = [x + y, x - y, x * y, x // nz, x % nz, x / nz, T.minimum(x, y), T.maximum(x, y),
           x < y, x > y, T.eq(x, y), T.neq(x, y), abs(x), T.sgn(x), x & y, x | y, x ^ y, ~x,
           T.cast(x, 'float32'), T.cast(x, 'int8'), T.cast(x, 'uint16'), T.cast(x, 'bool'),
           T.switch(x > y, x, y), T.clip(x, 1, 5), x ** 2]
    if not dtype.startswith('u'):
        ops.append(-x)
    return ops


@pytest.mark.parametrize('dtype', INTS)
def test_int_ops(dtype):
    x = T.matrix('x', dtype=dtype)
    y = T.matrix('y', dtype=dtype)
    rng = np.random.RandomState(5)
    low = 0 if dtype.startswith('u') else -9
    xv = rand((3, 5), dtype, rng, low=low, high=9)
    yv = rand((3, 5), dtype, rng, low=low, high=9)
    assert_matches_c([x, y], _int_ops(x, y, dtype), [xv, yv])


@pytest.mark.parametrize('dtype', INTS)
def test_int_wraparound(dtype):
    x = T.vector('x', dtype=dtype)
    y = T.vector('y', dtype=dtype)
    info = np.iinfo(dtype)
    xv = np.array([info.min, info.max, info.max, 0, 1], dtype)
    yv = np.array([1, 1, info.max, info.min, info.max], dtype)
    assert_matches_c([x, y], [x + y, x - y, x * y, T.cast(x, 'int8'), T.cast(x, 'uint8'),
                            T.cast(x, 'float32')], [xv, yv])


def test_bool_ops():
    x = T.matrix('x', dtype='bool')
    y = T.matrix('y', dtype='bool')
    rng = np.random.RandomState(7)
    xv, yv = rand((3, 4), 'bool', rng), rand((3, 4), 'bool', rng)
    assert_matches_c([x, y], [x & y, x | y, x ^ y, ~x, T.eq(x, y), x + y, T.cast(x, 'float32'),
                            T.switch(x, 1.5, -2.0)], [xv, yv])


@pytest.mark.parametrize('xshape,yshape,xb,yb', [
    ((3, 1, 4), (1, 5, 4), (False, True, False), (True, False, False)),
    ((1, 6), (5, 1), (True, False), (False, True)),
    ((), (4, 3), (), (False, False)),
    ((0, 3), (1, 3), (False, False), (True, False)),          # empty
    ((), (), (), ()),                                          # 0-d
])
def test_broadcasting_and_empty(xshape, yshape, xb, yb):
    x = T.TensorType('float32', xb)('x')
    y = T.TensorType('float32', yb)('y')
    rng = np.random.RandomState(9)
    ex = y if len(xb) < len(yb) else x
    assert_matches_c([x, y], [x * y + T.exp(x), x - y], [rand(xshape, 'f4', rng), rand(yshape, 'f4', rng)])


def test_strided_device_views():
    # views made on the device (transpose, broadcast, reversed and stepped slices)
    x = T.fmatrix('x')
    y = T.fvector('y')
    rng = np.random.RandomState(11)
    xv, yv = rand((6, 8), 'f4', rng), rand((6,), 'f4', rng)
    assert_matches_c([x, y], [T.exp(x.T) * y, x[::-1] + x, x[:, ::2] * 2, x[::-2, 1::3] - 1,
                            (x.T[::-1] + y[::-1]).T], [xv, yv])


@pytest.mark.parametrize('dtype', ['float32', 'float16', 'int16', 'uint8', 'bool'])
def test_multi_dimensional_launches(dtype, monkeypatch):
    # strided operands over 2, 3 and 5 collapsed dimensions (CPU devices launch these as
    # 2-d / 3-d ranges; GPUs as flat ranges): transposes, broadcasts on inner and outer
    # dimensions, negative steps, one dimension of size 1, an integer division with a
    # variable divisor (the checked kernel form). (merge off: launches of one size would
    # otherwise run as one flat launch, tests/test_merge.py)
    setting(monkeypatch, 'merge', '0')
    x = T.TensorType(dtype, (False,) * 5)('x')
    r = T.TensorType(dtype, (True, False, True, False, False))('r')
    m = T.TensorType(dtype, (False, False))('m')
    rng = np.random.RandomState(12)
    xv = rand((2, 3, 4, 1, 5), dtype, rng)
    rv = rand((1, 3, 1, 1, 5), dtype, rng)
    mv = rand((7, 9), dtype, rng)
    outs = [x.dimshuffle(4, 2, 0, 1, 3) + r.dimshuffle(4, 2, 0, 1, 3), x[:, ::-1, :, :, ::2] * 3,
            m.T + m[:, 0], m[::-1, 1:] - m[:, 0].dimshuffle(0, 'x') if dtype != 'bool' else m.T,
            x * r]
    if dtype not in ('bool', 'float16', 'float32'):
        outs.append(m.T // (abs(m.T) + 1))
    f = assert_matches_c([x, r, m], outs, [xv, rv, mv])
    counts = theano_ocl.stats(f)
    if counts['device'].is_cpu:
        # the strided operands launched as 2-d and 3-d ranges
        shapes = [gsize for _, _, gsize in counts['kernels']]
        assert any(len(g) == 2 for g in shapes) and any(len(g) == 3 for g in shapes), shapes


def test_fused_composite_is_one_kernel():
    x, y, z = T.fvectors('x', 'y', 'z')
    out = x * y + T.exp(-z) * T.tanh(x) / (1 + abs(y))
    rng = np.random.RandomState(13)
    vals = [rand((1000,), 'f4', rng) for _ in range(3)]
    f = assert_matches_c([x, y, z], [out], vals, rtol=1e-5, atol=1e-6)
    nodes = f.maker.fgraph.toposort()
    assert len(nodes) == 1 and 'Composite' in str(nodes[0].op)
    assert theano_ocl.stats(f)['launches'] == 1, theano_ocl.stats(f)


def test_inplace_chain_reuses_buffers():
    x = T.fvector('x')
    out = x
    for k in range(6):
        out = T.tanh(out * 0.5) - k          # a chain Theano makes inplace
    rng = np.random.RandomState(17)
    f = assert_matches_c([x], [out], [rand((5000,), 'f4', rng)], rtol=1e-5, atol=1e-5)
    # intermediates share buffers: far fewer buffers than nodes
    counts = theano_ocl.stats(f)
    assert counts['frame_bytes'] <= 3 * 5000 * 4, counts


def test_float16_storage():
    x = T.vector('x', dtype='float16')
    rng = np.random.RandomState(19)
    xv = rand((300,), 'float16', rng)
    assert_matches_c([x], [x * 2 + 1, T.exp(x), T.cast(x, 'float32') * 3, T.cast(x * 100, 'int16')],
                   [xv], rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------ integer division by zero
def _c_and_ocl_outcome(f_c, f_o, values):
    """(result or (exception type, first message line)) of Theano C and of OCL."""
    out = []
    for f in (f_c, f_o):
        try:
            out.append(('ok', f(*values)))
        except Exception as e:
            out.append((type(e), str(e).splitlines()[0]))
    return out


def _assert_same_outcome(f_c, f_o, values):
    (kc, c), (ko, o) = _c_and_ocl_outcome(f_c, f_o, values)
    if kc == 'ok':
        assert ko == 'ok', 'Theano C computes, OCL raises %s' % (o,)
        assert_close(o, c)
    else:
        assert (kc, c) == (ko, o)
    return kc, c


@pytest.mark.parametrize('dtype', ['bool'] + INTS)
def test_int_division_by_zero_raises_as_c(dtype):
    """Theano's C code raises ZeroDivisionError for integer // and % by 0 (Theano's own
    message); so does the device, through the kernel's error flag. Vectors, broadcasting
    and 0-d; the function stays usable afterwards."""
    rng = np.random.RandomState(23)
    low = 0 if dtype.startswith('u') or dtype == 'bool' else -9
    x = T.matrix('x', dtype=dtype)
    y = T.TensorType(dtype, (True, False))('y')        # a row: broadcast over x's rows
    s = T.scalar('s', dtype=dtype)
    xv = rand((4, 5), dtype, rng, low=low, high=9)
    yv = rand((1, 5), dtype, rng, low=low, high=9)
    yv[yv == 0] = 1
    zero = yv.copy()
    zero[0, 3] = 0
    for out, message in ((x // y, 'integer division by zero'), (x % y, 'integer modulo by zero')):
        f_c, f_o = compile_both([x, y], out)
        assert not fallback_nodes(f_o)
        _assert_same_outcome(f_c, f_o, [xv, yv])
        assert _assert_same_outcome(f_c, f_o, [xv, zero]) == (ZeroDivisionError, message)
        _assert_same_outcome(f_c, f_o, [xv, yv])            # the flag was cleared
    f_c, f_o = compile_both([s, y], [s // y, y % s])       # 0-d, both ways
    one = np.ones((), dtype)
    _assert_same_outcome(f_c, f_o, [one, yv])
    assert _assert_same_outcome(f_c, f_o, [np.zeros((), dtype), yv]) == \
        (ZeroDivisionError, 'integer modulo by zero')
    assert _assert_same_outcome(f_c, f_o, [one, zero]) == \
        (ZeroDivisionError, 'integer division by zero')


def test_int_division_by_zero_fused_and_constant_divisors():
    x, y = T.ivector('x'), T.ivector('y')
    xv = np.array([7, -8, 9, 10], 'int32')
    yv = np.array([2, -3, 4, 5], 'int32')
    zero = np.array([2, 0, 4, 5], 'int32')
    # fused: Theano's C code stops at the first op of the Composite that divides by zero
    for out in ((x % y) - (x // y), (x // y) * 2 + 1, (x % y) + x):
        f_c, f_o = compile_both([x, y], out)
        assert not fallback_nodes(f_o)
        _assert_same_outcome(f_c, f_o, [xv, yv])
        kind, message = _assert_same_outcome(f_c, f_o, [xv, zero])
        assert kind is ZeroDivisionError
    # nonzero constant divisors need no check: no error flag read after the call, while a
    # variable divisor has one
    f_c, f_o = compile_both([x], [x // 3 + x % -2, x // np.int32(7)])
    _assert_same_outcome(f_c, f_o, [xv])
    assert theano_ocl.stats(f_o)['checks'] == 0, theano_ocl.stats(f_o)
    f_c, f_o = compile_both([x, y], x // y)
    _assert_same_outcome(f_c, f_o, [xv, yv])
    assert theano_ocl.stats(f_o)['checks'] == 1, theano_ocl.stats(f_o)
    # a zero constant divisor raises
    f_c, f_o = compile_both([x], x % np.int32(0))
    assert _assert_same_outcome(f_c, f_o, [xv]) == (ZeroDivisionError, 'integer modulo by zero')
    # true division of integers by zero does not raise (inf, nan)
    f_c, f_o = compile_both([x, y], x / y)
    _assert_same_outcome(f_c, f_o, [xv, np.array([0, 0, 1, 0], 'int32') * xv])


# ------------------------------------------------------------------ mixed signedness
MIXED = [('int8', 'uint8'), ('int16', 'uint16'), ('int32', 'uint32'), ('int64', 'uint64'),
         ('int8', 'uint64'), ('uint32', 'int8'), ('uint32', 'int64'), ('uint64', 'int32'),
         ('uint16', 'int32'), ('uint32', 'int32')]


def _mixed_values(dtype, shape, rng):
    """Random values of ``dtype`` with |v| < 2**40 (Theano's C maximum and minimum pass
    integers through double), starting with -1, 0, 1 (or 0, 1, 2) where there is room."""
    info = np.iinfo(dtype)
    lo, hi = max(int(info.min), -2 ** 40), min(int(info.max), 2 ** 40)
    v = rng.randint(lo, hi, size=shape, dtype=np.int64)
    first = [-1, 0, 1] if lo < 0 else [0, 1, 2]
    v.reshape(-1)[:3] = first[:v.size]
    return v.astype(dtype)


@pytest.mark.parametrize('dx,dy', MIXED)
def test_mixed_signedness_matches_c(dx, dy):
    """Integers of mixed signedness combine as Theano's C code combines them: in C's common
    type (a negative int32 becomes a large uint32, int64 with uint64 wraps in uint64 before
    the float64 result), then converted to the dtype Theano infers. Broadcasting and 0-d."""
    rng = np.random.RandomState(29)
    x = T.matrix('x', dtype=dx)
    y = T.TensorType(dy, (True, False))('y')
    s = T.scalar('s', dtype=dy)
    nz = T.switch(T.eq(y, 0), T.ones_like(y), y)
    outs = [x + y, x - y, y - x, x * y, x // nz, x % nz, nz // T.switch(T.eq(x, 0), 1, x),
            T.maximum(x, y), T.minimum(x, y), x < y, x > y, x <= y, x >= y, T.eq(x, y),
            T.neq(x, y), x & y, x | y, x ^ y, T.switch(x > 0, x, y), T.clip(x, y, 50),
            x + s, s * x, T.maximum(s, x), x < s]
    xv = _mixed_values(dx, (3, 6), rng)
    yv = _mixed_values(dy, (1, 6), rng)
    sv = _mixed_values(dy, (), rng)
    f = assert_matches_c([x, y, s], outs, [xv, yv, sv])
    assert f(xv, yv, sv)[0].dtype == np.dtype(theano.scalar.upcast(dx, dy))


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_kept_output_not_computed_in_place_into_a_strided_view(dtype):
    # an LSTM cell: h = sigmoid(g[:, o]) * tanh(c) computed by Theano in place over the
    # column slice g[:, o] of the product (a strided view). For a value the function
    # keeps, a fresh array: no copy of h out of the product's buffer afterwards -- as many
    # launches as when Theano does not work in place at all -- and C's results.
    import theano_ocl
    from theano_ocl.benchmarks.timing import launches
    if not theano_ocl.get_device().supports_dtype(dtype):
        pytest.skip('the device has no %s' % dtype)
    a, b, c0 = T.matrix('a', dtype), T.matrix('b', dtype), T.matrix('c0', dtype)
    g = T.dot(a, b)
    s = nnet.sigmoid
    c = s(g[:, 0:4]) * c0 + s(g[:, 4:8]) * T.tanh(g[:, 12:16])
    h = s(g[:, 8:12]) * T.tanh(c)
    rng = np.random.RandomState(5)
    vals = [rand(sh, dtype, rng) for sh in [(33, 5), (5, 16), (33, 4)]]
    counts = {}
    for name, mode in (('inplace', theano_ocl.OCLMode()),
                       ('not inplace', theano_ocl.OCLMode().excluding('inplace_elemwise_opt'))):
        f = theano.function([a, b, c0], [h, c], mode=mode)
        destroys = [n for n in f.maker.fgraph.apply_nodes if getattr(n.op, 'destroy_map', None)
                    and isinstance(n.op, theano.tensor.Elemwise)]
        assert bool(destroys) == (name == 'inplace'), (name, destroys)
        f_c = theano.function([a, b, c0], [h, c], mode='FAST_RUN')
        for _ in range(2):
            for got, want in zip(f(*vals), f_c(*vals)):
                assert_close(got, want)
        counts[name] = launches(f)
    assert counts['inplace'] == counts['not inplace'], counts


# sizes around the CPU geometry's cases (runtime.plans.cpu_local): one group (<= 64), a
# divisor of 64..4,096 or at most 4,096 (an exact range, no bounds test), larger primes
# (no divisor: padded, tested)
_SIZES = [1, 7, 64, 65, 4093, 4099, 12288, 256000, 256019, 2 * 8191]


@pytest.mark.parametrize('n', _SIZES)
def test_every_size_of_a_flat_range(n):
    """Flat ranges of every kind of size, elementwise functions PoCL vectorizes only
    without a bounds test (exp, tanh) and an update: Theano C's values, and on a CPU
    device ranges of exactly ``n`` work-items where ``n`` is at most 4,096 or has a
    divisor of 64..4,096 (else a multiple of 256); the two outputs' launches, of one
    size, may run as one merged launch (``ops/elemwise_merge.py``)."""
    x = T.vector('x', dtype='float32')
    y = T.vector('y', dtype='float32')
    rng = np.random.RandomState(n % 1000)
    xv, yv = rand((n,), 'float32', rng), rand((n,), 'float32', rng)
    s = theano.shared(rand((n,), 'float32', rng), name='s')
    want = s.get_value() * np.float32(0.5) + xv
    f = assert_matches_c([x, y], [T.exp(x) * y, T.tanh(x - y)], [xv, yv], calls=1)
    f_up = theano.function([x], [], updates=[(s, s * np.float32(0.5) + x)],
                           mode=theano_ocl.OCLMode())
    f_up(xv)
    assert_close(s.get_value(), want)
    dev = theano_ocl.stats(f)['device']
    if dev.is_cpu:
        divisor = n <= 4096 or any(n % g == 0 for g in range(64, 4097))
        for _, _, gsize in theano_ocl.stats(f)['kernels']:
            assert len(gsize) == 1
            assert gsize[0] == n if divisor else (gsize[0] > n and gsize[0] % 256 == 0), \
                (n, gsize)


def test_cpu_groups_divide_their_range():
    from theano_ocl.runtime.plans import CPU_MIN_LOCAL, cpu_local
    for n in list(range(1, 600)) + [4096, 4097, 65536, 256000, 256019, 1 << 20, 999983]:
        g = cpu_local(n, 4096, 2)
        if g is None:
            assert n > 4096 and not any(n % k == 0 for k in range(64, 4097))
        else:
            assert n % g == 0 and g <= 4096 and (g >= CPU_MIN_LOCAL or g == n), (n, g)
            # every core gets groups where some divisor gives them
            if any(n % k == 0 and n // k >= 8 for k in range(CPU_MIN_LOCAL, 4097)):
                assert n // g >= 8, (n, g)
    # a device whose work-groups hold fewer than CPU_MIN_LOCAL work-items: never a group
    # over its limit (None: the range is padded in groups of the limit)
    for most in (1, 16, 48):
        for n in list(range(1, 300)) + [4096, 256019]:
            g = cpu_local(n, most, 2)
            assert g is None or (g <= most and n % g == 0), (n, most, g)
