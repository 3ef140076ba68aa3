"""OCLMode, and the registration of linker ``'ocl'`` and mode ``'OCL'`` with Theano."""
import theano
from theano.compile import mode as theano_mode

from .linker import OCLLinker


class OCLMode(theano_mode.Mode):
    """Theano's Mode with the OCL linker.

    ``OCLMode(device='0:0')`` picks a device (see :mod:`theano_ocl.device`);
    ``outputs='device'`` returns ``pyopencl.array.Array`` results that stay on the device.
    ``fuse``, ``epilogues``, ``blas``, ``conv``, ``cpu_group``, ``stats``: the settings
    (:mod:`theano_ocl.runtime.settings`: each defaults to its environment variable, read
    when a function is linked), e.g. ``OCLMode(fuse=False, blas='host')``.
    ``Mode.clone``/``including``/``excluding`` keep the linker (and so the device and the
    settings); ``excluding('ocl_fusion')`` turns fusion off, ``excluding('ocl_epilogues')``
    the product epilogues, as Theano users turn optimizations off by name.
    """

    def __init__(self, linker=None, optimizer='default', device=None, outputs='host',
                 **settings):
        if linker is None or linker == 'ocl':
            linker = OCLLinker(device=device, output_mode=outputs, **settings)
        elif device is not None or outputs != 'host' or settings:
            raise ValueError('give either a linker or device/outputs/settings, not both')
        super(OCLMode, self).__init__(linker=linker, optimizer=optimizer)

    #: optimization names Theano users include/exclude, and the settings they turn on/off
    TAGS = {'ocl_fusion': ('fuse', True, False), 'ocl_epilogues': ('epilogues', 'always', '0')}

    def _with_tags(self, tags, on):
        ours = [t for t in tags if t in self.TAGS]
        rest = [t for t in tags if t not in self.TAGS]
        parent = super(OCLMode, self)
        mode = (parent.including(*rest) if on else parent.excluding(*rest)) if rest \
            else self.clone()
        for t in ours:
            name, yes, no = self.TAGS[t]
            mode.linker.settings[name] = yes if on else no
        return mode

    def including(self, *tags):
        return self._with_tags(tags, True)

    def excluding(self, *tags):
        return self._with_tags(tags, False)

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
