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
variables (a simulator's reset before ``run_steps``: its step 0) uploads those alone
(:func:`refill`, from the frame's steady-state guard, ``runtime.frames.make_guard``): not
the general path's key, lookup and re-binding of every input, whose cost grows with all
the shared variables, changed or not. Every upload of a shared variable's value is counted
on its device (:func:`counted`); a call's share is ``theano_ocl.stats(f)['last_call']``.
"""
import numpy as np

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
            if len(group) >= GROUP_MIN:
                self._scatter(group)
            else:
                for buf, offset, value, _, _ in group:
                    self._single(buf, offset, value)
            for e in group:
                e[3](e[4])

    def _single(self, buf, offset, value):
        dev = self.dev
        ev = dev.cl.enqueue_copy(self.queue, buf, value, dst_offset=offset,
                                 is_blocking=False)
        dev.pending_upload(ev)
        counted(dev, 1, value.nbytes, 1)

    def _scatter(self, group):
        """One transfer of the packed values and one launch putting them in place."""
        n = len(group)
        sizes = np.fromiter((e[2].nbytes for e in group), np.int64, n)
        padded = (sizes + (_ALIGN - 1)) // _ALIGN * _ALIGN
        head = -(-n * 24 // _ALIGN) * _ALIGN
        table = np.zeros(head // 8, np.int64)
        rows = table[:3 * n].reshape(n, 3)
        rows[:, 0] = head + np.concatenate(([0], np.cumsum(padded)[:-1]))
        rows[:, 1] = [e[1] for e in group]
        rows[:, 2] = sizes
        # the table, then each value's bytes padded to _ALIGN, packed by one concatenate
        parts = [table.view(np.uint8)]
        for (_, _, value, _, _), pad in zip(group, (padded - sizes).tolist()):
            parts.append(value.reshape(-1).view(np.uint8))
            if pad:
                parts.append(_ZEROS[:pad])
        host = np.concatenate(parts)
        total = host.nbytes
        dev, queue = self.dev, self.queue
        cl = dev.cl
        staging = self._staging(total)
        ev = cl.enqueue_copy(queue, staging, host, is_blocking=False)
        dev.pending_upload(ev)
        counted(dev, n, int(sizes.sum()), 1)
        src, name = kernels.render('upload_scatter.cl.mako', 'upload_scatter')
        kernel = cl.Kernel(dev.build(src), name)
        kernel.set_args(group[0][0], staging, np.int32(n))
        cl.enqueue_nd_range_kernel(queue, kernel, (n * GROUP,), (GROUP,))

    def _staging(self, nbytes):
        """This queue's staging buffer, of at least ``nbytes`` (the queue runs its commands
        in order, so a later batch's transfer waits for this one's launch)."""
        q = self.queue
        hit = _staging.get(id(q))
        if hit is not None and hit[0] is q and hit[2] >= nbytes:
            return hit[1]
        size = max(nbytes, 1 << 16)
        size = 1 << (size - 1).bit_length()
        buf = self.dev.alloc(size)
        _staging[id(q)] = (q, buf, size)
        return buf
