"""SGEMM of two n x n float32 shared variables, result on the device, against Theano C
and against the library theano_ocl's BLAS backend calls, called directly."""
import numpy as np

from . import BASELINE, OCL, Case, Variant, register
from .timing import check_close, fallbacks, launches


def _reference(dev, backend, a, b):
    """The library behind ``backend`` called directly: CLBlast through pyclblast on
    device buffers, else scipy's sgemm into a preallocated array (the host backend's
    call), or None when neither is installed."""
    n = a.shape[0]
    if backend == 'clblast':
        import pyclblast
        import pyopencl.array as cla
        da, db = cla.to_device(dev.queue, a), cla.to_device(dev.queue, b)
        dc = cla.empty(dev.queue, (n, n), np.float32)
        return Variant('CLBlast (pyclblast)', sync=dev.queue.finish,
                       fn=lambda: pyclblast.gemm(dev.queue, n, n, n, da, db, dc, n, n, n))
    try:
        from scipy.linalg import blas as sblas
    except ImportError:
        return None
    c = np.empty((n, n), np.float32)
    # row-major c = a @ b is column-major c.T = b.T @ a.T: no copies
    return Variant('scipy sgemm', lambda: sblas.sgemm(1.0, b.T, a.T, 0.0, c.T, overwrite_c=1))


@register('gemm', quick=dict(n=256, calls=5), full=dict(n=4096, calls=3))
def gemm(ctx, n, calls):
    """T.dot(A, B) of two n x n float32 shared variables."""
    def setup():
        import theano
        import theano.tensor as T
        from theano_ocl.ops import blas
        rng = np.random.RandomState(0)
        a, b = rng.rand(n, n).astype('float32'), rng.rand(n, n).astype('float32')
        A, B = theano.shared(a, 'A'), theano.shared(b, 'B')
        f_c = theano.function([], T.dot(A, B), mode='FAST_RUN')
        f_o = theano.function([], T.dot(A, B), mode=ctx.mode(outputs='device'))
        check_close(f_o(), f_c(), rtol=1e-3, atol=1e-3 * n)
        backend = blas.choose_backend(ctx.dev, ['float32', 'float32'])
        variants = [Variant(BASELINE, f_c), Variant(OCL, f_o, sync=ctx.dev.queue.finish)]
        ref = _reference(ctx.dev, backend, a, b)
        if ref is not None:
            variants.append(ref)
        return variants, dict(launches=launches(f_o), fallbacks=fallbacks(f_o),
                              blas_backend=backend, flops_per_call=2.0 * n ** 3)
    return [Case('sgemm %d^3' % n, setup, calls=calls)]
