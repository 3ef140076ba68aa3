"""Theano's C ``Gemm``, ``Dot22`` and ``Dot22Scalar`` calling NumPy's BLAS, for the host's VM.

Theano's C code for these ops calls ``sgemm_`` / ``dgemm_``; with ``blas.ldflags`` empty
(NumPy 1.22 and later no longer describe their BLAS to Theano) ``Gemm`` is compiled against
Theano's NumPy-based stand-in (a new product array from ``PyArray_MatrixProduct2``, then a
second pass adding it into the output), and ``Dot22`` / ``Dot22Scalar`` have no C code at
all: their Python ``perform`` calls ``numpy.dot`` and allocates the result every call.

Where the host's VM (``runtime/host_tier.py``) runs such a node, its thunk is this module's
subclass of the op, compiled from Theano's own C code with ``sgemm_`` / ``dgemm_`` calling
the BLAS NumPy itself links (found in the process: the library holding NumPy's
``dgemm_64_`` or ``dgemm_``): one call, in place, into the output's kept storage. The
product is the same library's as ``numpy.dot``'s, to rounding (the operands' order and the
kernels' blocking can differ: not Theano C's bits). Measured on the 2-core EPYC
(2026-12-02, one process, medians of 11 rounds): the tutorial RNN's training step (``bench/
rnn.py``: 20 steps of ``Dot22`` and ``Gemm`` 32x64 by 64x64 float64 forward and back)
4.56 ms with Theano's ops, 3.52 ms with these, Theano C 6.17 ms.

Theano's real-BLAS code refuses the zero strides NumPy gives empty arrays ("some matrix has
no unit stride", Theano's ``t_gemm.test_shape_0``); the products here compute an empty
product as Theano's NumPy stand-in does (``b * z``, or zeros) before reaching it.
"""
import ctypes
import os

import numpy as np
from theano.gof import Apply
from theano.tensor import blas as tblas

from ..runtime import host_tier

_found = {}


def _candidates():
    """Libraries loaded in this process that may be NumPy's BLAS, NumPy's own first."""
    from .._openblas import mapped_libraries
    blas = mapped_libraries('blas')
    np_dir = os.path.dirname(os.path.dirname(np.__file__))
    return sorted(blas, key=lambda p: (not p.startswith(np_dir), 'scipy' in p, p))


def pointers():
    """(sgemm address, dgemm address, whether their integers are 64-bit) of NumPy's BLAS,
    or None where it cannot be found."""
    if 'pointers' in _found:
        return _found['pointers']
    _found['pointers'] = None
    ilp64_numpy = bool(getattr(np.__config__, 'blas_ilp64_opt_info', None))
    for path in _candidates():
        try:
            lib = ctypes.CDLL(path, mode=getattr(os, 'RTLD_NOLOAD', 0) | os.RTLD_LOCAL)
        except OSError:
            continue
        for suffix, ilp64 in (('64_', True), ('', ilp64_numpy)):
            try:
                s, d = getattr(lib, 'sgemm_' + suffix), getattr(lib, 'dgemm_' + suffix)
            except AttributeError:
                continue
            if suffix == '' and ilp64_numpy:
                continue            # (an ILP64 NumPy's library has the suffixed names)
            _found['pointers'] = (ctypes.cast(s, ctypes.c_void_p).value,
                                  ctypes.cast(d, ctypes.c_void_p).value, ilp64)
            _found['library'] = path
            return _found['pointers']
    return None


def library():
    """The path of the BLAS library :func:`pointers` found (None: none)."""
    pointers()
    return _found.get('library')


