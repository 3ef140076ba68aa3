"""The C library's vector math (glibc's ``libmvec``) for the host VM's elementwise nodes.

NumPy's ``tanh``, ``exp``, ``log`` ... are vector loops only on CPUs with AVX-512 (its SVML
dispatch, ``runtime/host_math.py``); elsewhere it calls the C library's scalar functions,
one element at a time, as Theano C's loop does. glibc (2.22 for exp, log, sin, cos; 2.35
for the rest of :data:`C_NAMES`) also has vector versions of them, ``libmvec``, which a
compiler calls from a loop it vectorizes (``#pragma omp simd`` over functions declared
``omp declare simd``). This module builds such loops, one per function and float dtype,
into a small Python extension, once per CPU (``-march=native``) in Theano's compiledir,
and hands :mod:`.host_math` a function that runs one over a contiguous array.

Measured on the 2-core AMD EPYC (AVX2, glibc 2.36, 2026-12-02), 2,048 elements, libmvec /
NumPy (the C library's scalar loop): float64 tanh 9.4 / 31.6 us, exp 3.6 / 14.3, log1p
5.3 / 18.6, sin 5.4 / 34.9; float32 tanh 3.6 / 12.7, log1p 2.3 / 27.7; at most 3.8 ulp
from the exact result over every function of :data:`C_NAMES` (the C library's scalar ones:
at most 2.6).
"""
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import platform
import subprocess
import sys
import sysconfig
import tempfile
import threading
import warnings

from . import kernel_cache

#: NumPy's name of a function -> the C library's (float: with the suffix ``f``)
C_NAMES = {'tanh': 'tanh', 'exp': 'exp', 'log': 'log', 'log1p': 'log1p', 'expm1': 'expm1',
           'exp2': 'exp2', 'log2': 'log2', 'log10': 'log10', 'sin': 'sin', 'cos': 'cos',
           'tan': 'tan', 'arcsin': 'asin', 'arccos': 'acos', 'arctan': 'atan',
           'sinh': 'sinh', 'cosh': 'cosh', 'arcsinh': 'asinh', 'arccosh': 'acosh',
           'arctanh': 'atanh'}
#: the functions libmvec has had since glibc 2.22 (the rest came with 2.35)
_SINCE_2_22 = frozenset(['exp', 'log', 'sin', 'cos'])
_TYPES = (('float64', 'double', ''), ('float32', 'float', 'f'))
SUBDIR = 'theano_ocl_vecmath'
_MODULE = 'theano_ocl_vecmath'

_lock = threading.Lock()
_loaded = {}


def glibc_version():
    """(major, minor) of the C library when it is glibc, else None."""
    try:
        name, version = os.confstr('CS_GNU_LIBC_VERSION').split()
    except (AttributeError, ValueError, OSError):
        return None
    parts = version.split('.')
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


def names():
    """The functions this C library has vector versions of (empty: none, or not glibc)."""
    v = glibc_version()
    if v is None or v < (2, 22) or platform.machine() not in ('x86_64', 'AMD64'):
        return ()
    return tuple(n for n in C_NAMES if v >= (2, 35) or n in _SINCE_2_22)


def source(functions):
    """The extension's C source: per function and dtype a loop the compiler vectorizes
    (libmvec's versions declared ``omp declare simd``), and ``apply(k, x, out)`` running
    loop ``k`` (``2 * functions.index(name) + (dtype == 'float32')``) over the contiguous
    buffers ``x`` and ``out`` (the same length and item size; ``x`` may be ``out``)."""
    lines = ['#define PY_SSIZE_T_CLEAN', '#include <Python.h>', '']
    table = []
    for name in functions:
        for dtype, ctype, suffix in _TYPES:
            c = C_NAMES[name] + suffix
            loop = 'loop_%s_%s' % (name, dtype)
            lines += ['#pragma omp declare simd notinbranch',
                      '%s %s(%s);' % (ctype, c, ctype),
                      'static void %s(const void* xv, void* yv, Py_ssize_t n) {' % loop,
                      '    const %s* x = (const %s*)xv; %s* y = (%s*)yv;' % ((ctype,) * 4),
                      '#pragma omp simd',
                      '    for (Py_ssize_t i = 0; i < n; i++) y[i] = %s(x[i]);' % c,
                      '}']
            table.append((loop, 8 if dtype == 'float64' else 4))
    lines += ['',
              'typedef void (*loop_t)(const void*, void*, Py_ssize_t);',
              'static const loop_t LOOPS[] = {%s};' % ', '.join(t[0] for t in table),
              'static const Py_ssize_t ITEMSIZE[] = {%s};' % ', '.join(str(t[1]) for t in table),
              'static const Py_ssize_t N_LOOPS = %d;' % len(table),
              r'''
static PyObject* apply(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "apply(k, x, out)");
        return NULL;
    }
    Py_ssize_t k = PyLong_AsSsize_t(args[0]);
    if (k == -1 && PyErr_Occurred()) return NULL;
    if (k < 0 || k >= N_LOOPS) {
        PyErr_SetString(PyExc_IndexError, "no such loop");
        return NULL;
    }
    Py_buffer x, y;
    if (PyObject_GetBuffer(args[1], &x, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(args[2], &y, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&x);
        return NULL;
    }
    if (x.len != y.len || x.itemsize != ITEMSIZE[k] || y.itemsize != ITEMSIZE[k]) {
        PyBuffer_Release(&x);
        PyBuffer_Release(&y);
        PyErr_SetString(PyExc_ValueError, "x and out: one length, the loop's item size");
        return NULL;
    }
    Py_ssize_t n = y.len / ITEMSIZE[k];
    if (n >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        LOOPS[k](x.buf, y.buf, n);
        Py_END_ALLOW_THREADS
    } else {
        LOOPS[k](x.buf, y.buf, n);
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&y);
    Py_RETURN_NONE;
}

static PyMethodDef METHODS[] = {
    {"apply", (PyCFunction)(void(*)(void))apply, METH_FASTCALL, "apply(k, x, out)"},
    {NULL, NULL, 0, NULL}
};
static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "''' + _MODULE + r'''", NULL, -1,
                                    METHODS};
PyMODINIT_FUNC PyInit_''' + _MODULE + r'''(void) { return PyModule_Create(&MODULE); }
''']
    return '\n'.join(lines)


