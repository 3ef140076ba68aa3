"""What theano_ocl holds in memory, and the bounds it keeps.

Device memory: buffers come from one pool per device (``OCLDevice.alloc``), held against
the device's reported size (PoCL does not enforce it). A function keeps the frame of its
last call and at most ``OCLFunction.max_frames`` others, whose buffers together stay under
``max_cached_bytes`` and whose plans under ``max_cached_steps`` steps; evicted and deleted
frames give their buffers back to the pool, and the pool gives them back to the driver
when it holds more than ``device.TRIM_KEEP``.
Under memory pressure every function's cached frames are dropped before an allocation
fails. Host memory: compiled programs are memoized per device up to ``max_programs`` (least
recently used dropped), rendered kernel sources up to ``kernels.MAX_RENDERED``, and as
many per family source function (``kernels.memoize``).
"""
import gc
import weakref

import numpy as np

from . import waits

_live = weakref.WeakSet()          # the FrameCache of every linked function alive


def register_frames(cache):
    """Count ``cache`` (a linked function's ``runtime.frames.FrameCache``) in
    :func:`memory_info` while it lives."""
    _live.add(cache)


def memory_info(device=None, collect=False):
    """A dict of what theano_ocl holds on ``device`` (default: the default device): bytes in
    use and held by the pool, the limit it keeps to, live functions and the bytes their
    cached frames hold, programs and rendered sources memoized."""
    from .. import kernels
    from ..device import get_device
    if collect:
        gc.collect()
    dev = get_device(device)
    info = dev.memory_info()
    caches = [c for c in list(_live) if c.dev is dev]
    info.update(functions=len(caches), frames=sum(len(c.frames) for c in caches),
                frame_bytes=sum(c.cached_bytes() for c in caches))
    info.update(kernels.cache_info())
    return info


def download(dev, queue, darr, host=None):
    """Blocking download of a C-contiguous DArray into a new (or given) host array."""
    if host is None:
        host = np.empty(darr.shape, darr.dtype)
    if waits.polls(dev):
        ev = _enqueue_download(dev, queue, darr, host, False)
        if ev is not None:
            waits.wait(dev, [ev])
    else:
        _enqueue_download(dev, queue, darr, host, True)
    return host


def upload(dev, queue, darr, host, blocking=False, wait_for=None):
    """Copy a host array into a C-contiguous DArray (same shape and dtype); returns the
    copy's event (None when there is nothing to copy). A non-blocking copy may read
    ``host`` until that event completes; ``wait_for``: events it starts after."""
    if darr.size:
        if not host.flags.c_contiguous:
            host = np.require(host, requirements="C")
        raw = _raw(dev.cl, '_enqueue_write_buffer')
        block = blocking and not waits.polls(dev)
        if raw is not None:
            ev = raw(queue, darr.root.buf, host, darr.boff, wait_for, block)
        else:       # pragma: no cover - another pyopencl
            ev = dev.cl.enqueue_copy(queue, darr.root.buf, host, dst_offset=darr.boff,
                                     is_blocking=block, wait_for=wait_for)
        if dev.profiles(queue):        # profile hook (profiling.py)
            from ..profiling import transfer
            transfer('upload', darr.nbytes, ev)
        if blocking and not block:
            waits.wait(dev, [ev])
        return ev
    return None


def write_later(dev, queue, buf, host, offset=0):
    """Enqueue the copy of the C-contiguous host array ``host`` into ``buf`` at byte
    ``offset`` without waiting (``host`` must live until the event completes): its event,
    through pyopencl's primitive where it exists (``enqueue_copy``'s dispatch costs ~10 us a
    call on the 2-core Xeon's PoCL)."""
    raw = _raw(dev.cl, '_enqueue_write_buffer')
    if raw is None:      # pragma: no cover - another pyopencl
        return dev.cl.enqueue_copy(queue, buf, host, dst_offset=offset, is_blocking=False)
    return raw(queue, buf, host, offset, None, False)


def read_later(dev, queue, buf, host, offset=0):
    """Enqueue the copy of ``host.nbytes`` from ``buf`` at byte ``offset`` into the
    C-contiguous host array ``host`` without waiting: its event (as :func:`write_later`)."""
    raw = _raw(dev.cl, '_enqueue_read_buffer')
    if raw is None:      # pragma: no cover - another pyopencl
        return dev.cl.enqueue_copy(queue, host, buf, src_offset=offset, is_blocking=False)
    return raw(queue, buf, host, offset, None, False)


def download_later(dev, queue, darr, host):
    """Enqueue the download of a C-contiguous DArray into ``host`` without waiting: returns
    its event (None when there is nothing to copy). ``host`` must live until the event
    completes, and is not filled before."""
    return _enqueue_download(dev, queue, darr, host, False)


def _enqueue_download(dev, queue, darr, host, blocking):
    if not darr.size:
        return None
    raw = _raw(dev.cl, '_enqueue_read_buffer')
    if raw is not None:
        ev = raw(queue, darr.root.buf, host, darr.boff, None, blocking)
    else:           # pragma: no cover - another pyopencl
        ev = dev.cl.enqueue_copy(queue, host, darr.root.buf, src_offset=darr.boff,
                                 is_blocking=blocking)
    if dev.profiles(queue):        # profile hook (profiling.py)
        from ..profiling import transfer
        transfer('download', darr.nbytes, ev)
    return ev


def _raw(cl, name):
    """pyopencl's primitive ``name`` (``_cl._enqueue_write_buffer``, ...), looked up at each
    call (a test may wrap it), or None.

    ``enqueue_copy`` works out the direction from its arguments' types and asks the driver
    for the buffer's object type on every call: host time of each upload and download of
    a call's inputs and outputs, for what a frame knows when it records the transfer."""
    return getattr(getattr(cl, '_cl', None), name, None)


def buffer_copier(cl):
    """``copy(queue, dst, src, nbytes, src_offset, dst_offset)``, device to device (returns
    its event).

    pyopencl's ``enqueue_copy`` works out what to do from its arguments' types: ~11 us a
    call on the 2-core CPU (PoCL), against ~1 us for the buffer-to-buffer primitive it ends
    in, which a loop enqueuing several copies per step calls directly where it exists."""
    raw = getattr(getattr(cl, '_cl', None), '_enqueue_copy_buffer', None)
    if raw is None:      # pragma: no cover - another pyopencl
        def copy(queue, dst, src, nbytes, src_offset, dst_offset):
            return cl.enqueue_copy(queue, dst, src, byte_count=nbytes, src_offset=src_offset,
                                   dst_offset=dst_offset)
        return copy

    def copy(queue, dst, src, nbytes, src_offset, dst_offset):
        return raw(queue, src, dst, nbytes, src_offset, dst_offset)
    return copy
