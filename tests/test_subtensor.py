"""Indexing family (theano_ocl/ops/subtensor.py) against Theano's C backend.

Each test compiles one graph per dtype with many outputs (Theano's C compilation is the
slow part), built on in-graph views (x[::-1], x.T, x[:, ::2]) so the device code sees
negative and non-unit strides; index vectors carry negative and duplicate entries.
"""
import numpy as np
import pytest

import theano
import theano.tensor as T

import theano_ocl
from helpers import assert_close, assert_matches_c, compile_both, ocl_mode, rand

DTYPES = ('bool', 'int8', 'int32', 'int64', 'uint8', 'float16', 'float32', 'float64')


def _inputs(dtype):
    x = T.tensor3('x', dtype=dtype)
    return x, rand((4, 5, 6), dtype)


@pytest.mark.parametrize('dtype', DTYPES)
def test_subtensor_views(dtype):
    x, xv = _inputs(dtype)
    s = T.lscalar('s')
    outs = [x[1], x[::-1, 1:3], x[:, ::-2, -1], x.dimshuffle(2, 0, 1)[1:, ::2],
            x[5:], x[-1, -1, -1], x[:, 0:0], x[s:, :, s], x[::-1][::s, -s],
            x[1:-1:2, ::-3, 4:0:-2], x[-100:100, 10:, :-100]]
    f = assert_matches_c([x, s], outs, [xv, 2])
    # another index value re-plans (the index is a guarded host value), same results
    f_c, _ = compile_both([x, s], outs)
    for sv in (1, -1, 3):
        for k, (g, w) in enumerate(zip(f(xv, sv), f_c(xv, sv))):
            assert_close(g, w, what='s=%d output %d' % (sv, k))


@pytest.mark.parametrize('dtype', DTYPES)
def test_inc_subtensor(dtype):
    x, xv = _inputs(dtype)
    y = T.matrix('y', dtype=dtype)
    yv = rand((5, 6), dtype, rng=np.random.RandomState(3))
    xt = x.dimshuffle(0, 2, 1)[::-1]        # strided, negative-stride x
    outs = [T.inc_subtensor(x[1], y),
            T.set_subtensor(x[1:3, ::-2], y[::2]),
            T.inc_subtensor(xt[:, 1:4, ::-1], y.T[:5, :3].T),
            T.set_subtensor(xt[0, -1], y[0, 1:]),
            T.inc_subtensor(x[:, :, 2:4], y[:, 0:2]),          # y broadcast over axis 0
            T.set_subtensor(x[2:2], y),                         # empty subtensor
            T.inc_subtensor(x[-1, -1, -1], y[0, 0])]
    assert_matches_c([x, y], outs, [xv, yv])


def _fill_steps(f):
    """The kernels a call of ``f`` launches for its Alloc nodes (zero fills)."""
    assert any(isinstance(node.op, T.Alloc) for node, _, _ in theano_ocl.placements(f))
    return [(node, name) for node, name, _ in theano_ocl.stats(f)['kernels']
            if isinstance(node.op, T.Alloc)]


@pytest.mark.parametrize('dtype', DTYPES)
def test_updates_that_cover_zeros_drop_the_fill(dtype):
    """The gradient of slices: ``inc_subtensor(zeros[:, a:b], y)`` for slices that cover
    the zeros (PlanContext.take_zeros): each update writes its y, and the fill is no longer
    launched; where they cover part of it, or a y reads the zeros, or another node reads
    them in between, the fill stays. Every case against Theano C over reversed-stride y,
    empty and one-row inputs."""
    x = T.matrix('x', dtype=dtype)
    n = x.shape[0]
    y1, y2 = x[:, ::-1][:, :3], x[:, 3:]

    def zeros():
        return T.zeros((n, 7), dtype=dtype)
    z = T.inc_subtensor(zeros()[:, :3], y1)
    z = T.set_subtensor(z[:, 3:5], y2[:, :2])
    full = T.inc_subtensor(z[:, 5:], y2[:, 2:])
    part = T.inc_subtensor(zeros()[:, 2:5], y1)
    r = T.inc_subtensor(zeros()[:, :3], y1)
    r = T.inc_subtensor(r[:, 6:], r[:, 3:4] + x[:, :1])      # reads zeros not yet written
    reads = T.inc_subtensor(r[:, 3:6], x[:, 4:])              # then covered
    out = [full, part, reads]
    rng = np.random.RandomState(5)
    for shape in ((6, 7), (1, 7), (0, 7)):
        assert_matches_c([x], out, [rand(shape, dtype, rng)])
    f = assert_matches_c([x], [full], [rand((6, 7), dtype, rng)])
    assert not _fill_steps(f), _fill_steps(f)
    for outs in ([part], [reads]):
        f = assert_matches_c([x], outs, [rand((6, 7), dtype, rng)])
        assert _fill_steps(f)


