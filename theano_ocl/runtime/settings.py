"""The settings of a linked function: arguments of ``OCLMode``/``OCLLinker``.

=================  ======================  ===============================================
argument           default (environment)   meaning
=================  ======================  ===============================================
``fuse``           THEANO_OCL_FUSE=1       fold elementwise producers into their one
                                           consumer (reductions, products, elementwise)
``epilogues``      THEANO_OCL_EPILOGUE=1   fold small products into their elementwise
                                           consumer: '1' on GPUs and on CPU
                                           devices whose launches cost 15 us or
                                           more, 'always' on every device, '0' never
``blas``           THEANO_OCL_BLAS         force a BLAS path: 'clblast', 'host', 'kernel',
                                           'small' (default: chosen per device)
``host_blas``      THEANO_OCL_HOST_BLAS    how the host BLAS of a CPU device runs: 'queued'
                   =queued                 (a native command of the device's queue, where
                                           the device runs them: ``ops/blas_queued.py``)
                                           or 'mapped' (the operands mapped, in this thread)
``conv``           THEANO_OCL_CONV         force a convolution algorithm: 'gemm',
                                           'direct' (default: chosen per device)
``cpu_group``      THEANO_OCL_CPU_GROUP=64 work-group size of batched kernels on CPU
                                           devices, about (``plans.whole_groups``;
                                           0: chunks of elements)
``stats``          THEANO_OCL_STATS        a file each link appends its counts to (JSON)
``launch``         THEANO_OCL_LAUNCH       how a recorded launch is enqueued: 'native'
                   =auto                   (ctypes, no event: ``runtime.native``),
                                           'pyopencl', or 'auto': native on GPUs,
                                           pyopencl on CPU devices
``merge``          THEANO_OCL_MERGE=1      a frame's independent elementwise launches of
                                           one size run as one launch once it is built
                                           (``ops/elemwise_merge.py``)
``scan_rows``      THEANO_OCL_SCAN_ROWS=0  a device Scan copies a step's rows in one
                                           launch each way (``ops/scan_rows.py``)
                                           instead of one copy per row
``scan_bind``      THEANO_OCL_SCAN_BIND=1  a device Scan's inner frame reads its rows and
                                           writes its slots in the outer buffers, its
                                           kernels re-pointed each step, in place of
                                           copies (``ops/scan_bind.py``); so do
                                           ``run``'s probes (``runtime/probe_places.py``),
                                           and its shared variables trade two places
                                           (``runtime/state_swap.py``)
``host_tier``      THEANO_OCL_HOST_TIER    which tiny hot functions Theano's own VM may
                   =exact                  run in this thread (``runtime/host_tier.py``):
                                           'exact' those whose results cannot depend on
                                           where they run (no float arithmetic), 'any'
                                           every one (faster; float results may then
                                           differ in the last bits from the first
                                           calls'), 'off' none
``cost_model``     THEANO_OCL_COST_MODEL   on a CPU device, each input signature's first
                   =on                     call runs dry on the host by Theano's VM, and
                                           its calls stay there where that beat the
                                           device's measured best case
                                           (``runtime/cost.py``); 'off': never
``functions``      THEANO_OCL_FUNCTIONS    float32 log, log1p, expm1, tanh, float64 tanh:
                   =auto                   'own' (``scalar/own_functions.py``: arithmetic
                                           a CPU compiler vectorizes, at most 1, 1.5,
                                           2.5, 1.5 ulp), 'builtin' (OpenCL's), 'auto':
                                           own on PoCL's CPU devices (its builtins run
                                           one element at a time), builtin elsewhere
``host_math``      THEANO_OCL_HOST_MATH    how the host's VM computes elementwise tanh,
                   =auto                   exp, log ... over 1,024 elements or more:
                                           'numpy' (NumPy's vector functions, 4-30x
                                           faster than C's; results within a few ulp
                                           of Theano C's), 'libmvec' (glibc's vector
                                           math in loops built for this CPU: 2-12x,
                                           within a few ulp), 'c' (Theano C's code: its
                                           bits), 'auto': numpy where NumPy has them
                                           (AVX-512), else libmvec where it builds, else
                                           c (``runtime/host_math.py``)
``pinned``         THEANO_OCL_PINNED=gpu   host outputs of 64 KiB or more are downloaded
                                           into page-locked memory (``runtime/pinned.py``):
                                           'gpu' on GPUs, 'always', 'off'
``stage_inputs``   THEANO_OCL_STAGE_INPUTS host inputs of 64 KiB or more are copied into
                   =gpu                    page-locked memory first, and uploaded from there
                                           (``runtime/steps.py``): 'gpu', 'always', 'off'
``tune``           THEANO_OCL_TUNE=auto    tuned GEMM choices (``ops/gemm_tune.py``):
                                           'auto' uses those stored for the device and,
                                           on a GPU with none, tunes at the first large
                                           product; 'cached' uses stored ones, else warns
                                           once per device; 'off' the built-in choices
``batch_after``    THEANO_OCL_BATCH_AFTER  calls of a frame after which its calls run its
                   =3                      batched plan (``runtime/planner.py``), where
                                           it pays; 'never': no batched plan
``batch_min_``     THEANO_OCL_BATCH_MIN_   launches a frame needs before a call batches
``launches``       LAUNCHES=16             them (a device Scan's inner frame: any)
``host_tier_``     THEANO_OCL_HOST_TIER_   calls of a tiny frame after which the host tier
``after``          AFTER=20                may take it (``runtime/host_tier.py``)
``reuse_min_``     THEANO_OCL_REUSE_MIN_   dead intermediates of at least this many bytes
``bytes``          BYTES=65536             are reused later in the frame (smaller ones
                                           would chain independent small launches)
``max_frames``     THEANO_OCL_MAX_FRAMES   device plans a function keeps besides the one
                   =256                    in use (LRU, under a byte bound)
``max_``           THEANO_OCL_MAX_         plans kept per key for other IfElse branch
``alternates``     ALTERNATES=3            outcomes
=================  ======================  ===============================================

An argument given to the mode wins; one left out takes its environment variable, read
when a function is linked (never at import), else the default. While the linker links and
the VM plans, the function's settings are the active ones (:func:`current`), which is how
op families read them.

Every value is checked, an argument when the mode (or linker) is made, a variable when a
function is linked: a value a setting does not take raises :class:`SettingError`, naming
the argument or variable, the value and what the setting takes. So a bad variable never
keeps mode ``'OCL'`` from registering: the first function linked under it says what is
wrong. Other modules read their own variables the same way (:func:`from_environment`).
"""
import collections
import contextlib
import contextvars
import os

