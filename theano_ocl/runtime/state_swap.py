"""``run``'s shared variables double-buffered: a step's update commits by trading places.

Each pass of ``run`` (``SimulatorOCL.run_steps``) computes a shared variable's new value
into a buffer of the frame, and the step's commit copies it into the variable's own buffer
(batched into one launch on a GPU: ``planner.CommitPlan``; on a CPU device, large ones as
the driver's copies). Where the frame allows it, the loop instead keeps the variable's
value in two places and trades them every step: at step ``t`` the frame's kernels read the
variable in one place and write its new value into the other (the roots are pointed there,
as a device Scan's are, ``ops/scan_bind.py``), so the commit copies nothing. The commit
that makes the step's updates count is still one point (:meth:`Swap.commit`, an action of
the step's commit journal, ``runtime/commit.py``): a step that fails or is interrupted
before it leaves the variable's last committed value where it was. When the loop ends,
however it ends, :func:`settle` copies that value home if it sits in the other place and
points the roots back, so a call, another method, a read or a snapshot finds the variable
where it lives.

What may be double-buffered: a shared variable resident on the device, read by the
frame's kernels from its own buffer (the input's root is the variable's root, its value at
the start), which no plan writes, whose update's value is the only value its root holds
at the end (the root is its size, C-contiguous at its start, the variable's shape and
dtype), that no other commit, probe or carry reads, and where every plan touching either
root finds its memory where the root is when it runs (``Plan.follows``). A batched launch
binds the buffers it merged once: the launches touching a root that moves stay steps of
their own (``planner.analyse``'s ``pinned``), and the executor takes the double buffering
only where the loop then makes no more launches a step. The ``scan_bind`` setting
(``runtime/settings.py``) turns it off.
"""
from ..darray import fills_root
from . import commit as commit_mod
from .context import point_root
from .invokers import set_long


