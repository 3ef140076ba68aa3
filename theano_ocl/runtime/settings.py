"""The settings of a linked function: arguments of ``OCLMode``/``OCLLinker``.

=================  ======================  ===============================================
argument           default (environment)   meaning
=================  ======================  ===============================================
``fuse``           THEANO_OCL_FUSE=1       fold elementwise producers into their one
                                           consumer (reductions, products, elementwise)
``epilogues``      THEANO_OCL_EPILOGUE=1   fold small products into their elementwise
                                           consumer: '1' on GPUs, 'always' on every
                                           device, '0' never
``blas``           THEANO_OCL_BLAS         force a BLAS path: 'clblast', 'host', 'kernel',
                                           'small' (default: chosen per device)
``conv``           THEANO_OCL_CONV         force a convolution algorithm: 'gemm',
                                           'direct' (default: chosen per device)
``cpu_group``      THEANO_OCL_CPU_GROUP=64 work-group size of batched kernels on CPU
                                           devices (0: chunks of elements)
``stats``          THEANO_OCL_STATS        a file each link appends its counts to (JSON)
``launch``         THEANO_OCL_LAUNCH       how a recorded launch is enqueued: 'pyopencl'
                                           (default) or 'native' (ctypes, no event:
                                           ``runtime.native``)
``scan_rows``      THEANO_OCL_SCAN_ROWS=0  a device Scan copies a step's rows in one
                                           launch each way (``ops/scan_rows.py``)
                                           instead of one copy per row
``scan_bind``      THEANO_OCL_SCAN_BIND=1  a device Scan's inner frame reads its rows and
                                           writes its slots in the outer buffers, its
                                           kernels re-pointed each step, in place of
                                           copies (``ops/scan_bind.py``)
``host_tier``      THEANO_OCL_HOST_TIER    which tiny hot functions Theano's own VM may
                   =exact                  run in this thread (``runtime/host_tier.py``):
                                           'exact' those whose results cannot depend on
                                           where they run (no float arithmetic), 'any'
                                           every one (faster; float results may then
                                           differ in the last bits from the first
                                           calls'), 'off' none
``pinned``         THEANO_OCL_PINNED=gpu   host outputs of 64 KiB or more are downloaded
                                           into page-locked memory (``runtime/pinned.py``):
                                           'gpu' on GPUs, 'always', 'off'
``stage_inputs``   THEANO_OCL_STAGE_INPUTS host inputs of 64 KiB or more are copied into
                   =gpu                    page-locked memory first, and uploaded from there
                                           (``runtime/steps.py``): 'gpu', 'always', 'off'
=================  ======================  ===============================================

An argument given to the mode wins; one left out takes its environment variable, read
when a function is linked (never at import), else the default. While the linker links and
the VM plans, the function's settings are the active ones (:func:`current`), which is how
op families read them.
"""
import contextlib
import contextvars
import os

_ENV = {
    'fuse': ('THEANO_OCL_FUSE', '1'),
    'epilogues': ('THEANO_OCL_EPILOGUE', '1'),
    'blas': ('THEANO_OCL_BLAS', None),
    'conv': ('THEANO_OCL_CONV', None),
    'cpu_group': ('THEANO_OCL_CPU_GROUP', '64'),
    'stats': ('THEANO_OCL_STATS', None),
    'launch': ('THEANO_OCL_LAUNCH', 'pyopencl'),
    'scan_rows': ('THEANO_OCL_SCAN_ROWS', '0'),
    'scan_bind': ('THEANO_OCL_SCAN_BIND', '1'),
    'host_tier': ('THEANO_OCL_HOST_TIER', 'exact'),
    'pinned': ('THEANO_OCL_PINNED', 'gpu'),
    'stage_inputs': ('THEANO_OCL_STAGE_INPUTS', 'gpu'),
}
_CHOICES = {
    'epilogues': ('0', '1', 'always'),
    'blas': (None, 'clblast', 'host', 'kernel', 'small'),
    'conv': (None, 'gemm', 'direct'),
    'launch': ('pyopencl', 'native'),
    'host_tier': ('exact', 'any', 'off'),
    'pinned': ('gpu', 'always', 'off'),
    'stage_inputs': ('gpu', 'always', 'off'),
}
NAMES = tuple(_ENV)


class Settings(object):
    __slots__ = NAMES

    def __init__(self, fuse=True, epilogues='1', blas=None, conv=None, cpu_group=64,
                 stats=None, launch='pyopencl', scan_rows=False, scan_bind=True,
                 host_tier='exact', pinned='gpu', stage_inputs='gpu'):
        self.fuse = _flag(fuse)
        self.epilogues = str(epilogues) if not isinstance(epilogues, bool) else (
            '1' if epilogues else '0')
        self.blas = blas or None
        self.conv = conv or None
        self.cpu_group = int(cpu_group)
        self.stats = stats or None
        self.launch = launch or 'pyopencl'
        self.scan_rows = _flag(scan_rows)
        self.scan_bind = _flag(scan_bind)
        self.host_tier = host_tier
        self.pinned = pinned
        self.stage_inputs = stage_inputs
        for name, allowed in _CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError('theano_ocl setting %s=%r: expected one of %s' % (
                    name, getattr(self, name), ', '.join(repr(a) for a in allowed)))
        if self.cpu_group < 0:
            raise ValueError('theano_ocl setting cpu_group=%r: expected an int >= 0'
                             % (cpu_group,))

    @classmethod
    def resolve(cls, given):
        """Settings from ``given`` (a dict; None values: not given) and the environment."""
        unknown = set(given) - set(NAMES)
        if unknown:
            raise TypeError('unknown theano_ocl setting(s) %s; known: %s' % (
                ', '.join(sorted(unknown)), ', '.join(NAMES)))
        values = {}
        for name, (var, default) in _ENV.items():
            v = given.get(name)
            if v is None:
                v = os.environ.get(var, default)
            if v is not None:
                values[name] = v
        return cls(**values)

    def as_dict(self):
        return {n: getattr(self, n) for n in NAMES}

    def __eq__(self, other):
        return isinstance(other, Settings) and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(tuple(sorted(self.as_dict().items(), key=lambda kv: kv[0])))

    def __repr__(self):
        return 'Settings(%s)' % ', '.join('%s=%r' % kv for kv in self.as_dict().items())


def _flag(v):
    if isinstance(v, str):
        return v.strip().lower() not in ('0', 'false', 'no', 'off', '')
    return bool(v)


_active = contextvars.ContextVar('theano_ocl_settings', default=None)


def current():
    """The settings of the function being linked or planned (outside any: from the
    environment now)."""
    s = _active.get()
    return s if s is not None else Settings.resolve({})


@contextlib.contextmanager
def active(settings):
    token = _active.set(settings)
    try:
        yield settings
    finally:
        _active.reset(token)
