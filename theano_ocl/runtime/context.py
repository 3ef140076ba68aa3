"""What op families record into: the frame of one input signature, and the context a
device implementation plans one node in.

A device implementation (``ops/``) sees a :class:`PlanContext`: it allocates its outputs
from the frame's arena (``alloc``), and records typed plans (``runtime.plans``):
``launch`` (with an optional declared :class:`~theano_ocl.runtime.plans.Batch`), ``copy``,
``enqueue`` (library calls), ``host_step`` and ``deferred_check``. It never runs anything
itself; the executor (``runtime.executor``) runs the recorded plans.

Families that provide a generic capability the context needs (a strided copy is an
elementwise kernel) register it with :func:`provide`, so this module imports no op family.
"""
import collections

import numpy as np

from ..darray import DArray, Root, element_indices
from . import native, plans, settings
from .invokers import set_long
from .memory import buffer_copier, upload

_provided = {}


def provide(name, fn):
    """Register ``fn`` as the implementation of the capability ``name`` (an op family
    does this at import; e.g. ``'strided_copy'``: ``fn(ctx, dst, src)``)."""
    _provided[name] = fn


def family(name):
    """The registered implementation of capability ``name`` (the op families register
    theirs when ``theano_ocl.ops`` is imported, which the linker does before planning)."""
    try:
        return _provided[name]
    except KeyError:
        raise LookupError('no op family provides %r (is theano_ocl.ops imported?)' % name)


class Replan(Exception):
    """A frame's assumption (a shape, a host value) no longer holds: plan again."""


class BranchFlip(Replan):
    """An IfElse's condition took the other branch than the frame planned: a frame of the
    same key planned for that branch runs instead (planned the first time)."""


class RunOnHost(Exception):
    """The frame cannot live on the device (a buffer over its largest allocation): this
    call, and every later one with the same key, runs on the host."""


class Frame(object):
    """Everything one input signature needs: buffers, bound steps, output views."""

    def __init__(self, key):
        self.key = key
        self.steps = []
        self.arena = []            # Roots whose buffers this frame owns (reusable)
        self.owned = []            # Roots of frame constants (never reused)
        self.root_sites = collections.defaultdict(list)     # id(root) -> [site] (not inputs)
        self.free = []             # roots free for reuse while planning
        self.dvals = {}            # variable -> DArray, kept for outputs/updates/probes
        # a site: (kernel, argi, byte offset of the view in its root, itemsize); the
        # kernel takes the buffer at argi and the element offset at argi + 1 (bind_site)
        self.rebind_sites = collections.defaultdict(list)   # input index -> [site]
        self.input_roots = {}      # input index -> Root planned with
        self.input_bufs = {}       # input index -> buffer its kernels are bound to
        self.root_to_input = {}    # id(root) -> input index, for re-binding
        self.outputs = None        # list of callables giving each output value
        # per output: its DArray where the call hands it over on the device (donated or
        # copied), else None (OCLFunction.pass_values reads these in place)
        self.kept_outputs = None
        self.commits = []          # steps applying the updates
        self.n_launches = 0
        self.tiny = False          # every value is small: hot calls may run in-thread
        self.tier_probes = 0       # calls run both ways that must agree first (host_tier.py)
        self.replays = 0
        self.batched = None        # planner.BatchedPlan once hot and worth it; False: never
        # ids of roots that a loop re-points between replays (ops/scan_bind.py): the
        # batched plan merges no launch that touches one
        self.pinned = frozenset()
        self.checks = []           # (task index, fn): device error flags read after a call
        self.slab = None           # SimulatorOCL.gather_into_slab: the slab, or False
        self.commit_plan = None    # CommitPlan once hot and worth it; False: never
        self.guard = None          # runtime.frames.make_guard's closure; False: none for it
        self.on_host = False       # a buffer would exceed the device: calls run on the host
        self.nbytes = 0            # bytes of the buffers it owns, its alternates' included
        self.alternates = []       # frames of the same key for other IfElse branches
        self.skipped = set()       # task indices of the IfElse branches it does not take
        self.zeros = {}            # id(root) -> _Zeros, while planning (PlanContext.zeros_written)
        self.early_reads = None    # runtime.early.Reads, once a call ran it
        # a call's pass as a one-step runtime.loop.Loop, unarmed and armed (outputs handed
        # over, read early): Executor.pass_loop's (plans, their number, Loop, Reads or None)
        self.passes = [None, None]
        # what run_steps derives from the steps and commits, which stay as planned: once
        # (name -> value; the executor's host_committed, host steps, launch counts)
        self.memo = {}
        # called before its buffers are released (a handed output's buffer is not the
        # pool's: runtime/steps.py)
        self.releasers = []

    def owned_bytes(self):
        return sum(r.nbytes for r in self.arena + self.owned if not r.slab)

    def release(self):
        for alt in self.alternates:
            alt.release()
        self.alternates = []
        for fn in self.releasers:
            fn()
        self.releasers = []
        for root in self.arena + self.owned:
            if root.slab:
                continue       # the slab is shared (resident shared variables live there too)
            try:
                root.buf.release()
            except Exception:
                pass
        self.arena = []
        self.owned = []
        self.free = []
        self.steps = []
        self.dvals = {}
        self.batched = False
        self.passes = [None, None]


