"""``theano.tensor.extra_ops`` ops that real graphs use: ``RepeatOp`` (``T.repeat``).

``repeat(x, repeats, axis)``: the repeats decide the output's shape, so they are a host
input (the frame is keyed on their values, as for any shape-deciding value); the host
computes which source index each output position takes (``np.repeat`` of a range, so
numpy's own errors for negative or mis-sized repeats) and the device gathers along the
axis with the subtensor family's gather kernel. ``axis=None`` repeats the flattened array.
"""
import numpy as np
from theano.tensor.extra_ops import RepeatOp

from .base import DeviceImpl
from .registry import ocl_impl
from .shape import frame_constant, reshaped
from .subtensor import plan_gather


class RepeatImpl(DeviceImpl):
    host_inputs = (1,)

    def describe(self):
        return 'gather kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x, repeats = ins
        axis = self.node.op.axis
        if axis is None:
            x = reshaped(ctx, x, (x.size,))
            axis = 0
        elif axis < 0:
            axis += x.ndim
        n = x.shape[axis]
        # numpy decides validity (negative counts, a vector of the wrong length)
        src = np.repeat(np.arange(n, dtype=np.int64), np.asarray(repeats))
        idx = frame_constant(ctx, src)
        entries = [slice(None)] * axis + [idx]
        return [plan_gather(ctx, self.node, x, entries)]


@ocl_impl.register(RepeatOp)
def _repeat(op, node, dev):
    return RepeatImpl(node, dev)
