"""extra_ops on the device (ops/extra_ops.py) against Theano C: cumsum/cumprod, diff,
fill_diagonal(_offset), CpuContiguous (RepeatOp: tests/test_subtensor.py)."""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano.tensor import extra_ops as xo

import theano_ocl
from helpers import assert_close, assert_matches_c, rand


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int8', 'int32', 'uint16', 'int64'])
def test_cumsum_cumprod_match_c(dtype):
    x = T.TensorType(dtype, (False, False, False))('x')
    rng = np.random.RandomState(1)
    xv = rand((3, 4, 50), dtype, rng, low=-2, high=3)     # int8 products wrap, as in C
    outs = [xo.cumsum(x, axis=2), xo.cumprod(x, axis=1), xo.cumsum(x[:, ::-1], axis=0),
            xo.cumsum(x), xo.cumprod(x.dimshuffle(2, 1, 0), axis=-1), xo.cumsum(x[:0], axis=1)]
    assert_matches_c([x], outs, [xv], rtol=1e-5 if dtype == 'float32' else None)


@pytest.mark.parametrize('dtype', ['float32', 'int16', 'uint8', 'float16'])
def test_diff_matches_c(dtype):
    x = T.TensorType(dtype, (False, False))('x')
    rng = np.random.RandomState(2)
    xv = rand((5, 6), dtype, rng)
    outs = [xo.diff(x), xo.diff(x, n=2, axis=0), xo.diff(x.T, n=3), xo.diff(x[:, ::-2], axis=1),
            xo.diff(x, n=7, axis=0)]                              # longer than the axis: empty
    assert_matches_c([x], outs, [xv])


@pytest.mark.parametrize('dtype', ['float32', 'int32', 'float64', 'bool'])
def test_fill_diagonal_match_c(dtype):
    a = T.TensorType(dtype, (False, False))('a')
    c = T.TensorType(dtype, (False, False, False))('c')
    v = T.TensorType(dtype, ())('v')
    off = T.iscalar('off')
    rng = np.random.RandomState(3)
    vals = [rand((4, 7), dtype, rng), rand((3, 3, 3), dtype, rng), np.asarray(rand((1,), dtype, rng)[0])]
    outs = [xo.fill_diagonal(a, v), xo.fill_diagonal(a.T, v), xo.fill_diagonal(c, v),
            xo.fill_diagonal_offset(a, v, off), xo.fill_diagonal_offset(a.T, v, off)]
    f = None
    for o in (0, 2, -2, 6, -5, 9):
        if f is None:
            f = assert_matches_c([a, c, v, off], outs, vals + [np.int32(o)])
        else:
            want = theano.function([a, c, v, off], outs, mode='FAST_RUN')(*(vals + [np.int32(o)]))
            for g, w in zip(f(*(vals + [np.int32(o)])), want):
                np.testing.assert_array_equal(g, w, err_msg='offset %d' % o)


def test_cpu_contiguous_matches_c():
    x = T.fmatrix('x')
    xv = rand((4, 6), 'float32')
    assert_matches_c([x], [xo.cpu_contiguous(x.T) * 2, xo.cpu_contiguous(x) + 1], [xv])


@pytest.mark.parametrize('dtype', ['int32', 'int64', 'int16'])
@pytest.mark.parametrize('order', ['C', 'F'])
def test_unravel_index_matches_theano(dtype, order):
    i = T.TensorType(dtype, (False, False))('i')
    rng = np.random.RandomState(4)
    iv = rng.randint(0, 60, (2, 7)).astype(dtype)        # int16: 60 fits
    outs = list(xo.unravel_index(i, (3, 4, 5), order=order)) + \
        list(xo.unravel_index(i[:, ::-2], (60,), order=order))
    f = assert_matches_c([i], outs, [iv])
    with pytest.raises(ValueError):
        f(np.full((2, 7), 60, dtype))                 # one past the end
    np.testing.assert_array_equal(f(iv)[0], np.unravel_index(iv, (3, 4, 5))[0])   # usable