from ..errors import SettingError

#: the words a switch takes (an empty value is off)
_SWITCH = {'1': True, 'true': True, 'yes': True, 'on': True,
           '0': False, 'false': False, 'no': False, 'off': False, '': False}


def switch(value):
    """A bool from a bool, 0/1 or one of :data:`_SWITCH`'s words."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _SWITCH:
        return _SWITCH[value.strip().lower()]
    raise ValueError('1, 0, true, false, yes, no, on or off')


_REFUSED = object()


def choice(*allowed, empty=_REFUSED, bools=None):
    """A parser taking one of ``allowed`` (strings); ``empty``: what an empty value
    stands for (default: refused); ``bools``: the values True and False (or 1 and 0)
    stand for."""
    def parse(value):
        if bools is not None and isinstance(value, int) and value in (0, 1):
            return bools[0] if value else bools[1]
        if isinstance(value, str):
            if value == '' and empty is not _REFUSED:
                return empty
            if value in allowed:
                return value
        raise ValueError('one of %s' % ', '.join(repr(a) for a in allowed)
                         + (" (or '' for the default)" if empty is not _REFUSED else ''))
    return parse


def count(value):
    """An int >= 0 from an int or its decimal digits."""
    if isinstance(value, bool):
        raise ValueError('an integer >= 0')
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError('an integer >= 0') from None
    if n < 0 or (isinstance(value, float) and n != value):
        raise ValueError('an integer >= 0')
    return n


def count_or_never(value):
    """An int >= 0 from an int or its decimal digits, or None for 'never'."""
    if isinstance(value, str) and value.strip().lower() == 'never':
        return None
    try:
        return count(value)
    except ValueError:
        raise ValueError("an integer >= 0 or 'never'") from None


def writable_file(value):
    """A file path whose directory exists and is writable, or None for ''."""
    if not isinstance(value, str):
        raise ValueError('a file path')
    if not value:
        return None
    directory = os.path.dirname(os.path.abspath(os.path.expanduser(value)))
    if not os.path.isdir(directory):
        raise ValueError('a file in an existing directory (%s does not exist)' % directory)
    if not os.access(directory, os.W_OK):
        raise ValueError('a file in a writable directory (%s is not)' % directory)
    return value


Spec = collections.namedtuple('Spec', 'var default parse')

SPECS = collections.OrderedDict([
    ('fuse', Spec('THEANO_OCL_FUSE', True, switch)),
    ('epilogues', Spec('THEANO_OCL_EPILOGUE', '1', choice('0', '1', 'always',
                                                           bools=('1', '0')))),
    ('blas', Spec('THEANO_OCL_BLAS', None, choice('clblast', 'host', 'kernel', 'small',
                                                  empty=None))),
    ('host_blas', Spec('THEANO_OCL_HOST_BLAS', 'queued', choice('queued', 'mapped',
                                                                 empty='queued'))),
    ('conv', Spec('THEANO_OCL_CONV', None, choice('gemm', 'direct', empty=None))),
    ('cpu_group', Spec('THEANO_OCL_CPU_GROUP', 64, count)),
    ('stats', Spec('THEANO_OCL_STATS', None, writable_file)),
    ('launch', Spec('THEANO_OCL_LAUNCH', 'auto', choice('auto', 'pyopencl', 'native',
                                                         empty='auto'))),
    ('scan_rows', Spec('THEANO_OCL_SCAN_ROWS', False, switch)),
    ('scan_bind', Spec('THEANO_OCL_SCAN_BIND', True, switch)),
    ('merge', Spec('THEANO_OCL_MERGE', True, switch)),
    ('host_tier', Spec('THEANO_OCL_HOST_TIER', 'exact', choice('exact', 'any', 'off'))),
    ('cost_model', Spec('THEANO_OCL_COST_MODEL', 'on', choice('on', 'off', empty='on',
                                                              bools=('on', 'off')))),
    ('functions', Spec('THEANO_OCL_FUNCTIONS', 'auto', choice('auto', 'own', 'builtin',
                                                              empty='auto'))),
    ('host_math', Spec('THEANO_OCL_HOST_MATH', 'auto', choice('auto', 'numpy', 'libmvec',
                                                              'c', empty='auto'))),
    ('pinned', Spec('THEANO_OCL_PINNED', 'gpu', choice('gpu', 'always', 'off'))),
    ('stage_inputs', Spec('THEANO_OCL_STAGE_INPUTS', 'gpu', choice('gpu', 'always', 'off'))),
    ('tune', Spec('THEANO_OCL_TUNE', 'auto', choice('auto', 'cached', 'off', empty='auto'))),
    ('batch_after', Spec('THEANO_OCL_BATCH_AFTER', 3, count_or_never)),
    ('batch_min_launches', Spec('THEANO_OCL_BATCH_MIN_LAUNCHES', 16, count)),
    ('host_tier_after', Spec('THEANO_OCL_HOST_TIER_AFTER', 20, count)),
    ('reuse_min_bytes', Spec('THEANO_OCL_REUSE_MIN_BYTES', 1 << 16, count)),
    ('max_frames', Spec('THEANO_OCL_MAX_FRAMES', 256, count)),
    ('max_alternates', Spec('THEANO_OCL_MAX_ALTERNATES', 3, count)),
])
NAMES = tuple(SPECS)


def parsed(parse, value, where):
    """``parse(value)``, or a :class:`SettingError` that says where the value came from
    (``where``: ``"THEANO_OCL_X='v'"``, ``"OCLMode(x='v')"``) and what ``parse`` takes."""
    try:
        return parse(value)
    except ValueError as e:
        raise SettingError('%s: expected %s' % (where, e)) from None


def from_environment(var, default, parse, environ=None):
    """The value of environment variable ``var`` through ``parse``, ``default`` when it is
    unset; :class:`SettingError` names the variable when ``parse`` refuses it."""
    raw = (os.environ if environ is None else environ).get(var)
    return default if raw is None else parsed(parse, raw, '%s=%r' % (var, raw))


class Settings(object):
    __slots__ = NAMES

    def __init__(self, **values):
        """The settings ``values`` (arguments of ``OCLMode``; None: not given) and the
        defaults for the rest, the environment left aside."""
        self._fill(values, {})

    @classmethod
    def resolve(cls, given, environ=None):
        """Settings from ``given`` (a dict; None values: not given), else the environment
        (``environ``, default ``os.environ``), else the defaults."""
        s = cls.__new__(cls)
        s._fill(given, os.environ if environ is None else environ)
        return s

    def _fill(self, given, environ):
        unknown = set(given) - set(NAMES)
        if unknown:
            raise TypeError('unknown theano_ocl setting(s) %s; known: %s' % (
                ', '.join(sorted(unknown)), ', '.join(NAMES)))
        for name, spec in SPECS.items():
            v = given.get(name)
            if v is not None:
                value = parsed(spec.parse, v, 'OCLMode(%s=%r)' % (name, v))
            else:
                value = from_environment(spec.var, spec.default, spec.parse, environ)
            setattr(self, name, value)

    def as_dict(self):
        return {n: getattr(self, n) for n in NAMES}

    def __eq__(self, other):
        return isinstance(other, Settings) and self.as_dict() == other.as_dict()

    def __hash__(self):
        return hash(tuple(sorted(self.as_dict().items(), key=lambda kv: kv[0])))

    def __repr__(self):
        return 'Settings(%s)' % ', '.join('%s=%r' % kv for kv in self.as_dict().items())


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