@pytest.mark.parametrize('dtype', DTYPES)
def test_advanced_subtensor1(dtype):
    x, xv = _inputs(dtype)
    i = T.lvector('i')
    i32 = T.ivector('i32')
    v = x[0, 0]
    outs = [x[i], x[::-1][i], x.dimshuffle(2, 1, 0)[i32], x[:, ::2][i32],
            x[:, i], v[i], x[i[:0]], x[i][:, :, ::-3]]
    assert_matches_c([x, i, i32], outs,
                   [xv, np.array([3, 0, -1, 3, 1]), np.array([-4, 3, 0, 3], np.int32)])


@pytest.mark.parametrize('dtype', DTYPES)
def test_advanced_inc_subtensor1(dtype):
    x, xv = _inputs(dtype)
    i = T.lvector('i')
    y = T.tensor3('y', dtype=dtype)
    yv = rand((5, 5, 6), dtype, rng=np.random.RandomState(7))
    xt = x.dimshuffle(2, 1, 0)[::-1]        # (6, 5, 4), negative stride
    outs = [T.inc_subtensor(x[i], y),                      # duplicates accumulate
            T.set_subtensor(x[i], y),                      # duplicates: the last one wins
            T.inc_subtensor(xt[i], y[:, :, :4]),
            T.inc_subtensor(x[i], y[0, 0]),                # y broadcast
            T.set_subtensor(x[0, 0][i], y[0, 0, 1]),
            T.inc_subtensor(x[0][i], y[:, 0, ::-1]),
            T.inc_subtensor(x[i[:0]], y[:0])]              # no index
    values = [xv, np.array([3, 0, -1, 3, 3]), yv]
    if dtype != 'bool':
        assert_matches_c([x, i, y], outs, values)
        return
    # Theano's C code raises TypeError on bool arrays: its Python code is the reference
    f_py = theano.function([x, i, y], outs, mode=theano.Mode(linker='py'))
    f_o = theano.function([x, i, y], outs, mode=ocl_mode())
    assert not theano_ocl.fallback_nodes(f_o)
    for k, (g, w) in enumerate(zip(f_o(*values), f_py(*values))):
        assert_close(g, w, what='output %d' % k)


@pytest.mark.parametrize('dtype', ('int32', 'float32', 'float64'))
def test_advanced_subtensor(dtype):
    x, xv = _inputs(dtype)
    i, j = T.lvector('i'), T.ivector('j')
    ic = T.lmatrix('ic')
    outs = [x[i, :, j], x[1:, i, j], x[i, j], x[::-1, :, ::-2][i, j], x[ic, j[:3]],
            x[:, j[:3], ic.T], x[i, j[::-1], i]]
    assert_matches_c([x, i, j, ic], outs,
                   [xv, np.array([3, 0, -1, 3]), np.array([-1, 4, 0, 2], np.int32),
                    np.array([[1], [-2], [3]])])


@pytest.mark.parametrize('dtype', ('int8', 'float16', 'float32', 'float64'))
def test_advanced_inc_subtensor(dtype):
    x, xv = _inputs(dtype)
    i, j = T.lvector('i'), T.lvector('j')
    y = T.matrix('y', dtype=dtype)
    yv = rand((4, 5), dtype, rng=np.random.RandomState(5))
    outs = [T.inc_subtensor(x[i, :, j], y),               # (i, j) pairs repeat: accumulate
            T.set_subtensor(x[i, :, j], y),
            T.inc_subtensor(x[1:, i, j], y[:, 0]),
            T.inc_subtensor(x.dimshuffle(2, 1, 0)[::-1][j, i], y[:, :4].T)]
    assert_matches_c([x, i, j, y], outs,
                   [xv, np.array([3, 0, -1, 3]), np.array([2, 5, 0, 2]), yv])


