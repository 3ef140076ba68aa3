"""Typed plans: what a frame is made of.

A frame is a flat list of plans. Each says what it is and what device memory it reads and
writes, and carries ``fn``, the bound callable the executor runs (arguments set once, at
recording time). Building a frame records plans; running a frame calls ``fn`` of each, in
order; nothing else looks inside a plan's callable.

===========  =====================================================================
``Launch``   one kernel launch; ``batch`` (a :class:`Batch`) when its op family
             declares how launches like it merge into one (``theano_ocl.runtime.planner``)
``Enqueue``  a library call queued on the device (CLBlast): a barrier to the planner
``Copy``     a device-to-device copy of contiguous same-sized arrays
``Upload``   host value into a device buffer (inputs, host-computed values)
``Download`` device buffer into a host cell (values a host node reads)
``HostStep`` a host node, shape arithmetic, or any host work between launches
``Guard``    re-checks an assumption of the frame (raises ``Replan`` when it breaks)
``Check``    reads a device error flag after the call, before its updates commit
===========  =====================================================================

What a call does after its steps is typed too, but not part of the step list:

===========  =====================================================================
``Fetch``    one output of the call: ``fetch()`` its value now; for a host output read
             from the device also ``later(events)`` / ``early()``, the download queued
             (``runtime/early.py``)
``Commit``   one update: ``prepare()`` (may fail: a download, an allocation) returns the
             action that cannot fail; ``resident`` (shared variable, device value) where
             it is a device value into a shared variable's device copy, which the
             commit plan batches (``planner.CommitPlan``)
===========  =====================================================================

``runtime.commit`` applies a frame's commits all or nothing, once every step and check
succeeded (a call), or after each step of a loop (``runtime/loop.py``).
"""
import functools
import math

from ..darray import DArray

#: the kinds of plan that make a pass return to the host ("host steps": host work, and
#: the uploads and downloads around it, and guards reading host values)
HOST_KINDS = frozenset(('host', 'upload', 'download', 'guard'))
#: the kinds of plan that are device launches (kernels and device copies)
LAUNCH_KINDS = frozenset(('launch', 'copy'))


def host_steps(plans):
    """How many of ``plans`` are host steps (:data:`HOST_KINDS`)."""
    return sum(1 for p in plans if p.kind in HOST_KINDS)


def launches(plans):
    """How many of ``plans`` are device launches (:data:`LAUNCH_KINDS`)."""
    return sum(1 for p in plans if p.kind in LAUNCH_KINDS)


class Plan(object):
    """One recorded action: ``fn()`` runs it; ``task`` is the index of the owning task."""
    __slots__ = ('fn', 'task', 'reads', 'writes')
    kind = None
    #: reads made only at the element written there (:class:`Launch` declares them)
    pointwise = ()
    #: whether the plan finds its memory where its roots are when it runs (a root moved
    #: between passes, ``ops/scan_bind.py``: launches through their bound sites, copies and
    #: library calls reading ``root.buf``), rather than where they were when recorded
    follows = False

    def __init__(self, fn, task, reads=(), writes=()):
        self.fn = fn
        self.task = task
        # DArrays it reads and writes; None: it does not say (a barrier to the planner)
        self.reads = None if reads is None else tuple(reads)
        self.writes = None if writes is None else tuple(writes)

    def touches(self, root):
        """Whether the plan may read or write memory of ``root`` (unknown: True)."""
        if self.reads is None or self.writes is None:
            return True
        return any(d.root is root for d in self.reads + self.writes)

    def __repr__(self):
        return '<%s of task %s>' % (type(self).__name__, self.task)


def followed(steps, root):
    """Whether every plan of ``steps`` touching ``root`` finds its memory where the root is
    when it runs (``Plan.follows``): the root may then be pointed elsewhere between passes."""
    return all(s.follows or not s.touches(root) for s in steps)


