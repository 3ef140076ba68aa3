"""Start-up hook: lets unchanged Theano scripts use theano_ocl through ``THEANO_FLAGS``.

``theano_ocl_startup.pth`` (installed next to the package in site-packages) puts a tiny
finder on ``sys.meta_path`` at every interpreter start. It reacts only to ``import theano``:
it then loads this module (by file, without importing the ``theano_ocl`` package) and hands
over to :func:`find_theano_spec`. From there on:

1. when ``theano.configparser`` has executed, its ``AddConfigVar`` is wrapped so that, when
   ``theano.configdefaults`` defines them,

   * the ``linker`` flag also accepts ``'ocl'`` and the ``mode`` flag also accepts ``'OCL'``
     (Theano checks both while it imports, before any plugin could register), and
   * the default of ``blas.ldflags`` becomes ``''`` when numpy no longer describes its BLAS
     (``numpy.distutils.__config__.blas_opt_info`` is gone since numpy 1.22, and Theano
     1.0.5's import fails on it). A value the user sets is never touched. With ``''`` Theano
     calls numpy's BLAS through numpy's C API (``_theano_compat.py``).

   * the ``device``, ``init_gpu_device`` and ``contexts`` flags hand an OpenCL device
     (``openclP:D``, gpuarray's syntax) to theano_ocl and read ``cpu`` / ``''`` to Theano,
     which then does not import its gpuarray back-end (nor log that pygpu is missing);
     ``device=`` / ``contexts=`` make ``'ocl'`` the default linker, as they moved
     computations with gpuarray. ``cuda*`` without pygpu warns how to pick an NVIDIA GPU
     through OpenCL (``_device_flags.py``, where :mod:`theano_ocl.device` reads what was
     taken).

2. when the ``theano`` package has finished importing, the hook removes itself and calls
   ``theano_ocl.mode.register()``, which registers linker ``'ocl'`` and mode ``'OCL'``
   (:func:`_register`, the one place that registers). When a ``theano_ocl`` module was
   importing theano (``import theano_ocl.vm`` first), registering now would import it
   half-executed: the hook, which watches every ``theano_ocl`` submodule while it is
   installed, stays and registers once the outermost of them has finished. A failure
   there is reported as a warning and never breaks ``import theano``.

3. from then on a second, narrower finder (:class:`ScanPerformHook`) watches the one module
   ``theano.scan_module.scan_perform_ext``, which Scan imports when it makes its thunk and
   which compiles Theano's Cython loop. Scan falls back to its Python loop
   (``Scan.execute``) only on ``ImportError``; a failed compile raises a plain
   ``Exception``, so on Python 3.11 (where ``longintrepr.h`` moved and the generated C no
   longer builds) every function with a ``theano.scan`` failed to compile under every
   mode. The finder turns "cannot be built" (``_theano_compat.scan_cython_unbuildable``,
   or a compile that fails) into that ``ImportError``, with one warning per process, and
   remembers it so that later Scans do not retry the compile.

4. right before ``theano.tensor.nnet.abstract_conv`` executes (``theano.tensor.nnet.conv``
   imports it first), ``_theano_compat.alias_scipy_signal`` gives the private SciPy names
   Theano's reference convolutions import (``scipy.signal.signaltools._valfrommode``, ...,
   ``scipy.signal.sigtools._convolve2d``) back at those paths, taken from where SciPy
   >= 1.8 keeps them (``scipy.signal._signaltools``, ``scipy.signal._sigtools``). Without
   them Theano sets ``imported_scipy_signal = False``: the legacy ``ConvOp`` cannot run its
   Python ``perform`` and Theano's conv tests skip. Only missing names are added, in the
   imported modules; nothing on disk changes.

``theano_ocl/__init__.py`` calls :func:`apply_theano_patches` so that the same happens
without the ``.pth`` (a checkout that is not installed): before ``theano`` is imported it
installs the hook; after, it relaxes the two flags on the live config, repairs the SciPy
names and registers.

This module owns the finders and when each patch runs; what Theano 1.0.5 lacks on today's
numpy, SciPy and Python is in ``_theano_compat.py``, Theano's device flags in
``_device_flags.py``, both loaded by file from here (:func:`theano_compat`,
:func:`device_flags_module`). It runs during interpreter start-up in every process of the
environment that imports Theano: it imports nothing beyond the standard library at module
level, and it must never import numpy, pyopencl or theano itself.
"""
import os
import sys