class Swap(object):
    """Shared variable ``res`` double-buffered over a loop's steps: its root ``a`` (the
    frame's input) and its update's root ``b`` trade ``places`` (``a``'s and ``b``'s own,
    (buffer, origin)) every step from step ``t0``; ``committed``: the steps whose updates
    count, so the value sits at ``places[(committed - t0) % 2]``."""
    __slots__ = ('res', 'i', 'a', 'a_sites', 'b', 'b_sites', 'places', 'nbytes', 't0', 't',
                 'committed', 'args')

    def __init__(self, res, i, a, a_sites, b, b_sites, nbytes):
        self.res, self.i = res, i
        self.a, self.a_sites, self.b, self.b_sites = a, a_sites, b, b_sites
        self.places = ((a.buf, a.origin), (b.buf, b.origin))
        self.nbytes = nbytes
        self.t0 = self.t = self.committed = 0
        # per parity, every bound argument's (kernel, index, buffer or None when the two
        # places share one, element offset): ~1 us a site saved on each step
        one = self.places[0][0] is self.places[1][0]
        self.args = []
        for p in (0, 1):
            args = []
            for sites, (buf, origin) in ((a_sites, self.places[p]),
                                         (b_sites, self.places[1 - p])):
                for kernel, argi, off, itemsize in sites:
                    args.append((kernel, argi, None if one else buf,
                                 (origin + off) // itemsize))
            self.args.append(args)

    def start(self, t0):
        self.t0 = self.t = self.committed = t0

    def holds(self, frame):
        """Whether the variable and both roots are where this swap was made (a re-placed
        variable, a slab: made again)."""
        a, b = self.a, self.b
        return self.res.darr is not None and self.res.darr.root is a and \
            frame.input_bufs.get(self.i) is a.buf and \
            self.places == ((a.buf, a.origin), (b.buf, b.origin))

    def again(self):
        """The same swap made from the roots' places now."""
        return Swap(self.res, self.i, self.a, self.a_sites, self.b, self.b_sites, self.nbytes)

    def place(self, t):
        """Before step ``t``: ``a`` where the value is, ``b`` in the other place."""
        self.t = t
        p = (t - self.t0) & 1
        places = self.places
        self.a.buf, self.a.origin = places[p]
        self.b.buf, self.b.origin = places[1 - p]
        for kernel, argi, buf, off in self.args[p]:
            if buf is not None:
                kernel.set_arg(argi, buf)
            set_long(kernel, argi + 1, off)

    def commit(self):
        """The step's updates count (an action of its commit journal: idempotent)."""
        self.committed = self.t + 1

    def home_actions(self, queue, cl):
        """The actions putting the last committed value home and the roots back (each
        idempotent: a copy from a place nothing writes meanwhile, a root's place)."""
        acts = []
        if (self.committed - self.t0) & 1 and self.nbytes:
            (dst, dst_off), (src, src_off) = self.places
            nbytes = self.nbytes

            def copy_home():
                cl.enqueue_copy(queue, dst, src, byte_count=nbytes, src_offset=src_off,
                                dst_offset=dst_off)
            acts.append(copy_home)
        acts.append(lambda: point_root(self.a, self.a_sites, *self.places[0]))
        acts.append(lambda: point_root(self.b, self.b_sites, *self.places[1]))
        return acts


def settle(swaps, queue, cl):
    """The loop ended (``runtime/loop.drive``): every variable's last committed value home,
    the roots back, as one commit (an interrupt: the next observer finishes it). A step's
    commit an interrupt left half-applied is finished first: it counts, its variables'
    commit points included."""
    commit_mod.finish_pending()
    acts = []
    for sw in swaps:
        acts += sw.home_actions(queue, cl)
    commit_mod.apply(acts)


def candidates(rc, frame, sink_roots, host_committed):
    """The frame's shared variables that may be double-buffered (see the module
    docstring) as unstarted :class:`Swap` s; ``sink_roots``: ids of the roots the loop's
    sinks read (probes copied, carries); ``host_committed``: input indices whose update
    the frame computes on the host."""
    prog = rc.program
    steps = frame.steps
    input_roots = {id(r) for r in frame.input_roots.values()}
    reads = {}
    for c in frame.commits:
        for r in (c.reads or ()):
            reads[id(r)] = reads.get(id(r), 0) + 1
    index = {id(res): i for i, res in prog.residents.items()}
    out, seen = [], set()
    for c in frame.commits:
        if c.resident is None:
            continue
        res, d = c.resident
        i = index.get(id(res))
        a = frame.input_roots.get(i)
        b = d.root
        home = res.darr
        if i is None or i in host_committed or a is None or home is None or \
                home.root is not a or home.offset or frame.input_bufs.get(i) is not a.buf or \
                res.dev is not rc.dev or b is a or id(b) in input_roots or \
                not fills_root(d) or d.shape != home.shape or \
                d.dtype != home.dtype or reads.get(id(b), 0) != 1 or \
                id(a) in sink_roots or id(b) in sink_roots or id(a) in seen or id(b) in seen:
            continue
        if not all(_follows(s, a, b) for s in steps):
            continue
        seen.update((id(a), id(b)))
        out.append(Swap(res, i, a, frame.rebind_sites.get(i, ()), b,
                        frame.root_sites.get(id(b), ()), d.nbytes))
    return out


def _follows(s, a, b):
    """Whether plan ``s`` leaves root ``a`` unwritten and finds ``a`` and ``b`` where their
    roots are when it runs."""
    if not (s.touches(a) or s.touches(b)):
        return True
    if not s.follows or s.writes is None:
        return False
    return not any(d.root is a for d in s.writes)


def choose(executor, frame, batch, pinned, sink_roots, steps):
    """The :class:`Swap` s ``run`` takes with its batched plan for a loop of ``steps``
    steps (``pinned``: the roots the loop already re-points, None: the frame's own), and
    the roots its plan then keeps in place and the residents whose commit copies it drops;
    ([], pinned, empty) where there are none, the loop is not batched, or they would cost
    launches: more a step, or, over the loop, more than they save (an odd number of steps
    leaves each value in the other place: one copy home each). Decided once per frame and
    sinks (``Frame.memo``): a run of one step pays a look-up."""
    none = [], pinned, frozenset()
    if batch is False or not executor.rc.settings.scan_bind:
        return none
    host = frozenset(i for i, _ in executor.host_committed(frame))
    key = ('swaps', frozenset(sink_roots), host, pinned, batch)
    hit = frame.memo.get(key)
    if hit is None:
        hit = frame.memo[key] = _decide(executor, frame, batch, pinned, sink_roots, host)
    swaps, pins, skip, saved = hit
    if not swaps or saved * steps < (len(swaps) if steps % 2 else 0) or not saved and steps % 2:
        return none
    if not all(sw.holds(frame) for sw in swaps):
        if not all(sw.res.darr is not None and sw.res.darr.root is sw.a and
                   frame.input_bufs.get(sw.i) is sw.a.buf for sw in swaps):
            return none                      # a variable moved: copies this run
        swaps = [sw.again() for sw in swaps]  # (a slab moved the roots: their places now)
        frame.memo[key] = (swaps, pins, skip, saved)
    return swaps, pins, skip


def _decide(executor, frame, batch, pinned, sink_roots, host):
    # (first: the frame's small buffers may move into a slab, and the places are taken
    # after it)
    info0 = executor.loop_plans.get(frame, batch, pinned)[2]
    swaps = candidates(executor.rc, frame, sink_roots, host)
    if not swaps:
        return [], pinned, frozenset(), 0
    base = frame.pinned if pinned is None else pinned
    pins = base | frozenset(x for sw in swaps for x in (id(sw.a), id(sw.b)))
    skip = frozenset(id(sw.res) for sw in swaps)
    info1 = executor.loop_plans.get(frame, batch, pins, skip)[2]
    if info1['batched'] and info1['launches_per_step'] <= info0['launches_per_step']:
        return swaps, pins, skip, info0['launches_per_step'] - info1['launches_per_step']
    return [], pinned, frozenset(), 0
