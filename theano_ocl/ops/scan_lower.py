"""A device Scan's steps lowered onto the runtime's loop (``runtime/loop.py``).

The first step of a run goes through the inner function as a pass of its own
(``OCLFunction.pass_values``: it plans the inner frame the first time, allocates the
nit-sot buffers, decides which rows the frame follows, ``ops/scan_bind.py``). The steps
after it need none of a pass's work (the frame lookup and its guard, the output list, the
error flags read every step): the same frame runs on the same staging arrays. They are
declared as one :class:`~theano_ocl.runtime.loop.Loop` over the inner frame and run by
the driver, as ``SimulatorOCL.run_steps`` runs a function's frame:

* feeds: a sequence's row ``t``, a state tap's row ``(pos + tap + t) % store`` (copied
  into its staging buffer, or followed by the frame's root), the fixed inputs' cells, a
  sequence the inner function reads on the host (an index) from the run's host copy;
* the pass: the inner frame's plans (its batched plan once hot);
* sinks: each inner output into its slot ``(pos + t) % store`` of the outer buffer
  (a mit-mot slice at its tap), a shared variable's whole buffer;
* an ``until`` condition: the loop's :class:`Until`. Computed on the device, the stop
  flag and step count of ``ops/scan.py``, read as the passes read them: every step in the
  run that plans the node, else after 4, 8, 16, ... steps; a step past the one that
  stopped the loop writes nothing that counts: a slot a later step of the run would
  reach again (a circular buffer, a shared variable, a mit-mot slice) is written by a
  kernel masked by the flag, any other is a row the run cuts away (``Loop._finish``).
  Computed on the host (from an index, say), it is read after every step.

The inner frame's error flags (a bad index inside the loop) are read once after the
loop; should one be set, the run starts again as passes that read them every step, so it
fails at the step Theano's loop fails at (an until loop: its condition read every
step). A state the inner function computes and reads on the host (an int64 counter,
``scan.mirrors``) is fed from its row of the run's host buffer and written into its slot
there, as the passes do. Loops the driver does not take run as passes (the module
docstring of ``ops/scan.py``): a host value among its outputs that is not such a state, a
profiled inner function, an inner frame run by the in-thread host tier.
"""
from ..darray import DArray
from ..runtime.loop import Copy, Follow, HostRow, Loop, RowLaunch, Rows, Strided


class ChecksFailed(Exception):
    """The lowered steps set an error flag: the run goes again as passes."""