__all__ = ['apply_theano_patches', 'install_hook', 'install_scan_hook', 'is_registered',
           'find_theano_spec', 'EXTRA_LINKERS', 'EXTRA_MODES', 'render_pth',
           'device_flags_module', 'theano_compat']

#: values the ``linker`` / ``mode`` flags accept on top of Theano's own
EXTRA_LINKERS = ('ocl',)
EXTRA_MODES = ('OCL',)

_MARK = '_theano_ocl_patched'

_state = {
    'registered': False,     # theano_ocl.mode.register() returned
    'registering': False,    # inside _register (guards the circular import)
    'configparser': False,   # AddConfigVar is wrapped
    'pending': False,        # theano is imported, a theano_ocl module was still importing
}


def _initializing(module):
    """True while ``module`` is still executing its import."""
    spec = getattr(module, '__spec__', None)
    return bool(getattr(spec, '_initializing', False))


def _warn(msg, stacklevel=3):
    import warnings
    warnings.warn('theano_ocl: ' + msg, RuntimeWarning, stacklevel=stacklevel)


# ---------------------------------------------------------------------------------------
# the import hook


class TheanoImportHook(object):
    """A ``sys.meta_path`` finder that watches the import of ``theano``, its config and
    the ``theano_ocl`` submodules.

    It finds nothing itself: for ``theano``, ``theano.configparser`` and the ``theano_ocl``
    submodules it asks the other finders and returns their spec with ``exec_module``
    wrapped, so that code runs right after the module executed. It removes itself once
    ``theano`` has been imported and linker and mode are registered (or failed to).
    """
    _theano_ocl_hook = True
    _WATCH = ('theano', 'theano.configparser', 'theano.tensor.nnet.abstract_conv')
    _PACKAGE = 'theano_ocl.'    # its submodules: one of them may be importing theano

    def __init__(self):
        self._busy = set()

    def __repr__(self):
        return '<theano_ocl start-up hook>'

    def find_spec(self, fullname, path=None, target=None):
        ours = fullname.startswith(self._PACKAGE)
        if not (ours or fullname in self._WATCH) or fullname in self._busy:
            return None
        self._busy.add(fullname)
        try:
            spec = _find_spec_elsewhere(fullname, path, target, skip=self)
        except Exception:
            spec = None
        finally:
            self._busy.discard(fullname)
        if spec is None:
            if fullname == 'theano':
                uninstall_hook()
            return None
        if fullname == 'theano.tensor.nnet.abstract_conv':
            return _wrap_exec(spec, before=_before_abstract_conv)
        if ours:
            after = _after_theano_ocl_module
        else:
            after = _after_theano if fullname == 'theano' else _after_configparser
        try:
            return _wrap_exec(spec, after,
                              on_error=_uninstall_on_error if fullname == 'theano' else None)
        except Exception:
            return spec


def _find_spec_elsewhere(fullname, path, target, skip):
    for finder in list(sys.meta_path):
        if finder is skip or getattr(finder, '_theano_ocl_hook', False) \
                or getattr(finder, '_theano_ocl_bootstrap', False):
            continue
        find_spec = getattr(finder, 'find_spec', None)
        if find_spec is None:
            continue
        spec = find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


