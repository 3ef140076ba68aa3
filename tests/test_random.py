"""Random family: MRG_RandomStreams on the device gives Theano CPU's samples and rstate
bit for bit, call after call."""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.sandbox.rng_mrg import MRG_RandomStreams, mrg_uniform

import theano_ocl
from helpers import assert_close, ocl_mode, rand


def _both(build, inputs=()):
    """Compile ``build(streams)`` with Theano C and with OCL, each with its own streams
    seeded alike. Returns [(function, rstate shared variables)] for C, then OCL."""
    out = []
    for mode in ('FAST_RUN', ocl_mode()):
        outputs = build(MRG_RandomStreams(234))
        f = theano.function(list(inputs), outputs, mode=mode)
        states = [i.variable for i in f.maker.expanded_inputs if i.update is not None]
        out.append((f, states))
    return out


def _assert_same_calls(pair, values=(), calls=3, exact=(0,)):
    """Outputs listed in ``exact`` must be bit-equal, the others close: Theano's C code is
    built with gcc's default FP contraction (``u * (high - low) + low`` becomes an fma),
    which OpenCL's elementwise kernels need not match in the last bit."""
    (f_c, s_c), (f_o, s_o) = pair
    assert len(s_c) == len(s_o) > 0
    for _ in range(calls):
        want, got = f_c(*values), f_o(*values)
        for k, (w, g) in enumerate(zip(want, got)):
            if k in exact:
                assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, w.dtype)
                np.testing.assert_array_equal(g, w, err_msg='output %d' % k)
            else:
                assert_close(g, w, what='output %d' % k)
        for a, b in zip(s_c, s_o):
            np.testing.assert_array_equal(b.get_value(), a.get_value(), err_msg='rstate')


def _mrg_on_device(f):
    rows = [(n, w) for n, w, _ in theano_ocl.placements(f) if isinstance(n.op, mrg_uniform)]
    assert rows and all(w == 'device' for _, w in rows), rows


@pytest.mark.parametrize('dtype,size', [('float32', (7, 11)), ('float64', (1000,)),
                                        ('float16', (3, 5)), ('float32', (2, 3, 4)),
                                        ('float64', (5,))])
def test_uniform_and_rstate_bit_exact(dtype, size):
    pair = _both(lambda R: [R.uniform(size, dtype=dtype),
                            R.uniform(size, low=-2, high=5, dtype=dtype)])
    _mrg_on_device(pair[1][0])
    _assert_same_calls(pair)


@pytest.mark.parametrize('nstreams', [1, 3, 64, 200])
def test_stream_counts(nstreams):
    """More streams than samples, fewer, and one: every stream advances as on the CPU."""
    pair = _both(lambda R: [R.uniform((37,), dtype='float32', nstreams=nstreams)])
    _assert_same_calls(pair)


@pytest.mark.parametrize('dtype', ['int8', 'int64', 'float32', 'bool'])
def test_dropout_masks(dtype):
    x = T.matrix('x')
    v = rand((16, 24), 'float64')

    def build(R):
        mask = R.binomial(x.shape, p=0.7, dtype=dtype)
        mask2 = R.binomial((16, 24), p=0.5, dtype='float32')
        return [mask, x * mask / 0.7, mask2]
    pair = _both(build, [x])
    _mrg_on_device(pair[1][0])
    _assert_same_calls(pair, [v], calls=4, exact=(0, 2))


def test_set_rstate_mid_way():
    pair = _both(lambda R: [R.uniform((30,), dtype='float64')])
    _assert_same_calls(pair, calls=2)
    for (_, states) in pair:
        states[0].set_value(MRG_RandomStreams(99).get_substream_rstates(
            states[0].get_value().shape[0], 'float64'))
    _assert_same_calls(pair, calls=2)


def test_normal():
    pair = _both(lambda R: [R.normal((5, 7), avg=1.0, std=2.0), R.normal((9,), dtype='float32')])
    _mrg_on_device(pair[1][0])
    _assert_same_calls(pair, exact=())


def test_multinomial_and_choice():
    p = T.matrix('p')
    pv = np.random.RandomState(0).dirichlet(np.ones(6), size=4)

    def build(R):
        return [R.multinomial(pvals=p, n=3), R.choice(size=2, p=p, replace=False)]
    pair = _both(build, [p])
    _mrg_on_device(pair[1][0])
    _assert_same_calls(pair, [pv], exact=(0, 1))


def _multinomial_case(op, pdt, udt, n, rows=5, outcomes=7, transposed=False, seed=0,
                      boundary=True):
    rng = np.random.RandomState(seed)
    p = T.TensorType(pdt, (False, False))('p')
    u = T.TensorType(udt, (False,))('u')
    pv = rng.dirichlet(np.ones(outcomes), size=rows).astype(pdt)
    pin = p.T if transposed else p
    if transposed:
        pv = np.ascontiguousarray(pv.T)
    # uniforms, with some exactly at running-sum boundaries and some near 1
    uv = rng.uniform(0, 1, rows * n).astype(udt)
    if uv.size and boundary:
        uv[0] = np.asarray(pv if not transposed else pv.T)[0, :2].astype('float64').sum()
        uv[-1] = 0.999999
    return [p, u], op(pin, u, n), [pv, uv]


