"""One declared loop over a frame, and the one driver that runs it.

A frame is run many times in two places: ``OCLFunction.run`` (``SimulatorOCL.run_steps``:
``n`` calls of a function with per-step inputs, probed outputs and state carried
from an output to an input) and a device Scan (``ops/scan.py``: the inner function once
per step, its sequences' rows and state taps in, its outputs into the slots of the outer
buffers). Both declare what a step moves as a :class:`Loop` and hand it to :func:`drive`,
the only code that walks a frame's plans and re-points kernel arguments at rows. A call's
single pass is a loop too: one step with nothing fed, sunk or committed
(``Executor.run_pass``; the call fetches its outputs, reads its checks and commits after
it), whose plans name their tasks (``tasks``, ``owner``: a failing plan's task becomes the
function's ``position_of_error``) and their fault hook boundaries (``plan_label``); so is
each segment of the plans a frame's first call runs as it is built (``runtime/build.py``).

What a loop says, each part data rather than code:

* where a value sits at step ``t``: :class:`Rows`, row ``(a + t // every) % m`` of a
  buffer (``m = 0``: no wrap; a sequence is row ``t``, a state tap of a circular buffer
  ``(pos + tap + t) % store``, a probe's slot ``t // every``);
* before the pass (``feeds``): a row copied into the frame's input buffer (:class:`Copy`),
  the frame's root pointed at the row instead (:class:`Follow`, its recorded kernel
  arguments re-pointed), a step's rows in one launch (:class:`RowLaunch`), a host
  array's row put in an input cell (:class:`HostRow`: a sequence's row ``t``, a state's
  tap of a host buffer); cells set every step
  (``cells``), host output cells cleared (``clear``), shared variables committed on the
  host brought to the device (``restage``);
* the pass: the frame's plans (``fns``: its recorded steps, or its batched plan; for a
  call, with its early reads interleaved, ``runtime/early.py``, or wrapped by the
  profiler, ``profiling.Profiler.fns``);
* after the pass (``sinks``): a frame value copied into a row (:class:`Copy`), a strided
  one by its copy kernel (:class:`Strided`), a host value appended or written into its
  slot of a host buffer (:class:`HostRow`);
  each sink every ``every`` steps;
* the step's commit (``commit``: the actions of its first step, then of the others);
  a shared variable double-buffered by the loop (a ``state_swap.Swap`` among the feeds:
  its root and its update's trade two places every step) commits by a point of that
  journal, and is put home when the loop ends, however it ends;
* an ``until`` condition (:class:`Until`, the last sink): a device stop flag updated
  every step and read every few steps, or a host value read every step; the loop ends
  once it is found set.

:func:`drive` runs steps ``first .. n-1`` and returns how many ran: ``n``, or the step
at which a plan found its frame's assumptions broken (``Replan``: an IfElse's other
branch, a host value the plan relied on), nothing of which was committed, or the step
after the one at which an :class:`Until` found its stop flag set.
"""
from operator import length_hint

from . import commit as commit_mod
from . import faults
from .context import Replan, bind_site, point_root
from .state_swap import Swap, settle


class Rows(object):
    """Row ``(a + t // every) % m`` (``m = 0``: no wrap) of ``buf``, rows ``stride`` bytes
    apart from byte ``base``: where a loop's value sits at step ``t``."""
    __slots__ = ('buf', 'base', 'stride', 'a', 'm', 'every')

    def __init__(self, buf, base=0, stride=0, a=0, m=0, every=1):
        self.buf, self.base, self.stride = buf, base, stride
        self.a, self.m, self.every = a, m, every

    def row(self, t):
        r = self.a + t // self.every
        return r % self.m if self.m else r

    def offset(self, t):
        return self.base + self.row(t) * self.stride


class Copy(object):
    """``nbytes`` from ``src`` to ``dst`` (both :class:`Rows`) each step."""
    __slots__ = ('src', 'dst', 'nbytes')

    def __init__(self, src, dst, nbytes):
        self.src, self.dst, self.nbytes = src, dst, nbytes


