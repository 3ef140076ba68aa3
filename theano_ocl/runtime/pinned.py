"""Host arrays in page-locked memory for the outputs a call downloads (and the inputs it
uploads: ``runtime/steps.upload_input_step`` copies an input of at least ``MIN_BYTES``
into a block its step keeps, so that the device's copy starts at once).

A download into pageable memory (a fresh ``np.empty``) goes through the driver's staging
buffer and touches every page of the new array. ``bench/download_cost.py`` on the H100
(NVIDIA OpenCL, 2026-11-26), 921,600 bytes (check1's result): 90.4-91.4 us into a new
``np.empty``, 34.8-35.2 us into a block of page-locked memory mapped from a buffer made
with ``CL_MEM_ALLOC_HOST_PTR``; check1's host-result call 152-175 us with plain arrays,
48.4-55.4 us with these blocks (Theano C: 643-891 us).

So a function's host outputs of at least :data:`MIN_BYTES` are downloaded into blocks of
such memory, each handed to the caller as an ordinary writable numpy array. A block goes
back to its device's pool when the last array viewing it is gone (its ``base`` is a
:class:`_Lease` whose finalizer returns the block), and the next output of its size class
takes it again: an array the caller keeps is never written over. A pool holds at most
:data:`CAP_BYTES` of blocks, in and out of use; past that, outputs are plain arrays.

Which devices: the ``pinned`` setting (``runtime.settings``) for outputs, ``stage_inputs``
for inputs: 'gpu' (the default: where the device memory is across a bus), 'always' (CPU
devices too, where it only costs), 'off'. With a call's reads queued early
(``runtime/early.py``) the staging still pays on the H100 where inputs are big: the LSTM
step's 6.7-9.3 ms rounds against 10.1-11.3 ms with ``stage_inputs='off'`` (one process each,
2026-11-27); the MLP's and LeNet's steps were within their spread either way.
"""
import threading

import numpy as np

MIN_BYTES = 1 << 16          # smaller outputs: the copy costs less than the page faults
CAP_BYTES = 1 << 28          # page-locked bytes a device's pool holds at most


def wanted(setting, dev):
    """Whether host outputs on ``dev`` go into page-locked blocks under ``setting``."""
    return setting == 'always' or (setting == 'gpu' and dev.is_gpu)


class PinnedPool(object):
    """Blocks of page-locked host memory of one device, by power-of-two size class."""

    def __init__(self, cl, context, queue, cap=CAP_BYTES):
        self.cl = cl
        self.context = context
        self.queue = queue
        self.cap = cap
        self.held = 0               # bytes of blocks made (in use or free)
        self.free = {}              # size class -> [block]
        self.made = 0               # blocks made (mapped), for tests and the profile
        self.reused = 0
        self._lock = threading.Lock()

    def empty(self, shape, dtype):
        """A C-contiguous host array of ``shape``/``dtype``: in a page-locked block when the
        output is big enough and the pool has room, else a plain ``np.empty``."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < MIN_BYTES:
            return np.empty(shape, dtype)
        size = 1 << (nbytes - 1).bit_length()
        try:
            block = self.free.get(size, []).pop()
            self.reused += 1
        except IndexError:
            with self._lock:
                if self.held + size > self.cap:
                    return np.empty(shape, dtype)
                self.held += size
            try:
                block = self._make(size)
            except Exception:
                with self._lock:
                    self.held -= size
                return np.empty(shape, dtype)
        return np.asarray(_Lease(self, block, shape, dtype))

    def _make(self, size):
        cl = self.cl
        buf = cl.Buffer(self.context, cl.mem_flags.READ_WRITE | cl.mem_flags.ALLOC_HOST_PTR, size)
        mapped, _ = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                          0, (size,), np.uint8, is_blocking=True)
        self.made += 1
        return (size, buf, mapped, mapped.__array_interface__['data'][0])

    def give_back(self, block):
        """(From a finalizer, which the collector may run in any thread, inside ``empty``
        too: no lock here; a list's append and pop are atomic.)"""
        self.free.setdefault(block[0], []).append(block)

    def release(self):
        """Forget the free blocks (their memory goes back once unmapped by pyopencl)."""
        free, self.free = self.free, {}
        with self._lock:
            self.held -= sum(b[0] for blocks in free.values() for b in blocks)


def is_pinned(a):
    """Whether host array ``a`` lies in one of the pools' page-locked blocks."""
    return isinstance(a.base, _Lease)


class _Lease(object):
    """What a handed-out array views (``np.asarray`` of it: the array's ``base``): the
    block goes back to the pool when this object is freed, after the last view of it."""
    __slots__ = ('__array_interface__', 'pool', 'block')

    def __init__(self, pool, block, shape, dtype):
        self.pool = pool
        self.block = block
        self.__array_interface__ = dict(shape=tuple(shape), typestr=dtype.str,
                                        descr=dtype.descr, data=(block[3], False), version=3)

    def __del__(self):
        try:
            self.pool.give_back(self.block)
        except Exception:       # pragma: no cover - interpreter shutdown
            pass
