"""A CPU device's buffers read and written in place by the host, where a call runs there.

A call the cost model sends to the host (``runtime/cost.py``) runs Theano's VM on host
arrays. Its device-array inputs were downloaded and its results, for a function with device
outputs, uploaded: each a command through PoCL's queue, ~25-60 us on the 2-core Xeon
(2026-12-01), as much as a small function's whole work (argmax over the rows of a 512 x 512
float32 matrix: 22 us in NumPy, 33 us as Theano C's call). On a device whose buffers are
host memory (PoCL's CPU devices, ``unified_memory``), neither is needed: a buffer's memory
has one address, the one a map of it hands back, and stays there while the buffer lives.

:class:`HostViews` learns each buffer's address once (a map, released at once) and then

- ``view(arr)``: a NumPy array over a device array's elements in place;
- ``fill(value)``: a device array from the device's pool holding a host result, written
  by a copy into the buffer's memory.

Both only once the device's queue has finished (``idle()``: a finished queue's
``clFinish`` returns in ~0.1 us), so that no queued kernel writes what the host reads, nor
reads what it writes, at the same time; a kernel queued afterwards sees what the host
wrote (the queue's enqueue is the ordering point).

Addresses are kept where they cannot go stale: for the device pool's own buffers as the
queued host BLAS keeps them (:class:`Addresses`: forgotten whenever the pool
gives buffers back to the driver, whose handles a later buffer may reuse; a buffer is the
pool's where its handle is one the pool made since, ``OCLDevice.pool_handles``: a
``PooledBuffer`` of the caller's own pool is not); for any other
buffer (an array the caller made) with the buffer itself held, the last ``KEEP`` of them,
each of at most ``KEEP_BYTES`` (a buffer held cannot be released, so its handle cannot come
back as another's); a larger one is mapped for each call.

:func:`of` checks the device once: a pattern a kernel wrote must read back through the
address, and one written there must reach a download; else (or on a device that is not a
CPU with unified memory) it returns None and calls copy as before.
"""
import collections
import contextlib
import ctypes

import numpy as np

from .. import darray as da

#: buffers of the caller's own (not the pool's) whose addresses are kept, at most ...
KEEP = 16
#: ... each of at most this many bytes (a kept buffer is held: its memory stays in use)
KEEP_BYTES = 16 << 20


class Addresses(object):
    """The host address of each of a device's pool buffers, mapped once (a CPU device's
    map is the buffer itself). Forgotten whenever the pool gave held buffers back to the
    driver (``OCLDevice.released`` moved on), since a new buffer may then get an old one's
    handle; each time, ``generation`` moves on, so a command filled with older addresses
    fills itself again."""

    def __init__(self, dev):
        self.dev = dev
        self.known = {}
        self.released = dev.released
        self.generation = 0

    def current(self):
        """The generation of the addresses known now (forgetting them first where the pool
        gave buffers back since they were mapped)."""
        if self.dev.released != self.released:
            self.released = self.dev.released
            self.forget()
        return self.generation

    def of(self, buf):
        self.current()
        h = buf.int_ptr
        addr = self.known.get(h)
        if addr is None:
            addr = self.known[h] = mapped_address(self.dev, buf)
        return addr

    def forget(self):
        self.known.clear()
        self.generation += 1

    def learn(self, buf, addr):
        """``buf`` was made over host memory at ``addr``: known without a map
        (``runtime.steps.handed_host_output``)."""
        self.known[buf.int_ptr] = addr

    def let_go(self, buf):
        """``buf`` is let go outside the pool (its handle may come back as a later
        buffer's): forgotten."""
        if buf is not None:
            self.known.pop(buf.int_ptr, None)


def owned(buf, dev):
    """Whether ``buf`` is a buffer ``dev``'s pool made and has not given back since
    (``OCLDevice.pool_handles``): its address, learnt once (:class:`Addresses`), stays its
    own. A buffer of another pool (a caller's device arrays) may be given back to the
    driver by that pool unseen, and its handle come back with other memory behind it."""
    return buf.int_ptr in dev.pool_handles


def mapped_address(dev, buf):
    """The host address a map of ``buf`` hands back (the map released at once: on a CPU
    device it is the buffer's own memory)."""
    cl = dev.cl
    arr, _ = cl.enqueue_map_buffer(dev.queue, buf, cl.map_flags.READ, 0, (1,), np.uint8,
                                   is_blocking=True)
    addr = arr.ctypes.data
    arr.base.release(dev.queue)
    return addr


def addresses(dev):
    """The device's :class:`Addresses` (made at the first use)."""
    a = getattr(dev, 'queued_addresses', None)
    if a is None:
        a = dev.queued_addresses = Addresses(dev)
    return a


def of(dev):
    """The device's :class:`HostViews`, or None where the host cannot use its buffers in
    place (not a CPU device with unified memory, or the check failed)."""
    views = dev.__dict__.get('host_views', False)
    if views is False:
        views = None
        if getattr(dev, 'is_cpu', False) and getattr(dev, 'unified_memory', False):
            views = HostViews(dev)
            if not views.check():
                views = None
        dev.host_views = views
    return views


