"""theano_ocl: an OpenCL backend for Theano 1.0.5, as a Linker/Mode plugin.

    import theano_ocl                                   # registers mode 'OCL', linker 'ocl'
    f = theano.function([x], y, mode='OCL')
    f = theano.function([x], y, mode=theano_ocl.OCLMode(device='0:0'))
    sim = theano_ocl.SimulatorOCL(f_compiled_anywhere); sim.run_steps(1000)
"""
from . import _startup

_startup.apply_theano_patches()

import theano  # noqa: E402  (after the start-up patches)

from .device import get_device, NoOpenCLPlatform  # noqa: E402,F401
from .errors import KernelBuildError, NoDeviceImplementation  # noqa: E402,F401
from .linker import OCLLinker  # noqa: E402,F401
from .mode import OCLMode, register  # noqa: E402,F401
from .report import report, fallback_nodes, placements  # noqa: E402,F401
from .simulator import SimulatorOCL, optimize  # noqa: E402,F401

register()

__version__ = '0.1.0'