class Batch(object):
    """How a launch merges with others of its family (declared by the op family).

    Launches of one ``(family, key)`` compute the same code over different operands; the
    planner runs a group of them as one launch of the family's batched kernel, one table
    row per launch: ``head`` (ints), then per operand its element offset and ``tails[k]``
    (ints: strides and the like). ``written`` are the indices of the operands the launch
    writes; ``n`` its work size; ``coef`` per-launch scalars the family's kernel takes in a
    second table (or None).
    """
    __slots__ = ('family', 'key', 'n', 'head', 'operands', 'tails', 'written', 'coef',
                 'pointwise')

    def __init__(self, family, key, n, head, operands, tails, written, coef=None,
                 pointwise=()):
        self.family = family
        self.key = key
        self.n = int(n)
        self.head = [int(x) for x in head]
        self.operands = list(operands)
        self.tails = [[int(x) for x in t] for t in tails]
        self.written = frozenset(written)
        self.coef = coef
        # indices of read operands the kernel reads only at the element it writes there
        # (see Launch.pointwise)
        self.pointwise = frozenset(pointwise)

    @property
    def group(self):
        return (self.family, self.key)

    def record(self):
        """The launch's table row (without its start), from the operands' offsets now."""
        rec = list(self.head)
        for d, tail in zip(self.operands, self.tails):
            rec.append(d.boff // d.itemsize)
            rec.extend(tail)
        return rec


class Launch(Plan):
    """One kernel launch. ``pointwise``: the DArrays among its reads that the kernel reads
    only at the element it writes at the same place of a written operand of the same layout,
    in the work-item that writes it, before writing it (an elementwise kernel's inputs, a
    product's Z): the launch stays right where that memory is also the written operand's
    (``ops/scan_bind.py``). Reads and writes: the batch's operands, else ``reads``/``writes``
    where the family declares them, else every buffer the arguments name."""
    __slots__ = ('kernel', 'name', 'gsize', 'lsize', 'args', 'batch', 'pointwise')
    kind = 'launch'
    follows = True

    def __init__(self, fn, task, kernel, name, gsize, lsize, args, batch=None,
                 reads=None, writes=None, pointwise=()):
        if batch is not None:
            reads = [d for k, d in enumerate(batch.operands) if k not in batch.written]
            writes = [d for k, d in enumerate(batch.operands) if k in batch.written]
            pointwise = [batch.operands[k] for k in sorted(batch.pointwise)]
        elif reads is None or writes is None:
            # undeclared: every buffer it names may be read and written
            reads = writes = [a for a in args if isinstance(a, DArray)]
        Plan.__init__(self, fn, task, reads, writes)
        self.pointwise = tuple(pointwise)
        self.kernel = kernel
        self.name = name
        self.gsize = gsize
        self.lsize = lsize
        self.args = tuple(args)
        self.batch = batch


class Enqueue(Plan):
    """A library call queued on the device (CLBlast, the host BLAS as a native command:
    ``ops/blas_queued.py``); ``fn()`` returns its event or None. ``session``: what the
    library keeps for replay, or None. ``reads``/``writes``: what it touches, where the
    library says (None: a barrier to the planner); ``pointwise`` as for a launch."""
    __slots__ = ('session', 'pointwise')
    kind = 'launch'
    follows = True

    def __init__(self, fn, task, session=None, reads=None, writes=None, pointwise=()):
        Plan.__init__(self, fn, task, reads, writes)
        self.session = session
        self.pointwise = tuple(pointwise)


class Copy(Plan):
    """``merge``: whether the planner may run it inside a batched copy kernel (False: the
    driver's own copy stays, e.g. large copies on CPU devices, a memcpy)."""
    __slots__ = ('dst', 'src', 'merge')
    kind = 'copy'
    follows = True

    def __init__(self, fn, task, dst, src, merge=True):
        Plan.__init__(self, fn, task, (src,), (dst,))
        self.dst = dst
        self.src = src
        self.merge = merge


class HostStep(Plan):
    """Host work; ``reads``/``writes`` None when the step does not say which buffers it
    touches (a barrier that may touch any). ``session``: state a family shares between its
    consecutive host steps (``ops.blas_host``' mapped regions), or None. ``follows``: the
    step maps what it touches from the roots' places when it runs (``ops.blas_host``);
    ``pointwise``: as :class:`Launch`'s (a product's Z, read where C is written)."""
    __slots__ = ('session', 'follows', 'pointwise')
    kind = 'host'

    def __init__(self, fn, task, reads=None, writes=None, session=None, follows=False,
                 pointwise=()):
        Plan.__init__(self, fn, task, reads, writes)
        self.session = session
        known = reads is not None and writes is not None
        self.follows = bool(follows) and known
        self.pointwise = tuple(pointwise) if known else ()


class Upload(HostStep):
    __slots__ = ()
    kind = 'upload'


class Download(HostStep):
    __slots__ = ()
    kind = 'download'


class Guard(HostStep):
    __slots__ = ()
    kind = 'guard'


class Check(Plan):
    """``read()`` enqueues the download of the flag ``fn`` examines and returns its event
    (the executor reads every flag of a call, and its outputs, with one wait); ``reads``:
    that flag's DArray, where the check says (else empty)."""
    __slots__ = ('read',)
    kind = 'check'

    def __init__(self, fn, task, read, flag=None):
        Plan.__init__(self, fn, task, () if flag is None else (flag,), ())
        self.read = read


#: the plan class recorded for each ``PlanContext.host_step`` kind
HOST_KINDS = {'host': HostStep, 'upload': Upload, 'download': Download, 'guard': Guard}


def launch_geometry(dev, n, local=256):
    """Global/local sizes for a 1-d kernel with one work-item per item (``if (gi < n)``).

    GPUs get ``local``-sized groups (the range padded to a multiple). CPU devices (PoCL)
    vectorize across the work-items of a group: the range is ``n`` exactly in groups of
    :func:`cpu_local` work-items where ``n`` has such a divisor, else padded to a multiple
    of ``local`` in groups of ``local``. Left to PoCL, a range of a prime number of items
    ran in groups of one (exp over 256,019 float32 on the 2-core Xeon: 1.07 ms by events;
    over 256,001, whose divisors PoCL used, 0.22 ms; 2026-12-02). :func:`exact` says
    whether a launch so shaped covers ``n`` without padding (its kernel then needs no
    bounds test: a kernel whose work-items test ``gi < n`` around a call of ``exp`` or
    ``tanh`` is not vectorized by PoCL 3.1, 2x slower).
    """
    n = max(int(n), 1)
    if dev.is_cpu:
        group = cpu_local(n, dev.max_work_group_size, dev.compute_units)
        if group is not None:
            return (n,), (group,)
    local = min(local, dev.max_work_group_size)
    return (((n + local - 1) // local) * local,), (local,)


#: the fewest work-items of a CPU device's work-group over a 1-d range (a group costs PoCL
#: ~1 us to start) ...
CPU_MIN_LOCAL = 64
#: ... and the groups per compute unit it aims at, where the range is long enough
CPU_GROUPS_PER_UNIT = 4


@functools.lru_cache(maxsize=4096)
def cpu_local(n, most, units):
    """The work-items of a CPU device's work-group over a 1-d range of exactly ``n`` items:
    ``n`` itself where it is at most ``CPU_MIN_LOCAL``, else the largest divisor of ``n``
    of at most ``most`` (the device's limit) and ``n / (CPU_GROUPS_PER_UNIT * units)``
    (so that every core gets groups), and at least ``CPU_MIN_LOCAL``; where it has none,
    its least divisor above that and at most ``most`` (``n`` itself, one group, where
    ``n`` is at most ``most``); None where ``n`` has no divisor of ``CPU_MIN_LOCAL`` to
    ``most`` (the range is then padded; so is every range over ``most`` on a device whose
    limit is below ``CPU_MIN_LOCAL``)."""
    if n <= min(CPU_MIN_LOCAL, most):
        return n
    top = min(most, max(CPU_MIN_LOCAL, n // (CPU_GROUPS_PER_UNIT * max(units, 1))))
    for group in range(top, CPU_MIN_LOCAL - 1, -1):
        if n % group == 0:
            return group
    for group in range(top + 1, min(most, n) + 1):
        if n % group == 0:
            return group
    return None


def whole_groups(sizes, L):
    """(work-group size, whether every operation is whole groups of it) for a batched
    kernel of operations of ``sizes`` elements on a CPU device (``runtime.planner``),
    about ``L`` (the ``cpu_group`` setting): the divisor of all the sizes within
    ``L / 2 .. 2 L`` nearest to ``L`` where there is one (every work-item of a launch is
    then an element: the kernel tests no bounds, which PoCL 3.1 does not vectorize a call
    of ``exp`` behind), else ``L`` (an operation's last group tests its work-items'
    bounds)."""
    g = 0
    for n in sizes:
        g = math.gcd(g, int(n))
    if g:
        near = [d for d in range(max(1, L // 2), 2 * L + 1) if g % d == 0]
        if near:
            return min(near, key=lambda d: (abs(d - L), -d)), True
    return L, False


def exact(gsize, n):
    """Whether a 1-d launch of ``gsize`` work-items covers ``n`` items with none left
    over (no work-item needs a bounds test)."""
    return len(gsize) == 1 and gsize[0] == max(int(n), 1)


def planes_local(dev, gsize, most=1024):
    """The local size of a 2-d or 3-d range ``gsize`` = (columns, rows[, planes]) on a CPU
    device: whole rows of the first dimension (of the first two, for a 3-d range), as many
    as divide the last dimension and fit ``most`` work-items. Against PoCL's own choice
    (2-core EPYC, LeNet batch 128's col2im over (12, 12, 2560) and im2col): the input
    gradient's convolution with its forward 23-27 -> 18-21 ms in the same process. None
    (the driver's choice) on other devices, for 1-d ranges, or where one row (plane) is
    over ``most``."""
    if not dev.is_cpu or len(gsize) < 2:
        return None
    most = min(most, dev.max_work_group_size)
    row = 1
    for g in gsize[:-1]:
        row *= g
    if row > most or row == 0:
        return None
    k = max(1, most // row)
    while gsize[-1] % k:
        k -= 1
    return tuple(gsize[:-1]) + (k,)


class Fetch(object):
    """One output of a call (see the module docstring); ``reads``: the roots it reads."""
    __slots__ = ('run', 'reads', 'later', 'early')

    def __init__(self, run, reads=(), later=None, early=None):
        self.run, self.reads, self.later, self.early = run, tuple(reads), later, early

    def __call__(self):
        return self.run()


class Commit(object):
    """One update of a call (see the module docstring); ``reads``: the roots it reads."""
    __slots__ = ('prepare', 'reads', 'resident')

    def __init__(self, prepare, reads=(), resident=None):
        self.prepare, self.reads, self.resident = prepare, tuple(reads), resident

    def __call__(self):
        return self.prepare()
