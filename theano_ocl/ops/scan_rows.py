"""Device-to-device copies of a device Scan's loop (``ops/scan.py``).

Each step of the loop copies rows: sequence rows and state taps into the inner function's
staging buffers before its pass, its outputs into the outer buffers' slots after it. One
enqueued copy costs about as much host time as a launch (8-12 us on NVIDIA's driver, a
command of its own on PoCL); :class:`RowCopies` does all of a step's copies of one side in
one launch, its rows set as kernel arguments (those that change) before each launch.

That is the ``scan_rows`` setting (``runtime/settings.py``), off by default: on the 2-core
PoCL CPU a row copy is a memcpy in the driver's thread (3 row copies cost 8-11 us a step)
and the launch more (~30 us); on the H100 an enqueued copy and a launch each cost 8-12 us
of host time, yet it does not pay there either: ``bench/lstm.py --scan-rows`` (batch 64,
256 hidden, 50 steps, 2026-11-25) took 20.1 ms a training step with it against 16.5 ms
without, in the same rounds (docs/_data/scripts/2026-11-25T21_h100_lstm_*.json). That
measurement predates ``runtime.invokers.set_long``: each of the launch's row arguments then
cost ~8.5 us of ``set_arg``. With the setting on, the inner frame is not pointed at the rows
(``ops/scan_bind.py``, the default, which removes most copies outright).
"""
import numpy as np

from .. import darray as da
from .. import kernels
from ..darray import DArray
from ..runtime.context import family
from ..runtime.invokers import set_long
from ..runtime.memory import download

#: work-items per work-group along the units of a row
GROUP = 64


