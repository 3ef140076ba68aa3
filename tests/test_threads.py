"""Python threads (issue 15, item 5): one function called from several threads gives every
caller its own result and loses no update (calls are serialized per function); different
functions run in different threads at the same time."""
import threading

import numpy as np
import theano
import theano.tensor as T

import theano_ocl
from helpers import assert_close


def _run_threads(target, n):
    errors = []

    def wrapped(k):
        try:
            target(k)
        except BaseException as e:      # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=wrapped, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def _counting(mode, size=64):
    x = T.lvector('x')
    c = theano.shared(np.int64(0), 'c')
    total = theano.shared(np.int64(0), 'total')
    s = theano.shared(np.zeros(size, 'int64'), 's')
    f = theano.function([x], [x * 3 + 1, x.sum()],
                        updates=[(c, c + 1), (total, total + x.sum()), (s, s + x)], mode=mode)
    return f, c, total, s


def test_one_function_from_several_threads():
    f, c, total, s = _counting(theano_ocl.OCLMode())
    n_threads, calls = 4, 250
    rng = np.random.RandomState(0)
    xs = rng.randint(-50, 50, size=(n_threads, calls, 64)).astype('int64')
    wrong = []

    def work(k):
        for j in range(calls):
            x = xs[k, j]
            out, sm = f(x)
            if not np.array_equal(out, x * 3 + 1) or int(sm) != int(x.sum()):
                wrong.append((k, j))
    _run_threads(work, n_threads)
    assert not wrong, '%d of %d results belong to another call' % (len(wrong),
                                                                    n_threads * calls)
    assert int(c.get_value()) == n_threads * calls
    assert int(total.get_value()) == int(xs.sum())
    assert np.array_equal(s.get_value(), xs.sum(axis=(0, 1)))


def test_different_functions_in_different_threads():
    n = 4
    fns = [_counting(theano_ocl.OCLMode(), size=16 + k) for k in range(n)]
    rng = np.random.RandomState(1)
    xs = [rng.randint(-9, 9, size=(100, 16 + k)).astype('int64') for k in range(n)]
    results = [[] for _ in range(n)]

    def work(k):
        f = fns[k][0]
        for x in xs[k]:
            results[k].append(f(x)[0])
    _run_threads(work, n)
    for k, (f, c, total, s) in enumerate(fns):
        for x, out in zip(xs[k], results[k]):
            assert_close(out, x * 3 + 1)
        assert int(c.get_value()) == len(xs[k])
        assert np.array_equal(s.get_value(), xs[k].sum(axis=0))


def test_a_shared_variable_updated_by_two_functions_in_two_threads():
    """Each call is serialized with itself only; two functions updating one shared
    variable concurrently still never lose its device copy (every call commits whole)."""
    x = T.fvector('x')
    s = theano.shared(np.zeros(8, 'float32'), 's')
    f = theano.function([x], s.sum(), updates=[(s, s + x)], mode=theano_ocl.OCLMode())
    g = theano.function([x], s.sum(), updates=[(s, s - x)], mode=theano_ocl.OCLMode())
    ones = np.ones(8, 'float32')
    lock = threading.Lock()            # the user's own lock around the shared state

    def work(k):
        fn = f if k % 2 == 0 else g
        for _ in range(100):
            with lock:
                fn(ones)
    _run_threads(work, 4)
    assert_close(s.get_value(), np.zeros(8, 'float32'))
