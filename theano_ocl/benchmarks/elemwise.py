"""Elementwise benchmarks: a fused expression over shared float32 vectors, and the
"Using the GPU" tutorial program (check1: exp of a shared vector)."""
import numpy as np

from . import BASELINE, OCL, Case, Variant, register
from .timing import check_close, copy_bandwidth, fallbacks, launches


def _pair(ctx, ins, out, label, rtol=1e-5, **mode):
    """Theano C's and theano_ocl's variants of ``out`` (outputs kept on the device when
    ``mode`` says so), checked against each other, and the facts about the OCL one."""
    import theano
    f_c = theano.function(ins, out, mode='FAST_RUN')
    f_o = theano.function(ins, out, mode=ctx.mode(**mode))
    check_close(f_o(), f_c(), rtol=rtol, what=label)
    queue = ctx.dev.queue
    variants = [Variant(BASELINE, f_c), Variant(OCL, f_o, sync=queue.finish)]
    return variants, dict(launches=launches(f_o), fallbacks=fallbacks(f_o))


@register('elemwise', quick=dict(log2n=16, calls=20), full=dict(log2n=24, calls=20))
def elemwise(ctx, log2n, calls):
    """Fused a*b + c*exp(-d) on 2^n float32 shared vectors, result on the device."""
    def setup():
        import theano
        import theano.tensor as T
        n = 2 ** log2n
        rng = np.random.RandomState(0)
        a, b, c, d = [theano.shared(rng.rand(n).astype('float32'), k) for k in 'abcd']
        variants, info = _pair(ctx, [], a * b + c * T.exp(-d), 'a*b + c*exp(-d)',
                               outputs='device')
        info.update(bytes_per_call=5 * n * 4, copy_GBps=copy_bandwidth(ctx.dev, n * 4) / 1e9)
        return variants, info
    return [Case('a*b + c*exp(-d), n=2^%d' % log2n, setup, calls=calls)]


@register('check1', quick=dict(n=10 * 30 * 768, calls=100), full=dict(n=10 * 30 * 768, calls=1000))
def check1(ctx, n, calls):
    """The "Using the GPU" tutorial: exp of a shared float32 vector, host or device result."""
    def setup(outputs):
        import theano
        import theano.tensor as T
        x = theano.shared(np.asarray(np.random.RandomState(22).rand(n), 'float32'), 'x')
        return _pair(ctx, [], T.exp(x), 'exp(x)', outputs=outputs)
    return [Case('exp, n=%d, %s result' % (n, where), lambda o=where: setup(o), calls=calls)
            for where in ('host', 'device')]