class RowCopies(object):
    """One launch copying ``entries``: (src, src row stride, dst, dst row stride) with
    ``src``/``dst`` C-contiguous DArrays of one row each (row 0 of their buffers' rows;
    a stride of 0 for a place that does not move), all rows the same byte size per entry.

    ``ok`` is False where a destination shares a buffer with a source (the copies of one
    launch run in no set order); ``run(srows, drows)`` enqueues the launch with these rows
    (None: all 0). ``valid()`` tells whether the buffers are still where it bound them
    (``rebind()`` binds them again)."""

    def __init__(self, dev, queue, entries):
        self.dev = dev
        self.queue = queue
        self.entries = entries
        self.ok = not ({id(d.root) for _, _, d, _ in entries} &
                       {id(s.root) for s, _, _, _ in entries})
        if not self.ok or not entries:
            self.ok = False
            return
        units, self.shape = [], []
        for s, ss, d, ds in entries:
            parts = (s.boff, ss, d.boff, ds, s.nbytes)
            unit = 4 if all(p % 4 == 0 for p in parts) else 1
            units.append('uint' if unit == 4 else 'uchar')
            self.shape.append(unit)
        src, name = kernels.render('scan_rows.cl.mako', 'scan_rows', units=tuple(units))
        self.kernel = dev.cl.Kernel(dev.build(src), name)
        most = max(s.nbytes // u for (s, _, _, _), u in zip(entries, self.shape))
        self.gsize = (-(-most // GROUP) * GROUP, len(entries))
        self.lsize = (GROUP, 1)
        self._bind()
        self.rows = [None] * (2 * len(entries))
        self.enqueue = dev.cl.enqueue_nd_range_kernel

    def _bind(self):
        k = self.kernel
        self.bound = []
        for e, ((s, ss, d, ds), u) in enumerate(zip(self.entries, self.shape)):
            a = 9 * e
            k.set_arg(a, s.root.buf)
            k.set_arg(a + 1, np.int64(s.boff // u))
            k.set_arg(a + 2, np.int64(ss // u))
            k.set_arg(a + 4, d.root.buf)
            k.set_arg(a + 5, np.int64(d.boff // u))
            k.set_arg(a + 6, np.int64(ds // u))
            k.set_arg(a + 8, np.int64(s.nbytes // u))
            self.bound.append((s.root.buf, s.root.origin, d.root.buf, d.root.origin))

    def valid(self):
        """Whether every buffer is where it was bound (else: bind again)."""
        for (s, _, d, _), (sb, so, db, do) in zip(self.entries, self.bound):
            if s.root.buf is not sb or s.root.origin != so or \
                    d.root.buf is not db or d.root.origin != do:
                return False
        return True

    def rebind(self):
        self._bind()
        self.rows = [None] * len(self.rows)

    def run(self, srows=None, drows=None):
        k = self.kernel
        rows = self.rows
        n = len(self.entries)
        for e in range(n):
            r = 0 if srows is None else srows[e]
            if rows[e] != r:
                set_long(k, 9 * e + 3, r)
                rows[e] = r
            r = 0 if drows is None else drows[e]
            if rows[n + e] != r:
                set_long(k, 9 * e + 7, r)
                rows[n + e] = r
        self.enqueue(self.queue, k, self.gsize, self.lsize)


def _row(d, r):
    """Row ``r`` of ``d`` (a view)."""
    return d.view(d.shape[1:], d.strides[1:], d.offset + r * d.strides[0])


class LoopCopies(object):
    """The device copies of ``ops.scan.Loop`` one at a time: whole arrays, strided ones, a
    step's value into its slot (masked by an ``until`` flag), the flag itself. The loop
    provides ``dev``, ``queue``, ``ctx``, ``copy_buffer``, ``strided``, ``keep``,
    ``wrappers``, ``wrapped``, ``masked_copies``, ``flags`` and ``uploads``."""

    def _rows_in(self):
        """The staged rows' copies as one launch (``RowCopies``), or False."""
        rows = self.rows_in
        if not self.use_rows:
            return False
        if rows is None:
            entries = [(_row(src, 0), src.strides[0], staging, 0)
                       for _, staging, src, o, tap, _ in self.stage if staging.nbytes]
            rows = RowCopies(self.dev, self.queue, entries)
            rows = self.rows_in = rows if rows.ok else False
        elif rows and not rows.valid():
            rows.rebind()
        return rows

    def _rows_out(self, results):
        """After step 0 of a run: the sinks' copies as one launch when every value is one
        of the inner frame's C-contiguous device values (``pass_values``), none a host
        mirror; the last run's launch where the values are the same objects."""
        lay = self.lay
        if not self.use_rows:
            return None
        last = self.rows_out
        if last and all(results[k] is v for (k, _, _), v in zip(self.sinks, last[0])):
            if not last[1].valid():
                last[1].rebind()
            return last
        entries, values = [], []
        for k, j, tap in self.sinks:
            value = results[k]
            if not isinstance(value, DArray) or not value.is_c_contiguous() or \
                    j in self.mirrors:
                return None
            values.append(value)
            if value.nbytes:
                buf = self.outs[j]
                shared = j >= lay.n_outs + lay.n_nit_sot
                entries.append((value, 0, buf if shared else _row(buf, 0),
                                0 if shared else buf.strides[0]))
        rows = RowCopies(self.dev, self.queue, entries) if entries else None
        return (values, rows) if rows is not None and rows.ok else None

    def _masked_put(self, k, r, dst, value):
        """``dst[...] = value`` unless the stop flag is set (a kernel built once per inner
        output and slot)."""
        if isinstance(value, DArray):
            src = value            # the inner frame's own: the same object every step
        elif not da.is_device_array(value):
            tmp = self.wrappers.get(('host', k))
            if tmp is None:
                tmp = self.wrappers[('host', k)] = self.ctx.alloc(dst.shape, dst.dtype)
            self._put(tmp, value)
            src = tmp
        else:
            src = self._wrap(k, value)
        run = self.masked_copies.get((k, r, id(src)))
        if run is None:
            run = self.masked_copies[(k, r, id(src))] = self._masked_copy(dst, src)
        run()

    def _masked_copy(self, dst, src):
        """A launch: ``dst[...] = src`` unless the stop flag is set."""
        flag = self.flags.view(dst.shape, (0,) * dst.ndim, self.flags.offset)
        return family('elementwise_later')(self.dev, self.queue, 'o0 = i1 ? i2 : i0;',
                                           [dst], [src, flag, dst], dst.shape)

    def masked_row(self, k, value, buf):
        """A kernel writing ``value`` (inner output ``k``: the inner frame's own DArray, the
        same object every step) into a place of ``buf``'s buffer unless the stop flag is
        set: (the root whose ``origin`` is that place, moved before each launch, and the
        launch). For a lowered ``until`` loop (``ops/scan_lower.py``); built once."""
        key = ('row', k, id(value))
        kept = self.masked_copies.get(key)
        if kept is None:
            slot = da.Root(buf.root.buf, value.nbytes)
            kept = self.masked_copies[key] = (slot, self._masked_copy(
                DArray(slot, value.shape, value.dtype), value))
            self.keep.append(value)           # (its id keys the kernel)
        kept[0].buf = buf.root.buf
        return kept

    def _counter(self, cond):
        """A launch: the step count goes up while the stop flag is not set; the flag is set
        once ``cond`` (the step's until condition, a DArray) is true."""
        run = self.masked_copies.get(('count', id(cond)))
        if run is None:
            flag = self.flags.view((), (), self.flags.offset)
            count = self.flags.view((), (), self.flags.offset + 4)
            run = self.masked_copies[('count', id(cond))] = family('elementwise_later')(
                self.dev, self.queue, 'o0 = i0 | (i2 != 0); o1 = i1 + (i0 == 0);',
                [flag, count], [flag, count, cond.view((), ())], ())
        return run

    def _count(self, cond):
        """Enqueue: the step count goes up while the stop flag is not set; the flag is set
        once ``cond`` (this step's until condition) is true."""
        self._counter(cond if isinstance(cond, DArray) else self._wrap(-1, cond))()

    def _wrap(self, k, value):
        """A DArray over device array ``value`` (inner output ``k``), the same object every
        step for the kernels bound to it: only its buffer changes (its layout does not;
        the wrapped DArrays live as long as the loop, so their ids key those kernels)."""
        key = (k, value.offset, value.shape, value.strides)
        d = self.wrappers.get(key)
        if d is None:
            d = self.wrappers[key] = da.from_pyopencl(value)
        d.root.buf = value.base_data
        return d

    def as_pyopencl(self, d):
        """A pyopencl array over DArray ``d`` (the loop keeps ``d``), made again only when
        its root moved: the same array from run to run, so no run builds wrappers."""
        arr = self.wrapped.get(id(d))
        if arr is None or arr.base_data is not d.root.buf or arr.offset != d.boff:
            arr = self.wrapped[id(d)] = da.to_pyopencl(d, self.queue)
        return arr

    def _copy(self, dst, src):
        """``dst[...] = src`` for DArrays, enqueued now (a strided one by a kernel built the
        first time)."""
        if dst.size == 0:
            return
        if dst.is_c_contiguous() and src.is_c_contiguous():
            self.copy_buffer(self.queue, dst.root.buf, src.root.buf, dst.nbytes, src.boff,
                             dst.boff)
            return
        # one kernel per pair of places (a row of an outer buffer is a new DArray every
        # step; the kernel reads its arrays' roots' buffers when it runs)
        key = (id(dst.root), dst.offset, dst.shape, dst.strides,
               id(src.root), src.offset, src.shape, src.strides)
        run = self.strided.get(key)
        if run is None:
            run = self.strided[key] = family('strided_copy_later')(self.dev, self.queue,
                                                                   dst, src)
            self.keep.append((dst, src))       # (the roots' ids stay theirs)
        run()

    def _put(self, dst, value):
        """``dst[...] = value``: an inner output, a device array or a host value."""
        if dst.size == 0:
            return
        if isinstance(value, DArray):        # the inner frame's value (pass_values)
            if value.root.buf is not dst.root.buf or value.boff != dst.boff:
                self._copy(dst, value)    # (unless handed back the row it was given)
            return
        if da.is_device_array(value):
            if value.base_data is dst.root.buf and value.offset == dst.boff:
                return       # the inner function handed back the row it was given
            if value.flags.c_contiguous:
                self.copy_buffer(self.queue, dst.root.buf, value.base_data, dst.nbytes,
                                 value.offset, dst.boff)
            else:
                # (a non-sequence handed back as it came: the same view every step)
                self._copy(dst, self._wrap('view', value))
            return
        # a snapshot (the inner function's host code may reuse its output's array), copied
        # without waiting: the run waits for these copies once, at its end
        host = np.array(value, dtype=dst.dtype, order='C')
        self.uploads.append(self.dev.cl.enqueue_copy(self.queue, dst.root.buf, host,
                                                     dst_offset=dst.boff, is_blocking=False))

    def _stop(self, cond):
        """Whether an ``until`` condition stops the loop (Theano: ``cond == 0`` goes on)."""
        if isinstance(cond, DArray):
            cond = download(self.dev, self.queue, cond)
        elif da.is_device_array(cond):
            cond = cond.get()
        return bool(np.asarray(cond) != 0)

    def _zero(self, d):
        if d.size:
            self.dev.cl.enqueue_fill_buffer(self.queue, d.root.buf, np.zeros(1, np.uint8),
                                            d.boff, d.nbytes)
