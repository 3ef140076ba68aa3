"""What ``blas.plan_gemm`` and its backends take: alpha and beta (``Scalar``), vectors and
matrices seen as 3-d batches of matrices (``as_column``, ``as_row``, ``as_batch``,
``as_scalar_matrix``), and the BLAS layout of one matrix of such a batch (``blas_layout``),
which decides what the host BLAS and CLBlast take as is and what they copy first; the
host BLAS's ?gemm (``gemm_pointer``) and the Fortran call of a product (``fortran_call``).
"""
import numpy as np
from theano.gof.graph import Constant


class Scalar(object):
    """alpha or beta: absent (1 for alpha, no Z for beta), a link-time constant, or a
    0-d device array read at run time (never a host value: no re-plan when it changes)."""
    __slots__ = ('kind', 'value', 'darr')

    def __init__(self, kind, value=None, darr=None):
        self.kind = kind        # 'one', 'none' (beta only), 'const', 'dev'
        self.value = value
        self.darr = darr

    @classmethod
    def of(cls, var, darr):
        if isinstance(var, Constant):
            v = np.asarray(var.data).item()
            return cls('const', value=v, darr=darr)
        return cls('dev', darr=darr)


ONE = Scalar('one', 1)
NONE = Scalar('none', 0)


def as_column(d):
    """A vector (n,) as an (n, 1) matrix view; strides chosen so BLAS sees a plain layout."""
    return d.view((d.shape[0], 1), (d.strides[0], d.itemsize))


def as_row(d):
    return d.view((1, d.shape[0]), (d.itemsize, d.strides[0]))


def as_batch(d):
    """A matrix as a batch of one."""
    return d.view((1,) + d.shape, (0,) + d.strides)


def as_scalar_matrix(d):
    return d.view((1, 1), (d.itemsize, d.itemsize))


def matrix_layout(d):
    """``blas_layout`` of the matrices of a 3-d view (all share the first one's)."""
    return blas_layout(d.view(d.shape[1:], d.strides[1:], d.offset))


def blas_layout(d):
    """(transposed, leading dimension) if the 2-d view ``d`` is a BLAS row-major matrix or
    its transpose, else None. Strides of size-1 dimensions are free."""
    (r, c), (sr, sc) = d.shape, [s // d.itemsize for s in d.strides]
    if c == 1:
        sc = 1
        if r == 1:
            sr = 1
    if r == 1 and sr != 1:
        sr = max(c, 1) if sc == 1 else 1
    if sc == 1 and sr >= max(c, 1):
        return False, sr
    if sr == 1 and sc >= max(r, 1):
        return True, sc
    return None


#: scipy.linalg.cython_blas's ?gemm per dtype
GEMM_NAMES = {'float32': 'sgemm', 'float64': 'dgemm', 'complex64': 'cgemm', 'complex128': 'zgemm'}


def gemm_pointer(dtype):
    """The address of scipy's ?gemm for ``dtype`` (the Fortran interface
    scipy.linalg.cython_blas exports)."""
    import ctypes
    from scipy.linalg import cython_blas
    cap = cython_blas.__pyx_capi__[GEMM_NAMES[np.dtype(dtype).name]]
    api = ctypes.PyDLL(None)        # own function objects: argtypes set here stay here
    api.PyCapsule_GetName.restype = ctypes.c_char_p
    api.PyCapsule_GetName.argtypes = [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return api.PyCapsule_GetPointer(cap, api.PyCapsule_GetName(cap))


def fortran_call(mnk, la, lb, lc):
    """The column-major ?gemm call computing row-major-indexed ``C = A @ B`` (M x N, sum
    over K) with the (transposed, leading dimension) layouts ``la``/``lb``/``lc`` of
    ``blas_layout``: ((transpose first, transpose second), (m, n, k), (ld first, ld
    second), ldc), and whether A is the first operand."""
    M, N, K = mnk
    if not lc[0]:
        # row-major C is column-major C^T = B^T A^T: B first; a row-major operand is
        # its own transpose in column-major terms ('N'), a column-major one needs 'T'
        return ((lb[0], la[0]), (N, M, K), (lb[1], la[1]), lc[1]), False
    # column-major C = A B: a column-major operand is 'N', a row-major one 'T'
    return ((not la[0], not lb[0]), (M, N, K), (la[1], lb[1]), lc[1]), True