def test_index_values_change_between_calls():
    """Index vectors are device inputs: new values replay the frame without re-planning."""
    x = T.matrix('x')
    i = T.lvector('i')
    y = T.vector('y')
    outs = [x[i] * 2, T.inc_subtensor(x[i], y)]
    f_c, f_o = compile_both([x, i, y], outs)
    xv, yv = rand((5, 3), 'float64'), rand((3,), 'float64')
    for iv in ([0, 1, 2, 3], [4, 4, 4, -5], [-1, 0, 3, 3]):
        iv = np.array(iv)
        for k, (g, w) in enumerate(zip(f_o(xv, iv, yv), f_c(xv, iv, yv))):
            assert_close(g, w, what='i=%s output %d' % (iv, k))
    assert theano_ocl.stats(f_o)['replans'] == 0, theano_ocl.stats(f_o)


@pytest.mark.parametrize('dtype', DTYPES)
def test_integer_index_read_every_call(dtype):
    """An integer index or slice bound given as an input (not fixed by shapes) is read at
    every call: one plan serves every value (a slice, every value giving the planned
    length). Subtensor copies the view at that place; IncSubtensor gathers, updates and
    scatters it back. Views with negative and non-unit strides, 0-d and empty results,
    indices from the end, slices clipped at the ends."""
    x, xv = _inputs(dtype)
    s = T.lscalar('s')
    y = T.matrix('y', dtype=dtype)
    yv = rand((5, 6), dtype, rng=np.random.RandomState(3))
    xt = x.dimshuffle(0, 2, 1)[::-1]
    outs = [x[s], x[::-1, s % 3], x[1:, s + 1, ::-2], xt[-s, 2:, 1], x[s, s + 1, -s],
            x[:, 0:0][s], T.inc_subtensor(x[s], y), T.set_subtensor(xt[s, ::2, 1:], y[:3, :4]),
            T.inc_subtensor(x[-1, s, 1:5], y[0, :4]), x[s:s + 2, 1],
            T.set_subtensor(x[1:, s - 1:s + 2], y[1, 2])]
    f_c, f_o = compile_both([x, y, s], outs)
    kinds = [impl for node, where, impl in theano_ocl.placements(f_o) if where == 'device'
             and 'Subtensor' in str(node.op)]
    assert sum('index read every call' in k for k in kinds) >= 9, kinds
    for sv in (0, 1, -1, 3, -2, 2):
        for k, (g, w) in enumerate(zip(f_o(xv, yv, sv), f_c(xv, yv, sv))):
            assert_close(g, w, what='s=%d output %d' % (sv, k))
    # the slices' lengths differ at the ends (a frame of the same key for each length);
    # values giving lengths already seen re-plan nothing
    plans = theano_ocl.stats(f_o)['replans']
    for sv in (1, 2, 0):
        f_o(xv, yv, sv)
    assert theano_ocl.stats(f_o)['replans'] == plans, (plans, theano_ocl.stats(f_o))


@pytest.mark.parametrize('bad', (5, -6))
def test_index_errors(bad):
    """Out-of-range indices raise IndexError, as Theano does; the next call still works."""
    x = T.matrix('x')
    i = T.lvector('i')
    s = T.lscalar('s')
    xv = rand((5, 3), 'float64')
    cases = [([x, i], x[i], [xv, np.array([0, bad, 1])]),
             ([x, i], T.inc_subtensor(x[i], 1.0), [xv, np.array([bad])]),
             ([x, i], x[i, i[::-1]], [xv, np.array([0, 1, bad])]),
             ([x, s], x[s], [xv, bad]),
             ([x, s], T.inc_subtensor(x[s, 1:], 1.0), [xv, bad])]
    for ins, out, values in cases:
        f_c, f_o = compile_both(ins, out)
        for f in (f_c, f_o):
            with pytest.raises(IndexError):
                f(*values)
        good = list(values)
        good[1] = np.zeros_like(values[1])
        assert_close(f_o(*good), f_c(*good), what=str(out))


