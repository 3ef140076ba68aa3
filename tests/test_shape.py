"""Shapes, views, fills and joins (theano_ocl/ops/shape.py) against Theano's C backend.

One graph per dtype with many outputs (Theano's C compilation is the slow part); inputs
reach the ops through in-graph views (x.T, x[::-1], x[:, ::2]) so strided and
negative-stride operands are covered.
"""
import numpy as np
import pytest

import theano
import theano.scalar as S
import theano.tensor as T

import theano_ocl
from helpers import assert_close, assert_matches_c, compile_both, rand
from theano_ocl.report import placements

DTYPES = ('bool', 'int8', 'int32', 'int64', 'uint8', 'float16', 'float32', 'float64')


def _op_names(f):
    return {type(n.op).__name__ for n in f.maker.fgraph.toposort()}


@pytest.mark.parametrize('dtype', DTYPES)
def test_reshape_flatten_specify(dtype):
    x = T.matrix('x', dtype=dtype)
    shp = T.lvector('shp')
    xv = rand((4, 6), dtype)
    x3 = x.reshape((2, 3, 4))
    outs = [x3, x.T.reshape((-1,)), x[::-1].reshape((2, -1, 3)), x.reshape(shp, ndim=2),
            x[:, 1::2].T.reshape(shp, ndim=2), x[:0].reshape((3, 0, 5)),
            T.flatten(x3.dimshuffle(2, 0, 1), 2), T.flatten(x[::-1, ::3], 1),
            x[0, 0].reshape((1, 1)), T.specify_shape(x.T, (6, 4)),
            T.addbroadcast(x[:, :1], 1)]
    f = assert_matches_c([x, shp], outs, [xv, np.array([-1, 4])])
    assert {'Reshape', 'SpecifyShape'} <= _op_names(f)


@pytest.mark.parametrize('dtype', DTYPES)
def test_alloc(dtype):
    x = T.matrix('x', dtype=dtype)
    n = T.lscalar('n')
    xv = rand((4, 6), dtype)
    outs = [T.alloc(x[0], 3, 4, 6), T.alloc(x[-1, ::-2], n, 3), T.alloc(x[1, 2], n, 2),
            T.alloc(T.addbroadcast(x.T[:, :1], 1), 6, 5), T.alloc(x[0, 0], 0, n),
            T.zeros((n, 2), dtype=dtype), T.ones((2, n), dtype=dtype)]
    f = assert_matches_c([x, n], outs, [xv, 3])
    assert 'Alloc' in _op_names(f)


@pytest.mark.parametrize('dtype', DTYPES)
def test_join_split_stack(dtype):
    x = T.matrix('x', dtype=dtype)
    ax = T.lscalar('ax')
    splits = T.lvector('splits')
    xv = rand((4, 6), dtype)
    a, b, c = T.split(x.T, splits, 3, axis=1)
    d, e = T.split(x[::-1], [3, 3], 2, axis=-1)
    outs = [T.concatenate([x, x[::-1], x[:0], x[:, ::-1][1:]]),
            T.concatenate([x, x[:, :2], x[:, 0:0], x.T[::2].T], axis=-1),
            T.join(ax, x, x[::-1]),
            T.stack([x[0, 0], x[-1, -1], x[1, 2]]),
            a, b, c, d, e, T.join(0, a.T, c.T)]
    f = assert_matches_c([x, ax, splits], outs, [xv, 1, np.array([1, 0, 3])])
    assert {'Join', 'Split', 'MakeVector'} <= _op_names(f)


@pytest.mark.parametrize('dtype', ('float16', 'float32', 'float64'))
def test_host_decided_values(dtype):
    """Eye, Tri (tril/triu), ARange, TensorFromScalar: values decided by host inputs."""
    x = T.matrix('x', dtype=dtype)
    n, m, k = T.lscalar('n'), T.lscalar('m'), T.lscalar('k')
    s = S.float64('s')
    xv = rand((4, 6), dtype)
    outs = [T.eye(n, m, k, dtype=dtype), T.tril(x), T.triu(x.T, k), T.tril(x[::-1], -k),
            T.arange(0.5, n, 0.25, dtype=dtype), T.cast(T.tensor_from_scalar(s), dtype) + x]
    f_c, f_o = compile_both([x, n, m, k, s], outs)
    assert not theano_ocl.fallback_nodes(f_o), theano_ocl.fallback_nodes(f_o)
    assert {'Eye', 'Tri', 'ARange'} <= _op_names(f_o)
    for values in ([xv, 3, 5, 1, 2.5], [xv, 4, 2, -1, -1.0], [xv, 3, 5, 1, 2.5], [xv, 0, 3, 0, 0.0]):
        for j, (g, w) in enumerate(zip(f_o(*values), f_c(*values))):
            assert_close(g, w, what='values %s output %d' % (values[1:], j))