@pytest.mark.parametrize('pdt,udt', [('float32', 'float32'), ('float64', 'float32'),
                                     ('float32', 'float64'), ('float64', 'float64')])
@pytest.mark.parametrize('odtype', ['auto', 'int64', 'int32', 'uint8', 'float32'])
@pytest.mark.parametrize('n', [1, 3])
def test_multinomial_from_uniform_matches_c(pdt, udt, odtype, n):
    from theano.sandbox.multinomial import MultinomialFromUniform
    for transposed in (False, True):
        ins, out, vals = _multinomial_case(MultinomialFromUniform(odtype), pdt, udt, n,
                                           transposed=transposed)
        f_c = theano.function(ins, out, mode='FAST_RUN')
        f_o = theano.function(ins, out, mode=ocl_mode())
        assert not theano_ocl.fallback_nodes(f_o), theano_ocl.fallback_nodes(f_o)
        for _ in range(2):
            want, got = f_c(*vals), f_o(*vals)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize('pdt,udt', [('float32', 'float32'), ('float64', 'float64'),
                                     ('float32', 'float64')])
@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('n', [1, 2, 7])
def test_choice_from_uniform_matches_c(pdt, udt, replace, n):
    from theano.sandbox.multinomial import ChoiceFromUniform
    for odtype in ('auto', 'int32'):
        ins, out, vals = _multinomial_case(ChoiceFromUniform(odtype, replace=replace), pdt,
                                           udt, n, seed=n)
        f_c = theano.function(ins, out, mode='FAST_RUN')
        f_o = theano.function(ins, out, mode=ocl_mode())
        assert not theano_ocl.fallback_nodes(f_o), theano_ocl.fallback_nodes(f_o)
        want, got = f_c(*vals), f_o(*vals)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_multinomial_float16_and_empty_match_python():
    # Theano's C code sums npy_float16 (integer) storage for float16 pvals, so the
    # reference here is the Python implementation (Mode(linker='py')); uniforms away from
    # running-sum boundaries, where Python (searchsorted: >=) and C (>) differ -- the
    # device follows C
    from theano.sandbox.multinomial import MultinomialFromUniform, ChoiceFromUniform
    py = theano.Mode(linker='py', optimizer='fast_run')
    for op, pdt, n, rows in [(MultinomialFromUniform('int64'), 'float16', 3, 5),
                             (ChoiceFromUniform('auto', replace=True), 'float16', 2, 4),
                             (MultinomialFromUniform('auto'), 'float32', 2, 0),
                             (ChoiceFromUniform('auto'), 'float64', 3, 0)]:
        ins, out, vals = _multinomial_case(op, pdt, 'float32', n, rows=rows, boundary=False)
        f_p = theano.function(ins, out, mode=py)
        f_o = theano.function(ins, out, mode=ocl_mode())
        assert not theano_ocl.fallback_nodes(f_o), (op, pdt)
        want, got = f_p(*vals), f_o(*vals)
        assert got.shape == want.shape, (op, got.shape, want.shape)
        np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=str(op))


def test_multinomial_errors_match_c():
    from theano.sandbox.multinomial import MultinomialFromUniform, ChoiceFromUniform
    ins, out, vals = _multinomial_case(ChoiceFromUniform('auto'), 'float32', 'float32', 8)
    f_o = theano.function(ins, out, mode=ocl_mode())
    with pytest.raises(ValueError, match='bigger than the size of the distribution'):
        f_o(*vals)
    ins, out, vals = _multinomial_case(MultinomialFromUniform('auto'), 'float32', 'float32', 2)
    f_o = theano.function(ins, out, mode=ocl_mode())
    with pytest.raises(ValueError, match=r'unis.shape\[0\] != pvals.shape\[0\] \* n'):
        f_o(vals[0], vals[1][:-1])
    assert f_o(*vals).shape == vals[0].shape          # still usable


def test_mrg_multinomial_and_choice_run_on_the_device():
    p = T.fmatrix('p')
    pv = np.random.RandomState(1).dirichlet(np.ones(9), size=6).astype('float32')

    def build(R):
        return [R.multinomial(pvals=p, n=4, dtype='float32'),
                R.choice(size=3, a=None, p=p, replace=False)]
    pair = _both(build, [p])
    assert not theano_ocl.fallback_nodes(pair[1][0]), theano_ocl.fallback_nodes(pair[1][0])
    _assert_same_calls(pair, [pv], exact=(0, 1))