class HostViews(object):
    """In-place host access to one device's buffers (see the module docstring)."""

    def __init__(self, dev):
        import pyopencl.array as cla
        self.dev = dev
        self.empty = cla.empty
        self.pool_addresses = addresses(dev)
        self.kept = collections.OrderedDict()   # handle: (buffer, address), oldest first
        self.factories = {}     # (shape, dtype, queue): darray.array_factory's maker

    def idle(self, queue):
        """Wait for ``queue`` (and the device's own) to finish what was queued."""
        queue.finish()
        if queue is not self.dev.queue:
            self.dev.queue.finish()

    # ------------------------------------------------------------------ addresses
    def address(self, buf):
        """The host address of ``buf``'s first byte."""
        if owned(buf, self.dev):
            return self.pool_addresses.of(buf)
        h = buf.int_ptr
        got = self.kept.get(h)
        if got is not None and got[0] is buf:
            self.kept.move_to_end(h)
            return got[1]
        addr = mapped_address(self.dev, buf)
        if buf.size <= KEEP_BYTES:
            self.kept[h] = (buf, addr)
            self.kept.move_to_end(h)
            while len(self.kept) > KEEP:
                self.kept.popitem(last=False)
        return addr

    # ------------------------------------------------------------------ values
    def view(self, arr):
        """A host array over device array ``arr``'s elements (no copy; the queue must be
        idle: :meth:`idle`)."""
        shape, dtype, strides = arr.shape, arr.dtype, arr.strides
        buf = arr.base_data
        if buf is None or arr.size == 0:
            return np.empty(shape, dtype)
        lo = hi = arr.offset
        for n, s in zip(shape, strides):
            if s < 0:
                lo += (n - 1) * s
            else:
                hi += (n - 1) * s
        size = buf.int_size if hasattr(buf, 'int_size') else buf.size
        if lo < 0 or hi + dtype.itemsize > size:
            raise ValueError('a device array reaches outside its buffer (bytes %d..%d of %d)'
                             % (lo, hi + dtype.itemsize, size))
        start = self.address(buf) + lo
        mem = (ctypes.c_char * (hi + dtype.itemsize - lo)).from_address(start)
        # (writeable: Theano's C code copies a read-only input first -- 62 us against 24
        # for argmax over 512 x 512 float32; a function's inputs are never destroyed unless
        # declared mutable, as for host arrays)
        return np.ndarray(shape, dtype, buffer=mem, offset=arr.offset - lo, strides=strides)

    def fill(self, value, queue):
        """A device array (C order, from the device's pool) holding host array ``value``,
        copied into its buffer's memory (the queue must be idle: :meth:`idle`)."""
        if not value.size:
            return self.empty(queue, value.shape, value.dtype)
        key = (value.shape, value.dtype, queue)
        make = self.factories.get(key)
        if make is None:
            if len(self.factories) >= 64:
                self.factories.clear()
            make = self.factories[key] = da.array_factory(queue, value.shape, value.dtype)
        buf = self.dev.alloc(value.nbytes)
        out = make(buf)
        dst = np.ndarray(value.shape, value.dtype,
                         buffer=(ctypes.c_char * value.nbytes).from_address(self.address(buf)))
        np.copyto(dst, value, casting='no')
        return out

    # ------------------------------------------------------------------ the check
    def check(self):
        """Whether this device's buffers are where their maps say, both ways: a kernel's
        fill read through the address, a write through the address downloaded."""
        cl = self.dev.cl
        queue = self.dev.queue
        n = 4096
        try:
            buf = self.dev.alloc(n)
            cl.enqueue_fill_buffer(queue, buf, np.uint32(0x5a17c0de), 0, n)
            queue.finish()
            addr = self.address(buf)
            seen = np.ctypeslib.as_array((ctypes.c_uint32 * (n // 4)).from_address(addr))
            if not (seen == 0x5a17c0de).all():
                return False
            seen[:] = np.arange(n // 4, dtype=np.uint32)
            back = np.empty(n // 4, np.uint32)
            cl.enqueue_copy(queue, back, buf)
            queue.finish()
            return bool((back == np.arange(n // 4, dtype=np.uint32)).all())
        except Exception:
            return False


# ---------------------------------------------------------------------- a call's inputs
def read_inputs(cells, dev, queue):
    """Put host arrays of the device arrays in ``cells`` (a function's device-consumed
    input cells): views of their memory where the device's buffers are the host's
    (:func:`of`; the queue waited for first), else downloads. Returns whether a cell held
    a device array. The device is asked for its views only when one does (the first ask
    checks it, a few commands through its queue: a function of host values never pays for
    it, nor has them run beside its cost model's timing)."""
    views = False
    for cell in cells:
        v = cell[0]
        if da.is_device_array(v):
            if views is False:
                views = of(dev)
                if views is not None:
                    views.idle(queue)
            cell[0] = v.get(queue=queue) if views is None else views.view(v)
    return views is not False


@contextlib.contextmanager
def reading(cells, dev, queue):
    """``read_inputs`` for the length of a ``with`` block (a dry run: the cost model's
    choice), the device arrays put back after it; yields ``read_inputs``' answer."""
    swapped = [(cell, cell[0]) for cell in cells if da.is_device_array(cell[0])]
    try:
        yield read_inputs(cells, dev, queue)
    finally:
        for cell, value in swapped:
            cell[0] = value