def _compiler():
    try:
        import theano
        cxx = theano.config.cxx
    except Exception:            # noqa: BLE001 (no Theano config: no compiler known)
        cxx = ''
    return cxx


def _flags():
    return ['-x', 'c', '-O3', '-march=native', '-fopenmp-simd', '-fno-math-errno',
            '-fPIC', '-shared']


def _cpu_key():
    """What decides whether a module built with ``-march=native`` runs here."""
    try:
        from numpy.core._multiarray_umath import __cpu_features__ as features
        feats = ','.join(sorted(k for k, v in features.items() if v))
    except ImportError:
        feats = ''
    return '%s|%s|%s' % (platform.machine(), platform.processor(), feats)


def _directory():
    import theano
    return os.path.join(theano.config.compiledir, SUBDIR)


def _build(path, src, cxx):
    """Compile ``src`` into ``path`` (atomically: a temporary file, then renamed)."""
    work = kernel_cache.temp_in(os.path.dirname(path), tempfile.mkdtemp, prefix='tmp_build_')
    try:
        c_file = os.path.join(work, 'vecmath.c')
        so_file = os.path.join(work, 'vecmath.so')
        with open(c_file, 'w') as f:
            f.write(src)
        cmd = [cxx] + _flags() + ['-I' + sysconfig.get_paths()['include'], c_file,
                                  '-o', so_file, '-lmvec', '-lm']
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError('building the vector math module failed:\n%s\n%s'
                          % (' '.join(cmd), done.stderr[-4000:]))
        os.replace(so_file, path)
    finally:
        for name in os.listdir(work):
            try:
                os.unlink(os.path.join(work, name))
            except OSError:
                pass
        try:
            os.rmdir(work)
        except OSError:
            pass


def module():
    """The built extension (its ``apply`` and the ``functions`` it has, in loop order),
    built on first use; None where it cannot be (no glibc with libmvec, no compiler, a
    failed build: warned once)."""
    with _lock:
        if 'module' in _loaded:
            return _loaded['module']
        _loaded['module'] = None
        functions = names()
        cxx = _compiler()
        if not functions or not cxx:
            return None
        src = source(functions)
        key = hashlib.sha256('\0'.join([src, cxx, ' '.join(_flags()), _cpu_key(),
                                        sys.version]).encode()).hexdigest()[:24]
        try:
            path = os.path.join(_directory(), 'vecmath_%s%s' % (
                key, sysconfig.get_config_var('EXT_SUFFIX') or '.so'))
            if not os.path.exists(path):
                _build(path, src, cxx)
            loader = importlib.machinery.ExtensionFileLoader(_MODULE, path)
            spec = importlib.util.spec_from_file_location(_MODULE, path, loader=loader)
            mod = importlib.util.module_from_spec(spec)
            loader.exec_module(mod)
        except (OSError, ImportError) as e:
            warnings.warn('theano_ocl: the C library\'s vector math (libmvec) is not usable '
                          'here (%s); the host\'s VM keeps Theano C\'s elementwise code'
                          % str(e).splitlines()[0], RuntimeWarning)
            return None
        mod.functions = functions
        _loaded['module'] = mod
        return mod


def available():
    """Whether the vector math module is (or can be) built here."""
    return module() is not None


def loops():
    """{(NumPy's name, dtype): f(x, out)} running libmvec's loop over contiguous arrays
    of that dtype (``x`` and ``out`` of one size; ``out`` may be ``x``); empty where the
    module cannot be built."""
    mod = module()
    if mod is None:
        return {}
    apply = mod.apply
    out = {}
    for i, name in enumerate(mod.functions):
        for j, (dtype, _, _) in enumerate(_TYPES):
            out[(name, dtype)] = functools.partial(apply, 2 * i + j)
    return out
