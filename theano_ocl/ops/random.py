"""Random family: ``theano.sandbox.rng_mrg.mrg_uniform`` (what ``MRG_RandomStreams``
draws everything from) on the device.

The kernel (``kernels/random.cl.mako``) runs Theano's MRG31k3p generator with one
work-item per stream, so for the same rstate the samples and the updated rstate equal
Theano's CPU implementation bit for bit: its C code for float32/float64, its Python code
for float16. ``binomial``, ``uniform`` with bounds and ``normal``'s arithmetic are
Elemwise ops on the sample and run on the device through the elementwise family.
"""
import os

import numpy as np
from mako.template import Template
from theano.sandbox.rng_mrg import mrg_uniform

from ..errors import NoDeviceImplementation
from .base import DeviceImpl
from .registry import ocl_impl

_TEMPLATE = Template(filename=os.path.join(os.path.dirname(__file__), '..', 'kernels',
                                           'random.cl.mako'))
_M1 = 2147483647

# The constant each output dtype multiplies by, as Theano's C (float32, float64) and Python
# (float16) code write it.
_NORM = {'float32': '4.6566126e-10f', 'float64': '4.656612873077392578125e-10',
         'float16': repr(float(np.float16(3.0458e-05)))}


def kernel_source(dtype, fp64):
    """(source, kernel name) of the generator writing ``dtype`` samples."""
    norm_t = 'double' if dtype == 'float64' or (dtype == 'float16' and fp64) else 'float'
    norm = _NORM[dtype] if norm_t == 'double' or dtype == 'float32' else _NORM[dtype] + 'f'
    name = 'mrg_uniform_%s' % dtype
    support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable' if norm_t == 'double' else ''
    out_t = {'float16': 'half', 'float32': 'float', 'float64': 'double'}[dtype]
    return _TEMPLATE.render(name=name, support=support, dtype=dtype, out_t=out_t, norm=norm,
                            norm_t=norm_t), name


class MRGUniformImpl(DeviceImpl):
    """Inputs: rstate (device int32 matrix, one 6-int state per stream), size (host)."""
    host_inputs = (1,)

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.dtype = node.outputs[1].type.dtype
        self.ndim = node.outputs[1].type.ndim
        self.src, self.kname = kernel_source(self.dtype, dev.has_fp64)

    def describe(self):
        return 'MRG31k3p kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        rstate, size = ins
        size = np.asarray(size)
        if size.ndim != 1 or size.shape[0] != self.ndim:
            raise ValueError('%s: size must be a vector of length %d, got %r'
                             % (self.node.op, self.ndim, size))
        shape = tuple(int(s) for s in size)
        n = 1
        for s in shape:
            n *= s
        if n > _M1:
            raise ValueError('rng_mrg does not support more than (2**31 -1) samples (%s asks %d)'
                             % (self.node.op, n))
        if rstate.ndim != 2 or rstate.shape[1] != 6 or rstate.dtype != np.int32:
            raise ValueError('%s: rstate must be an int32 matrix with 6 columns, got %s %s'
                             % (self.node.op, rstate.dtype, rstate.shape))
        n_streams = rstate.shape[0]
        new_state = ctx.alloc(rstate.shape, 'int32')
        sample = ctx.alloc(shape, self.dtype)
        if n_streams == 0:
            return [new_state, sample]
        prg = ctx.dev.build(self.src)
        args = [np.int64(n), np.int64(n_streams), rstate,
                np.int64(rstate.strides[0] // 4), np.int64(rstate.strides[1] // 4),
                new_state, sample]
        if ctx.dev.is_cpu:
            gsize, lsize = (n_streams,), None
        else:
            gsize, lsize = (-(-n_streams // 64) * 64,), (64,)
        ctx.launch(prg, self.kname, gsize, lsize, args)
        return [new_state, sample]


@ocl_impl.register(mrg_uniform)
def _mrg_uniform(op, node, dev):
    dtype = node.outputs[1].type.dtype
    if dtype not in _NORM:
        raise NoDeviceImplementation('mrg_uniform has no %s samples' % dtype)
    return MRGUniformImpl(node, dev)
