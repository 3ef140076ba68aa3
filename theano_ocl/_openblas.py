"""OpenBLAS threads that sleep when idle, in libraries loaded before theano_ocl set it.

OpenBLAS's worker threads spin for 2^28 cycles (about 0.1 s) after each threaded call
before they sleep: on a machine with few cores they take the cores from whatever runs next
(PoCL's threads, and another OpenBLAS's threads: NumPy and SciPy each load their own).
``OPENBLAS_THREAD_TIMEOUT=4`` makes them sleep at once, but an OpenBLAS reads it when it
loads, and most scripts ``import numpy`` before Theano: NumPy's OpenBLAS then keeps its
spinning threads. Measured on the 2-core EPYC (2026-12-02, NumPy 1.23.5's OpenBLAS 0.3.20
and SciPy 1.15's 0.3.28, 256x256 float32 products): ``numpy.dot`` 310-330 us alone,
800-1,900 us when calls alternate with SciPy's ``sgemm``, the pair as fast as alone once
both libraries' threads sleep when idle.

:func:`quiet_loaded` applies the setting to the OpenBLAS libraries already in the process:
``openblas_read_env`` reads the environment again, and ``blas_thread_shutdown_`` (the
library's own pre-fork handler) stops the idle threads; the next threaded call starts them
again with the new timeout, as after a fork. Only pthread builds (an OpenMP build's threads
are OpenMP's, and ignore the setting), and only libraries that export both functions.

Loaded by file from ``_startup.py`` (standard library only: it runs inside ``import
theano``). Call it while no other thread is inside a BLAS call (at import).
"""
import ctypes
import os

#: OpenBLAS's ``openblas_get_parallel`` value for a pthread build
_PTHREADS = 1


def mapped_libraries(word):
    """Paths of the shared libraries mapped into this process whose file name contains
    ``word`` (lower case; Linux's ``/proc/self/maps``; [] elsewhere)."""
    try:
        with open('/proc/self/maps') as f:
            paths = {parts[5].strip() for parts in (line.split(None, 5) for line in f)
                     if len(parts) == 6}
    except OSError:
        return []
    return sorted(p for p in paths if word in os.path.basename(p).lower() and '.so' in p)


def loaded_libraries():
    """Paths of the OpenBLAS libraries mapped into this process."""
    return mapped_libraries('openblas')


def _parallel(lib):
    """The library's ``openblas_get_parallel`` (suffixed in an ILP64 or SciPy build)."""
    for name in ('openblas_get_parallel', 'openblas_get_parallel64_',
                 'scipy_openblas_get_parallel'):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            return fn()
    return None


def quiet_loaded():
    """Make the idle threads of every OpenBLAS already loaded sleep as
    ``OPENBLAS_THREAD_TIMEOUT`` (set by the caller) says. Returns the paths it changed."""
    done = []
    for path in loaded_libraries():
        try:
            lib = ctypes.CDLL(path, mode=getattr(os, 'RTLD_NOLOAD', 0) | os.RTLD_LOCAL)
        except OSError:
            continue
        read, stop = (getattr(lib, n, None) for n in ('openblas_read_env',
                                                      'blas_thread_shutdown_'))
        if read is None or stop is None or _parallel(lib) != _PTHREADS:
            continue
        read()
        stop()
        done.append(path)
    return done
