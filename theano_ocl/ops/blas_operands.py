"""What ``blas.plan_gemm`` and its backends take: alpha and beta (``Scalar``), vectors and
matrices seen as 3-d batches of matrices (``as_column``, ``as_row``, ``as_batch``,
``as_scalar_matrix``), and the BLAS layout of one matrix of such a batch (``blas_layout``),
which decides what the host BLAS and CLBlast take as is and what they copy first.
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
