"""The dispatch registry: op type -> device implementation.

Each op family module registers a factory with ``@ocl_impl.register(OpType)``;
the factory returns an object with a ``plan(ctx, inputs) -> outputs`` method (see
:class:`theano_ocl.ops.base.DeviceImpl`) or raises ``NoDeviceImplementation``
with the reason the node must run on the host. Adding a family never touches the
linker.

A factory also says which :class:`~theano_ocl.ops.base.DeviceImpl` classes it returns
(:func:`implemented_by`, or ``factory.impls`` set by a family's factory maker): the
supported-ops page (:mod:`theano_ocl.ops.catalog`) lists them with their ``dtypes`` and
``host_when``. A factory that never returns one (the op always stays on the host)
declares ``impls = ()`` and says why in its docstring.
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


def implemented_by(*impls):
    """Declare the DeviceImpl classes a factory returns (read by the supported-ops page)."""
    def deco(factory):
        factory.impls = impls
        return factory
    return deco
