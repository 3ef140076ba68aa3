"""Ops that are gathers over an index the plan builds: ``PermuteRowElements`` (forward) and
``Choose`` over a tensor of choices, both planned as ``ops/subtensor.plan_gather``."""
import numpy as np
from theano.gof import Constant
from theano.tensor import basic as tbasic
from theano.tensor.type import TensorType

from ..errors import NoDeviceImplementation
from .base import DeviceImpl
from .elemwise import check_flag, error_flag, plan_elementwise
from .registry import implemented_by, ocl_impl
from .shape import frame_constant
from .subtensor import plan_gather


def _axis_index(ctx, src_len, out_len, d, nd):
    """The index array that walks output axis ``d`` (of ``nd``) over a source axis of
    ``src_len`` in a gather: 0 where the source broadcasts (length 1), else 0..out_len-1;
    shaped to broadcast along ``d`` only (a frame constant)."""
    index = np.zeros(1, np.int64) if src_len == 1 else np.arange(out_len, dtype=np.int64)
    return frame_constant(ctx, index.reshape([-1 if k == d else 1 for k in range(nd)]))


class PermuteRowsImpl(DeviceImpl):
    """``PermuteRowElements`` (forward): row r of x permuted by row r of y, both broadcast
    to the output's leading dims, as the gather ``x[I_0, ..., I_{n-2}, y]`` where I_d is
    the output's index along d (0 where x has length 1 there). Negative entries of y count
    from the end of the row and out-of-range ones raise IndexError, as numpy's ``x[y]`` in
    Theano's perform."""
    host_when = 'the inverse permutation (a scatter whose order decides duplicates)'

    def describe(self):
        return 'gather kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        x, y = ins[0], ins[1]
        nd = x.ndim
        xb = self.node.inputs[0].type.broadcastable
        yb = self.node.inputs[1].type.broadcastable
        # as Theano's perform: a length differs only along a dim broadcastable by its type
        for d, (nx, ny) in enumerate(zip(x.shape, y.shape)):
            if nx != ny and not (nx == 1 and xb[d]) and not (ny == 1 and yb[d]):
                raise ValueError('Dimension mismatch: %s, %s' % (nx, ny))
        entries = [_axis_index(ctx, x.shape[d], x.shape[d] if x.shape[d] != 1 else y.shape[d],
                               d, nd) for d in range(nd - 1)]
        return [plan_gather(ctx, self.node, x, entries + [y])]


@ocl_impl.register(tbasic.PermuteRowElements)
@implemented_by(PermuteRowsImpl)
def _permute_rows(op, node, dev):
    inverse = node.inputs[2]
    if not (isinstance(inverse, Constant) and int(inverse.data) == 0):
        raise NoDeviceImplementation('the inverse permutation (a scatter whose order decides '
                                     'duplicates) has no device kernel')
    return PermuteRowsImpl(node, dev)


class ChooseImpl(DeviceImpl):
    """``Choose`` over a tensor of choices (``np.choose(a, choices, mode)``): the index
    ``a`` is made valid by the mode (raise: ValueError for an entry outside
    [0, len(choices)), as numpy; wrap: modulo; clip: clamped) in an elementwise launch,
    then the gather ``choices[a', I_0, ..., I_{n-1}]`` (I_d the output's index along d, 0
    where choices has length 1 there)."""
    host_when = 'choices given as a typed list'

    def describe(self):
        return 'gather kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        a, choices = ins
        n = choices.shape[0]
        nd = a.ndim
        cshape = choices.shape[1:]
        try:
            shape = tuple(np.broadcast_shapes(a.shape, cshape))
        except ValueError:
            raise ValueError('shape mismatch: objects cannot be broadcast to a single shape '
                             '(index %s, choices %s)' % (a.shape, choices.shape))
        idx = ctx.alloc(a.shape, 'int64')
        mode = self.node.op.mode
        if mode == 'raise' or n == 0:
            body = 'long r = (long)i0; if (r < 0 || r >= %dL) { th_err = 1; r = 0; } o0 = r;' % n
        elif mode == 'wrap':
            body = 'long r = (long)i0 %% %dL; o0 = r < 0 ? r + %dL : r;' % (n, n)
        else:
            body = 'long r = (long)i0; o0 = r < 0 ? 0 : (r >= %dL ? %dL : r);' % (n, n - 1)
        err = error_flag(ctx)
        plan_elementwise(ctx, '', body, [idx], [a], a.shape, err=err)
        check_flag(ctx, err, lambda code: ValueError('invalid entry in choice array (in %s)'
                                                     % self.node.op))
        entries = [idx] + [_axis_index(ctx, cshape[d], shape[d], d, nd) for d in range(nd)]
        return [plan_gather(ctx, self.node, choices, entries)]


@ocl_impl.register(tbasic.Choose)
@implemented_by(ChooseImpl)
def _choose(op, node, dev):
    if not isinstance(node.inputs[1].type, TensorType):
        raise NoDeviceImplementation('choices given as a typed list have no device kernel')
    return ChooseImpl(node, dev)