class PlanContext(object):
    """What a device implementation sees while planning one node of a frame."""

    def __init__(self, rc, frame, task_index, queue, run_recorded=None):
        self.rc = rc               # the function's RunContext (its profiler, settings)
        self.dev = rc.dev
        self.queue = queue
        self.frame = frame
        self.task_index = task_index
        self.node = None
        self.cells = None          # the node's storage cells (dynamic inputs are read there)
        # per input: whether the node may overwrite its buffer; per output: whether the
        # function keeps it (an output, an update, a probe) -- set by the frame builder
        self.destroyable = ()
        self.kept = ()
        # allocations take buffers no earlier value of the frame used (set by the frame
        # builder for a loop step's node computing a kept value: ops/scan_bind.py points
        # such a value's root at the outer rows, which an earlier value in the same root
        # would overwrite)
        self.fresh = False
        self.new_steps = []
        self.native = None         # launches through runtime.native (decided at the first)
        # runs the plans recorded so far, this node's too, through the loop driver (the
        # frame builder's; see :meth:`run_recorded`)
        self._run_recorded = run_recorded

    def run_recorded(self):
        """Run the plans recorded so far, this node's included, before its planning goes
        on: for a family whose outputs are known only once its plans ran (a device Scan's:
        their shapes follow what its loop did). They run once, as a segment of the frame's
        first call (``runtime/build.py``); replays run them as any other plans."""
        self._run_recorded(self)

    # -- memory -------------------------------------------------------------------
    def alloc(self, shape, dtype):
        """A fresh C-contiguous device array from the frame's arena; ValueError for a
        negative dimension (numpy's error, where Theano's C code fails to allocate)."""
        dtype = np.dtype(dtype)
        n = 1
        for s in shape:
            s = int(s)
            if s < 0:
                raise ValueError('negative dimensions are not allowed: an output of shape %s'
                                 % (tuple(int(d) for d in shape),))
            n *= s
        nbytes = max(n * dtype.itemsize, 1)
        free = () if self.fresh else self.frame.free
        best = None
        for j, root in enumerate(free):
            if root.nbytes >= nbytes and root.nbytes <= 2 * nbytes + 4096:
                if best is None or root.nbytes < free[best].nbytes:
                    best = j
        if best is not None:
            root = free.pop(best)
        else:
            buf = self.dev.alloc(nbytes)
            root = Root(buf, nbytes, arena=True)
            self.frame.arena.append(root)
        return DArray(root, shape, dtype)

    # -- recording ------------------------------------------------------------------
    def launch(self, prg, kernel_name, gsize, lsize, args, batch=None, reads=None, writes=None,
               pointwise=()):
        """Bind a kernel's arguments once and record its launch (returns its ``Launch``).

        In ``args`` a DArray stands for two arguments: its buffer and its offset in
        elements. Arguments coming from an input's buffer are remembered so the
        frame can re-bind them when the same-shaped input arrives in another buffer.
        ``batch``: a :class:`~theano_ocl.runtime.plans.Batch` when the family declares
        how this launch merges with others like it (``theano_ocl.runtime.planner``);
        ``reads``/``writes``/``pointwise``: what a launch without one declares it touches
        (:class:`~theano_ocl.runtime.plans.Launch`).
        """
        cl = self.dev.cl
        kernel = cl.Kernel(prg, kernel_name)
        expanded = []
        sites = []
        for a in args:
            if isinstance(a, DArray):
                if a.offset % a.itemsize:
                    raise ValueError('misaligned device view %r' % (a,))
                site = (kernel, len(expanded), a.offset, a.itemsize)
                i = self.frame.root_to_input.get(id(a.root))
                if i is not None:
                    sites.append((i, site))
                else:
                    self.frame.root_sites[id(a.root)].append(site)
                expanded.append(a.root.buf)
                expanded.append(np.int64(a.boff // a.itemsize))
            else:
                expanded.append(a)
        kernel.set_args(*expanded)
        for idx, site in sites:
            self.frame.rebind_sites[idx].append(site)
        gsize = tuple(int(g) for g in gsize)
        lsize = None if lsize is None else tuple(int(x) for x in lsize)
        queue = self.queue
        if self.native is None:
            self.native = native.use_native(settings.current().launch,
                                            queue is not self.dev.queue, self.dev.is_gpu)
        if self.native:
            run = native.launcher(queue, kernel, kernel_name, gsize, lsize)
        else:
            enqueue = cl.enqueue_nd_range_kernel

            def run():
                return enqueue(queue, kernel, gsize, lsize)
        plan = plans.Launch(run, self.task_index, kernel, kernel_name, gsize, lsize, args, batch,
                            reads, writes, pointwise)
        self._record(plan)
        self.frame.n_launches += 1
        return plan

    def copy(self, dst, src):
        """Device-to-device copy of contiguous, same-size arrays (strided: use elemwise)."""
        if dst.size == 0:
            return
        if dst.shape == src.shape and dst.dtype == src.dtype and \
                dst.is_c_contiguous() and src.is_c_contiguous():
            copy = buffer_copier(self.dev.cl)
            queue = self.queue
            nbytes = dst.nbytes

            def run():
                return copy(queue, dst.root.buf, src.root.buf, nbytes, src.boff, dst.boff)
            self._record(plans.Copy(run, self.task_index, dst, src))
        else:
            family('strided_copy')(self, dst, src)

    def contiguous(self, d):
        """``d`` itself when C-contiguous, else a C-contiguous copy (recorded)."""
        if d.is_c_contiguous():
            return d
        tmp = self.alloc(d.shape, d.dtype)
        self.copy(tmp, d)
        return tmp

    def constant(self, value):
        """Upload ``value`` once into a buffer this frame owns and never recycles.

        For values the frame's key or guards decide (computed from host inputs): later
        nodes never reuse the buffer or write into it in place.
        """
        value = np.require(value, requirements='C')
        nbytes = max(value.nbytes, 1)
        root = Root(self.dev.alloc(nbytes), nbytes)
        self.frame.owned.append(root)
        d = DArray(root, value.shape, value.dtype)
        upload(self.dev, self.queue, d, value, blocking=True)
        return d

    def enqueue(self, fn, session=None, reads=None, writes=None, pointwise=()):
        """Record an asynchronous device action (a library call such as CLBlast).

        ``fn()`` enqueues on ``ctx.queue`` and returns its event (or None); unlike
        ``host_step`` it leaves the frame replayable without host work. ``reads`` and
        ``writes``: the DArrays it touches, where known (``plans.Enqueue``).
        """
        self._record(plans.Enqueue(fn, self.task_index, session, reads, writes, pointwise))
        self.frame.n_launches += 1

    def host_step(self, fn, kind='host', reads=None, writes=None, session=None, follows=False,
                  pointwise=()):
        """Record host work (``kind``: 'host', 'upload', 'download' or 'guard'); ``reads``
        and ``writes``: the DArrays it touches, when known (else it is a barrier);
        ``follows``: it reads their roots' places when it runs; ``pointwise``: reads made
        only where the same element is written (``plans.HostStep``)."""
        cls = plans.HOST_KINDS[kind]
        self._record(cls(fn, self.task_index, reads, writes, session=session,
                         follows=follows, pointwise=pointwise))

    def previous_plan(self):
        """The plan recorded just before this node's first one (None when this node has
        recorded already, or the frame is empty): lets a family continue its last step."""
        steps = self.frame.steps
        if self.new_steps or not steps:
            return None
        return steps[-1]

    def deferred_check(self, fn, read, flag=None):
        """Record ``fn()``, which examines a device error flag (and raises if a kernel set it),
        to run once the call's outputs are fetched and before its updates are committed
        -- not as a host step: the steps of a call (or of ``run_steps``) never wait for it.
        A failed check still commits nothing; later kernels of that call ran on the values
        the erring kernel left (kernels that flag errors never access memory out of range).
        ``read()``: enqueues the flag's download without waiting and returns its event;
        ``fn`` then examines the host copy (the flags of a call come back with one wait).
        ``flag``: the DArray ``read`` copies, where it says (a call then reads it as soon as
        the kernels setting it were queued: ``runtime/early.py``).
        """
        self.frame.checks.append(plans.Check(fn, self.task_index, read, flag))

    # -- known zeros ----------------------------------------------------------------
    def zeros_written(self, d):
        """The plan just recorded filled ``d`` (a fresh array) with zeros. Until another plan
        touches its buffer, an update of a view of it that finds the view still zero may
        write its values instead of adding them (:meth:`take_zeros`); once such writes
        covered all of ``d``, the fill is dropped from the frame (:meth:`keep_zeros`): the
        gradient of slices of one value, ``inc_subtensor(zeros[:, a:b], ...)`` for every
        slice (an LSTM's gates), is written without the fill. (A written -0.0 stays -0.0,
        where adding it to the fill's +0.0 gives +0.0.)"""
        step = self.new_steps[-1] if self.new_steps else None
        if 0 < d.size <= ZEROS_MAX and d.is_c_contiguous() and \
                isinstance(step, plans.Launch) and all(w.root is d.root for w in step.writes):
            self.frame.zeros[id(d.root)] = _Zeros(d, step)

    def take_zeros(self, view):
        """Where every element of ``view`` still holds the zero a tracked fill wrote: the
        fill's record, those elements taken out of it (the caller writes them, then calls
        :meth:`keep_zeros`); else None."""
        entry = self.frame.zeros.get(id(view.root))
        idx = None if entry is None else entry.elements(view)
        if idx is None or not entry.mask[idx].all():
            return None
        del self.frame.zeros[id(view.root)]      # (the caller's launch touches the root)
        entry.mask[idx] = False
        return entry

    def keep_zeros(self, entry):
        """After the launch writing the elements :meth:`take_zeros` took: track the rest, or
        drop the fill once nothing of it is left to read."""
        if entry.mask.any():
            self.frame.zeros[id(entry.d.root)] = entry
            return
        for steps in (self.frame.steps, self.new_steps):
            for k, step in enumerate(steps):
                if step is entry.step:
                    del steps[k]
                    self.frame.n_launches -= 1
                    return

    def _record(self, step):
        zeros = self.frame.zeros
        if zeros:
            for key, entry in list(zeros.items()):
                if step.touches(entry.d.root):
                    del zeros[key]            # read or written otherwise: no longer known
        self.new_steps.append(step)


#: the largest zero fill (elements) PlanContext.zeros_written tracks
ZEROS_MAX = 1 << 24


class _Zeros(object):
    """A zero fill of ``d`` recorded as ``step``; ``mask``: its elements still zero."""

    def __init__(self, d, step):
        self.d, self.step = d, step
        self.mask = np.ones(d.size, bool)

    def elements(self, v):
        """The indices into ``d``'s elements of view ``v``'s, or None (another dtype, a
        misaligned or out-of-range view)."""
        d = self.d
        idx = element_indices(v) if v.dtype == d.dtype and not d.boff % d.itemsize else None
        if idx is None:
            return None
        idx -= d.boff // d.itemsize
        if idx.size and (idx.min() < 0 or idx.max() >= d.size):
            return None
        return idx


def point_root(root, sites, buf, origin):
    """Move ``root`` to ``buf`` at byte ``origin`` and its kernels' recorded arguments
    ``sites`` with it (the buffer only where it changes): a loop re-pointing a root between
    passes (``runtime/loop.place``, ``runtime/state_swap.py``, ``ops/scan_bind.py``)."""
    if root.buf is not buf:
        root.buf = buf
        for site in sites:
            site[0].set_arg(site[1], buf)
    if root.origin != origin:
        root.origin = origin
        for kernel, argi, off, itemsize in sites:
            set_long(kernel, argi + 1, (origin + off) // itemsize)


def bind_site(site, root):
    """Point a recorded kernel argument pair (buffer, element offset) at ``root``'s
    current buffer and origin."""
    kernel, argi, off, itemsize = site
    kernel.set_arg(argi, root.buf)
    set_long(kernel, argi + 1, (root.origin + off) // itemsize)
