"""Device arrays read and written in place where a call runs on the host
(``runtime/host_views.py``): on a CPU device whose buffers are host memory, a call that the
cost model sends to Theano's VM reads its device-array inputs where they lie and writes its
device outputs into pool buffers, with no download or upload; the cost model then weighs
functions with device outputs too, by the device's passes in a row.

Checked through the public API, ``theano_ocl.stats`` and ``report`` against Theano C (the
host runs Theano C's code: its bits), over dtypes, offset, strided, reversed and transposed
device arrays, 0-d and empty ones, a device kernel's result read at once, a host result read
by a device kernel at once, buffers let go and made again (their handles reused), buffers
too large to keep, and a device where the check fails (downloads and uploads as before).
Skipped on GPUs, where the host never reads a device buffer in place."""
import io

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import cost, host_views

DEV = theano_ocl.get_device()
pytestmark = pytest.mark.skipif(host_views.of(DEV) is None,
                                reason='the host reads buffers in place on CPU devices only')

# the cost model on, Theano C's code on the host (host_math's NumPy functions are checked
# in test_host_math)
ON = dict(cost_model='on', host_math='c')


@pytest.fixture
def host_wins(monkeypatch):
    """Every signature measured, and the host chosen (device outputs included)."""
    monkeypatch.setattr(cost, 'MARGIN', 1e9)
    monkeypatch.setattr(cost, 'WRITES_MARGIN', 1e9)
    monkeypatch.setattr(cost, 'PASSES_MARGIN', 1e9)


def _dev(a):
    import pyopencl.array as cla
    return cla.to_device(DEV.queue, np.require(a, requirements='C'))  # (0-d stays 0-d)


def _report(f):
    out = io.StringIO()
    theano_ocl.report(f, file=out, width=None)
    return out.getvalue()


LAYOUTS = {
    'contiguous': lambda a: a,
    'offset': lambda a: a[2:],
    'strided': lambda a: a[:, ::2],
    'reversed': lambda a: a[::-1],
    'transposed': lambda a: a.T,
}
DTYPES = ['float32', 'float64', 'int32', 'uint8', 'int64']


def _data(dtype, shape, seed=0):
    rng = np.random.RandomState(seed)
    if dtype == 'bool':
        return rng.rand(*shape) > 0.5
    return (rng.rand(*shape) * 100).astype(dtype)


@pytest.mark.parametrize('layout', sorted(LAYOUTS))
@pytest.mark.parametrize('dtype', DTYPES)
def test_device_arrays_in_and_out_as_theano_c(host_wins, dtype, layout):
    """A function of a device array with a device output, on the host from its first call:
    Theano C's values to the bit for every layout (the host reads the array where it lies),
    the outputs device arrays, no upload made by the call."""
    x = T.matrix('x', dtype=dtype)
    outs = [T.argmax(x, 1), (x * 2 + x[0]).sum(0), x.T * 3]
    f = theano.function([x], outs, mode=theano_ocl.OCLMode(outputs='device', **ON))
    g = theano.function([x], outs, mode='FAST_RUN')
    for call in range(3):
        host = _data(dtype, (7, 6), seed=call)
        d = LAYOUTS[layout](_dev(host))
        want = g(LAYOUTS[layout](host))
        got = f(d)
        for j, (a, b) in enumerate(zip(got, want)):
            assert hasattr(a, 'get'), 'output %d is not a device array' % j
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a.get(), b, err_msg='call %d output %d' % (call, j))
        stats = theano_ocl.stats(f)
        assert stats['on_host'] is True
        assert stats['last_call']['uploads'] == 0
    assert 'input signature 0 on the host' in _report(f)


def test_bool_0d_and_empty_device_arrays(host_wins):
    """A 0-d device array, an empty one and a boolean one in, 0-d and empty results out."""
    x = T.fscalar('x')
    e = T.fmatrix('e')
    b = T.matrix('b', dtype='bool')
    outs = [x * 2, e.sum(0) + x, T.xor(b, b[0]), e * 3]
    f = theano.function([x, e, b], outs, mode=theano_ocl.OCLMode(outputs='device', **ON))
    g = theano.function([x, e, b], outs, mode='FAST_RUN')
    xv = np.float32(1.5)
    for rows in (0, 3):
        ev = _data('float32', (rows, 4))
        bv = _data('bool', (5, 2))
        got = f(_dev(np.asarray(xv)), _dev(ev), _dev(bv))
        for j, (a, w) in enumerate(zip(got, g(xv, ev, bv))):
            assert a.shape == w.shape, j
            np.testing.assert_array_equal(a.get(), w, err_msg='output %d' % j)
    assert theano_ocl.stats(f)['on_host'] is True


