"""The collectives family (``theano_ocl.distributed``: AllReduce, Broadcast) on the device.

A collective is one host step of the frame, in the frame's order (a barrier: the planner
moves nothing across it, so every rank meets its collectives in the same order), running
the same exchange as the op's ``perform`` (``distributed.collectives.reduce_into`` /
``broadcast_into``) on the device's buffers:

- where the device shares memory with the host (a CPU device, PoCL), the input and output
  buffers are mapped (no copy: PoCL hands back the buffer itself) and the mapped arrays are
  handed to MPI directly;
- otherwise (a GPU) the input is downloaded into a page-locked block of the device's pool,
  reduced there in place, and uploaded into the output; the block is the frame's, made once.
"""
from ..darray import span
from ..distributed.collectives import AllReduce, Broadcast, broadcast_into, reduce_into
from ..runtime.memory import download, upload
from .base import DeviceImpl, INT_DTYPES
from .blas_host import _Mapped
from .registry import implemented_by, ocl_impl


class CollectiveImpl(DeviceImpl):
    """One collective as a host step: mapped buffers on a CPU device, staged through a
    page-locked block on a GPU."""
    dtypes = ('float32', 'float64') + INT_DTYPES      # (MPI has no float16 of its own)
    collective = True

    def __init__(self, node, dev, exchange):
        super(CollectiveImpl, self).__init__(node, dev)
        self.exchange = exchange          # (src, dst) host arrays -> None
        self.mapped = bool(dev.unified_memory)

    def describe(self):
        return '%s (%s)' % (self.node.op, 'mapped buffers' if self.mapped else 'staged')

    def plan(self, ctx, ins):
        x = ctx.contiguous(ins[0])
        y = ctx.alloc(x.shape, x.dtype)
        exchange, queue, dev = self.exchange, ctx.queue, ctx.dev
        if self.mapped:
            m = _Mapped(dev, queue)
            regions = [(x.root,) + span(x) + (False,), (y.root,) + span(y) + (True,)]

            def run():
                m.open(regions)
                try:
                    exchange(m.view(x), m.view(y))
                finally:
                    m.release()
        else:
            stage = dev.pinned.empty(x.shape, x.dtype)

            def run():
                download(dev, queue, x, stage)
                exchange(stage, stage)
                upload(dev, queue, y, stage, blocking=True)
        ctx.host_step(run)
        return [y]


@ocl_impl.register(AllReduce)
@implemented_by(CollectiveImpl)
def _allreduce(op, node, dev):
    name = op.label(node)
    return CollectiveImpl(node, dev, lambda src, dst: reduce_into(src, dst, op.op, name,
                                                                  op.due()))


@ocl_impl.register(Broadcast)
def _broadcast(op, node, dev):
    name = op.label(node)
    return CollectiveImpl(node, dev, lambda src, dst: broadcast_into(src, dst, op.root, name,
                                                                     op.due()))


_broadcast.impls = (CollectiveImpl,)
