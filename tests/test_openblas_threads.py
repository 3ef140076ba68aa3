"""OpenBLAS's idle threads sleep in a process with theano_ocl, also in a library loaded
before Theano (NumPy's, in a script importing numpy first): ``theano_ocl/_openblas.py``.

Each case runs a fresh interpreter (the setting is read when a library loads), without
``OPENBLAS_THREAD_TIMEOUT`` in its environment unless the case sets it."""
import json
import os
import subprocess
import sys

import pytest

_PROBE = r'''
import ctypes, importlib.util, json, os, sys
import numpy as np
# (by file: importing the theano_ocl package would run the start-up hook now)
spec = importlib.util.spec_from_file_location('probe_openblas', os.path.join('theano_ocl',
                                                                              '_openblas.py'))
_openblas = importlib.util.module_from_spec(spec)
spec.loader.exec_module(_openblas)

def timeouts():
    out = {}
    for path in _openblas.loaded_libraries():
        lib = ctypes.CDLL(path, mode=os.RTLD_NOLOAD)
        fn = getattr(lib, 'openblas_thread_timeout', None)
        if fn is not None and getattr(lib, 'blas_thread_shutdown_', None) is not None:
            out[os.path.basename(path)] = fn()
    return out

rng = np.random.RandomState(0)
a, b = rng.rand(300, 200), rng.rand(200, 250)
before = timeouts()
first = a.dot(b)                    # (NumPy's threads started with its own setting)
import theano_ocl, theano           # the start-up hook runs here (the .pth's, or theano_ocl's)
import scipy.linalg.blas            # (a library loaded after it)
after = timeouts()
again = a.dot(b)                    # (its threads started again)
ref = sum(a[:, k:k + 1] * b[k:k + 1, :] for k in range(200))
print(json.dumps(dict(before=before, after=after, env=os.environ.get('OPENBLAS_THREAD_TIMEOUT'),
                      same=bool((first == again).all()),
                      close=float(abs(again - ref).max()))))
'''


def _run(env_value):
    env = {k: v for k, v in os.environ.items() if k != 'OPENBLAS_THREAD_TIMEOUT'}
    if env_value is not None:
        env['OPENBLAS_THREAD_TIMEOUT'] = env_value
    out = subprocess.run([sys.executable, '-c', _PROBE], env=env, capture_output=True,
                         text=True, timeout=300,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_library_loaded_before_theano_sleeps_when_idle():
    got = _run(None)
    if not got['before']:
        pytest.skip('no pthread OpenBLAS with openblas_read_env loaded by numpy here')
    assert got['env'] == '4'
    # NumPy's library read its default (0: OpenBLAS's built-in timeout) when it loaded,
    # and the setting once theano was imported; every library loaded later reads it too
    assert all(v == 0 for v in got['before'].values()), got
    assert got['after'] and all(v == 4 for v in got['after'].values()), got
    # its threads stopped and started again: products as before
    assert got['same'] and got['close'] < 1e-10, got


def test_the_users_setting_is_kept():
    got = _run('9')
    if not got['before']:
        pytest.skip('no pthread OpenBLAS with openblas_read_env loaded by numpy here')
    assert got['env'] == '9'
    assert all(v == 9 for v in got['before'].values()), got
    assert all(v == 9 for v in got['after'].values()), got