@pytest.mark.parametrize('dtype', ('uint8', 'float32'))
def test_boolean_masks(dtype):
    """Masks decide the result's shape: a changed mask re-plans, an unchanged one replays."""
    x = T.matrix('x', dtype=dtype)
    m = T.bmatrix('m')
    y = T.vector('y', dtype=dtype)
    xt = x.T[::-1]                                    # (6, 4), strided
    outs = [x[m], xt[m.T[::-1]], x[m.nonzero()], x[1:, m[0]], xt[:, m[:, 1]],
            T.set_subtensor(x[m], y[0]), T.inc_subtensor(xt[:, m[:, 1]], y[1:2])]
    f_c, f_o = compile_both([x, m, y], outs)
    assert not theano_ocl.fallback_nodes(f_o), theano_ocl.fallback_nodes(f_o)
    xv = rand((4, 6), dtype)
    yv = rand((6,), dtype, rng=np.random.RandomState(1))
    rng = np.random.RandomState(2)
    masks = [rng.rand(4, 6) > 0.5, rng.rand(4, 6) > 0.3, np.zeros((4, 6), bool)]
    for mv in masks + masks[1:2]:
        for k, (g, w) in enumerate(zip(f_o(xv, mv, yv), f_c(xv, mv, yv))):
            assert_close(g, w, what='mask %s output %d' % (mv.astype(int).tolist(), k))
    replans = theano_ocl.stats(f_o)['replans']
    f_o(xv, masks[1], yv)
    assert theano_ocl.stats(f_o)['replans'] == replans, theano_ocl.stats(f_o)


@pytest.mark.parametrize('dtype', ['float32', 'int16', 'bool', 'float16'])
def test_repeat_matches_c(dtype):
    # T.repeat (extra_ops.RepeatOp) on the device: scalar and vector repeats, every axis,
    # axis=None, negative axis, strided input, zero repeats, empty input
    x = T.TensorType(dtype, (False, False, False))('x')
    r = T.lvector('r')
    k = T.lscalar('k')
    rng = np.random.RandomState(3)
    xv = rand((3, 4, 5), dtype, rng)
    outs = [T.repeat(x, k, axis=1), T.repeat(x, r, axis=2), T.repeat(x[:, ::-1], k, axis=0),
            T.repeat(x, k), T.repeat(x.dimshuffle(2, 0, 1), r, axis=-3)]
    f = assert_matches_c([x, r, k], outs, [xv, np.array([0, 2, 1, 3, 1], 'int64'), 2])
    for vals in ([xv, np.array([1, 0, 0, 0, 4], 'int64'), 0],
                 [xv[:0], np.array([2, 2, 2, 2, 2], 'int64'), 3]):
        want = theano.function([x, r, k], outs, mode='FAST_RUN')(*vals)
        got = f(*vals)
        for g, w in zip(got, want):
            assert_close(g, w)
    with pytest.raises(ValueError):
        f(xv, np.array([1, 2], 'int64'), 1)          # repeats of the wrong length


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int8', 'uint16', 'bool', 'float16'])
def test_permute_row_elements(dtype):
    """PermuteRowElements (forward: a gather on the device) against Theano C: a permutation
    per row, one for every row, x broadcast over y's rows, 3-d, negative entries, strided
    and reversed operands, empty rows; the inverse (a host fallback) still matches."""
    rng = np.random.RandomState(7)

    def perms(rows, n, neg=False):
        p = np.array([rng.permutation(n) for _ in range(rows)], 'int64')
        return p - n if neg else p
    x2 = T.matrix('x2', dtype=dtype)
    x1 = T.vector('x1', dtype=dtype)
    x3 = T.tensor3('x3', dtype=dtype)
    xr = T.row('xr', dtype=dtype)
    y2 = T.lmatrix('y2')
    y1 = T.lvector('y1')
    y2i = T.imatrix('y2i')
    outs = [T.permute_row_elements(x2, y2), T.permute_row_elements(x2, y1),
            T.permute_row_elements(x1, y2), T.permute_row_elements(x3, y2),
            T.permute_row_elements(x2[::-1, ::2], y2i[:, 3:]),
            T.permute_row_elements(xr, y2)]
    vals = [rand((4, 7), dtype, rng), rand((7,), dtype, rng), rand((3, 4, 7), dtype, rng),
            perms(4, 7), perms(1, 7, neg=True)[0], perms(4, 7, neg=True)[:, ::-1].astype('int32')]
    vals[5] = np.concatenate([np.zeros((4, 3), 'int32'), perms(4, 4).astype('int32')], 1)
    vals.append(rand((1, 7), dtype, rng))
    f = assert_matches_c([x2, x1, x3, y2, y1, y2i, xr], outs, vals)
    assert any(isinstance(n.op, T.basic.PermuteRowElements) for n, where, _ in
               theano_ocl.placements(f) if where == 'device')
    # empty rows, and the inverse: on the host, same values
    assert_matches_c([x2, y2], [T.permute_row_elements(x2, y2)],
                     [np.zeros((0, 7), dtype), np.zeros((0, 7), 'int64')])
    g = assert_matches_c([x2, y2], [T.permute_row_elements(x2, y2, inverse=True) * 1],
                         [vals[0], vals[3]], device_only=False)
    assert [n.op for n in theano_ocl.fallback_nodes(g)] == [T.basic.PermuteRowElements()]


