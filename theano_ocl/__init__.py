"""theano_ocl: an OpenCL backend for Theano 1.0.5, as a Linker/Mode plugin.

    import theano_ocl                                   # registers mode 'OCL', linker 'ocl'
    f = theano.function([x], y, mode='OCL')
    f = theano.function([x], y, mode=theano_ocl.OCLMode(device='0:0'))
    sim = theano_ocl.SimulatorOCL(f_compiled_anywhere); sim.run_steps(1000)

Importing the package is cheap: it arranges (through :mod:`theano_ocl._startup`) that
the linker and mode are registered as soon as Theano is imported (at once if it already
is); the public names below load on first use.
"""
import importlib

from . import _startup

__version__ = '0.1.0'

_startup.apply_theano_patches()

_LAZY = {
    'get_device': 'device', 'NoOpenCLPlatform': 'device',
    'KernelBuildError': 'errors', 'NoDeviceImplementation': 'errors', 'SettingError': 'errors',
    'OCLLinker': 'linker', 'OCLMode': 'mode', 'register': 'mode',
    'report': 'report', 'fallback_nodes': 'report', 'placements': 'report',
    'SimulatorOCL': 'simulator', 'optimize': 'simulator',
    'memory_info': 'runtime.memory',
    'kernel_cache_info': 'runtime.kernel_cache',
    'stats': 'counts',
    'export_chrome_trace': 'profiling',
}

__all__ = sorted(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError("module 'theano_ocl' has no attribute %r" % (name,))
    mod = importlib.import_module('.' + module, __name__)
    value = getattr(mod, name)
    globals()[name] = value
    if _LAZY.get(module) == module:
        # importing the submodule bound its name here (theano_ocl.report, the module); the
        # function of the same name is the public one
        globals()[module] = getattr(mod, module)
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