class Follow(object):
    """The frame's ``root`` pointed at ``rows`` each step, ``shift`` bytes before them;
    ``sites`` (kernel, argument, element offset, item size) are the kernel arguments
    bound to the root. :func:`home` puts the root and its arguments back."""
    __slots__ = ('root', 'sites', 'rows', 'shift', 'home', 'base')

    def __init__(self, root, sites, rows, shift=0):
        self.root, self.sites, self.rows, self.shift = root, sites, rows, shift
        self.home = (root.buf, root.origin)
        self.base = rows.base + shift     # the root's origin at row 0 (place)


class RowLaunch(object):
    """A step's row copies in one launch (``ops/scan_rows.RowCopies``): source rows
    ``src`` and destination rows ``dst`` (lists of :class:`Rows`, None: row 0)."""
    __slots__ = ('copies', 'src', 'dst')

    def __init__(self, copies, src=None, dst=None):
        self.copies, self.src, self.dst = copies, src, dst


class Strided(object):
    """A strided value copied by its own kernel ``run`` into ``rows``: the kernel writes
    through ``slot_root``, moved to the step's row."""
    __slots__ = ('run', 'slot_root', 'rows')

    def __init__(self, run, slot_root, rows):
        self.run, self.slot_root, self.rows = run, slot_root, rows


class HostRow(object):
    """As a feed: ``cell[0] = array[t]`` (a 0-d array for a scalar input), or
    ``array[rows.row(t)]`` (a view: a state tap of a host buffer). As a sink: ``fetch()``
    (a host output) appended to ``into`` every ``every`` steps, or written into
    ``array[rows.row(t)]`` (a state's slot of a host buffer; ``rows`` None: the whole
    array, a shared variable's value)."""
    __slots__ = ('cell', 'array', 'fetch', 'into', 'every', 'rows')

    def __init__(self, cell=None, array=None, fetch=None, into=None, every=1, rows=None):
        self.cell, self.array, self.fetch, self.into, self.every = \
            cell, array, fetch, into, every
        self.rows = rows


class Until(object):
    """An ``until`` condition, as the loop's last sink: after every step ``count()`` (if
    any) enqueues the update of a device stop flag (set once a step's condition holds)
    and of a step count (the steps until then); after the steps ``next``, then
    ``next + min(next, most)``, ... (``most = 1``: every step) and after step ``last``,
    ``read(steps run)`` reads them (blocking; or a condition computed on the host): the
    steps the condition let run, or None. Once it gives them the loop ends (``done``:
    those steps). The steps run past the one that stopped the loop write nothing that
    counts (their sinks are masked by the flag, or write rows cut away afterwards); a
    loop with an Until commits nothing of its own."""
    __slots__ = ('count', 'read', 'next', 'most', 'last', 'done')

    def __init__(self, count, read, last, next=1, most=1):
        self.count, self.read, self.last = count, read, last
        self.next, self.most = next, most
        self.done = None

    def step(self, t):
        """After step ``t``'s other sinks: whether the loop ends here."""
        if self.count is not None:
            self.count()
        i = t + 1
        if i != self.next and i != self.last:
            return False
        self.next = i + min(i, self.most)
        self.done = self.read(i)
        return self.done is not None


