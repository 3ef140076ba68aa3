"""The one comparison helper every op-family test uses: Theano C vs theano_ocl."""
import numpy as np
import theano

import theano_ocl

RTOL = {'float16': 2e-3, 'float32': 1e-5, 'float64': 1e-12,
        'complex64': 1e-5, 'complex128': 1e-12}
ATOL = {'float16': 1e-3, 'float32': 1e-6, 'float64': 1e-12,
        'complex64': 1e-6, 'complex128': 1e-12}


def setting(monkeypatch, name, value):
    """Set theano_ocl's setting ``name`` (``runtime.settings``) for functions linked from
    now on in this test, through its environment variable (None: its default)."""
    from theano_ocl.runtime.settings import SPECS
    var = SPECS[name].var
    if value is None:
        monkeypatch.delenv(var, raising=False)
    else:
        monkeypatch.setenv(var, str(value))


def ocl_mode():
    return theano_ocl.OCLMode()


def compile_both(inputs, outputs, updates=None, excluding=(), reference='FAST_RUN', **kwargs):
    """(reference function, OCL function): the reference by Theano C, or by ``reference``
    (a mode: ``Mode(linker='py')`` where Theano C's own code is wrong); ``excluding``:
    optimizations both leave out."""
    mode_c, mode_o = theano.compile.mode.get_mode(reference), ocl_mode()
    if excluding:
        mode_c, mode_o = mode_c.excluding(*excluding), mode_o.excluding(*excluding)
    f_c = theano.function(inputs, outputs, updates=updates, mode=mode_c, **kwargs)
    f_o = theano.function(inputs, outputs, updates=updates, mode=mode_o, **kwargs)
    return f_c, f_o


def assert_close(got, want, dtype=None, rtol=None, atol=None, what='output'):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, '%s: dtype %s, Theano C gives %s' % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, '%s: shape %s, Theano C gives %s' % (what, got.shape, want.shape)
    dt = str(want.dtype)
    if dt.startswith('float') or dt.startswith('complex'):
        np.testing.assert_allclose(got, want, rtol=rtol or RTOL[dt], atol=atol or ATOL[dt],
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def assert_matches_c(inputs, outputs, values, updates=None, rtol=None, atol=None,
                   device_only=True, calls=2, excluding=(), names=None, reference='FAST_RUN',
                   **kwargs):
    """Compile with Theano C (or ``reference``: :func:`compile_both`) and with OCL, call
    both ``calls`` times, compare every output.

    ``device_only``: also assert no node fell back to the host; ``names``: the outputs'
    names in failure messages (default 'output K').
    Returns the OCL function.
    """
    f_c, f_o = compile_both(inputs, outputs, updates=updates, excluding=excluding,
                            reference=reference, **kwargs)
    if device_only:
        fb = theano_ocl.fallback_nodes(f_o)
        assert not fb, 'nodes fell back to the host: %s' % [str(n) for n in fb]
    for _ in range(calls):
        want = f_c(*values)
        got = f_o(*values)
        if not isinstance(want, (list, tuple)):
            want, got = [want], [got]
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, rtol=rtol, atol=atol,
                         what=names[k] if names else 'output %d' % k)
    return f_o


def rand(shape, dtype, rng=None, low=-3, high=3):
    rng = rng or np.random.RandomState(42)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.rand(*shape) > 0.5
    if dtype.kind in 'iu':
        lo = max(low, np.iinfo(dtype).min)
        return rng.randint(lo, high + 1, size=shape).astype(dtype)
    if dtype.kind == 'c':
        return (rng.uniform(low, high, size=shape)
                + 1j * rng.uniform(low, high, size=shape)).astype(dtype)
    return rng.uniform(low, high, size=shape).astype(dtype)