def _wrap_exec(spec, after=None, on_error=None, before=None):
    """Make ``spec.loader.exec_module`` call ``after(module)`` once the module executed
    (and ``before(module)`` right before it executes).

    ``on_error(exc)`` runs when the module raises (with None when the loader cannot be
    wrapped); an exception it returns is raised instead, chained to the original.
    """
    loader = spec.loader
    orig = getattr(loader, 'exec_module', None)
    if orig is None:  # a legacy loader: leave it alone (no patching, no harm)
        if on_error is not None:
            on_error(None)
        return spec

    def exec_module(module):
        if before is not None:
            try:
                before(module)
            except Exception as e:  # the hook must never break `import theano`
                _warn('start-up hook failed before importing %s: %r' % (module.__name__, e))
        try:
            orig(module)
        except BaseException as exc:
            replacement = on_error(exc) if on_error is not None else None
            if replacement is not None:
                raise replacement from exc
            raise
        finally:
            # one shot: a reload of the module must not run the hook again
            if getattr(loader, '__dict__', {}).get('exec_module') is exec_module:
                try:
                    del loader.exec_module
                except AttributeError:
                    pass
        if after is None:
            return
        try:
            after(module)
        except Exception as e:  # the hook must never break `import theano`
            _warn('start-up hook failed after importing %s: %r' % (module.__name__, e))

    try:
        loader.exec_module = exec_module      # an instance attribute shadows the method
    except (AttributeError, TypeError):       # a loader with __slots__: wrap it instead
        spec.loader = _LoaderProxy(loader, exec_module)
    return spec


class _LoaderProxy(object):
    def __init__(self, loader, exec_module):
        self._loader = loader
        self.exec_module = exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


_hook = None


#: OpenBLAS worker threads spin this long (2^N cycles) before sleeping. OpenBLAS's default
#: keeps them busy-waiting long after each call, which on a CPU OpenCL device takes the
#: cores from PoCL's threads: the MLP 784-1000-1000-10 step on 2 cores went from 22.0 to
#: 18.5-19.1 ms with 4 (Theano C: 22.2 -> 23.1 ms). Read when an OpenBLAS loads: set before
#: Theano imports scipy.linalg, and applied to those loaded already (NumPy's, in a script
#: importing numpy first: ``_openblas.py``); only when the user has not set it.
OPENBLAS_THREAD_TIMEOUT = '4'


def _quiet_openblas_threads():
    if 'OPENBLAS_THREAD_TIMEOUT' in os.environ:
        return              # the user's value, or set here already (and applied then)
    os.environ['OPENBLAS_THREAD_TIMEOUT'] = OPENBLAS_THREAD_TIMEOUT
    try:
        m = _sibling('_openblas')
        if m is not None:
            m.quiet_loaded()
    except Exception:       # (never breaks an import: OpenBLAS keeps its default)
        pass


def install_hook():
    """Put the hook first on ``sys.meta_path`` (once). Returns True when it is installed."""
    global _hook
    if 'theano' in sys.modules:
        return False
    _quiet_openblas_threads()
    # the .pth bootstrap finder has nothing left to do once this module is loaded
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not getattr(f, '_theano_ocl_bootstrap', False)]
    if _hook is None:
        _hook = TheanoImportHook()
    if not any(f is _hook for f in sys.meta_path):
        sys.meta_path.insert(0, _hook)
    return True


def _uninstall_on_error(exc):
    uninstall_hook()


def uninstall_hook():
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not getattr(f, '_theano_ocl_hook', False)
                        and not getattr(f, '_theano_ocl_bootstrap', False)]


def find_theano_spec(fullname, path=None, target=None):
    """Entry point for the ``.pth`` bootstrap finder when ``import theano`` starts."""
    if not install_hook():
        return None
    return _hook.find_spec(fullname, path, target)


# ---------------------------------------------------------------------------------------
# what runs inside Theano's import


def _after_configparser(configparser):
    _wrap_add_config_var(configparser)


def _after_theano(theano):
    install_scan_hook()
    _register_when_ready()


def _after_theano_ocl_module(module):
    if _state['pending']:
        _register_when_ready(finishing=module.__name__)