class Loop(object):
    """``n`` passes of ``frame`` (see the module docstring). ``restage``: (input index,
    root, (cell, Resident)) of shared variables whose update the frame computes on the
    host; ``checks(t)``: the frame's device error flags read after step ``t`` (when the
    driver is asked to read them every step); ``label`` names the loop at the fault
    hook's boundaries of each step (``'<label> step t'``; None: none per step).

    ``plan_label``: a fault hook boundary before each of ``fns`` (``plan_label % k``, or
    ``plan_label[k]`` for a list);
    ``owner``: the function's ``RunContext``, whose ``position_of_error`` a failing plan sets:
    ``tasks[k]``, the task of ``fns[k]`` (``tasks`` None: -1, unknown). A call's pass (and a
    build's segment) sets these; the loops of ``run`` and of a device Scan do not."""

    def __init__(self, frame, fns, label, dev, queue, feeds=(), sinks=(), cells=(),
                 clear=(), restage=(), commit=None, checks=None, tasks=None,
                 plan_label=None, owner=None):
        self.frame, self.fns, self.label = frame, fns, label
        self.dev, self.queue = dev, queue
        self.feeds, self.sinks = list(feeds), list(sinks)
        self.cells, self.clear, self.restage = list(cells), list(clear), list(restage)
        self.commit, self.checks = commit, checks
        self.tasks, self.plan_label, self.owner = tasks, plan_label, owner
        self.follows = [f for f in self.feeds if type(f) is Follow]
        self.swaps = [f for f in self.feeds if type(f) is Swap]
        # whether a step moves anything besides its plans (a call's pass does not)
        self.moves = bool(self.feeds or self.sinks or self.cells or self.clear or
                          self.restage)
        self.replan = None       # the Replan that ended the last drive early

    def feed_anew(self, head):
        """The loop's first ``len(head)`` feeds replaced by ``head`` (a run like the one it
        was declared for, its inputs in other arrays)."""
        self.feeds[:len(head)] = head
        self.follows = [f for f in self.feeds if type(f) is Follow]


def bind_input(dev, queue, frame, i, root, cell_res, batch=None):
    """Bring input ``i`` of ``frame`` to the device as a pass reads it: a shared
    variable's host value when it is newer (an upload), a device array where it is (no
    copy); the kernels bound to another buffer are re-pointed at it."""
    cell, res = cell_res
    bufs = frame.input_bufs
    if res is not None:
        cur = res.ensure_device(dev, queue, batch).root.buf
    else:
        v = cell[0]
        cur = v.base_data if hasattr(v, 'base_data') else None
    if cur is not None and cur is not bufs[i]:
        # same shapes, another buffer (a new device array, a re-placed shared variable):
        # point the bound kernels at it instead of re-planning
        bufs[i] = cur
        if res is None:
            root.move(cur)              # origin 0, as planned: only buffers change
            for site in frame.rebind_sites.get(i, ()):
                site[0].set_arg(site[1], cur)
        else:
            for site in frame.rebind_sites.get(i, ()):
                bind_site(site, root)


def place(follow, t):
    """Point ``follow``'s root (and its kernel arguments) at step ``t``'s row."""
    rows = follow.rows
    point_root(follow.root, follow.sites, rows.buf, follow.base + rows.row(t) * rows.stride)


def home(loop):
    """Every followed root (and its kernels' arguments) back where the frame planned it."""
    for f in loop.follows:
        root = f.root
        buf, origin = f.home
        if root.buf is not buf or root.origin != origin:
            root.buf, root.origin = buf, origin
            for site in f.sites:
                bind_site(site, root)


