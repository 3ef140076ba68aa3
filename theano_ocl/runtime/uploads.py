"""Many small uploads into one device buffer as one transfer and one launch.

After ``set_value`` on many shared variables (a simulator's reset: a Nengo-like model has
thousands), the next call finds every host value newer than its device copy and uploads
each one. One enqueued upload costs 8-10 us of host time on NVIDIA's driver, so 4,500 of
them took 42 ms on the H100 (2026-11-25), most of that call. The shared variables a
simulator steps live in one slab buffer (``slab.gather_into_slab``), so their uploads
can be packed on the host into one staging array, sent in one transfer and put in place
by one launch of ``kernels/upload_scatter.cl.mako``. (Not the planner's batched copies:
those merge device-to-device copies of one dtype, planned with a dependency analysis
that costs more than the uploads it would save; here the table travels with the data
and one byte-wise kernel serves every dtype.)

The loops that make a call's uploads (the executor's re-binding of a frame's inputs, the
frame builder's inputs, ``SimulatorOCL.sync_from_theano``) pass an :class:`UploadBatch`
to ``Resident.ensure_device``, which adds its upload to it instead of enqueuing it, and
flush it when the loop ends, before anything runs (nothing in those loops reads the device
values). A resident counts its host value as uploaded only once the flush has enqueued
it: a loop that raises, or is interrupted, drops its batch, and the next call uploads
those values again. Values into a buffer that receives fewer than ``GROUP_MIN`` of them,
values over ``VALUE_MAX`` bytes, and every upload outside such a loop go on their own, as
before.

A call that comes back to its last frame after ``set_value`` on some of its shared
variables (a simulator's reset before ``run_steps``: its step 0) uploads those alone, from
the frame's steady-state guard (``runtime.frames.make_guard``): not the general path's
key, lookup and re-binding of every input, whose cost grows with all the shared
variables, changed or not. The guard finds them with C loops over the frame's residents
and sends them with :func:`send` (``shared.ResidentTable``: ~0.1 us of host time per
shared variable and per value where checking and packing them one by one in Python cost
~10 us each on NVIDIA's host path); :func:`refill` is its path for values it looks at
one by one. Packing is one ``bytes.join`` over the values' buffers, the table built with
numpy. Every upload of a shared variable's value is counted on its device
(:func:`counted`); a call's share is ``theano_ocl.stats(f)['last_call']``.
"""
import numpy as np

from . import memory
from .. import kernels

#: a value larger than this (bytes) is uploaded on its own
VALUE_MAX = 64 << 10
#: fewer values than this into one buffer are uploaded one by one
GROUP_MIN = 8
#: work-items per value in the scatter launch
GROUP = 64
_ALIGN = 16
_ZEROS = np.zeros(_ALIGN, np.uint8)

_staging = {}      # id(queue) -> (queue, device buffer, bytes): reused, one per queue


def counted(dev, values, nbytes, transfers):
    """Count uploads of shared variables' values on ``dev``: values, their bytes, and the
    host-to-device transfers that carried them (``dev.upload_tally``)."""
    t = dev.upload_tally
    t[0] += values
    t[1] += nbytes
    t[2] += transfers


def refill(dev, queue, residents):
    """Upload the host values of ``residents`` (``shared.Resident``: set on the host since
    the device copy was last current, the same shape, dtype and place) into their places,
    packed as one transfer where they share a buffer."""
    batch = UploadBatch(dev, queue)
    add = batch.add
    for res in residents:
        # (what Resident.ensure_device would do, its tests already passed: refillable)
        host = res.cell[0]
        value = host if host.flags.c_contiguous else np.ascontiguousarray(host)
        root = res.root
        if not value.size:
            res.uploaded(host)
        elif not add(root.buf, root.origin, value, res.uploaded, host):
            res.ensure_device(dev, queue)          # too large to pack: on its own
    batch.flush()


def send(dev, queue, buf, values, offsets, sizes):
    """Upload host arrays ``values`` (a list) into ``buf`` at byte ``offsets``, ``sizes``
    bytes each (int64 arrays; none empty), without waiting: packed into one transfer and
    one scatter launch where they are ``GROUP_MIN`` or more, each value over ``VALUE_MAX``
    on its own."""
    big = sizes > VALUE_MAX
    if big.any():
        for k in np.flatnonzero(big).tolist():
            single(dev, queue, buf, offsets[k], values[k])
        keep = np.flatnonzero(~big)
        values = [values[k] for k in keep.tolist()]
        offsets, sizes = offsets[keep], sizes[keep]
    if len(values) >= GROUP_MIN:
        _scatter(dev, queue, buf, values, offsets, sizes)
    else:
        for value, offset in zip(values, offsets.tolist()):
            single(dev, queue, buf, offset, value)