def _register_when_ready(finishing=None):
    """Theano is imported: register, unless a ``theano_ocl`` module is still importing
    (``finishing``, the one calling from its end, excepted). Registering imports
    ``theano_ocl.mode`` and what it imports, which may be that module, half-executed: the
    hook then stays, and the end of the outermost one calls again."""
    for name, module in list(sys.modules.items()):
        if name.startswith(TheanoImportHook._PACKAGE) and name != finishing \
                and _initializing(module):
            _state['pending'] = True
            return False
    _state['pending'] = False
    uninstall_hook()
    return _register()


def _wrap_add_config_var(cp):
    orig = getattr(cp, 'AddConfigVar', None)
    if orig is None or getattr(orig, _MARK, False):
        return
    root_config = getattr(cp, 'config', None)

    def AddConfigVar(name, doc, configparam, *args, **kwargs):
        root = kwargs.get('root', args[0] if args else root_config)
        if root is root_config:     # the top-level call (it recurses per '.' section)
            try:
                _adjust_param(name, configparam)
            except Exception as e:
                _warn('could not adjust Theano flag %r: %r' % (name, e))
        return orig(name, doc, configparam, *args, **kwargs)

    AddConfigVar.__doc__ = orig.__doc__
    AddConfigVar.__wrapped__ = orig
    setattr(AddConfigVar, _MARK, True)
    cp.AddConfigVar = AddConfigVar
    _state['configparser'] = True


def _adjust_param(name, param):
    if getattr(param, _MARK, False):
        return
    if name == 'linker':
        allowed = getattr(param, 'all', None)
        if allowed is None:
            return
        param.all = tuple(allowed) + tuple(v for v in EXTRA_LINKERS if v not in allowed)
        flags = sys.modules.get('theano_ocl._device_flags')   # loaded by 'device', defined first
        if flags is not None and flags.moves_computation():
            param.default = 'ocl'       # a linker the user sets still wins
    elif name in ('device', 'init_gpu_device', 'contexts'):    # _device_flags.DEVICE_FLAGS
        flags = device_flags_module()
        if flags is None:
            return
        flags.claim(name, param)
    elif name == 'mode':
        orig_filter = param.filter

        def filter_mode(val):
            if isinstance(val, str) and val in EXTRA_MODES:
                return val
            return orig_filter(val) if orig_filter is not None else val
        filter_mode.__wrapped__ = orig_filter
        param.filter = filter_mode
    elif name == 'blas.ldflags':
        compat = theano_compat()
        if compat is None or not callable(param.default):
            return
        param.default = compat.blas_ldflags_default(param.default)
    else:
        return
    setattr(param, _MARK, True)


def _patch_live_config(theano):
    """Theano is already imported: let later ``config.linker = 'ocl'`` / ``mode = 'OCL'`` pass."""
    cp = sys.modules.get('theano.configparser')
    if cp is None:
        return
    _wrap_add_config_var(cp)
    for param in list(getattr(cp, '_config_var_list', ())):
        name = getattr(param, 'fullname', None)
        if name in ('linker', 'mode'):
            try:
                _adjust_param(name, param)
            except Exception as e:
                _warn('could not adjust Theano flag %r: %r' % (name, e))


def _register():
    """Call ``theano_ocl.mode.register()`` once theano is imported (the one place that
    registers linker ``'ocl'`` and mode ``'OCL'``). True when done."""
    if _state['registered']:
        return True
    if _state['registering']:
        return False
    pkg = sys.modules.get('theano_ocl')
    _state['registering'] = True
    try:
        import importlib
        mode_mod = importlib.import_module('theano_ocl.mode')
        mode_mod.register()
        _state['registered'] = True
    except Exception as e:
        if pkg is not None and _initializing(pkg):
            # theano_ocl/__init__ is calling (theano was imported first): the package's
            # import goes on quietly; importing theano_ocl.mode raises where it is used
            return False
        _warn("could not register linker 'ocl' / mode 'OCL' with Theano "
              "(theano_ocl.mode failed to import or register): %r. Plain Theano works; "
              "THEANO_FLAGS=linker=ocl / mode=OCL will not." % (e,))
        return False
    finally:
        _state['registering'] = False
    return True


