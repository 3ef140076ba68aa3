"""Ops that only pass values through: DeepCopyOp, ViewOp, OutputGuard.

On the device they are views: outputs leave the frame through a download (a fresh
host array) or a fresh device buffer, and updates are committed by copy, so no
output can alias a buffer the next call overwrites.
"""
from theano.compile.ops import DeepCopyOp, ViewOp, OutputGuard

from .base import DeviceImpl
from .registry import implemented_by, ocl_impl


class PassThrough(DeviceImpl):
    complex_ok = True

    def plan(self, ctx, ins):
        return [ins[0]]


@ocl_impl.register(DeepCopyOp)
@ocl_impl.register(ViewOp)
@ocl_impl.register(OutputGuard)
@implemented_by(PassThrough)
def _pass_through(op, node, dev):
    return PassThrough(node, dev)