_SUPPORT_TEMPLATE = r'''
typedef void (*tocl_sgemm32_t)(const char*, const char*, const int*, const int*, const int*,
                               const float*, const float*, const int*, const float*,
                               const int*, const float*, float*, const int*);
typedef void (*tocl_dgemm32_t)(const char*, const char*, const int*, const int*, const int*,
                               const double*, const double*, const int*, const double*,
                               const int*, const double*, double*, const int*);
typedef void (*tocl_sgemm64_t)(const char*, const char*, const long long*, const long long*,
                               const long long*, const float*, const float*,
                               const long long*, const float*, const long long*,
                               const float*, float*, const long long*);
typedef void (*tocl_dgemm64_t)(const char*, const char*, const long long*, const long long*,
                               const long long*, const double*, const double*,
                               const long long*, const double*, const long long*,
                               const double*, double*, const long long*);
static void* tocl_blas[2] = {0, 0};
static int tocl_blas_ilp64 = 0;

%(wrappers)s
#ifndef MOD
#define MOD %
#endif
static double time_time() {
    struct timeval tv;
    gettimeofday(&tv, 0);
    return (double) tv.tv_sec + (double) tv.tv_usec / 1000000.0;
}
'''

# (one of them per type: p the BLAS prefix, t the C type, k its slot in tocl_blas)
_WRAPPER = r'''
static void %(p)sgemm_(const char* ta, const char* tb, const int* m, const int* n,
                       const int* k, const %(t)s* alpha, const %(t)s* A, const int* lda,
                       const %(t)s* B, const int* ldb, const %(t)s* beta, %(t)s* C,
                       const int* ldc) {
    if (tocl_blas_ilp64) {
        long long M = *m, N = *n, K = *k, LA = *lda, LB = *ldb, LC = *ldc;
        ((tocl_%(p)sgemm64_t)tocl_blas[%(k)d])(ta, tb, &M, &N, &K, alpha, A, &LA, B, &LB,
                                               beta, C, &LC);
    } else {
        ((tocl_%(p)sgemm32_t)tocl_blas[%(k)d])(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta,
                                               C, ldc);
    }
}
'''
_SUPPORT = _SUPPORT_TEMPLATE.replace('%(wrappers)s', ''.join(
    _WRAPPER % dict(p=p, t=t, k=k) for k, (p, t) in enumerate((('s', 'float'),
                                                                 ('d', 'double')))))

# (module init: the addresses from pointers(); an import error where there are none)
_INIT = r'''
{
    PyObject* tocl_mod = PyImport_ImportModule("theano_ocl.ops.host_blas");
    PyObject* tocl_ptrs = tocl_mod ? PyObject_CallMethod(tocl_mod, "pointers", NULL) : NULL;
    Py_XDECREF(tocl_mod);
    if (tocl_ptrs == NULL || !PyTuple_Check(tocl_ptrs)) {
        if (tocl_ptrs != NULL || !PyErr_Occurred())
            PyErr_SetString(PyExc_ImportError, "theano_ocl: NumPy's BLAS was not found");
        Py_XDECREF(tocl_ptrs);
        return NULL;
    }
    tocl_blas[0] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(tocl_ptrs, 0));
    tocl_blas[1] = PyLong_AsVoidPtr(PyTuple_GET_ITEM(tocl_ptrs, 1));
    tocl_blas_ilp64 = PyObject_IsTrue(PyTuple_GET_ITEM(tocl_ptrs, 2));
    Py_DECREF(tocl_ptrs);
}
'''
_VERSION = (4,)


