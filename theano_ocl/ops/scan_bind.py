"""A device Scan's inner frame pointed at the outer rows, in place of staged copies.

By default each step of the loop (``ops/scan.py``) copies the step's sequence rows and
state taps into the inner function's staging arrays, and the inner outputs from the
frame's buffers into their slots of the outer buffers (``ops/scan_rows.LoopCopies``): on
NVIDIA's driver each enqueued copy costs about as much host time as a launch (~8 us).

Once the inner function's frame is planned (after a run's first step), :class:`RowBinding`
re-points the frame instead. An input's root moves to the outer row this step reads, an
output's root to the slot this step fills; the kernel arguments bound to a root (the
frame's sites) follow it with one ``set_arg`` of the offset (the buffer only when it
changes), and copies and CLBlast calls read their roots when they run. The staging array
stays in the input's cell, so the frame's guard still holds and the frame replays.

What may be pointed elsewhere:

* an input that only plans which follow their roots read (``Plan.follows``: launches,
  copies, library calls, and the host BLAS of CPU devices, which maps its operands where
  their roots are when it runs): not another host step (it may keep its own idea of where
  the input is), not a value read on the host;
* an output whose root holds it and nothing bigger (the frame puts in a root only values
  no larger than the root), not an input's or another output's root, not a shared
  variable, in a loop whose writes are not masked by a device stop flag (an ``until``
  condition computed on the device). Where an input of the same step reads the slot's row
  (a gradient's mit-mot state, read and written at tap 1), that input follows the row too
  and the frame must read it before it writes the output there, or in the writing launch
  at the element it writes (:func:`reads_first`: an elementwise kernel's input, a
  product's Z); else the output is copied.

The frame's batched plan (``runtime/planner.py``) merges no launch that touches a root
pointed at rows (``Frame.pinned``: such a launch stays a step of its own, its arguments
following the root), so launches of the frame's own intermediates still batch. Should another frame of the inner function run at a step (a re-plan, an IfElse
branch), it reads staging arrays the step did not fill: the loop notices
(``OCLFunction.last_frame``) and does the step again with copies. After every run of the
loop the roots and their arguments go back where they were planned, so a call of the inner
function from elsewhere finds the frame as it was.

The ``scan_bind`` setting (``runtime/settings.py``) turns it off.
"""
from ..darray import DArray, fills_root
from ..runtime.context import bind_site, point_root
from ..runtime.plans import followed

def reads_first(steps, src, shift, dst):
    """Whether the frame's ``steps`` may write root ``dst`` over the memory root ``src``
    reads (both pointed at one row; ``src``'s offsets ``shift`` bytes from ``dst``'s): every
    read of ``src`` comes before the first write of ``dst``, or in that very launch at the
    element it writes there (``Launch.pointwise``, the same layout), and nothing writes
    ``src``. A plan that does not say what it touches: no."""
    wrote = False
    for s in steps:
        if s.reads is None or s.writes is None:
            if s.touches(src) or s.touches(dst):
                return False
            continue
        if any(d.root is src for d in s.writes):
            return False
        reads = [d for d in s.reads if d.root is src]
        writes = [d for d in s.writes if d.root is dst]
        if reads and wrote:
            return False
        if reads and writes:            # in the writing launch: at the element written
            for d in reads:
                if not any(p is d for p in s.pointwise) or \
                        not all(_same_place(d, shift, w) for w in writes):
                    return False
        wrote = wrote or bool(writes)
    return True


def _same_place(d, shift, w):
    return d.offset + shift == w.offset and d.shape == w.shape and d.strides == w.strides \
        and d.dtype == w.dtype


