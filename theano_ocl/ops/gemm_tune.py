"""Tuned GEMM choices per device: the file they are kept in, and what a product takes
from it.

Owns: the tuning file (where, its format, atomic writes, a corrupt file ignored with a
warning), the device key, the shape classes, and the decision at a product's first use
on a device with nothing stored (the ``tune`` setting): tune then (``auto``, GPUs), or run
untuned with one warning per device naming ``python -m theano_ocl tune``. The search
itself is ``ops/gemm_search.py``, which registers it here (``runtime.context.provide``:
this module imports no BLAS module, which import it).

* File: ``$THEANO_OCL_TUNE_FILE`` if set, else ``theano_ocl_gemm_tuning.json`` beside the
  kernel cache directory (``runtime/kernel_cache.py``: ``<compiledir>/theano_ocl_kernels``
  by default, so in ``compiledir`` too). One JSON object: ``format`` and ``devices``,
  keyed by platform name, device name and driver version (a driver update tunes again).
* Per device and dtype (float32, float64): ``classes``, the choice per shape class --
  ``{"backend": "kernel", "tile": [TX, TY, RM, RN, BK]}`` (a 6th element: the kernel's
  variant for NVIDIA-like GPUs, ``blas.fast_variant``; ``null`` tile: the one element
  per work-item kernel) or ``{"backend": "clblast"}`` -- with the GFLOP/s measured for it
  and for the built-in choice; ``clblast``, CLBlast's Xgemm parameters found for this
  device (applied once per process, ``blas_clblast.clblast_tuning``); ``tried``, every
  candidate measured (what a later ``tune`` skips: the search resumes).
* Shape class: the tuned size (n x n x n) nearest, on a log scale, to the product's
  shortest side (M, N or K); a product whose shortest side is under half the smallest
  tuned size keeps the built-in choice (``ops/blas.py``): skinny products need other tiles
  than the cubes measured here.
"""
import collections
import json
import math
import os
import sys
import tempfile
import threading
import time
import warnings

from ..runtime import kernel_cache, settings
from ..runtime.context import family

ENV_FILE = 'THEANO_OCL_TUNE_FILE'
ENV_BUDGET = 'THEANO_OCL_TUNE_BUDGET'
FILE_NAME = 'theano_ocl_gemm_tuning.json'
FORMAT = 1
DTYPES = ('float32', 'float64')
COMMAND = 'python -m theano_ocl tune'
#: seconds a first-use tuning may take (``$THEANO_OCL_TUNE_BUDGET``), per dtype
FIRST_USE_BUDGET = 60.0
#: the sizes tuned (n x n x n products): on GPUs the products where the tiles and
#: CLBlast's parameters decide the speed; on CPU devices small ones (their products run
#: the host BLAS unless the ``blas`` setting forces the kernel)
GPU_SIZES = (1024, 2048, 4096)
CPU_SIZES = (64, 128)


class UntunedWarning(RuntimeWarning):
    """A GEMM ran with the built-in choices on a device with no tuned parameters."""


Choice = collections.namedtuple('Choice', 'backend tile size')
Choice.__doc__ = """What a product of one shape class takes: ``backend`` 'kernel' (``tile``
(TX, TY, RM, RN, BK[, variant]) register-blocked, or None: one element per work-item) or 'clblast';
``size``: the class (the n of the n^3 product tuned)."""


def sizes_for(dev):
    return GPU_SIZES if dev.is_gpu else CPU_SIZES


def device_key(dev):
    """Platform, device and driver: parameters measured under another driver do not
    apply."""
    return ' | '.join((dev.platform_name, dev.name, dev.device.driver_version.strip()))


def tuning_file():
    path = os.environ.get(ENV_FILE)
    if path:
        return os.path.abspath(os.path.expanduser(path))
    return os.path.join(os.path.dirname(kernel_cache.default_directory()), FILE_NAME)


def shape_class(sizes, M, N, K):
    """The tuned size whose n^3 product stands for (M, N, K), or None (see module doc)."""
    sizes = sorted(int(s) for s in sizes)
    short = min(M, N, K)
    if not sizes or short * 2 < sizes[0]:
        return None
    return min(sizes, key=lambda s: abs(math.log(short / s)))


# --------------------------------------------------------------------------- the file
_lock = threading.RLock()
_entries = {}           # (file, device key) -> its entry (or None), read once per process


def load(path=None):
    """The whole file as a dict ({'format', 'devices'}); an absent file is empty, and a
    file that is not this format's JSON is ignored with a warning (rewritten by the next
    ``save``)."""
    path = path or tuning_file()
    empty = dict(format=FORMAT, devices={})
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        return empty
    try:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get('format') != FORMAT or \
                not isinstance(data.get('devices'), dict):
            raise ValueError('not a format %d tuning file' % FORMAT)
    except ValueError as e:
        warnings.warn('theano_ocl GEMM tuning: ignored %s (%s); it is rewritten when tuning '
                      'next stores its results' % (path, str(e).splitlines()[0]),
                      RuntimeWarning, stacklevel=2)
        return empty
    return data


