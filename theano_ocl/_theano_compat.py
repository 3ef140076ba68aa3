"""What Theano 1.0.5 needs to import and run on today's numpy, SciPy and Python 3.11.

The start-up hook (:mod:`theano_ocl._startup`) applies each at the moment Theano's import
needs it; this module says what is missing and how it is made up for:

* numpy >= 1.22 no longer describes its BLAS (``numpy.distutils.__config__.blas_opt_info``),
  which Theano's default ``blas.ldflags`` reads: :func:`blas_ldflags_default` makes it
  ``''`` there (Theano then calls numpy's BLAS through numpy's C API);
* SciPy >= 1.8 moved the private names Theano's reference convolutions import:
  :func:`alias_scipy_signal` (before Theano imports them) and
  :func:`repair_theano_scipy_imports` (after, when Theano was imported first) give them back;
* Theano's Cython Scan loop cannot build on Python 3.11: :func:`scan_cython_unbuildable`
  says so without running the compiler (``_startup.ScanPerformHook`` turns it into the
  ``ImportError`` that makes Scan use its Python loop).

Like ``_startup.py`` it runs during Theano's import, loaded by file before the package may
be importable: standard library only at module level; numpy, SciPy and Theano are only
looked at inside the functions, once Theano's import has loaded them.
"""
import os
import sys

__all__ = ['blas_ldflags_default', 'numpy_describes_blas', 'alias_scipy_signal',
           'repair_theano_scipy_imports', 'scan_cython_unbuildable',
           'SCIPY_SIGNAL_ALIASES', 'THEANO_SCIPY_USERS']


# ---------------------------------------------------------------------------------------
# numpy's BLAS description


def blas_ldflags_default(orig_default):
    """Theano's ``blas.ldflags`` default, made ``''`` where numpy does not describe its BLAS
    (Theano 1.0.5's own default fails on it). A value the user sets is never touched."""
    def default_blas_ldflags():
        if not numpy_describes_blas():
            quiet_numpy_blas_notice()
            return ''
        return orig_default()
    default_blas_ldflags.__wrapped__ = orig_default
    return default_blas_ldflags


def numpy_describes_blas():
    """Whether ``numpy.distutils.__config__.blas_opt_info`` (Theano's BLAS probe) exists."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')    # numpy.distutils is deprecated in numpy 1.23
        try:
            import numpy.distutils.__config__ as npconf
        except Exception:
            return False
    return hasattr(npconf, 'blas_opt_info')


class _DropNumpyBlasNotice(object):
    # Theano logs 'Using NumPy C-API based implementation for BLAS functions.' at import
    # when blas.ldflags is empty. It is only dropped when the hook chose that default
    # (numpy no longer tells Theano where its BLAS is); an explicit blas.ldflags= keeps it.
    def filter(self, record):
        return not str(record.msg).startswith('Using NumPy C-API based implementation for BLAS')


def quiet_numpy_blas_notice():
    import logging
    logger = logging.getLogger('theano.tensor.blas')
    if not any(isinstance(f, _DropNumpyBlasNotice) for f in logger.filters):
        logger.addFilter(_DropNumpyBlasNotice())


# ---------------------------------------------------------------------------------------
# SciPy's private signal names

#: (old module, where SciPy >= 1.8 keeps it, names Theano 1.0.5 imports from the old one)
SCIPY_SIGNAL_ALIASES = (
    ('scipy.signal.signaltools', 'scipy.signal._signaltools',
     ('_valfrommode', '_bvalfromboundary', 'convolve')),
    ('scipy.signal.sigtools', 'scipy.signal._sigtools', ('_convolve2d',)),
)

#: Theano modules that import those names under ``try`` (``imported_scipy_signal``)
THEANO_SCIPY_USERS = (
    ('theano.tensor.nnet.abstract_conv',
     ('_valfrommode', '_bvalfromboundary', 'convolve', '_convolve2d')),
    ('theano.tensor.nnet.conv', ('_valfrommode', '_bvalfromboundary', '_convolve2d')),
)


def alias_scipy_signal():
    """Make ``from scipy.signal.signaltools import _valfrommode, _bvalfromboundary,
    convolve`` and ``from scipy.signal.sigtools import _convolve2d`` work on a SciPy that
    moved them (1.8 made the modules private; 1.15 has no ``sigtools`` at all and a
    ``signaltools`` shim without the underscored names). A name the old module has is left
    alone; a missing old module becomes the new one in ``sys.modules``. Returns the list of
    ``module.name`` aliases made."""
    import importlib
    import importlib.util
    made = []
    for old_name, new_name, names in SCIPY_SIGNAL_ALIASES:
        try:
            new = importlib.import_module(new_name)
        except ImportError:
            continue                    # an older SciPy: the old paths are the real ones
        old = sys.modules.get(old_name)
        if old is None:
            try:
                found = importlib.util.find_spec(old_name) is not None
            except ImportError:
                found = False
            if not found:
                sys.modules[old_name] = new
                made.append(old_name)
                continue
            old = importlib.import_module(old_name)
        for name in names:
            # vars(): the shim's module __getattr__ would answer 'convolve' with a warning
            if name not in vars(old) and hasattr(new, name):
                setattr(old, name, getattr(new, name))
                made.append('%s.%s' % (old_name, name))
    return made


def repair_theano_scipy_imports():
    """Theano was imported before the hook: give its conv modules the SciPy names they
    failed to import (and ``imported_scipy_signal = True``). True when both have them."""
    ok = True
    for modname, names in THEANO_SCIPY_USERS:
        m = sys.modules.get(modname)
        if m is None or getattr(m, 'imported_scipy_signal', True):
            continue
        try:
            alias_scipy_signal()
            import importlib
            values = {}
            for name in names:
                src = 'scipy.signal.sigtools' if name == '_convolve2d' \
                    else 'scipy.signal.signaltools'
                values[name] = getattr(importlib.import_module(src), name)
        except Exception:
            ok = False
            continue
        for name, value in values.items():
            setattr(m, name, value)
        m.imported_scipy_signal = True
    return ok


# ---------------------------------------------------------------------------------------
# Scan's Cython module


def scan_cython_unbuildable():
    """Why ``scan_perform.c`` cannot compile here, without running the compiler; else None.

    Theano 1.0.5 ships Cython output that includes ``longintrepr.h``, which Python 3.11
    moved to ``cpython/``: the compile fails at its first include. Knowing it up front
    spares every process the compile lock and the failed compile (and its long error).
    """
    theano = sys.modules.get('theano')
    config = getattr(theano, 'config', None)
    if config is None or not getattr(config, 'cxx', ''):
        return None                 # no compiler: Theano raises ImportError itself
    import sysconfig
    cfile = os.path.join(os.path.dirname(theano.__file__), 'scan_module', 'c_code',
                         'scan_perform.c')
    try:
        with open(cfile) as f:
            needs = '#include "longintrepr.h"' in f.read()
    except OSError:
        return None                 # Theano warns about the missing file itself
    if not needs:
        return None
    paths = sysconfig.get_paths()
    for key in ('include', 'platinclude'):
        if os.path.isfile(os.path.join(paths.get(key) or '', 'longintrepr.h')):
            return None
    return 'its generated C includes longintrepr.h, which this Python no longer provides'
