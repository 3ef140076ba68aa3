"""Reductions of an n x n float32 matrix, input and output on the device."""
import numpy as np

from . import BASELINE, OCL, Case, Variant, register
from .timing import check_close, fallbacks, launches

CASES = (('sum all', lambda T, x: T.sum(x)), ('sum axis 0', lambda T, x: T.sum(x, 0)),
         ('sum axis 1', lambda T, x: T.sum(x, 1)), ('argmax axis 1', lambda T, x: T.argmax(x, 1)))


@register('reduce', quick=dict(n=512, calls=10), full=dict(n=4096, calls=20))
def reduce(ctx, n, calls):
    """Sums over all / axis 0 / axis 1 and argmax of an n x n float32 matrix."""
    def setup(expr):
        import theano
        import theano.tensor as T
        import pyopencl.array as cla
        x = T.matrix('x', dtype='float32')
        data = np.random.RandomState(0).rand(n, n).astype('float32')
        on_dev = cla.to_device(ctx.dev.queue, data)
        f_c = theano.function([x], expr(T, x), mode='FAST_RUN')
        f_o = theano.function([x], expr(T, x), mode=ctx.mode(outputs='device'))
        check_close(f_o(on_dev), f_c(data), rtol=1e-4, atol=1e-2)
        return ([Variant(BASELINE, lambda: f_c(data)),
                 Variant(OCL, lambda: f_o(on_dev), sync=ctx.dev.queue.finish)],
                dict(launches=launches(f_o), fallbacks=fallbacks(f_o), bytes_per_call=data.nbytes))
    return [Case('%s, %dx%d' % (name, n, n), lambda e=expr: setup(e), calls=calls)
            for name, expr in CASES]