def save(data, path=None):
    """Write ``data`` atomically (a temporary file in the same directory renamed over the
    file): a reader sees the old file or the new one."""
    path = path or tuning_file()
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix='.tmp-tuning-', dir=directory)
    try:
        with os.fdopen(fd, 'w') as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def device_entry(dev):
    """This device's stored entry ({dtype: {...}}), or None; read once per process."""
    path, key = tuning_file(), device_key(dev)
    with _lock:
        if (path, key) not in _entries:
            _entries[path, key] = load(path)['devices'].get(key)
        return _entries[path, key]


def store_entry(dev, entry):
    """Replace this device's entry in the file (other devices' entries kept)."""
    path, key = tuning_file(), device_key(dev)
    with _lock:
        data = load(path)
        data['devices'][key] = entry
        save(data, path)
        _entries[path, key] = entry


def forget():
    """Read the file again at the next use (tests; after another process tuned)."""
    with _lock:
        _entries.clear()
        _warned.clear()
        _attempted.clear()


def clblast_params(dev):
    """{precision bits: CLBlast Xgemm parameters} tuned for this device."""
    entry = device_entry(dev) or {}
    return {int(dt[-2:]): e['clblast'] for dt, e in sorted(entry.items())
            if isinstance(e, dict) and e.get('clblast')}


# --------------------------------------------------------------------------- first use
_warned = set()
_attempted = set()


def _budget(value):
    try:
        b = float(value)
    except ValueError:
        b = -1.0
    if not b > 0:
        raise ValueError('a number of seconds > 0')
    return b


def first_use_budget():
    return settings.from_environment(ENV_BUDGET, FIRST_USE_BUDGET, _budget)


def choice(dev, dtype, M, N, K):
    """The stored :class:`Choice` for an (M, N, K) product of ``dtype`` on ``dev``, or None
    (keep the built-in one): the ``tune`` setting 'off', a dtype or shape not tuned here.
    With nothing stored for the device and dtype, the first classed product tunes it
    (``auto`` on GPUs: once per process and dtype, whatever the outcome) or warns once per
    device."""
    mode = settings.current().tune
    if mode == 'off' or dtype not in DTYPES:
        return None
    entry = (device_entry(dev) or {}).get(dtype) or {}
    if not entry.get('classes'):
        if shape_class(sizes_for(dev), M, N, K) is None:
            return None
        key = (device_key(dev), dtype)
        if mode == 'auto' and dev.is_gpu and key not in _attempted:
            _attempted.add(key)
            _tune_now(dev, dtype)
            entry = (device_entry(dev) or {}).get(dtype) or {}
        if not entry.get('classes'):
            _warn_untuned(dev, dtype)
            return None
    classes = entry['classes']
    n = shape_class([int(s) for s in classes], M, N, K)
    if n is None:
        return None
    c = classes[str(n)]
    return Choice(c['backend'], tuple(c['tile']) if c.get('tile') else None, n)


def _tune_now(dev, dtype):
    budget = first_use_budget()
    print('theano_ocl: tuning GEMM (%s) on %s once, for up to %.0f s; the results are kept '
          'in %s (`%s` does it ahead of time; THEANO_OCL_TUNE=cached skips it)'
          % (dtype, dev.name, budget, tuning_file(), COMMAND), file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    try:
        family('gemm_tuner')(dev, dtypes=[dtype], budget=budget)
    except Exception as e:      # a failed search leaves the built-in choice, and says so
        warnings.warn('theano_ocl: tuning GEMM on %s failed (%s: %s)'
                      % (dev.name, type(e).__name__, e), UntunedWarning, stacklevel=4)
        return
    print('theano_ocl: tuned GEMM (%s) on %s in %.0f s' % (dtype, dev.name,
          time.perf_counter() - t0), file=sys.stderr, flush=True)


def _warn_untuned(dev, dtype):
    key = device_key(dev)
    if key in _warned:
        return
    _warned.add(key)
    warnings.warn(
        'theano_ocl: no tuned GEMM parameters for %s (%s; driver %s): matrix products run '
        'with the built-in tiles and CLBlast\'s default parameters, which can be half as '
        'fast as tuned ones. Run `%s` once (results kept in %s), or set THEANO_OCL_TUNE=auto '
        'to tune at the first large product on a GPU.'
        % (dev.name, dtype, dev.device.driver_version.strip(), COMMAND, tuning_file()),
        UntunedWarning, stacklevel=4)