def test_alloc_empty():
    n = T.lscalar('n')
    x = T.matrix('x', dtype='float32')
    empty = T.AllocEmpty('float32')(n, 3)
    f = theano.function([n], empty, mode=theano_ocl.OCLMode())
    assert not theano_ocl.fallback_nodes(f)
    got = f(5)
    assert got.shape == (5, 3) and got.dtype == np.float32
    # filled completely afterwards, so values are defined
    assert_matches_c([x, n], [T.set_subtensor(empty[:, ::-1], x[:, :3])],
                   [rand((5, 4), 'float32'), 5])


def test_shape_errors():
    """Theano's exception types: ValueError for bad reshapes/joins, AssertionError for
    SpecifyShape."""
    x = T.matrix('x')
    shp = T.lvector('shp')
    xv = rand((4, 6), 'float64')
    cases = [(x.reshape(shp, ndim=2), np.array([5, -1]), ValueError),
             (x.reshape(shp, ndim=2), np.array([-1, -1]), ValueError),
             (T.specify_shape(x, shp), np.array([4, 5]), AssertionError),
             (T.join(0, x, x.T), None, ValueError)]
    for out, sv, err in cases:
        ins = [x] if sv is None else [x, shp]
        values = [xv] if sv is None else [xv, sv]
        f_c, f_o = compile_both(ins, out)
        for f in (f_c, f_o):
            with pytest.raises(err):
                f(*values)


@pytest.mark.parametrize('dtype', ['int8', 'uint16', 'float32'])
def test_eye_with_none_columns(dtype):
    """Theano passes a None input as is: eye(N, None, k) is eye(N, N, k)."""
    N, M, k = T.iscalar(), T.iscalar(), T.iscalar()
    f_c, f_o = compile_both([N, M, k], T.eye(N, M, k, dtype=dtype))
    for args in [(3, None, 0), (4, 2, 1), (3, None, -1)]:
        assert_close(f_o(*args), f_c(*args))


@pytest.mark.parametrize('dtype', ['float64', 'int16', 'bool'])
def test_extract_diag_and_alloc_diag(dtype):
    x = T.tensor3('x', dtype=dtype)
    m = T.matrix('m', dtype=dtype)
    v = T.vector('v', dtype=dtype)
    outs = [T.ExtractDiag(offset=o, axis1=a1, axis2=a2)(x)
            for o, a1, a2 in [(0, 0, 1), (1, 1, 2), (-2, 0, 2), (0, 2, 0), (5, 0, 1)]]
    outs += [T.ExtractDiag(offset=1)(m[::-1, ::2]) * 1, T.ExtractDiag(offset=-1, view=True)(m) + 0]
    outs += [T.AllocDiag(offset=o)(v) for o in (0, 2, -1)]
    outs += [T.AllocDiag(offset=1, axis1=1, axis2=2)(m), T.AllocDiag(offset=-1, axis1=0, axis2=2)(m)]
    f = assert_matches_c([x, m, v], outs, [rand((3, 4, 5), dtype), rand((4, 6), dtype),
                                           rand((3,), dtype)])
    assert not theano_ocl.fallback_nodes(f)
    assert_matches_c([m, v], [T.ExtractDiag()(m), T.AllocDiag()(v)],
                     [rand((0, 3), dtype), rand((0,), dtype)])


def _outcome(f, *vals):
    try:
        return 'ok', f(*vals)
    except AssertionError as e:
        return 'AssertionError', str(e).split('\n')[0]


@pytest.mark.parametrize('dtype', DTYPES + ('complex64',))
def test_assert(dtype):
    """Assert: a view of the value; conditions on the host (shape checks, scalar inputs)
    checked while planning, conditions computed on the device by a flag kernel read after
    the call. Values and errors as Theano C's over calls that pass, fail and pass again."""
    from theano.tensor.opt import assert_op
    x = T.matrix('x', dtype=dtype)
    n = T.iscalar('n')
    c = T.vector('c', dtype='float32')
    xv = rand((4, 6), dtype)
    outs = [assert_op(x.T, T.eq(x.shape[1], 6)),                      # host condition
            assert_op(x[::-1, ::2], T.gt(n, 0)),                      # scalar input
            assert_op(x[:0], T.all(c > 0), T.any(c)),                 # device conditions
            assert_op(x[1, 2], T.all(c > 0), T.eq(x.shape[0], 4), T.lt(n, 5)),
            assert_op(x, T.cast(c[0] - 1, 'int8'), T.max(c))]          # int8, NaN is true
    f_c, f_o = compile_both([x, n, c], outs, on_unused_input='ignore')
    assert not theano_ocl.fallback_nodes(f_o)
    asserts = [node for node, _, _ in theano_ocl.placements(f_o)
               if type(node.op).__name__ == 'Assert']
    assert len(asserts) == len(outs)
    host_inputs = theano_ocl.stats(f_o)['host_inputs']
    assert [host_inputs.get(n, ()) for n in asserts] == [(1,), (1,), (), (2, 3), ()]
    ones = np.ones(3, 'float32')
    calls = [(xv, 1, ones * 2), (xv, 0, ones * 2), (xv, 1, -ones), (xv[:, :5], 1, ones * 2),
             (xv, 1, np.array([2, np.nan, 3], 'float32')), (xv, 1, ones), (xv, 7, ones * 3),
             (xv, 1, ones * 2)]
    for k, vals in enumerate(calls):
        (kind_o, got), (kind_c, want) = _outcome(f_o, *vals), _outcome(f_c, *vals)
        assert kind_o == kind_c, 'call %d: %s, Theano C %s' % (k, got, want)
        if kind_c == 'ok':
            for j, (g, w) in enumerate(zip(got, want)):
                assert_close(g, w, what='call %d output %d' % (k, j))
        else:
            assert got == want, 'call %d' % k


