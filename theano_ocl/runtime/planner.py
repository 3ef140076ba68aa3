"""Fewer launches: regroup a frame's steps so independent same-kernel launches run as one.

A frame (:class:`~theano_ocl.runtime.context.Frame`) is a flat list of steps in the linker's topological
order. A graph built the naive way (one small subgraph per neuron population, as a
Theano port of a Nengo model is) gives many launches of the *same generated kernel*
over different small buffers. :func:`plan_steps` reorders the steps by their data
dependencies and turns every set of ready, same-kernel elementwise launches (and
same-dtype contiguous device copies, e.g. the update commits of ``run_steps``) into
one launch of a batched kernel (elementwise: ``kernels/batched.cl.mako``, registered by
``ops/elemwise.py``): K operand sets bound as
arguments, a table of per-operation offsets, sizes and strides, and work-items mapped
to (operation, element) through the prefix sum of the sizes -- nengo-ocl's planner idea.
Small matrix products (``ops/gemm_small.py``: encoders, decoders) batch the same way,
with alpha/beta in a second table. K is bounded by the device's kernel-argument size
(CL_DEVICE_MAX_PARAMETER_SIZE: 1024 bytes on PoCL, 4352 on NVIDIA), unless every operand
position of the group lies in one buffer (a slab: ``runtime.slab.gather_into_slab``): then the buffers are
bound once and the table's offsets count from their start. On CPU devices a work-group of
``cpu_group`` (a setting, ``runtime.settings``) work-items takes that many consecutive
elements of one operation (a map from
work-group to operation follows the records), so PoCL vectorizes it; where operations
average fewer than cpu_group / 4 elements a work-item walks ``CPU_CHUNK`` consecutive
elements with one table search instead. On GPUs each element searches (binary search) on
its own.

What merges is declared, not guessed: an op family records a launch with a
:class:`~theano_ocl.runtime.plans.Batch` (family, key, the launch's table row and
operands), and registers how its launches batch (:func:`register_family`: the batched
kernel, the largest batch, per-launch scalars). Dependencies are read off what each plan
says it reads and writes (buffer, byte span; where spans overlap, the elements: column
slices of one matrix do not conflict, ``darray.disjoint``): a plan that reads or writes
bytes an earlier one wrote, or writes bytes an earlier one read, runs after it and is never
merged with it.
Plans that do not say (host work, uploads, guards, library calls) are barriers: nothing
moves across them.

The result is a :class:`BatchedPlan`: callables to run in order, plus launch counts.
It binds the buffers the frame's roots hold when it is built; ``valid()`` says whether
they still do (an input re-bound to another buffer, a frame released: build again).
"""
import itertools
import operator

import numpy as np

from .. import darray as da
from .. import shared
from . import early, plans, settings, steps
from .plans import launch_geometry, whole_groups
from .context import PlanContext, family

MAX_BATCH = 256
SLAB_MAX_BATCH = 1 << 16
CPU_CHUNK = 64


def _copy_key(dtype):
    """The elementwise key of a contiguous same-dtype copy (``dst = src``)."""
    return family('copy_key')(dtype)


class Op(object):
    """One step as the planner sees it."""
    __slots__ = ('index', 'step', 'key', 'reads', 'writes', 'barrier', 'record', 'ptrs', 'n',
                 'deps', 'coef')

    def __init__(self, index, step):
        self.index = index
        self.step = step
        self.key = None          # batchable: the elemwise source key
        self.reads = []          # (buffer id, lo, hi)
        self.writes = []
        self.barrier = False
        self.record = None       # ints for the batched table (without start)
        self.ptrs = None         # DArrays bound as operand pointers
        self.n = 0
        self.deps = set()
        self.coef = None         # small products: (alpha, beta)


def _span(d):
    lo, hi = da.span(d)
    origin = d.root.origin
    return (_buf_id(d.root), origin + lo, origin + hi, d)


def _buf_id(root):
    buf = root.buf
    return getattr(buf, 'int_ptr', None) or id(root)


