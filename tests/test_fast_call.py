"""Theano's Function.__call__ on an OCL function (theano_ocl/fast_call.py): every part of
Theano's call contract holds where the call decided its work once."""
import re

import numpy as np
import pytest
import theano
import theano.tensor as T
from theano import In

import theano_ocl
from theano_ocl import fast_call
from helpers import assert_close


def ocl(**kw):
    return theano_ocl.OCLMode(**kw)


def both(inputs, outputs, **kw):
    return (theano.function(inputs, outputs, mode=ocl(), **kw),
            theano.function(inputs, outputs, mode='FAST_RUN', **kw))


def test_positional_calls_take_the_decided_path_and_agree():
    x, y = T.fmatrix('x'), T.ivector('y')
    fns = []
    for mode in (ocl(), 'FAST_RUN'):
        w = theano.shared(np.ones((3, 4), 'float32'), 'w')
        outs = [T.dot(x, w).sum(axis=1) + y, (x ** 2).mean()]
        fns.append((theano.function([x, y], outs, updates=[(w, w * np.float32(0.5))], mode=mode),
                    w))
    (f, wf), (g, wg) = fns
    rng = np.random.RandomState(0)
    for _ in range(3):
        xv, yv = rng.rand(5, 3).astype('float32'), rng.randint(-3, 3, 5).astype('int32')
        for a, b in zip(f(xv, yv), g(xv, yv)):
            assert_close(a, b)
        assert_close(wf.get_value(), wg.get_value())
    assert callable(f._ocl_call)
    # the explicit inputs' cells are cleared after the call, as Theano clears them
    assert all(c.storage[0] is None for c in f.input_storage[:2])
    assert f.maker.mode.call_time > 0 and f.maker.mode.fn_time > 0


def test_unpack_single_and_return_none():
    x = T.dvector('x')
    a = np.arange(2.0)
    got = []
    for mode in (ocl(), 'FAST_RUN'):
        s = theano.shared(np.zeros(2), 's')
        one = theano.function([x], x * 2, mode=mode)
        listed = theano.function([x], [x * 2], mode=mode)
        none = theano.function([x], None, updates=[(s, s + x)], mode=mode)
        empty = theano.function([x], [], updates=[(s, s + x)], mode=mode)
        assert isinstance(one(a), np.ndarray)
        assert isinstance(listed(a), list) and len(listed(a)) == 1
        got.append((none(a), empty(a)))
        none.return_none = True              # (what Theano's call honours)
        assert none(a) is None
        assert_close(s.get_value(), 3 * a)
    assert got[0] == got[1]


@pytest.mark.parametrize('bad', ['dtype', 'ndim', 'count', 'missing'])
def test_bad_calls_raise_theano_errors(bad):
    x, y = T.fvector('x'), T.fvector('y')
    f, g = both([x, y], x + y)
    v = np.ones(3, 'float32')
    args = {'dtype': (v, np.ones(3, 'float64')), 'ndim': (v, np.ones((3, 1), 'float32')),
            'count': (v, v, v), 'missing': (v,)}[bad]
    errors = []
    for fn in (g, f):
        with pytest.raises(TypeError) as e:
            fn(*args)
        errors.append(re.sub(r'\.py:\d+', '.py', str(e.value)))   # where each was made
    assert errors[0] == errors[1]
    assert_close(f(v, v), 2 * v)      # still usable