def test_a_device_kernels_result_read_at_once_and_a_host_result_by_a_kernel(host_wins):
    """A device function's output (its kernel queued, not waited for) is read by a host
    function at once, whose output a device kernel reads at once: each sees the other's
    values, over many rounds with fresh data."""
    x = T.fvector('x')
    on_device = theano.function([x], T.sqrt(x) + 1, mode=theano_ocl.OCLMode(
        outputs='device', cost_model='off'))
    on_host = theano.function([x], x[::-1] * 3 - x, mode=theano_ocl.OCLMode(outputs='device',
                                                                            **ON))
    c_dev = theano.function([x], T.sqrt(x) + 1, mode='FAST_RUN')
    c_host = theano.function([x], x[::-1] * 3 - x, mode='FAST_RUN')
    rng = np.random.RandomState(3)
    for round_ in range(30):
        v = rng.rand(50000).astype('float32')
        y = on_device(_dev(v))
        z = on_host(y)
        w = on_device(z * 0 + z)            # (pyopencl's kernels, then ours)
        want_y = c_dev(v)
        want_z = c_host(want_y)
        np.testing.assert_allclose(z.get(), want_z, rtol=1e-6, err_msg='round %d' % round_)
        np.testing.assert_allclose(w.get(), c_dev(want_z), rtol=1e-6)
    assert theano_ocl.stats(on_host)['on_host'] is True
    assert theano_ocl.stats(on_device)['on_host'] is False


def test_buffers_let_go_and_made_again(host_wins, monkeypatch):
    """Device arrays made and let go call after call (a driver may hand a new buffer an
    old one's handle), fewer kept than in use, and one too large to keep: every call reads
    the values of the array it was given."""
    monkeypatch.setattr(host_views, 'KEEP', 2)
    x = T.fmatrix('x')
    f = theano.function([x], x.max(1) - x.min(1), mode=theano_ocl.OCLMode(outputs='device',
                                                                          **ON))
    g = theano.function([x], x.max(1) - x.min(1), mode='FAST_RUN')
    held = []
    for call in range(24):
        v = _data('float32', (16, 64), seed=call)
        d = _dev(v)
        if call % 3 == 0:
            held.append(d)          # (some kept alive by the caller, most let go)
        np.testing.assert_array_equal(f(d).get(), g(v), err_msg='call %d' % call)
        del d
    for k, d in enumerate(held):
        np.testing.assert_array_equal(f(d).get(), g(d.get()), err_msg='held %d' % k)
    monkeypatch.setattr(host_views, 'KEEP_BYTES', 1024)
    for call in range(3):
        v = _data('float32', (16, 64), seed=100 + call)
        np.testing.assert_array_equal(f(_dev(v)).get(), g(v))
    assert theano_ocl.stats(f)['on_host'] is True


def test_host_outputs_of_device_inputs_and_an_update(host_wins):
    """Host outputs of a device-array input with a shared variable's update: Theano C's
    bits, the update committed once a call."""
    def build(mode):
        x = T.dmatrix('x')
        s = theano.shared(np.zeros(5), 's')
        return theano.function([x], (x * s).sum(), updates=[(s, s + x.mean(0))],
                               mode=mode), s
    f, s = build(theano_ocl.OCLMode(**ON))
    g, sc = build('FAST_RUN')
    for call in range(4):
        v = _data('float64', (9, 5), seed=call) / 100
        assert f(_dev(v)) == g(v)
        np.testing.assert_array_equal(s.get_value(), sc.get_value())
    assert theano_ocl.stats(f)['on_host'] is True


