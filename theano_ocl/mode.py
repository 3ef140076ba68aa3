"""OCLMode, and the registration of linker ``'ocl'`` and mode ``'OCL'`` with Theano."""
import theano
from theano.compile import mode as theano_mode

from . import _startup
from .linker import OCLLinker


class OCLMode(theano_mode.Mode):
    """Theano's Mode with the OCL linker.

    ``OCLMode(device='0:0')`` picks a device (see :mod:`theano_ocl.device`);
    ``outputs='device'`` returns ``pyopencl.array.Array`` results that stay on the device.
    ``Mode.clone``/``including``/``excluding`` keep the linker (and so the device).
    """

    def __init__(self, linker=None, optimizer='default', device=None, outputs='host'):
        if linker is None or linker == 'ocl':
            linker = OCLLinker(device=device, output_mode=outputs)
        elif device is not None or outputs != 'host':
            raise ValueError('give either a linker or device/outputs, not both')
        super(OCLMode, self).__init__(linker=linker, optimizer=optimizer)

    def __setstate__(self, state):
        linker, optimizer = state[:2]
        if linker is None or linker == 'ocl':
            linker = OCLLinker()
        super(OCLMode, self).__setstate__((linker, optimizer) + tuple(state[2:]))


def register():
    """Make ``linker='ocl'`` and ``mode='OCL'`` known to Theano (idempotent)."""
    from . import shared
    if 'ocl' not in theano_mode.predefined_linkers:
        theano_mode.register_linker('ocl', OCLLinker())
    if 'OCL' not in theano_mode.predefined_modes:
        theano_mode.register_mode('OCL', OCLMode())
    shared.install_patches()


_startup.register_deferred(__name__)    # when importing this module deferred registration