def test_numpy_scalars_are_taken_as_theanos_filter_takes_them():
    # a NumPy scalar of an input's exact dtype, a Python int the dtype holds, a Python
    # float for a float64 input: the 0-d array Theano's filter makes of it (NaN and
    # infinities too); any other (another dtype, a lossy value, an int out of range, a 1-d
    # array, a scalar for a strict input) goes through the filter: its errors
    x, n, h, i, s = (T.dscalar('x'), T.lscalar('n'), T.fscalar('h'), T.bscalar('i'),
                     T.fscalar('s'))
    f, g = both([x, n, In(h, strict=True), i, s],
                [x * n + 1, h * 2, x.shape.sum(), i * 2, s + 1])
    f32 = np.asarray(2, 'float32')
    args = [(np.float64(1.5), np.int64(3), f32, np.int8(3), np.float32(0.5)),
            (np.float64('nan'), np.int64(-2), f32, -128, 16777216),
            (float('nan'), 2 ** 63 - 1, f32, 127, -16777216),
            (np.float64('inf'), np.int32(7), f32, np.uint8(3), 0.5),
            (float('-inf'), -2 ** 63, f32, np.int16(5), np.float64(0.25)),
            (np.float32(0.25), np.uint8(200), f32, True, 3),
            (2, np.int64(5), f32, 0, float('inf'))]
    for a in args:
        got, want = f(*a), g(*a)
        for u, v in zip(got, want):
            assert type(u) is type(v) and u.dtype == v.dtype and u.shape == v.shape
            np.testing.assert_array_equal(u, v)
    ok = (np.float64(1), np.int64(1), f32, 1, 1.0)
    raised = 0
    for k, other in [(1, np.float64(2.5)), (1, 2 ** 63), (1, 2.0), (2, np.float32(1)),
                     (0, np.asarray([1.0])), (3, 128), (3, -129), (4, 16777217), (4, 0.1)]:
        a = ok[:k] + (other,) + ok[k + 1:]
        outcomes = []
        for fn in (f, g):
            try:
                outcomes.append([v.tolist() for v in fn(*a)])
            except Exception as e:      # noqa: BLE001 - compared below
                outcomes.append((type(e), str(e).split('\n')[0][:60]))
        assert outcomes[0] == outcomes[1], (k, other, outcomes)
        raised += type(outcomes[0]) is tuple
    assert raised == 8
    assert callable(f._ocl_call)


def test_keyword_defaults_and_trust_input_take_theanos_call():
    x, y = T.dvectors('x', 'y')
    f, g = both([x, In(y, value=np.ones(3), name='yy')], x + y)
    a = np.arange(3.0)
    assert_close(f(a), g(a))
    assert_close(f(a, yy=np.full(3, 2.0)), a + 2)
    assert f.__dict__.get('_ocl_call') is False
    h = theano.function([x, y], x * y, mode=ocl())
    h.trust_input = True
    assert_close(h(a, a), a * a)
    assert '_ocl_call' not in h.__dict__


def test_profiled_functions_count_their_calls():
    x = T.dvector('x')
    f = theano.function([x], x + 1, mode=ocl(), profile=True)
    for _ in range(3):
        f(np.zeros(2))
    assert f._ocl_call is False
    assert f.profile.fct_callcount == 3


def test_aliased_inputs_of_one_type_are_copied_as_theano_copies_them(monkeypatch):
    """Two borrowed inputs of the very same type object given one array: Theano copies the
    second; inputs of distinct types are never compared (Theano's rule); without a borrowed
    or mutable input nothing is compared."""
    vec = T.TensorType('float64', (False,))
    a, b = vec('a'), vec('b')
    c = T.dvector('c')
    f = theano.function([In(a, borrow=True), In(b, borrow=True), c], [a * 2, b * 3 + c],
                        mode=ocl())
    assert [i for i, _ in fast_call._aliasing_candidates(f)] == [0, 1]
    copies = []
    orig = fast_call.copy.copy
    monkeypatch.setattr(fast_call.copy, 'copy', lambda v: copies.append(v) or orig(v))
    v = np.arange(4.0)
    r = f(v, v, v)
    assert len(copies) == 1 and copies[0] is v
    assert_close(r[0], 2 * v)
    assert_close(r[1], 4 * v)
    f(v, v.copy(), v)
    assert len(copies) == 1
    plain = theano.function([a, b], a + b, mode=ocl())
    assert fast_call._aliasing_candidates(plain) == []
    assert_close(plain(v, v), 2 * v)


def test_errors_in_the_call_name_the_node():
    x, y = T.lvectors('x', 'y')
    f = theano.function([x, y], x // y, mode=ocl())
    with pytest.raises(ZeroDivisionError) as e:
        f(np.arange(3), np.zeros(3, 'int64'))
    assert 'Apply node that caused the error' in str(e.value)
    assert_close(f(np.arange(3), np.ones(3, 'int64')), np.arange(3))