class RowBinding(object):
    """The inner ``frame``'s roots that follow the loop's rows (see the module docstring).

    ``entries``: (root, sites, source DArray, outer output index or None, tap, shift):
    each step the root's region starts at row ``i`` (a sequence) or ``(pos[o] + tap) %
    store[o]`` of the source, ``shift`` bytes before it. ``bound_inputs`` are the inner
    input indices whose staged copies it replaces, ``sinks`` the inner outputs it writes
    in their slots (the loop stores nothing of theirs).
    """

    def __init__(self, frame, entries, bound_inputs, sinks=()):
        self.frame = frame
        self.entries = entries
        self.bound_inputs = frozenset(bound_inputs)
        # the inner outputs the frame writes in their slots itself: nothing to store
        self.sinks = frozenset(sinks)
        self.homes = [(root, sites, root.buf, root.origin)
                      for root, sites, _, _, _, _ in entries]
        self.pins = frozenset(id(root) for root, _, _, _, _, _ in entries)
        self.live = None

    @classmethod
    def build(cls, loop, frame, results):
        """The binding of ``loop``'s inner ``frame`` after a step that returned ``results``
        (the frame's own values), or None where nothing can follow the rows."""
        if frame is None or frame.tiny or frame.on_host or frame.key is None:
            return None
        lay = loop.lay
        prog = loop.fn.fn.program
        steps = frame.steps

        input_roots = {id(r) for r in frame.input_roots.values()}
        entries, bound = [], []
        taps = {}            # outer output -> [(tap, followed input root, its shift)]
        staged = {(o, tap) for _, _, _, o, tap, _ in loop.stage if o is not None}
        for cell, staging, src, o, tap, k in loop.stage:
            root = frame.input_roots.get(k)
            if root is None or k in prog.host_read_inputs or not staging.nbytes or \
                    frame.input_bufs.get(k) is not staging.root.buf or root.origin or \
                    root.slab or not followed(steps, root):
                continue
            entries.append((root, frame.rebind_sites.get(k, ()), src, o,
                            0 if tap is None else tap, -staging.boff))
            bound.append(k)
            if o is not None:
                taps.setdefault(o, []).append((tap, root, -staging.boff))
        # outputs: the sinks of states and nit-sots (a mit-mot slice included)
        n_kept = lay.n_outs + lay.n_nit_sot
        sinks = []
        if not loop.masked:
            seen = {}
            for k, j, tap in loop.sinks:
                value = results[k]
                if j < n_kept and isinstance(value, DArray):
                    seen.setdefault(id(value.root), []).append((k, j, tap, value))
            for rows in seen.values():
                if len(rows) != 1:
                    continue               # one root for two outputs
                k, j, tap, value = rows[0]
                root = value.root
                slot = 0 if tap is None else tap
                store = loop.store[j]
                if id(root) in input_roots or not fills_root(value) or root.slab or \
                        root.origin or j in loop.mirrors or \
                        loop.outs[j] is None or not followed(steps, root) or \
                        not cls._row_free(steps, root, j, slot, store, lay, taps, staged):
                    continue
                entries.append((root, frame.root_sites.get(id(root), ()), loop.outs[j], j,
                                slot, 0))
                sinks.append(k)
        if not entries:
            return None
        return cls(frame, entries, bound, sinks)

    @staticmethod
    def _row_free(steps, root, j, slot, store, lay, taps, staged):
        """Whether output ``j``'s ``root`` may be written in its slot's row during the step:
        every input tap reading that row is copied into staging before the step, or follows
        the row and is read first (:func:`reads_first`); an input handed the outer rows as
        they are (a state one row deep) is not."""
        for t in (lay.taps[j] if j < lay.n_outs else ()):
            if (t - slot) % store:
                continue
            same = [(r, shift) for tt, r, shift in taps.get(j, ()) if tt == t]
            if same:
                if not all(reads_first(steps, r, shift, root) for r, shift in same):
                    return False
            elif (j, t) not in staged:
                return False
        return True

    def start(self, store):
        """Before a run's steps: where each source is now (an outer buffer may have moved
        since the last run, e.g. handed over with an output)."""
        self.live = [(root, sites, src.root.buf, src.boff + shift, src.strides[0], o, tap,
                      None if o is None else store[o])
                     for root, sites, src, o, tap, shift in self.entries]
        # the frame's batched plan merges no launch of a root that moves (planner.analyse)
        if not self.pins <= self.frame.pinned:
            self.frame.pinned = self.frame.pinned | self.pins
            self.frame.batched = None      # planned again, with these roots kept in place

    def place(self, i, pos):
        """Point every root at step ``i``'s row (positions ``pos``)."""
        for root, sites, buf, base, stride, o, tap, st in self.live:
            point_root(root, sites, buf,
                       base + (i if o is None else (pos[o] + tap) % st) * stride)

    def restore(self):
        """Every root (and its kernels' arguments) back where the frame was planned."""
        for root, sites, buf, origin in self.homes:
            if root.buf is not buf or root.origin != origin:
                root.buf, root.origin = buf, origin
                for site in sites:
                    bind_site(site, root)