def lowered(scan, results, staged, meta, binding, pos0, host_seqs, check=None):
    """The :class:`Loop` for the steps after the first of ``scan`` (an ``ops.scan.Loop``
    whose first step returned ``results``), with its launches per step, or (None, 0)
    where the driver cannot take them (see the module docstring). An until loop's stop
    flag is first read after ``check`` steps (None: after every step)."""
    lay = scan.lay
    inner = scan.fn.fn
    frame = inner.last_frame
    # an until condition computed on the device: counted there; on the host: read every
    # step (nothing to mask)
    masking = lay.as_while and scan.impl.cond_on_device
    if masking and not (scan.masked and isinstance(results[-1], DArray)):
        return None, 0
    if frame is None or frame.tiny or frame.on_host or frame.commits or inner.profile or \
            inner.profiler is not None:
        return None, 0
    guard = inner.hot_guard
    if not guard or guard() is not frame:
        return None, 0         # (the next pass would not find this very frame as it is)
    n_kept = lay.n_outs + lay.n_nit_sot
    store = scan.store
    n = scan.n_steps

    def rows_of(o, tap):
        if o is None:
            return 0, 0                       # a sequence: row t
        return pos0[o] + (tap or 0), store[o]
    # ---------------------------------------------------------------- feeds
    feeds = []
    if binding is not None:
        for root, sites, buf, base, stride, o, tap, st in binding.live:
            a, m = rows_of(o, tap)
            feeds.append(Follow(root, sites, Rows(buf, base, stride, a, m)))
    rows_in = scan.rows_in
    if rows_in:
        feeds.append(RowLaunch(rows_in, [Rows(None, 0, 0, *rows_of(o, tap))
                                         for o, _, tap in meta]))
        cells = [(row[0], row[1]) for row in staged]
    else:
        cells = []
        for cell, arr, dbuf, doff, sbuf, soff, stride, nbytes, o, _, tap, _ in staged:
            cells.append((cell, arr))
            if nbytes:
                feeds.append(Copy(Rows(sbuf, soff, stride, *rows_of(o, tap)),
                                  Rows(dbuf, doff), nbytes))
    cells += [(cell, scan.as_pyopencl(v) if isinstance(v, DArray) else v)
              for cell, v in scan.fixed]
    # a sequence read on the host (an index): its row of the host copy the run read
    feeds += [HostRow(cell, rows) for cell, rows in host_seqs]
    # a state computed and read on the host (a counter): its tap's row of the run's host
    # buffer (``scan.mirrors``), the whole buffer where it has no taps
    for cell, o, tap in scan.host_reads:
        if tap is None:
            cells.append((cell, scan.mirrors[o]))
        else:
            feeds.append(HostRow(cell, scan.mirrors[o], rows=Rows(None, 0, 0, *rows_of(o, tap))))
    # ---------------------------------------------------------------- sinks
    sinks = []
    written = () if binding is None else binding.sinks
    batched = scan.rows_out
    followed = {id(f.root) for f in feeds if type(f) is Follow}
    if batched and not lay.as_while and \
            all(results[k] is v for (k, _, _), v in zip(scan.sinks, batched[0])):
        if any(j < n_kept and tap is not None and
               not _taps_in_range(tap, pos0[j], store[j], n)
               for (_, j, tap), v in zip(scan.sinks, batched[0]) if v.nbytes):
            return None, 0
        sinks.append(RowLaunch(batched[1], None, [
            Rows(None, 0, 0, 0, 1) if j >= n_kept else Rows(None, 0, 0, pos0[j] + (tap or 0),
                                                            store[j])
            for (k, j, tap), v in zip(scan.sinks, batched[0]) if v.nbytes]))
    else:
        for k, j, tap in scan.sinks:
            if k in written:
                continue
            value = results[k]
            out = scan.outs[j]
            mirror = scan.mirrors.get(j)
            if mirror is not None:
                # computed on the host into the host buffer: its slot, as a pass writes it
                fetch = frame.outputs[k]
                if frame.kept_outputs[k] is not None or (j < n_kept and tap is not None):
                    return None, 0
                sinks.append(HostRow(fetch=fetch, array=mirror, rows=None if j >= n_kept
                                     else Rows(None, 0, 0, pos0[j], store[j])))
                continue
            if not isinstance(value, DArray) or not value.is_c_contiguous() or out is None \
                    or id(value.root) in followed:
                return None, 0
            if value.root.buf is out.root.buf:
                if value.boff == out.boff and (j >= n_kept or store[j] == 1):
                    continue                 # handed back the row it was given
                return None, 0
            if j >= n_kept:                  # a shared variable: its whole buffer
                dst = Rows(out.root.buf, out.boff)
            else:
                if tap is not None and not _taps_in_range(tap, pos0[j], store[j], n):
                    return None, 0           # (the passes raise Theano's IndexError)
                dst = Rows(out.root.buf, out.boff, out.strides[0], pos0[j] + (tap or 0),
                           store[j])
            if masking and value.nbytes and _reached_again(j >= n_kept, tap, pos0[j],
                                                                store[j], n):
                # (unless the stop flag is set)
                slot, run = scan.masked_row(k, value, out)
                sinks.append(Strided(run, slot, dst))
            else:
                sinks.append(Copy(Rows(value.root.buf, value.boff), dst, value.nbytes))
    fns, launches = inner.executor.pass_fns(frame)
    launches += sum(1 for m in feeds + sinks
                    if type(m) in (RowLaunch, Strided) or (type(m) is Copy and m.nbytes))
    if lay.as_while:
        sinks.append(scan.until(results[-1], check))
        launches += masking
    loop = Loop(frame, fns, 'scan', scan.dev, scan.queue, feeds=feeds, sinks=sinks,
                cells=cells, clear=inner.host_output_cells)
    return loop, launches


def _reached_again(shared, tap, pos0, store, n):
    """Whether a later step of an until loop's ``n`` writes a sink's place again: a
    shared variable, a mit-mot slice, a slot of a circular buffer (``pos0 + t`` wraps);
    a step past the stop may then write nothing (any other row is cut away)."""
    return shared or tap is not None or pos0 + n > store


def _taps_in_range(tap, pos0, store, n):
    """Whether a mit-mot slice's slot ``tap + pos`` stays in its buffer at every step
    (``ops.scan.Loop._slot`` raises Theano's IndexError where it does not)."""
    for t in range(min(n, store)):
        r = tap + (pos0 + t) % store
        if r < 0:
            r += store
        if not 0 <= r < store:
            return False
    return True
