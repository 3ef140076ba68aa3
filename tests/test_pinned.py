"""Host outputs downloaded into page-locked blocks (theano_ocl/runtime/pinned.py): the same
values as plain arrays and Theano C's, never written over while the caller holds them,
blocks reused once the caller lets them go."""
import gc

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import pinned as pinned_mod
from helpers import assert_close, rand


def device_dtypes():
    dev = theano_ocl.get_device()
    return [d for d in ('float32', 'float64', 'int8', 'uint16', 'int64', 'bool', 'float16')
            if dev.supports_dtype(d)]


def _leased(a):
    base = a
    while base is not None and not isinstance(base, pinned_mod._Lease):
        base = getattr(base, 'base', None)
    return base is not None


def _fns(inputs, outputs):
    return [theano.function(inputs, outputs, mode=m) for m in
            ('FAST_RUN', theano_ocl.OCLMode(pinned='always', stage_inputs='always'),
             theano_ocl.OCLMode(pinned='off', stage_inputs='off'))]


@pytest.mark.parametrize('dtype', device_dtypes())
def test_pinned_outputs_hold_the_values(dtype):
    x = T.matrix('x', dtype=dtype)
    flag = dtype == 'bool'
    outs = [~x if flag else x * 2, x.T, x[::-1, ::2], x.any(axis=0) if flag else x.sum(axis=0)]
    f_c, f_p, f_o = _fns([x], outs)
    for shape in ((160, 120), (3, 5), (0, 7), (1, 40000)):
        v = rand(shape, dtype)
        want = f_c(v)
        got_p, got_o = f_p(v), f_o(v)
        for k, (w, p, o) in enumerate(zip(want, got_p, got_o)):
            assert_close(p, w, what='pinned output %d %s' % (k, shape))
            assert_close(o, w, what='plain output %d %s' % (k, shape))
            assert p.flags.c_contiguous and p.flags.writeable
            assert _leased(p) == (p.nbytes >= pinned_mod.MIN_BYTES)
            assert not _leased(o)


def test_held_outputs_are_never_written_over_and_blocks_come_back():
    x = theano.shared(np.zeros(50000, 'float32'), 'x')
    y = T.fvector('y')
    f = theano.function([y], T.exp(x + y), mode=theano_ocl.OCLMode(pinned='always'))
    pool = theano_ocl.stats(f)['device'].pinned
    rng = np.random.RandomState(0)
    ins = [rng.rand(50000).astype('float32') for _ in range(6)]
    held = [f(v) for v in ins]
    views = [h[10:20] for h in held]
    for h, v in zip(held, ins):
        assert_close(h, np.exp(v))
    made = pool.made
    assert made >= len(held)
    del held
    gc.collect()
    for v in ins:
        f(v)
    # the views kept their blocks: their values are intact after six more calls
    for w, v in zip(views, ins):
        assert_close(w, np.exp(v[10:20]))
    del views
    gc.collect()
    reused = pool.reused
    for v in ins:
        assert_close(f(v), np.exp(v))
    assert pool.reused >= reused + len(ins) - 1
    assert pool.made <= made + 2


def test_a_full_pool_hands_out_plain_arrays(monkeypatch):
    # outputs are plain arrays; big inputs go from the caller's array, as without blocks
    x = T.fvector('x')
    f = theano.function([x], x * 3, mode=theano_ocl.OCLMode(pinned='always',
                                                            stage_inputs='always'))
    pool = theano_ocl.stats(f)['device'].pinned
    monkeypatch.setattr(pool, 'cap', pool.held)      # no room for another block
    pool.release()
    monkeypatch.setattr(pool, 'cap', pool.held)
    from theano_ocl.runtime import steps
    sources = []
    upload = steps.upload
    monkeypatch.setattr(steps, 'upload', lambda dev, q, d, host: sources.append(host) or
                        upload(dev, q, d, host))
    v = np.arange(40000, dtype='float32')
    made = pool.made + pool.reused
    outs = []
    for k in range(3):
        outs.append(f(v))
        assert any(np.shares_memory(h, v) for h in sources)       # no copy in between
        v = v + 1
    assert pool.made + pool.reused == made
    for k, o in enumerate(outs):
        assert not _leased(o)
        assert_close(o, (np.arange(40000, dtype='float32') + k) * 3)


def test_the_setting():
    with pytest.raises(ValueError) as e:
        theano_ocl.OCLMode(pinned='sometimes')
    assert 'pinned' in str(e.value) and "'gpu'" in str(e.value)
    with pytest.raises(ValueError) as e:
        theano_ocl.OCLMode(stage_inputs='yes')
    assert 'stage_inputs' in str(e.value) and "'off'" in str(e.value)
    x = T.fvector('x')
    f = theano.function([x], x + 1, mode=theano_ocl.OCLMode())
    out = f(np.zeros(40000, 'float32'))
    assert _leased(out) == theano_ocl.get_device().is_gpu     # the default: GPUs only
    assert_close(out, np.ones(40000, 'float32'))


@pytest.mark.parametrize('dtype', device_dtypes())
def test_inputs_staged_through_page_locked_blocks(dtype):
    # an input of at least MIN_BYTES is copied into a block the upload step keeps, and the
    # device reads it from there: the values of Theano C, with strided inputs, the caller's
    # array changed between calls (and right after a call returning device arrays); one
    # block per big input, taken at the first call only
    x, y = T.matrix('x', dtype=dtype), T.matrix('y', dtype=dtype)
    flag = dtype == 'bool'
    out = (x ^ y) if flag else x * 2 + y
    red = out.any() if flag else out.sum(dtype='float64' if dtype == 'float16' else None)
    outs = [out[:2], red]        # small outputs: the pool's blocks count staged inputs only
    f_c = theano.function([x, y], outs, mode='FAST_RUN')
    f_p = theano.function([x, y], outs, mode=theano_ocl.OCLMode(stage_inputs='always'))
    f_d = theano.function([x, y], out, mode=theano_ocl.OCLMode(stage_inputs='always',
                                                               outputs='device'))
    pool = theano_ocl.stats(f_p)['device'].pinned
    rng = np.random.RandomState(3)
    big = rand((300, 200), dtype, rng)
    assert big.nbytes >= pinned_mod.MIN_BYTES or big.dtype.itemsize == 1
    if big.nbytes < pinned_mod.MIN_BYTES:
        big = rand((600, 200), dtype, rng)
    small = rand((big.shape[0], big.shape[1]), dtype, rng)[:4]
    taken = pool.made + pool.reused
    for k in range(3):
        xs = rand((big.shape[1], big.shape[0] * 2), dtype, rng)[:, ::2].T     # strided
        v = big
        want = f_c(v, xs)
        got = f_p(v, xs)
        assert_close(got[0], want[0], what='call %d output' % k)
        assert_close(got[1], want[1], what='call %d sum' % k, rtol=1e-3)
        if k == 0:
            assert pool.made + pool.reused - taken >= 2     # both inputs staged
            taken = pool.made + pool.reused
        big[:] = rand(big.shape, dtype, rng)                   # the caller's array changes
    assert pool.made + pool.reused == taken                    # no block taken again
    # small inputs go as they are; a device result is not changed by the caller's writes
    assert_close(f_p(small, small)[0], f_c(small, small)[0])
    keep = big.copy()
    d = f_d(big, keep)
    big[:] = rand(big.shape, dtype, rng)
    f_full = theano.function([x, y], out, mode='FAST_RUN')
    assert_close(d.get(), f_full(keep, keep))
