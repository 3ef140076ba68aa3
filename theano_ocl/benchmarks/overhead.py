"""Call overhead: a tiny function (a float64 scalar in, a scalar out), per call."""
import numpy as np

from . import BASELINE, OCL, Case, Variant, register
from .timing import fallbacks, launches


@register('overhead', quick=dict(calls=2000), full=dict(calls=20000))
def overhead(ctx, calls):
    """f(x) = x * 2 + 1 on a float64 scalar, with and without a shared-variable update."""
    def setup(with_update):
        import theano
        import theano.tensor as T
        x = T.dscalar('x')
        s = theano.shared(np.float64(0), 's')
        upd = {s: s + x} if with_update else None
        v = np.float64(1.5)
        variants, info = [], {}
        for label, mode in ((BASELINE, 'FAST_RUN'), (OCL, ctx.mode())):
            f = theano.function([x], x * 2 + 1, updates=upd, mode=mode)
            got = float(f(v))
            if got != 4.0:
                raise AssertionError('%s computed %r for 1.5 * 2 + 1' % (label, got))
            variants.append(Variant(label, lambda f=f: f(v)))
        info.update(launches=launches(f), fallbacks=fallbacks(f))
        return variants, info
    return [Case(name, lambda u=u: setup(u), calls=calls)
            for name, u in (('x*2+1, scalar in and out', False), ('x*2+1 + shared update', True))]