def is_registered():
    return _state['registered']


def _bind_to_package():
    # When the .pth loaded this file (and its siblings) before the package existed, the
    # package module does not have the attributes yet.
    pkg = sys.modules.get('theano_ocl')
    if pkg is None:
        return
    mods = [('_startup', sys.modules.get(__name__))]
    mods += [(name, sys.modules.get('theano_ocl.' + name)) for name in SIBLINGS]
    for name, m in mods:
        if m is not None and getattr(pkg, name, None) is not m:
            try:
                setattr(pkg, name, m)
            except Exception:
                pass


def apply_theano_patches():
    """Make Theano accept and know theano_ocl. Idempotent; safe at any time.

    * ``theano`` not imported yet: install the import hook (flags relaxed while Theano
      imports, ``blas.ldflags`` default fixed, registration once the import completes).
    * ``theano`` being imported right now: nothing more to do (the hook is at work).
    * ``theano`` imported: relax the flags on the live config and register.

    Returns True when the linker and mode are registered by now.
    """
    _bind_to_package()
    theano = sys.modules.get('theano')
    if theano is None:
        install_hook()
        return False
    if _initializing(theano):
        cp = sys.modules.get('theano.configparser')
        if cp is not None:
            _wrap_add_config_var(cp)
        return False
    _quiet_openblas_threads()
    _patch_live_config(theano)
    install_scan_hook()
    compat = theano_compat()
    if compat is not None:
        compat.repair_theano_scipy_imports()
    return _register()


# ---------------------------------------------------------------------------------------
# the modules this one loads by file

#: stdlib-only modules that run during Theano's import, next to this file
SIBLINGS = ('_device_flags', '_theano_compat', '_openblas')


def _sibling(name):
    """``theano_ocl.<name>``, loaded by file like this module: it runs during Theano's
    import, before the package may be importable. None where this file was copied without
    it: what it does for Theano is then left undone."""
    fullname = 'theano_ocl.' + name
    m = sys.modules.get(fullname)
    if m is None:
        import importlib.util
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), name + '.py')
        if not os.path.isfile(path):
            return None
        spec = importlib.util.spec_from_file_location(fullname, path)
        m = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = m
        try:
            spec.loader.exec_module(m)
        except BaseException:
            del sys.modules[spec.name]
            raise
        _bind_to_package()
    return m


def device_flags_module():
    """``theano_ocl._device_flags`` (Theano's device flags taken over; Theano reads them
    itself where the file is missing)."""
    return _sibling('_device_flags')


def theano_compat():
    """``theano_ocl._theano_compat``: what Theano 1.0.5 needs on today's numpy, SciPy and
    Python."""
    return _sibling('_theano_compat')


def _before_abstract_conv(module):
    compat = theano_compat()
    if compat is not None:
        compat.alias_scipy_signal()


# ---------------------------------------------------------------------------------------
# Scan's Cython module

SCAN_EXT = 'theano.scan_module.scan_perform_ext'