@pytest.mark.parametrize('mode', ['raise', 'wrap', 'clip'])
@pytest.mark.parametrize('order', ['C', 'F'])
def test_ravel_multi_index_matches_theano(mode, order):
    a, b = T.lmatrix('a'), T.TensorType('int16', (True, False))('b')
    c = T.ivector('c')
    rng = np.random.RandomState(5)
    lo, hi = (0, 4) if mode == 'raise' else (-9, 12)
    av = rng.randint(lo, hi, (3, 6)).astype('int64')
    bv = rng.randint(lo, min(hi, 5), (1, 6)).astype('int16')
    cv = rng.randint(0, 3, 6).astype('int32')
    outs = [xo.ravel_multi_index((a, b), (4, 5), mode=mode, order=order),
            xo.ravel_multi_index((a.T, b.T, c.dimshuffle(0, 'x')), (4, 5, 3), mode=mode,
                                 order=order)]
    f = assert_matches_c([a, b, c], outs, [av, bv, cv])
    if mode == 'raise':
        with pytest.raises(ValueError, match='invalid entry in coordinates array'):
            f(av + 4, bv, cv)


@pytest.mark.parametrize('side', ['left', 'right'])
@pytest.mark.parametrize('xdt,vdt', [('float64', 'float64'), ('float32', 'float64'),
                                     ('int32', 'int64'), ('uint8', 'float32'),
                                     ('int64', 'bool')])
def test_searchsorted(side, xdt, vdt):
    rng = np.random.RandomState(6)
    xs = np.sort(rand((40,), xdt, rng, -5, 5))
    vs = rand((3, 7), vdt, rng, -6, 6)
    if xdt.startswith('float'):
        xs[-3:] = np.nan                     # numpy sorts NaN last and searches after them
    if vdt.startswith('float'):
        vs[0, :3] = [np.nan, -np.inf, xs[5]]
    x = T.vector('x', dtype=xdt)
    v = T.matrix('v', dtype=vdt)
    outs = [T.extra_ops.searchsorted(x, v, side=side),
            T.extra_ops.searchsorted(x[::2], v.T, side=side)]
    f = assert_matches_c([x, v], outs, [xs, vs])
    assert not theano_ocl.fallback_nodes(f)
    # a sorter: the unsorted vector and its argsort; an out-of-range sorter raises
    perm = rng.permutation(40)
    s = T.vector('s', dtype='int64')
    g = assert_matches_c([x, v, s], T.extra_ops.searchsorted(x, v, side=side, sorter=s),
                         [xs[perm], vs, np.argsort(xs[perm], kind='stable')])
    bad = np.argsort(xs[perm], kind='stable')
    bad[:] = 99
    with pytest.raises(ValueError, match='Sorter index out of range'):
        g(xs[perm], vs, bad)
    assert_close(g(xs[perm], vs, np.argsort(xs[perm], kind='stable')),
                 np.searchsorted(xs[perm], vs, side=side,
                                 sorter=np.argsort(xs[perm], kind='stable')))


@pytest.mark.parametrize('side', ['left', 'right'])
@pytest.mark.parametrize('dtype', ['float64', 'int16'])
def test_searchsorted_of_an_unsorted_vector_is_numpys(side, dtype):
    """numpy's answer on an unsorted x (what Theano's C code returns, and its own test
    checks): its search narrows from the previous value's result, so only the same probes
    give the same indices; with a sorter too."""
    rng = np.random.RandomState(8)
    xs = rand((50,), dtype, rng, -30, 30)
    vs = rand((8, 10, 5), dtype, rng, -30, 30)
    x = T.vector('x', dtype=dtype)
    v = T.tensor3('v', dtype=dtype)
    s = T.vector('s', dtype='int32')
    f = assert_matches_c([x, v], T.extra_ops.searchsorted(x, v, side=side), [xs, vs], calls=3)
    assert_close(f(xs, vs), np.searchsorted(xs, vs, side=side))
    srt = rng.permutation(50).astype('int32')      # not the argsort: x[srt] unsorted
    assert_matches_c([x, v, s], T.extra_ops.searchsorted(x, v, side=side, sorter=s),
                     [xs, vs, srt], calls=3)
    # sorted input after unsorted input: the flag was cleared
    assert_close(f(np.sort(xs), vs), np.searchsorted(np.sort(xs), vs, side=side))


def test_bartlett_window():
    """Bartlett(M): computed on the host once per frame (keyed on M), used on the device."""
    M = T.lscalar('M')
    x = T.vector('x')
    f = assert_matches_c([M, x], [xo.bartlett(M) * 2, xo.bartlett(M)[:3] + x[:3]],
                         [7, np.arange(9.)])
    for m in (3, 12, 5):
        assert_close(f(m, np.arange(12.))[0], np.bartlett(m) * 2)
