"""What every device implementation shares: the planning interface and launch sizing."""

INT_DTYPES = ('int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32', 'uint64')
FLOAT_DTYPES = ('float16', 'float32', 'float64')
COMPLEX_DTYPES = ('complex64', 'complex128')
#: dtypes device buffers can hold (the linker keeps tensors of other dtypes on the host)
DEVICE_DTYPES = ('bool',) + INT_DTYPES + FLOAT_DTYPES + COMPLEX_DTYPES


class DeviceImpl(object):
    """Device implementation of one Apply node.

    ``host_inputs``: indices of inputs the implementation needs as host values
    (sizes, indices, shapes); the others arrive as :class:`~theano_ocl.darray.DArray`.
    ``plan(ctx, inputs)`` allocates outputs through ``ctx.alloc``, records launches
    through ``ctx.launch``/``ctx.copy`` and returns one DArray per output. It runs once
    per input signature; what it records is replayed on later calls, so everything
    value-dependent must come through ``host_inputs`` (guarded) or be on the device.
    """
    host_inputs = ()
    #: indices of inputs taken on the host where the linker has them there (shape
    #: arithmetic, constants, scalar inputs) and on the device otherwise: the linker sets
    #: ``host_inputs`` from it per node (``linker.select``)
    host_if_available = None
    #: whether the implementation takes complex64/complex128 values (views, copies and the
    #: kernels that know complex arithmetic); the linker keeps other nodes on the host
    complex_ok = False
    #: inputs whose elementwise producer this implementation computes inside its own kernel
    #: (``ops.fusion.fuse_producers``: the producer is never launched nor stored)
    fusable_inputs = ()
    #: whether an elementwise consumer of its output may be computed inside its kernel
    #: (``ops.fusion.fuse_epilogues``)
    takes_epilogue = False
    #: set by ``ops.fusion.fuse_producers`` on an elementwise node Theano made in place:
    #: it writes fresh outputs instead, so a producer reading what it would overwrite can
    #: be folded into a consumer after it (its destroy is void)
    writes_fresh = False
    #: the dtypes of the node's device tensors this implementation takes (None: every one of
    #: DEVICE_DTYPES, complex ones where ``complex_ok``); the supported-ops page lists them
    dtypes = None
    #: when the op's factory leaves a node on the host instead (``NoDeviceImplementation``),
    #: in words, beyond the dtypes; the supported-ops page lists it
    host_when = ''
    #: host inputs (integer indices) the implementation can read at every call without its
    #: plan depending on their values, and those the linker made so (``linker.mark_dynamic``:
    #: the ones not fixed by shapes and constants). A frame is not keyed on a dynamic input;
    #: the implementation reads its cell (``ctx.cells``) in a host step of every call.
    dynamic_capable = ()
    dynamic_inputs = ()
    #: whether ``plan`` reads or computes values of the frame (a mask's positions, a Scan
    #: running its loop): the first call's plans recorded before it run first
    #: (``runtime/build.py``); other plans only record
    plans_with_values = False
    #: compiled functions the implementation runs inside it (a device Scan's inner
    #: function); ``report(f)`` lists their placements under the node
    inner_functions = ()
    #: whether ``plan`` records no launch where no input is read at every call
    #: (``dynamic_inputs``): a view of its input (the CPU cost model counts the launches a
    #: call makes, ``runtime/cost.py``)
    is_view = False

    def __init__(self, node, dev):
        self.node = node
        self.dev = dev

    def plan(self, ctx, inputs):  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self):
        return type(self).__name__