def analyse(index, step, pinned=frozenset()):
    """What a plan reads and writes (``runtime.plans``), and whether it can join a batch.
    A step touching a root in ``pinned`` (one a loop re-points between replays: where it
    is now says nothing of where it will be) is a barrier, kept in place."""
    op = Op(index, step)
    if step.reads is None or step.writes is None or isinstance(step, plans.HostStep) or \
            (pinned and any(id(d.root) in pinned
                            for d in itertools.chain(step.reads, step.writes))):
        # host work may also read and write host cells other steps use: nothing moves
        op.barrier = True
        return op
    op.reads = [_span(d) for d in step.reads]
    op.writes = [_span(d) for d in step.writes]
    batch = getattr(step, 'batch', None)
    if batch is not None and batch.family in _FAMILIES:
        op.key = batch.group
        op.record, op.ptrs, op.n, op.coef = batch.record(), batch.operands, batch.n, batch.coef
        return op
    if step.kind == 'copy' and step.merge:
        dst, src = step.dst, step.src
        if dst.dtype == src.dtype and dst.is_c_contiguous() and src.is_c_contiguous() \
                and dst.size and dst.offset % dst.itemsize == 0 and src.offset % src.itemsize == 0:
            op.key = ('elemwise', _copy_key(dst.dtype))
            op.record = [dst.size, dst.boff // dst.itemsize, src.boff // src.itemsize]
            op.ptrs = [dst, src]
            op.n = dst.size
    return op


def _dependencies(ops):
    """Fill ``op.deps``: the earlier ops each op must follow (RAW, WAR, WAW, barriers)."""
    touched = {}                 # buffer id -> [(op index, lo, hi, is_write)]
    since_barrier = []
    last_barrier = None
    for b in ops:
        if b.barrier:
            b.deps.update(since_barrier)
            if last_barrier is not None:
                b.deps.add(last_barrier)
            last_barrier = b.index
            since_barrier = []
            touched = {}
            continue
        if last_barrier is not None:
            b.deps.add(last_barrier)
        for accesses, is_write in ((b.reads, False), (b.writes, True)):
            for buf, lo, hi, d in accesses:
                for i, lo_a, hi_a, w, d_a in touched.get(buf, ()):
                    if (w or is_write) and lo_a < hi and lo < hi_a and i != b.index and \
                            i not in b.deps and not da.disjoint(d_a, d):
                        b.deps.add(i)
        for accesses, is_write in ((b.reads, False), (b.writes, True)):
            for buf, lo, hi, d in accesses:
                touched.setdefault(buf, []).append((b.index, lo, hi, is_write, d))
        since_barrier.append(b.index)


def schedule(ops, urgent=()):
    """Greedy list schedule: emit ready non-batchable steps first, then the largest ready
    same-kernel set whose kernel has no launch left waiting, else the largest ready set.
    ``urgent``: indices of steps whose values the call reads back as soon as they are
    final (``runtime/early.py``): once one of them, or a batchable step it depends on, is
    ready, its kernel's ready launches go first, before the non-batchable steps, rather
    than wait to grow a batch (a loss's last launch would otherwise wait behind the
    backward pass's products). Returns a list of groups (lists of ops)."""
    _dependencies(ops)
    soon = set()
    stack = [i for i in urgent if 0 <= i < len(ops)]
    while stack:
        i = stack.pop()
        if i not in soon:
            soon.add(i)
            stack.extend(ops[i].deps)
    waiting = [len(o.deps) for o in ops]
    succ = [[] for _ in ops]
    for o in ops:
        for i in o.deps:
            succ[i].append(o.index)
    ready = [o for o in ops if not o.deps]
    remaining = {}
    for o in ops:
        if o.key is not None:
            remaining[o.key] = remaining.get(o.key, 0) + 1
    groups = []
    while ready:
        hurry = [o for o in ready if o.key is not None and o.index in soon] if soon else ()
        singles = [o for o in ready if o.key is None]
        if hurry:
            # a launch a call reads early: with every ready launch of its kernel
            key = min(hurry, key=lambda o: o.index).key
            chosen = [o for o in ready if o.key == key]
            remaining[key] -= len(chosen)
        elif singles:
            first = min(singles, key=lambda o: o.index)
            chosen = [first]
        else:
            by_key = {}
            for o in ready:
                by_key.setdefault(o.key, []).append(o)
            # a kernel all of whose launches are ready goes first: waiting cannot grow it,
            # and running it may make other kernels' launches ready (fewer, larger groups)
            complete = [g for k, g in by_key.items() if len(g) == remaining[k]]
            chosen = max(complete or by_key.values(), key=len)
            remaining[chosen[0].key] -= len(chosen)
        groups.append(chosen)
        ids = {o.index for o in chosen}
        ready = [o for o in ready if o.index not in ids]
        for o in chosen:
            for j in succ[o.index]:
                waiting[j] -= 1
                if waiting[j] == 0:
                    ready.append(ops[j])
    if sum(len(g) for g in groups) != len(ops):  # pragma: no cover - a cycle is a bug
        raise AssertionError('planner: dependency cycle')
    return groups


class BatchedPlan(object):
    """Steps regrouped: ``plans`` (``runtime.plans`` objects: the original steps kept as
    they were, and a ``Launch`` per merged group) run in order do what the original steps
    did; ``fns`` are their callables."""

    def __init__(self, plans_, n_launches_before, n_launches_after, bound, holds):
        self.plans = plans_
        self.fns = [p.fn for p in plans_]
        self.n_launches_before = n_launches_before
        self.n_launches_after = n_launches_after
        self._holds = holds         # tables and kernels kept alive
        # ``bound``: [(root, buffer bound, origin bound)]; each root kept once, its binding
        # as two lists that valid() compares in C (a Nengo-like E=500 step binds 15,000
        # roots, 7,000 of them distinct)
        seen = {}
        self._conflict = False
        for root, buf, origin in bound:
            first = seen.setdefault(id(root), (root, buf, origin))
            if first[1] is not buf or first[2] != origin:
                self._conflict = True     # bound in two places: never valid (as before)
        self._roots = [r for r, _, _ in seen.values()]
        self._bufs = [b for _, b, _ in seen.values()]
        self._origins = [o for _, _, o in seen.values()]
        self._held_at = None        # da.moves.n when valid() last found every root in place
        self.prologue = []          # callables run once before a loop's passes (loop_plans)

    def valid(self):
        """Whether every root is still in the buffer, at the origin, it was bound to (looked
        at again only where some root moved since it last was: ``darray.moves``)."""
        if self._conflict:
            return False
        at = da.moves.n
        if at == self._held_at:
            return True
        roots = self._roots
        ok = all(map(operator.is_, map(_BUF, roots), self._bufs)) and \
            list(map(_ORIGIN, roots)) == self._origins
        if ok:
            self._held_at = at
        return ok

    def pays(self, looped=False, gpu=False):
        """Whether ordinary calls should replay it: on CPU devices when it removes at least
        a quarter of the launches (building it costs more than a replay of the steps); on
        GPUs (``gpu``), and for a frame replayed as a loop's step (``looped``: a device
        Scan's inner frame), any launch: a launch costs NVIDIA's driver about 8 us of host
        time. On the H100 (2026-11-26; one process, the frame's plan on and off in
        alternating rounds of 100 steps, three processes): the MLP 784-1000-1000-10 step,
        36 launches batched to 30 (its momentum updates), enqueued in 34-50 us less host
        time (0.34-0.50 ms against 0.37-0.55) and took 0.70-0.80 ms against 0.72-0.83;
        LeNet's (56 -> 52, a merged launch of 819,200 elements among them), device-bound,
        took the same time either way (1.80-1.87 ms against 1.80-1.90)."""
        if looped or gpu:
            return self.n_launches_after < self.n_launches_before
        return self.n_launches_after * 4 <= self.n_launches_before * 3

    def run(self):
        for fn in self.fns:
            fn()


def chunk_for(dev):
    """Elements per work-item of a batched kernel: CPU devices walk chunks (one table
    search each), GPUs take one element per work-item."""
    return CPU_CHUNK if dev.is_cpu else 1


def group_for(dev, sizes=None, cpu_group=None):
    """Work-group size of a batched kernel on CPU devices (``cpu_group``, default: the
    active settings' ``cpu_group``), 0 for chunks (GPUs; operations of fewer than
    cpu_group / 4 elements on average, where most lanes would idle)."""
    if cpu_group is None:
        cpu_group = settings.current().cpu_group
    if not dev.is_cpu or not cpu_group:
        return 0
    if sizes is not None and sum(sizes) * 4 < cpu_group * len(sizes):
        return 0
    return cpu_group


def batched_geometry(dev, total):
    chunk = chunk_for(dev)
    return launch_geometry(dev, -(-total // chunk))


class Family(object):
    """How one op family's launches batch: ``kernel(dev, key, K, slab, chunk, group)`` gives
    (program, kernel name, record length incl. start) of the kernel running K launches;
    ``max_batch(dev, key)`` the largest K; ``coef_table(key, coefs)`` the host array of the
    second table (per-launch scalars), or None when the family has none."""

    def __init__(self, kernel, max_batch, coef_table=None):
        self.kernel = kernel
        self.max_batch = max_batch
        self.coef_table = coef_table


_FAMILIES = {}
_BUF = operator.attrgetter('buf')
_ORIGIN = operator.attrgetter('origin')


def register_family(name, family):
    """Let launches whose ``Batch.family`` is ``name`` merge (see :class:`Family`)."""
    _FAMILIES[name] = family




def max_batch(dev, key):
    family, fkey = key
    return _FAMILIES[family].max_batch(dev, fkey)


def device_table(dev, queue, host):
    """A read-only device buffer holding ``host`` (a launch table), filled by a blocking copy.

    Not CL_MEM_COPY_HOST_PTR: a driver may leave such a buffer in host memory, and every
    work-item reads the table."""
    cl = dev.cl
    buf = cl.Buffer(dev.context, cl.mem_flags.READ_ONLY, max(host.nbytes, 1))
    if host.nbytes:
        cl.enqueue_copy(queue, buf, np.ascontiguousarray(host), is_blocking=True)
    return buf


def slab_of(group):
    """Per operand position, the one buffer every op's operand lies in (a slab: the
    records' offsets already count from the buffer, root origins included) -- or None
    when some position spans several buffers."""
    bufs = []
    for k in range(len(group[0].ptrs)):
        parent = group[0].ptrs[k].root.buf
        ptr = parent.int_ptr
        for o in group:
            if o.ptrs[k].root.buf.int_ptr != ptr:
                return None
        bufs.append(parent)
    return bufs


def _make_batch(dev, queue, group, holds, bound, slab=None, cpu_group=None):
    key = group[0].key
    for o in group:
        bound.extend((d.root, d.root.buf, d.root.origin) for d in o.ptrs)
    records = [o.record for o in group]
    K = len(group)
    L = group_for(dev, [o.n for o in group], cpu_group)
    whole = False
    if L:
        L, whole = whole_groups([o.n for o in group], L)
    extra = []     # tables after the launch table
    family = _FAMILIES[key[0]]
    prg, name, rec = family.kernel(dev, key[1], K, slab is not None,
                                   1 if L else chunk_for(dev), L, whole)
    if family.coef_table is not None:
        extra.append(device_table(dev, queue, family.coef_table(key[1], [o.coef for o in group])))
    table = np.zeros((K, rec), np.int64)
    start = 0
    args = [None, None] + extra
    for k, (o, r) in enumerate(zip(group, records)):
        table[k, 0] = start
        table[k, 1:] = r
        start += -(-o.n // L) if L else o.n
        if slab is None:
            args.extend(d.root.buf for d in o.ptrs)
    if L:
        # work-groups: the records' starts count groups; each group's operation follows
        n_groups = start
        gop = np.repeat(np.arange(K, dtype=np.int64), [-(-o.n // L) for o in group])
        table = np.concatenate([table.ravel(), gop])
        start = sum(o.n for o in group)
    if slab is not None:
        args.extend(slab)
    cl = dev.cl
    tab = device_table(dev, queue, table)
    args[0] = np.int64(start)
    args[1] = tab
    kernel = cl.Kernel(prg, name)
    kernel.set_args(*args)
    if L:
        gsize, lsize = (n_groups * L,), (L,)
    else:
        gsize, lsize = batched_geometry(dev, start)
    enqueue = cl.enqueue_nd_range_kernel
    holds.append((tab, extra, kernel))

    def run():
        return enqueue(queue, kernel, gsize, lsize)
    # what the merged launches read and write (its arguments are tables and raw buffers)
    reads = [d for o in group for d in o.step.reads]
    writes = [d for o in group for d in o.step.writes]
    return plans.Launch(run, -1, kernel, name, gsize, lsize, args, reads=reads, writes=writes)


def plan_steps(steps, dev, queue, min_group=2, cpu_group=None, pinned=frozenset(),
               urgent=()):
    """Regroup ``steps`` (a frame's, or any list of ``runtime.plans``) into a
    :class:`BatchedPlan` (``cpu_group``: see :func:`group_for`; ``pinned``: see
    :func:`analyse`; ``urgent``: see :func:`schedule`)."""
    ops = [analyse(i, s, pinned) for i, s in enumerate(steps)]
    before = plans.launches(steps)
    out, holds, bound = [], [], []
    after = 0
    for group in schedule(ops, urgent):
        if len(group) < min_group:
            for o in group:
                out.append(o.step)
                after += o.step.kind in plans.LAUNCH_KINDS
            continue
        slab = slab_of(group)
        if slab is not None and len(group) <= SLAB_MAX_BATCH:
            # every operand position lies in one buffer: one launch, pointers bound once
            out.append(_make_batch(dev, queue, group, holds, bound, slab, cpu_group))
            after += 1
            continue
        K = max_batch(dev, group[0].key)
        for c in range(0, len(group), K):
            chunk = group[c:c + K]
            if len(chunk) < min_group:
                out.extend(o.step for o in chunk)
                after += len(chunk)
                continue
            out.append(_make_batch(dev, queue, chunk, holds, bound, None, cpu_group))
            after += 1
    return BatchedPlan(out, before, after, bound, holds)


# --------------------------------------------------------------------------- merging
#: launches merged into one at most (each adds its operands' arguments to the kernel)
MERGE_MAX = 8
#: launches over a 2-d or 3-d range (CPU devices, strided operands: no division per
#: element, ``ops.elemwise.launch_dims``) merge up to this many elements (the merged kernel
#: divides, which costs less than a launch there)
MERGE_MAX_ND_ELEMENTS = 1 << 16
#: an elementwise kernel launched more often than this in a frame is left to the batched
#: plan, which runs all of its launches as one (a Nengo-like model's ensembles)
MERGE_MAX_SAME = 4


def _mergeable(step, inputs):
    b = getattr(step, 'batch', None)
    return (step.kind == 'launch' and b is not None and b.family == 'elemwise' and
            (len(step.gsize) == 1 or b.n <= MERGE_MAX_ND_ELEMENTS) and
            not any(id(d.root) in inputs for d in step.writes))


def _forwardable(dtype):
    """Whether a merged kernel hands a launch's value of ``dtype`` to a later one as its
    store and a load would (``ops/elemwise_merge.py``): not float16 (a store rounds) or
    complex values."""
    return dtype != np.float16 and dtype.kind != 'c'


def _pointwise_after(a, b):
    """Whether elementwise launch ``b``, after ``a`` in a frame, touches what ``a`` touches
    only element for element (``Launch.pointwise``: at the element ``gi`` it writes), so
    that a merged kernel's work-item ``gi`` does what the two did apart: ``b`` writing what
    ``a`` reads (a merged kernel loads before it stores: the arena handing ``b`` a buffer
    ``a`` reads last, an update in place of a value ``a`` reads), reading what ``a``
    writes (the merged kernel hands ``b`` the value ``a`` computed, as its store and a load
    would: ``ops/elemwise_merge.py``; :func:`_forwardable` dtypes), or writing over it
    (the merged kernel stores in the launches' order). "Element for element": the same
    elements in the same order and type (``darray.layout``) over the whole range."""
    n = a.batch.n
    if n != b.batch.n:
        return False

    def same(w, d):
        return da.layout(w) == da.layout(d) and w.size == n

    b_pointwise = [id(r) for r in b.pointwise]
    for w in a.writes:
        if any(da.overlaps(w, x) and not same(w, x) for x in b.writes):
            return False
        for r in b.reads:
            if da.overlaps(w, r) and not (id(r) in b_pointwise and same(w, r) and
                                          _forwardable(w.dtype)):
                return False
    a_pointwise = [id(r) for r in a.pointwise]
    for w in b.writes:
        for r in a.reads:
            if da.overlaps(w, r) and not (id(r) in a_pointwise and same(w, r)):
                return False
    return True


def merge_groups(steps, inputs=frozenset()):
    """Index lists of ``steps`` (a frame's) whose elementwise launches can run as one at
    the place of the first: each an elementwise launch (``Batch`` family ``'elemwise'``,
    the same number of elements; over a 1-d range, or a small one), writing no frame input's root
    (``inputs``: ids of roots), touching nothing the others touch but element for element
    (:func:`_pointwise_after`), and depending on no step after the first outside the
    group. Kernels launched more than ``MERGE_MAX_SAME`` times stay apart."""
    cand = [_mergeable(s, inputs) for s in steps]
    count = {}
    for s, c in zip(steps, cand):
        if c:
            count[s.batch.key] = count.get(s.batch.key, 0) + 1
    if sum(1 for c in cand if c) < 2:
        return []
    ops = [analyse(i, s) for i, s in enumerate(steps)]
    _dependencies(ops)
    groups, open_ = [], {}
    for i, s in enumerate(steps):
        if not cand[i] or count[s.batch.key] > MERGE_MAX_SAME:
            continue
        g = open_.get(s.batch.n)
        if g is not None and len(g) < MERGE_MAX and \
                all(d < g[0] or (d in g and _pointwise_after(steps[d], s))
                    for d in ops[i].deps):
            g.append(i)
        else:
            open_[s.batch.n] = g = [i]
            groups.append(g)
    return [g for g in groups if len(g) > 1]


def merge_frame(rc, frame):
    """Merge ``frame``'s independent elementwise launches of one size (:func:`merge_groups`)
    into one launch each (the ``'merge_elementwise'`` family: ``ops/elemwise_merge.py``),
    once the frame is built; the launches merged away's kernel arguments leave the
    frame's sites. Returns how many launches fewer the frame makes."""
    groups = merge_groups(frame.steps, frozenset(frame.root_to_input))
    if not groups:
        return 0
    merge = family('merge_elementwise')
    steps_ = frame.steps
    at, gone, dead = {}, set(), set()
    with settings.active(rc.settings):
        for g in groups:
            members = [steps_[i] for i in g]
            plan = merge(PlanContext(rc, frame, members[0].task, rc.queue), members)
            if plan is None:
                continue
            at[g[0]] = plan
            gone.update(g[1:])
            dead.update(id(m.kernel) for m in members)
            frame.n_launches -= len(g)
    if not at:
        return 0
    steps_[:] = [at.get(i, s) for i, s in enumerate(steps_) if i not in gone]
    for sites in itertools.chain(frame.root_sites.values(), frame.rebind_sites.values()):
        sites[:] = [site for site in sites if id(site[0]) not in dead]
    return len(gone)


# --------------------------------------------------------------------------- commits
def commit_copy_step(rc, prepare):
    """A frame commit as a planner step when it is a plain device copy into a resident
    shared variable whose placement is as planned (a ``plans.Copy``, or a host step that
    does nothing when the value was computed in place); else None."""
    res, d = prepare.resident or (None, None)
    dst = res.darr if res is not None else None
    if dst is None or res.dev is not rc.dev or dst.shape != d.shape or dst.dtype != d.dtype \
            or not d.is_c_contiguous():
        return None
    if (d.root is dst.root and d.offset == dst.offset) or not d.nbytes:
        # computed in place, or empty (an OpenCL copy of 0 bytes is an error)
        return plans.HostStep(steps.none, -1, reads=(), writes=())
    cl, queue, nbytes = rc.dev.cl, rc.queue, d.nbytes

    def run():
        return cl.enqueue_copy(queue, dst.root.buf, d.root.buf, byte_count=nbytes,
                               src_offset=d.boff, dst_offset=dst.boff)
    return plans.Copy(run, -1, dst, d)


class CommitPlan(object):
    """A frame's commits with the device copies into residents batched (planner.py; 12
    copies of an MLP step -> 1 launch on a GPU) and the residents' coherence flags set as
    ``Resident.prepare_device_commit``'s action would; the other commits (host values,
    downloads) stay prepare -> action pairs. The residents in ``skip`` (ids) only have
    their flags set: a loop double-buffers them (``runtime/state_swap.py``).

    On CPU devices copies over ``CPU_BATCH_MAX_BYTES`` stay the driver's own copies (a
    memcpy; through the batched kernel the MLP step's 14 MB of commits cost 2 ms more)."""
    CPU_BATCH_MAX_BYTES = 1 << 16

    def __init__(self, rc, frame, skip=frozenset()):
        self.marks = []
        self.prepares = []
        small, big = [], []
        for prepare in frame.commits:
            if skip and prepare.resident is not None and id(prepare.resident[0]) in skip:
                # double-buffered by the loop (runtime/state_swap.py): its flags only
                res = prepare.resident[0]
                self.marks.append((res, res.darr))
                continue
            step = commit_copy_step(rc, prepare)
            if step is None:
                self.prepares.append(prepare)
                continue
            res, d = prepare.resident
            self.marks.append((res, res.darr))
            if rc.dev.is_cpu and step.kind == 'copy' and d.nbytes > self.CPU_BATCH_MAX_BYTES:
                big.append(plans.Copy(step.fn, -1, step.dst, step.src, merge=False))
            else:
                small.append(step)
        # the commits are independent (sources overlapping a destination were staged)
        self.plan = plan_steps(small + big, rc.dev, rc.queue, cpu_group=rc.settings.cpu_group)
        self.copies_kept = list(self.plan.fns)
        self.copies = self.copies_kept + [self._mark]
        self._marked = None           # shared.tally.now() after the last _mark
        self.residents = [res for res, _ in self.marks]
        self._held_at = None          # shared.tally.moves when valid() last held

    def pays(self):
        return self.plan.n_launches_after < self.plan.n_launches_before

    def valid(self):
        moves = shared.tally.moves
        if moves != self._held_at:
            for res, darr in self.marks:
                if res.darr is not darr:      # re-placed (set_value of another shape, device)
                    return False
            self._held_at = moves
        return self.plan.valid()

    def actions(self):
        """This call's commit actions: the other commits' reads first (they may fail)."""
        if not self.prepares:
            return self.copies
        return self.copies + [prepare() for prepare in self.prepares]

    def actions_kept(self):
        """As :meth:`actions`, without setting the residents' coherence flags again: for
        the passes of a loop after one whose commit set them, where nothing between passes
        touches them (no host steps; 1,500 residents of a Nengo-like model cost ~0.2 ms a
        pass to mark)."""
        if not self.prepares:
            return self.copies_kept
        return self.copies_kept + [prepare() for prepare in self.prepares]

    def _mark(self):
        # (where no resident's flags, host object or place changed since the last mark,
        # they are as this one would leave them: 1,500 residents of a Nengo-like model
        # cost 0.6-1.7 ms to mark)
        tally = shared.tally
        if self._marked == tally.now():
            return
        shared.mark_device_newer(self.residents)
        self._marked = tally.now()


# --------------------------------------------------------------------------- a function's plans
def _planning(plan):
    """Run ``plan(rc, frame)`` with the function's settings active
    (``runtime.settings.current``: how op families read them)."""
    def planning(rc, frame, *args):
        with settings.active(rc.settings):
            return plan(rc, frame, *args)
    planning.__name__ = plan.__name__
    planning.__doc__ = plan.__doc__
    return planning


@_planning
def commit_plan(rc, frame):
    """The frame's commits as a CommitPlan when batching merges some of its copies, else
    False (the executor asks once the frame is hot)."""
    plan = CommitPlan(rc, frame)
    return plan if plan.pays() else False


def may_batch(rc, steps):
    """Whether a frame of ``steps`` is one whose hot calls may run a batched plan: enough
    launches (``batch_min_launches``; 2 for a loop's step, ``rc.loop_step``), batching on."""
    return rc.batch_after is not None and \
        plans.launches(steps) >= (2 if rc.loop_step else rc.batch_min_launches)


@_planning
def batched_plan(rc, frame):
    """The frame's steps with independent same-kernel launches merged, or False when that
    does not remove at least a quarter of the launches (on GPUs and for a loop's step,
    ``rc.loop_step``: any; ``BatchedPlan.pays``)."""
    if not may_batch(rc, frame.steps):
        return False
    plan = plan_steps(frame.steps, rc.dev, rc.queue, cpu_group=rc.settings.cpu_group,
                      pinned=frame.pinned, urgent=early.producers(frame))
    return plan if plan.pays(looped=rc.loop_step, gpu=rc.dev.is_gpu) else False
