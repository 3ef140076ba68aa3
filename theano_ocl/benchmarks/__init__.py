"""The benchmark suite behind ``python -m theano_ocl bench``: theano_ocl against Theano's
C backend, measured in the same process, recorded as data.

A benchmark family is a module here that registers a function with :func:`register`;
the function takes the run's :class:`Context` and its size parameters (``quick`` or
``full``) and returns a list of :class:`Case`. A case is cheap to list; its ``setup``
compiles the functions, checks theano_ocl's result against Theano C's and returns the
:class:`Variant` callables that the runner (:mod:`.runner`) times in turn. Families
import Theano inside their functions, so listing the suite or rendering recorded runs
(:mod:`.record`) needs neither Theano nor OpenCL.

    @register('elemwise', quick=dict(log2n=16), full=dict(log2n=24))
    def elemwise(ctx, log2n):
        return [Case('a*b + c*exp(-d)', setup=lambda: ...)]
"""
import collections
import importlib

BASELINE = 'Theano C'
OCL = 'theano_ocl'

# the family modules, imported on first use of the registry
FAMILIES = ('elemwise', 'overhead', 'reduce', 'gemm', 'mlp', 'nengo', 'nengo_compare')


class Skip(Exception):
    """Raised by a benchmark function that cannot run here (an optional package missing):
    its message says why and how to install what it needs; the run records and prints
    it, and goes on."""

Benchmark = collections.namedtuple('Benchmark', 'name fn quick full doc')


class Variant(object):
    """One timed implementation of a case: ``fn()`` does one call; ``sync()`` (optional)
    waits for the device after a sample's calls; one call does ``per`` units of work
    (steps), and the recorded times are seconds per unit."""

    def __init__(self, label, fn, sync=None, per=1):
        self.label, self.fn, self.sync, self.per = label, fn, sync, per


class Case(object):
    """One row of the results: ``setup()`` returns ``(variants, info)``, a list of
    :class:`Variant` (Theano C's labelled :data:`BASELINE`, theano_ocl's :data:`OCL`) and a
    dict of facts worth recording (launches per call, host fallbacks, bytes moved...).
    ``calls``: calls per timed sample; ``unit``: what one time is per ('call', 'step');
    ``pause``: idle seconds before each sample (lets BLAS threads of the other variant
    stop spinning); ``settle``: untimed calls of the variant right before each sample,
    after the pause, so that a sample times the variant at work rather than waking up. On
    the H100 (2026-11-27, medians over 8 pauses) the MLP step's first call after an idle
    half second took 1.27 ms and the second 0.83, against 0.67-0.73 ms for the 18 after
    them: a cost a training loop pays once, not every twentieth step."""

    def __init__(self, name, setup, calls=1, unit='call', pause=0.0, settle=0):
        self.name, self.setup, self.calls, self.unit = name, setup, calls, unit
        self.pause, self.settle = pause, settle


class Context(object):
    """What a family needs from the run: the device spec (``None``: theano_ocl's default)
    and, once asked for, the :class:`~theano_ocl.device.OCLDevice`."""

    def __init__(self, device=None, quick=False):
        self.device, self.quick = device, quick
        self._dev = None

    @property
    def dev(self):
        if self._dev is None:
            from theano_ocl.device import get_device
            self._dev = get_device(self.device)
        return self._dev

    def mode(self, **kw):
        """An OCLMode on this run's device."""
        import theano_ocl
        return theano_ocl.OCLMode(device=self.device, **kw)


_REGISTRY = collections.OrderedDict()


def register(name, quick, full, doc=None):
    """Register ``fn(ctx, **params) -> [Case]`` as benchmark ``name`` with its quick and
    full parameters."""
    def deco(fn):
        _REGISTRY[name] = Benchmark(name, fn, dict(quick), dict(full),
                                    (doc or fn.__doc__ or '').strip().split('\n')[0])
        return fn
    return deco


def registry():
    """Name -> :class:`Benchmark`, in suite order."""
    for mod in FAMILIES:
        importlib.import_module('.' + mod, __name__)
    # suite order: the families' order, then each module's own (not the order in which
    # something imported them first: the demo imports mlp alone)
    rank = {}
    for name, b in _REGISTRY.items():
        rank[name] = (FAMILIES.index(b.fn.__module__.rsplit('.', 1)[-1])
                      if b.fn.__module__.rsplit('.', 1)[-1] in FAMILIES else len(FAMILIES),
                      b.fn.__code__.co_firstlineno)
    return dict(sorted(_REGISTRY.items(), key=lambda kv: rank[kv[0]]))