def drive(loop, first, n, copy, check_each=False, stats=None):
    """Run steps ``first .. n-1`` of ``loop`` (``copy``: ``runtime.memory.buffer_copier``;
    None where the loop copies nothing); the number of steps run: ``n``, the step whose
    plans raised ``Replan`` (nothing of it committed, the exception in ``loop.replan``), or
    the step after the one whose :class:`Until` ended the loop. With ``check_each`` the
    frame's error flags are read after every step (a failing step raises before its
    commit)."""
    fns = loop.fns
    commit = loop.commit
    moves = loop.moves
    if moves:
        frame, queue, dev = loop.frame, loop.queue, loop.dev
        feeds, sinks = loop.feeds, loop.sinks
        cells, clear, restage = loop.cells, loop.clear, loop.restage
    hooked = faults.hook is not None
    if hooked and loop.plan_label is not None:
        labels = loop.plan_label
        if isinstance(labels, str):
            labels = [labels % k for k in range(len(fns))]
        fns = [_boundary(where, fn) for where, fn in zip(labels, fns)]
    swaps = loop.swaps
    for sw in swaps:
        sw.start(first)
    t = first
    try:
        for t in range(first, n):
            if hooked and loop.label is not None:
                faults.at('%s step %d' % (loop.label, t))
            # ---------------------------------------------------- before the pass
            if moves:
                for cell in clear:
                    cell[0] = None      # a host thunk must not write into an array handed on
                for cell, value in cells:
                    cell[0] = value     # (a host step may have swapped in its host copy)
                for f in feeds:
                    kind = type(f)
                    if kind is Copy:
                        if f.nbytes:
                            copy(queue, f.dst.buf, f.src.buf, f.nbytes, f.src.offset(t),
                                 f.dst.offset(t))
                    elif kind is Follow:
                        place(f, t)
                    elif kind is Swap:
                        f.place(t)
                    elif kind is RowLaunch:
                        f.copies.run(None if f.src is None else [r.row(t) for r in f.src],
                                     None if f.dst is None else [r.row(t) for r in f.dst])
                    elif f.rows is None:
                        f.cell[0] = f.array[t, ...]
                    else:
                        f.cell[0] = f.array[f.rows.row(t), ...]
                for i, root, cell_res in restage:
                    bind_input(dev, queue, frame, i, root, cell_res)
            # ---------------------------------------------------- the pass
            plan = iter(fns)
            try:
                for fn in plan:
                    fn()
            except BaseException as e:
                if loop.owner is not None and not isinstance(e, Replan):
                    # the failing plan: the one the iterator handed out last (counting
                    # what is left costs nothing while no plan fails)
                    tasks = loop.tasks
                    loop.owner.position_of_error = -1 if tasks is None else \
                        tasks[len(fns) - length_hint(plan) - 1]
                raise
            # ---------------------------------------------------- after it
            if moves:
                for s in sinks:
                    kind = type(s)
                    if kind is Copy:
                        dst = s.dst
                        if (t + 1) % dst.every == 0 and s.nbytes:
                            copy(queue, dst.buf, s.src.buf, s.nbytes, s.src.offset(t),
                                 dst.offset(t))
                    elif kind is RowLaunch:
                        s.copies.run(None if s.src is None else [r.row(t) for r in s.src],
                                     None if s.dst is None else [r.row(t) for r in s.dst])
                    elif kind is Strided:
                        if (t + 1) % s.rows.every == 0:
                            s.slot_root.origin = s.rows.offset(t)
                            s.run()
                    elif kind is Until:
                        if s.step(t):
                            return t + 1
                    elif s.into is None:
                        if s.rows is None:
                            s.array[...] = s.fetch()
                        else:
                            s.array[s.rows.row(t), ...] = s.fetch()
                    elif (t + 1) % s.every == 0:
                        s.into.append(s.fetch())
            if check_each and loop.checks is not None:
                loop.checks(t)
            if commit is not None:
                if hooked:
                    faults.at('%s step %d commit' % (loop.label, t))
                # one commit per step, all of its updates or none (runtime/commit.py); the
                # first step sets the residents' flags, which then hold
                commit_mod.apply(commit[0]() if t == first else commit[1]())
            if stats is not None:
                stats['steps_done'] = t + 1
    except Replan as e:
        loop.replan = e
        return t
    finally:
        if swaps:
            # each double-buffered variable's last committed value home, however the loop
            # ended (runtime/state_swap.py)
            settle(swaps, loop.queue, loop.dev.cl)
    return n


def once(loop):
    """One step of ``loop`` (a pass: a call's, or a segment of a frame being built);
    raises the ``Replan`` that a plan of it raised."""
    if drive(loop, 0, 1, None) == 0:
        replan, loop.replan = loop.replan, None
        raise replan


def _boundary(where, fn):
    """``fn`` after the fault hook's boundary ``where`` (a hooked pass: tests only)."""
    def run():
        faults.at(where)
        return fn()
    return run