class _NumpyBlas(object):
    """What the three ops share: the support code above in place of Theano's BLAS header,
    no libraries to link, the init code."""

    def c_support_code(self):
        return _SUPPORT

    def c_libraries(self):
        return []

    def c_compile_args(self):
        return []

    def c_lib_dirs(self):
        return []

    def c_header_dirs(self):
        return []

    def c_init_code(self):
        return [_INIT]

    #: the names Theano's gemm code gives the op's inputs, in order
    c_input_names = ()

    def c_code(self, node, name, inp, out, sub):
        # (Theano's Dot22 / Dot22Scalar refuse C code without blas.ldflags)
        names = dict(zip(self.c_input_names, inp), _zout=out[0])
        return self.build_gemm_call() % dict(names, **sub)

    def c_code_cache_version(self):
        return _VERSION + (self.build_gemm_version(),)

    #: (C) the product's factor of the output's old value: Gemm's ``b``, else 0
    old_factor = '0.0'

    def build_gemm_call(self):
        """Theano's code, but for an empty product (a dimension of 0: real BLAS refuses
        the zero strides NumPy gives empty arrays, which Theano's NumPy stand-in accepts),
        computed here as Theano C does: ``b * z`` (Gemm) or zeros, after the same shape
        checks."""
        full = super(_NumpyBlas, self).build_gemm_call()
        cut = full.index(self.check_strides)
        empty = """
        if (Nx[0] == 0 || Nx[1] == 0 || Ny[1] == 0) {
            double tocl_b = %s;
            if (PyArray_SIZE(%%(_zout)s) > 0) {
                PyObject* tocl_s = PyFloat_FromDouble(tocl_b);
                if (!tocl_s) %%(fail)s
                if (tocl_b == 0.0) {
                    int tocl_err = PyArray_FillWithScalar(%%(_zout)s, tocl_s);
                    Py_DECREF(tocl_s);
                    if (tocl_err < 0) %%(fail)s
                } else if (tocl_b != 1.0) {
                    PyObject* tocl_r = PyNumber_InPlaceMultiply((PyObject*)%%(_zout)s, tocl_s);
                    Py_DECREF(tocl_s);
                    if (!tocl_r) %%(fail)s
                    Py_DECREF(tocl_r);
                } else {
                    Py_DECREF(tocl_s);
                }
            }
        } else {
        """ % self.old_factor
        return full[:cut] + empty + full[cut:] + '\n        }\n'


class HostGemm(_NumpyBlas, tblas.Gemm):
    c_input_names = ('_z', '_a', '_x', '_y', '_b')
    old_factor = ('((PyArray_DESCR(%(_b)s)->type_num == NPY_FLOAT) ? '
                  '(double)((float*)PyArray_DATA(%(_b)s))[0] : '
                  '((double*)PyArray_DATA(%(_b)s))[0])')


class HostDot22(_NumpyBlas, tblas.Dot22):
    c_input_names = ('_x', '_y')


class HostDot22Scalar(_NumpyBlas, tblas.Dot22Scalar):
    c_input_names = ('_x', '_y', '_a')


# Theano's op type (exactly: not a subclass someone else made) -> the host's op
_HOST_OPS = {tblas.Gemm: lambda op: HostGemm(inplace=op.inplace),
             tblas.Dot22: lambda op: HostDot22(),
             tblas.Dot22Scalar: lambda op: HostDot22Scalar()}


def make_thunk(node, storage_map, compute_map, no_recycling):
    """The thunk of ``node`` (a real-valued ``Gemm``, ``Dot22`` or ``Dot22Scalar``) as its
    ``Host`` op compiles it, over the same storage cells; None where NumPy's BLAS is not
    found, the dtype is complex, or the build fails (the caller keeps Theano's thunk)."""
    make = _HOST_OPS.get(type(node.op))
    if make is None or pointers() is None:
        return None
    if any(getattr(v.type, 'dtype', '') not in ('float32', 'float64')
           for v in node.inputs[:1] + node.outputs):
        return None
    op = make(node.op)
    twin = Apply(op, list(node.inputs), [v.type() for v in node.outputs])
    # (the node's own cells: the twin's outputs are the node's)
    storage = {v: storage_map[v] for v in node.inputs}
    computed = {v: compute_map[v] for v in node.inputs}
    for old, new in zip(node.outputs, twin.outputs):
        storage[new] = storage_map[old]
        computed[new] = compute_map[old]
    recycle = [new for old, new in zip(node.outputs, twin.outputs) if old in no_recycling]
    try:
        return op.make_c_thunk(twin, storage, computed, recycle)
    except Exception:         # noqa: BLE001 (a build failure: Theano's own thunk stays)
        return None


host_tier.register_thunk_maker(('Gemm', 'Dot22', 'Dot22Scalar'), make_thunk)