def single(dev, queue, buf, offset, value):
    """Upload the host array ``value`` into ``buf`` at byte ``offset`` on its own, without
    waiting (the device settles it, ``OCLDevice.pending_upload``), counted."""
    ev = memory.write_later(dev, queue, buf, np.ascontiguousarray(value), int(offset))
    dev.pending_upload(ev)
    counted(dev, 1, value.nbytes, 1)


def _pack(values, offsets, sizes):
    """The staging bytes of one scatter launch: a table of n rows (source offset, ``offsets``,
    ``sizes``; int64, in bytes), then the values' bytes (C order), those whose size is a
    multiple of 4 first (the kernel moves them as uints)."""
    n = len(values)
    odd = (sizes & 3) != 0
    if odd.any():
        order = np.argsort(odd, kind='stable')
        values = [values[k] for k in order.tolist()]
        offsets, sizes = offsets[order], sizes[order]
    head = -(-n * 24 // _ALIGN) * _ALIGN
    table = np.zeros(head // 8, np.int64)
    rows = table[:3 * n].reshape(n, 3)
    rows[0, 0] = head
    np.cumsum(sizes[:-1], out=rows[1:, 0])
    rows[1:, 0] += head
    rows[:, 1] = offsets
    rows[:, 2] = sizes
    try:
        # one C loop over the values' buffers (C-contiguous ones: else BufferError)
        packed = b''.join([table] + values)
    except (BufferError, ValueError, TypeError):
        packed = b''.join([table] + [np.ascontiguousarray(v) for v in values])
    if len(packed) != head + int(sizes.sum()):
        raise AssertionError('upload of %d values: packed %d bytes, expected %d'
                             % (n, len(packed) - head, int(sizes.sum())))  # pragma: no cover
    return np.frombuffer(packed, np.uint8)


def _scatter(dev, queue, buf, values, offsets, sizes):
    """One transfer of the packed values and one launch putting them in place."""
    n = len(values)
    host = _pack(values, offsets, sizes)
    cl = dev.cl
    staging = _staging_buffer(dev, queue, host.nbytes)
    ev = cl.enqueue_copy(queue, staging, host, is_blocking=False)
    dev.pending_upload(ev)
    counted(dev, n, int(sizes.sum()), 1)
    src, name = kernels.render('upload_scatter.cl.mako', 'upload_scatter')
    kernel = cl.Kernel(dev.build(src), name)
    kernel.set_args(buf, staging, np.int32(n))
    # on a CPU a work-group costs microseconds to start: a few, each taking many values
    groups = min(n, 4 * dev.device.max_compute_units) if dev.is_cpu else n
    cl.enqueue_nd_range_kernel(queue, kernel, (groups * GROUP,), (GROUP,))


def _staging_buffer(dev, queue, nbytes):
    """This queue's staging buffer, of at least ``nbytes`` (the queue runs its commands in
    order, so a later batch's transfer waits for this one's launch)."""
    hit = _staging.get(id(queue))
    if hit is not None and hit[0] is queue and hit[2] >= nbytes:
        return hit[1]
    size = max(nbytes, 1 << 16)
    size = 1 << (size - 1).bit_length()
    buf = dev.alloc(size)
    _staging[id(queue)] = (queue, buf, size)
    return buf


class UploadBatch(object):
    """Uploads of host values into device buffers, collected by :meth:`add`, enqueued by
    :meth:`flush` (non-blocking: the host arrays are packed, the packed array kept alive
    by its transfer's event until ``settle_uploads``)."""

    def __init__(self, dev, queue):
        self.dev = dev
        self.queue = queue
        self.entries = []      # (buffer, offset, C-contiguous host value, on_done, its arg)

    def add(self, buf, offset, value, on_done, arg):
        """Take the upload of ``value`` into ``buf`` at ``offset``; False where it must go
        on its own (too large). ``on_done(arg)`` is called once the upload is enqueued:
        where the flush fails or never comes, it is not, and the caller's value stays as
        stale as it was (the next call uploads it again)."""
        if value.nbytes > VALUE_MAX:
            return False
        self.entries.append((buf, offset, value, on_done, arg))
        return True

    def flush(self):
        entries = self.entries
        self.entries = []
        groups = {}
        for e in entries:
            groups.setdefault(id(e[0]), []).append(e)
        for group in groups.values():
            send(self.dev, self.queue, group[0][0], [e[2] for e in group],
                 np.array([e[1] for e in group], np.int64),
                 np.array([e[2].nbytes for e in group], np.int64))
            for e in group:
                e[3](e[4])