def test_permute_row_elements_errors():
    x = T.matrix('x')
    y = T.lmatrix('y')
    f = theano.function([x, y], T.permute_row_elements(x, y), mode=ocl_mode())
    v = rand((3, 5), 'float64')
    with pytest.raises(IndexError):
        f(v, np.full((3, 5), 5, 'int64'))
    for bad in [np.zeros((2, 5), 'int64'), np.zeros((1, 5), 'int64')]:   # y not broadcastable
        with pytest.raises(ValueError):
            f(v, bad)
    p = np.array([np.random.RandomState(k).permutation(5) for k in range(3)])
    assert_close(f(v, p), np.take_along_axis(v, p, 1))      # still usable after the errors


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int16', 'bool', 'float16'])
def test_choose(dtype):
    """Choose over a tensor of choices (a gather after the mode's index fix-up) against
    Theano C: modes raise / wrap / clip, broadcast index and choices, reversed choices, index
    dtypes int8 / uint8 / int64, an empty index."""
    rng = np.random.RandomState(5)
    c3 = T.tensor3('c3', dtype=dtype)
    cb = T.TensorType(dtype, (False, True, False))('cb')
    a = T.lmatrix('a')
    ar = T.TensorType('uint8', (True, False))('ar')
    a8 = T.bmatrix('a8')
    outs = [T.choose(a, c3), T.choose(a8, c3, mode='wrap'), T.choose(a8, c3, mode='clip'),
            T.choose(ar, c3), T.choose(a, cb), T.choose(a, c3[:, ::-1, ::-1])]
    vals = [rng.randint(0, 3, (4, 5)).astype('int64'), rand((3, 4, 5), dtype, rng),
            rng.randint(-7, 8, (4, 5)).astype('int8'), rng.randint(0, 3, (1, 5)).astype('uint8'),
            rand((3, 1, 5), dtype, rng)]
    f = assert_matches_c([a, c3, a8, ar, cb], outs, vals)
    assert any(isinstance(n.op, T.basic.Choose) for n, where, _ in theano_ocl.placements(f)
               if where == 'device')
    assert_matches_c([a, c3], [T.choose(a, c3)], [np.zeros((0, 5), 'int64'),
                                                  rand((3, 1, 5), dtype, rng)])


def test_choose_errors():
    a = T.lmatrix('a')
    c = T.tensor3('c')
    f = theano.function([a, c], T.choose(a, c), mode=ocl_mode())
    v = rand((3, 2, 4), 'float64')
    for bad in (3, -1):
        idx = np.zeros((2, 4), 'int64')
        idx[1, 2] = bad
        with pytest.raises(ValueError):
            f(idx, v)
    with pytest.raises(ValueError):
        f(np.zeros((3, 4), 'int64'), v)                     # shapes do not broadcast
    idx = np.random.RandomState(0).randint(0, 3, (2, 4))
    assert_close(f(idx, v), np.choose(idx, v))              # still usable after the errors
