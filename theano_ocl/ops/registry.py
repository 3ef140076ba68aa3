"""The dispatch registry: op type -> device implementation.

Each op family module registers a factory with ``@ocl_impl.register(OpType)``;
the factory returns an object with a ``plan(ctx, inputs) -> outputs`` method (see
:class:`theano_ocl.ops.base.DeviceImpl`) or raises ``NoDeviceImplementation``
with the reason the node must run on the host. Adding a family never touches the
linker.
"""
from functools import singledispatch

from ..errors import NoDeviceImplementation


@singledispatch
def _dispatch(op, node, dev):
    raise NoDeviceImplementation('no device implementation for %s' % type(op).__name__)


def ocl_impl(op, node, dev):
    return _dispatch(op, node, dev)


ocl_impl.register = _dispatch.register
ocl_impl.registry = _dispatch.registry