class ScanPerformHook(object):
    """A ``sys.meta_path`` finder for ``theano.scan_module.scan_perform_ext`` only.

    Where the Cython module cannot be built it makes the import raise ``ImportError`` (the
    one exception Scan's ``make_thunk`` answers with its Python loop) and warns once; every
    later import in the process fails the same way at once. A module that builds, or one
    already imported, is left alone. Stays on ``sys.meta_path`` for the life of the process.
    """
    _theano_ocl_scan_hook = True

    def __init__(self):
        self.failure = None     # why the module cannot be had, once known

    def __repr__(self):
        return '<theano_ocl scan_perform hook>'

    def find_spec(self, fullname, path=None, target=None):
        if fullname != SCAN_EXT:
            return None
        if self.failure is not None:
            raise ImportError(self.failure, name=fullname)
        compat = theano_compat()
        reason = compat.scan_cython_unbuildable() if compat is not None else None
        if reason is not None:
            raise self._fail(reason, stacklevel=4)
        spec = _find_spec_elsewhere(fullname, path, target, skip=self)
        if spec is None:
            return None

        path_before = list(sys.path)

        def convert(exc):
            # Theano's module puts the compiledir in front of sys.path and, when the
            # import under it fails, leaves it there
            n = len(sys.path) - len(path_before)
            if n > 0 and sys.path[n:] == path_before:
                del sys.path[:n]
            # Theano's own ImportError (no compiler: cxx='') is already the fallback
            if isinstance(exc, Exception) and not isinstance(exc, ImportError):
                return self._fail('its compilation failed: %s' % _first_line(exc),
                                  stacklevel=5)
            return None
        return _wrap_exec(spec, on_error=convert)

    def _fail(self, reason, stacklevel):
        # stacklevel: the warning names Scan's make_thunk (import machinery is skipped)
        self.failure = ("Theano's Cython scan module (scan_perform) cannot be built on "
                        "Python %d.%d: %s" % (sys.version_info[:2] + (reason,)))
        _warn(self.failure + '. Scan runs its Python loop (Scan.execute) instead.',
              stacklevel=stacklevel)
        return ImportError(self.failure, name=SCAN_EXT)


def _first_line(exc):
    text = ' '.join(str(a) for a in getattr(exc, 'args', ()) if isinstance(a, str)) or repr(exc)
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    return lines[0][:400] if lines else type(exc).__name__


_scan_hook = None


def install_scan_hook():
    """Put :class:`ScanPerformHook` on ``sys.meta_path`` (once, idempotent)."""
    global _scan_hook
    if _scan_hook is None:
        _scan_hook = ScanPerformHook()
    if not any(f is _scan_hook for f in sys.meta_path):
        sys.meta_path.insert(0, _scan_hook)
    return _scan_hook


# ---------------------------------------------------------------------------------------
# the .pth line

#: The one line in ``theano_ocl_startup.pth`` runs at every interpreter start, so it
#: only compiles and installs the tiny finder below (``_PTH_FINDER``; some Pythons process
#: site-packages twice: it installs one finder only). When ``import theano`` starts, the
#: finder compiles ``_PTH_LOADER``, which locates the theano_ocl package on the (by then
#: complete) sys.path without importing it, loads this file as ``theano_ocl._startup``
#: and hands over to :func:`find_theano_spec`.
_PTH_LOADER = '''\
def find_spec(name, path=None, target=None):
    try:
        m = sys.modules.get('theano_ocl._startup')
        if m is None:
            import os, importlib.util as u
            p = u.find_spec('theano_ocl')
            f = [os.path.join(d, '_startup.py') for d in (p and p.submodule_search_locations or ())]
            f = [x for x in f if os.path.isfile(x)]
            if not f:
                return None
            s = u.spec_from_file_location('theano_ocl._startup', f[0])
            m = u.module_from_spec(s)
            sys.modules[s.name] = m
            try:
                s.loader.exec_module(m)
            except BaseException:
                del sys.modules[s.name]
                raise
        return m.find_theano_spec(name, path, target)
    except Exception as e:
        import warnings
        warnings.warn('theano_ocl start-up hook failed: %r' % (e,))
        return None
'''

_PTH_FINDER = '''\
import sys
class TheanoOclStartup(object):
    _theano_ocl_bootstrap = True
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != 'theano':
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not TheanoOclStartup]
        g = {'sys': sys, '__name__': __name__}
        exec(LOADER, g)
        return g['find_spec'](name, path, target)
for f in sys.meta_path:
    if getattr(f, '_theano_ocl_bootstrap', False):
        break
else:
    sys.meta_path.insert(0, TheanoOclStartup)
'''


def render_pth():
    """The exact content of ``theano_ocl_startup.pth`` (one ``import`` line)."""
    return ('import sys; exec(%r, {"__name__": "theano_ocl_startup_pth", "LOADER": %r})\n'
            % (_PTH_FINDER, _PTH_LOADER))