def test_mismatched_shapes_raise_as_theano_c(host_wins):
    """Device arrays whose shapes do not match raise Theano C's ValueError."""
    x, y = T.fmatrix('x'), T.fmatrix('y')
    f = theano.function([x, y], x + y, mode=theano_ocl.OCLMode(outputs='device', **ON))
    g = theano.function([x, y], x + y, mode='FAST_RUN')
    a, b = _data('float32', (3, 4)), _data('float32', (3, 4), seed=1)
    np.testing.assert_array_equal(f(_dev(a), _dev(b)).get(), g(a, b))
    bad = _data('float32', (2, 4))
    with pytest.raises(ValueError):
        g(a, bad)
    with pytest.raises(ValueError):
        f(_dev(a), _dev(bad))


def test_a_device_without_in_place_access_downloads_and_uploads(host_wins, monkeypatch):
    """Where the check of a device's buffers fails, a host call downloads its device
    inputs and uploads its device outputs (and the cost model leaves functions with device
    outputs to the device): the same values."""
    monkeypatch.setattr(DEV, 'host_views', None)
    x = T.fvector('x')
    f = theano.function([x], (x * 2).sum(), mode=theano_ocl.OCLMode(**ON))
    h = theano.function([x], x * 2, mode=theano_ocl.OCLMode(outputs='device', **ON))
    v = _data('float32', (300,))
    assert f(_dev(v)) == theano.function([x], (x * 2).sum(), mode='FAST_RUN')(v)
    assert theano_ocl.stats(f)['on_host'] is True
    np.testing.assert_array_equal(h(_dev(v)).get(), v * 2)
    assert theano_ocl.stats(h)['on_host'] is False


def test_device_outputs_are_decided_by_the_devices_passes_in_a_row():
    """Without forcing: a function with device outputs is measured both ways before its
    first call returns, and goes where ``WRITES_MARGIN`` says for the report's times."""
    import re
    x = T.fvector('x')
    f = theano.function([x], T.exp(x) * 2, mode=theano_ocl.OCLMode(outputs='device', **ON))
    v = np.linspace(-1, 1, 1 << 16).astype('float32')
    np.testing.assert_allclose(f(_dev(v)).get(), np.exp(v) * 2, rtol=1e-6)
    text = _report(f)
    got = re.search(r"measured, the host's calls took ([0-9.]+) us, the device's ([0-9.]+) us",
                    text)
    assert got is not None, text
    host_us, dev_us = float(got.group(1)), float(got.group(2))
    on_host = theano_ocl.stats(f)['on_host']
    assert ('input signature 0 on the host' in text) == on_host, text
    line = cost.WRITES_MARGIN * dev_us
    if abs(host_us - line) > 2:       # (the report rounds to whole microseconds)
        assert on_host == (host_us <= line), text


def test_arrays_of_the_callers_own_pool(host_wins):
    """Device arrays from a memory pool of the caller's own, which gives its buffers back
    to the driver between calls (a later buffer may get a released one's handle with other
    memory behind it, the stale address planted here): every call reads the values of the
    array it was given."""
    import pyopencl.array as cla
    import pyopencl.tools as clt
    pool = clt.MemoryPool(clt.ImmediateAllocator(DEV.queue))
    x = T.fmatrix('x')
    f = theano.function([x], x.sum(1) * 2, mode=theano_ocl.OCLMode(outputs='device', **ON))
    g = theano.function([x], x.sum(1) * 2, mode='FAST_RUN')
    # (whether this driver hands a released handle out again is its own affair: every other
    # call, the address a reused handle would still have is planted for the array's handle,
    # that of a decoy buffer of other values)
    decoy = cla.to_device(DEV.queue, np.full(4096, 5, np.float32))
    known = host_views.addresses(DEV).known
    spacers = []        # (driver allocations between the calls: the memory moves)
    for call in range(24):
        v = _data('float32', (8 + call % 3, 64), seed=call)
        d = cla.to_device(DEV.queue, v, allocator=pool)
        planted = [d.base_data.int_ptr] if call % 2 else []
        try:
            for h in planted:
                known[h] = host_views.mapped_address(DEV, decoy.base_data)
            np.testing.assert_array_equal(f(d).get(), g(v), err_msg='call %d' % call)
        finally:
            for h in planted:       # (the handles come back as the device pool's buffers')
                known.pop(h, None)
        del d
        pool.free_held()
        spacers.append(cla.empty(DEV.queue, (1024 * (call % 5 + 1),), np.float32))
    assert theano_ocl.stats(f)['on_host'] is True
