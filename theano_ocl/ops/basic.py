"""Ops that only pass values through: DeepCopyOp, ViewOp, OutputGuard, IfElse.

On the device they are views: outputs leave the frame through a download (a fresh
host array) or a fresh device buffer, and updates are committed by copy, so no
output can alias a buffer the next call overwrites.
"""
from theano.compile.ops import DeepCopyOp, ViewOp, OutputGuard
from theano.ifelse import IfElse

from ..runtime.steps import branch_taken
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


class IfElseImpl(DeviceImpl):
    """The taken branch's values are the outputs, as they are (no copy).

    The condition comes on the host (one scalar read where a kernel computed it). The
    linker's ``lazy_branches`` pass and the VM see to the laziness: a frame plans (and so
    runs) only the tasks of the taken branch; the other branch's inputs arrive as None.
    ``branch_input``: the host input that selects a branch rather than deciding a plan (it
    does not key frames; the VM guards its truth value).
    """
    complex_ok = True
    host_inputs = (0,)
    branch_input = 0
    host_when = ('eager (both branches run) where a task between a branch and the IfElse '
                 'overwrites in place a value the branch reads')

    def __init__(self, node, dev):
        super(IfElseImpl, self).__init__(node, dev)
        n = node.op.n_outs
        self.branches = {True: tuple(range(1, 1 + n)), False: tuple(range(1 + n, 1 + 2 * n))}

    def plan(self, ctx, ins):
        return [ins[j] for j in self.branches[branch_taken(ins[0])]]


@ocl_impl.register(IfElse)
@implemented_by(IfElseImpl)
def _ifelse(op, node, dev):
    return IfElseImpl(node, dev)