def test_failed_device_assert_commits_no_update():
    """A device condition that fails raises after the call and leaves shared variables at
    their last good values; the next passing call updates them."""
    from theano.tensor.opt import assert_op
    x = T.vector('x')
    s = theano.shared(np.zeros(3), 's')
    f = theano.function([x], assert_op(x * 2, T.all(x > 0)), updates=[(s, s + x)],
                        mode=theano_ocl.OCLMode())
    assert not theano_ocl.fallback_nodes(f)
    assert_close(f(np.array([1., 2, 3])), np.array([2., 4, 6]))
    with pytest.raises(AssertionError, match='Theano Assert failed'):
        f(np.array([1., -2, 3]))
    assert_close(s.get_value(), np.array([1., 2, 3]))
    assert_close(f(np.array([1., 1, 1])), np.array([2., 2, 2]))
    assert_close(s.get_value(), np.array([2., 3, 4]))


def test_shape_values_on_the_device_are_constants_of_their_frame():
    """A value the frame's key decides (a shape, arithmetic on shapes) that device nodes
    compute with is uploaded once, when its frame is planned: a replayed call has no host
    step and no upload; each input shape gets its own value. Against Theano C."""
    x = T.matrix('x', dtype='float32')
    n = x.shape[0]
    outs = [x * T.cast(n, 'float32'), x.mean(axis=0) + T.cast(n * x.shape[1], 'float32')]
    f_c, f_o = compile_both([x], outs)
    for rows in (3, 5, 3, 5, 3):
        xv = rand((rows, 4), 'float32')
        for a, b in zip(f_o(xv), f_c(xv)):
            assert_close(a, b)
    counts = theano_ocl.stats(f_o)
    assert counts['host_steps'] == 1 and counts['frames'] == 2, counts    # x's upload only


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'uint8'])
def test_float_arithmetic_on_shapes_is_a_constant_of_its_frame(dtype):
    """``T.mean``'s ``1 / cast(n)`` and other one-element float arithmetic on shapes runs on
    the host with the shapes, once per frame, and is a constant of that frame: no launch
    of its own, no host step on replay. Each input shape, the empty one included (a mean
    of nothing is nan, as in Theano C), gets its own value."""
    x = T.matrix('x', dtype=dtype)
    n = x.shape[0]
    outs = [x.mean(), x.mean(axis=0), x.sum(axis=1) / T.cast(x.shape[1], 'float32'),
            T.cast(x, 'float32') * (T.constant(2, dtype='float32') / T.cast(n, 'float32') + 1)]
    f_c, f_o = compile_both([x], outs)
    for rows in (3, 5, 0, 3, 5):
        xv = rand((rows, 4), dtype)
        with np.errstate(divide='ignore', invalid='ignore'):
            want = f_c(xv)
        got = f_o(xv)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_close(a, b, what='output %d, %d rows' % (k, rows))
    # a node runs on the device exactly where it reads x's values (not only its shape)
    def reads_values(node):
        return not isinstance(node.op, theano.compile.ops.Shape_i) and any(
            v.name == 'x' if v.owner is None else reads_values(v.owner) for v in node.inputs)
    rows = placements(f_o)
    wrong = [(str(node), place) for node, place, _ in rows
             if (place == 'device') != reads_values(node)]
    assert not wrong, wrong
    casts = [node for node, place, _ in rows
             if 'Cast' in str(node.op) and not reads_values(node)]
    assert casts, [str(node) for node, _, _ in rows]
    counts = theano_ocl.stats(f_o)
    assert counts['host_steps'] == 1 and counts['frames'] == 3, counts    # x's upload only
