"""Shapes and views: DimShuffle (a view: no kernel, no copy)."""
from theano.tensor.elemwise import DimShuffle

from .base import DeviceImpl
from .registry import ocl_impl


class DimShuffleView(DeviceImpl):
    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.new_order = node.op.new_order
        self.drop = [d for d in range(node.inputs[0].ndim) if d not in self.new_order]

    def describe(self):
        return 'view (DimShuffle %s)' % (self.new_order,)

    def plan(self, ctx, ins):
        x = ins[0]
        for d in self.drop:
            if x.shape[d] != 1:
                raise ValueError('DimShuffle%s cannot drop dimension %d of an input of shape %s '
                                 '(only broadcastable, size-1 dimensions can be dropped)'
                                 % (self.new_order, d, x.shape))
        shape, strides = [], []
        for o in self.new_order:
            if o == 'x':
                shape.append(1)
                strides.append(x.itemsize)
            else:
                shape.append(x.shape[o])
                strides.append(x.strides[o])
        return [x.view(shape, strides)]


@ocl_impl.register(DimShuffle)
def _dimshuffle(op, node, dev):
    return DimShuffleView(node, dev)
