"""The collectives family (``theano_ocl.distributed``: AllReduce, Broadcast, Wait) on the
device.

A collective is a host step of the frame, in the frame's order (a barrier: the planner moves
nothing across it, so every rank meets its collectives in the same order), running the same
exchange as the op's ``perform`` (``distributed.collectives.reduce_into`` /
``broadcast_into``) on the device's buffers:

- where the device shares memory with the host (a CPU device, PoCL), the input and output
  buffers are mapped (no copy: PoCL hands back the buffer itself) and the mapped arrays are
  handed to MPI directly; the exchange is over when the step ends, and ``Wait`` is a view;
- otherwise (a GPU) the input is copied into a page-locked block of the device's pool and
  reduced there in place, then copied into the output. Where every consumer of an
  AllReduce is a ``Wait`` (``allreduce()`` builds it so), the exchange is asynchronous: the
  AllReduce's step queues the copy out without waiting and hands the exchange to the
  process's exchange thread (``distributed.collectives.Exchanger``); the Wait's step, which
  the linker schedules as late as the graph allows (``overlap_schedule``), waits for it
  and queues the copy in. The kernels queued in between (the earlier layers' gradients)
  run meanwhile. An exchange's error is raised by its Wait, before anything is committed.

  With more than one rank, a call whose exchanges check no agreement (all but the first
  call and every ``CHECK_EVERY``-th) does not wait at its Waits at all: each Wait queues
  the copy in behind a user event that the exchange thread completes when the exchange is
  over, and the call goes on queueing its updates and returns; the device runs them once
  the exchange is done, and the host meanwhile queues the next call (a GPU left idle
  while the host waited and then queued the updates and the next step's first kernels
  cost LeNet's 2-GPU step 1.5 ms of its 11.5). Such an exchange failing after its call
  returned leaves that call's updates wrong on this rank: it ends the job on every rank
  (``distributed.world.abort``), as MPI's own errors do.
"""
import heapq
import weakref

from ..darray import span
from ..distributed.collectives import (AllReduce, Broadcast, Wait, broadcast_into, exchanger,
                                       reduce_into)
from ..runtime.memory import download, download_later, upload
from ..runtime.native import wait_for_event
from .base import DeviceImpl, INT_DTYPES
from .blas_host import _Mapped
from .registry import implemented_by, ocl_impl

#: frame -> {AllReduce output variable: its Transfer}: how a Wait finds its exchange
_IN_FLIGHT = weakref.WeakKeyDictionary()


class Transfer(object):
    """An asynchronous exchange of one frame: ``start`` queues the copy of ``x`` into the
    page-locked ``stage`` and hands the exchange to the exchange thread; ``finish`` waits for
    it and queues the copy of the result into ``y`` -- or, where ``defer``, queues that copy
    behind a user event the exchange completes, and returns at once."""

    def __init__(self, dev, queue, x, y, stage, exchange, due, defer):
        self.dev, self.queue, self.x, self.y, self.stage = dev, queue, x, y, stage
        self.exchange, self.due, self.defer = exchange, due, defer
        self.job = None
        self.gate = None
        # the gated copy's event, dropped only once complete: pyopencl waits for a dropped
        # transfer's event without letting go of Python's lock, which the exchange thread
        # needs to complete the gate
        self.pending = []
        # (not at exit: an exchange whose peer is gone would never complete its gate)
        weakref.finalize(self, _drain, self.pending).atexit = False

    def start(self):
        if self.job is not None:        # the last call's exchange (deferred, or failed)
            self.job.settle()
            self.job = None
        _drain(self.pending)
        # decided here, in the calling thread: every rank checks at the same calls
        check = self.due()
        ev = download_later(self.dev, self.queue, self.x, self.stage)
        stage, exchange = self.stage, self.exchange
        gate = self.gate = user_event(self.dev) if self.defer and not check else None

        def run():
            try:
                if ev is not None:
                    wait_for_event(ev)
                exchange(stage, stage, check)
            finally:
                if gate is not None:
                    gate.set_status(self.dev.cl.command_execution_status.COMPLETE)
        self.job = exchanger().submit(run, deferred=gate is not None)

    def finish(self):
        job, gate = self.job, self.gate
        if gate is not None:
            # the in-order queue runs the copy, and what reads y, once the exchange is over
            self.pending.append(upload(self.dev, self.queue, self.y, self.stage,
                                       blocking=False, wait_for=[gate]))
            self.gate = None
            return
        try:
            job.result()
        finally:
            if job.over.is_set():
                self.job = None
        # the queue is in order: the kernels reading y come after this copy
        upload(self.dev, self.queue, self.y, self.stage, blocking=False)


def _drain(pending):
    """Wait (letting go of Python's lock) for the events in ``pending``, then drop them."""
    while pending:
        ev = pending.pop()
        if ev is not None:
            wait_for_event(ev)


def user_event(dev):
    """An OpenCL user event of ``dev``'s context (completed by the exchange thread)."""
    return dev.cl.UserEvent(dev.context)


def _deferred_allowed():
    """Whether Waits may leave their exchanges to the device (more than one rank: with one,
    the exchange is a copy, and its failure is raised by its call)."""
    from ..distributed import world
    return world.init().size > 1


def _threads_allowed():
    """Whether MPI may be called from the exchange thread while the caller's thread may
    call it too (MPI_THREAD_MULTIPLE; no MPI at all: one rank, nothing is sent)."""
    from ..distributed import world
    MPI = world.mpi()
    if MPI is None or not MPI.Is_initialized():
        return True
    return MPI.Query_thread() >= MPI.THREAD_MULTIPLE


class CollectiveImpl(DeviceImpl):
    """One collective as a host step: mapped buffers on a CPU device, staged through a
    page-locked block on a GPU (asynchronously where a Wait awaits it)."""
    # (float16: exchanged as float32, rounded once; distributed.collectives.reduce_into)
    dtypes = ('float16', 'float32', 'float64') + INT_DTYPES
    collective = True

    def __init__(self, node, dev, exchange, due):
        super(CollectiveImpl, self).__init__(node, dev)
        self.exchange = exchange          # (src, dst, check) host arrays -> None
        self.due = due                    # () -> whether this call checks agreement
        self.mapped = bool(dev.unified_memory)
        clients = getattr(node.outputs[0], 'clients', None) or ()
        self.awaited = bool(clients) and all(
            not isinstance(c, str) and isinstance(c.op, Wait) for c, _ in clients)

    def describe(self):
        how = 'mapped buffers' if self.mapped else \
            'staged, overlapped until its Wait' if self.awaited else 'staged'
        return '%s (%s)' % (self.node.op, how)

    def plan(self, ctx, ins):
        x = ctx.contiguous(ins[0])
        y = ctx.alloc(x.shape, x.dtype)
        exchange, due, queue, dev = self.exchange, self.due, ctx.queue, ctx.dev
        if self.mapped:
            m = _Mapped(dev, queue)
            regions = [(x.root,) + span(x) + (False,), (y.root,) + span(y) + (True,)]

            def run():
                m.open(regions)
                try:
                    exchange(m.view(x), m.view(y), due())
                finally:
                    m.release()
        elif self.awaited and _threads_allowed():
            t = Transfer(dev, queue, x, y, dev.pinned.empty(x.shape, x.dtype), exchange, due,
                         _deferred_allowed())
            _IN_FLIGHT.setdefault(ctx.frame, {})[self.node.outputs[0]] = t
            # what it touches on the device, said: a call's early reads (runtime/early.py)
            # of values computed before it are not queued behind it
            ctx.host_step(t.start, reads=[x], writes=[])
            return [y]
        else:
            stage = dev.pinned.empty(x.shape, x.dtype)

            def run():
                download(dev, queue, x, stage)
                exchange(stage, stage, due())
                upload(dev, queue, y, stage, blocking=True)
        ctx.host_step(run)
        return [y]


class WaitImpl(DeviceImpl):
    """The end of an asynchronous exchange (a host step waiting for it, then the copy of
    its result queued); a view where the exchange was over when its step ended."""
    complex_ok = True
    collective = True

    def plan(self, ctx, ins):
        t = _IN_FLIGHT.get(ctx.frame, {}).get(self.node.inputs[0])
        if t is None:
            return [ins[0]]
        # it writes t.y alone (the copy in): a read of a value computed before it is not
        # queued behind the exchange
        ctx.host_step(t.finish, reads=[], writes=[t.y])
        return [t.y]


@ocl_impl.register(AllReduce)
@implemented_by(CollectiveImpl)
def _allreduce(op, node, dev):
    name = op.label(node)
    return CollectiveImpl(node, dev, lambda src, dst, check: reduce_into(
        src, dst, op.op, name, check), op.due)


@ocl_impl.register(Broadcast)
def _broadcast(op, node, dev):
    name = op.label(node)
    return CollectiveImpl(node, dev, lambda src, dst, check: broadcast_into(
        src, dst, op.root, name, check), op.due)


_broadcast.impls = (CollectiveImpl,)


@ocl_impl.register(Wait)
@implemented_by(WaitImpl)
def _wait(op, node, dev):
    return WaitImpl(node, dev)


def overlap_schedule(fgraph, order):
    """``order`` (a topological order of ``fgraph``'s nodes, its ``orderings()`` kept)
    rearranged so that asynchronous exchanges overlap computation: an AllReduce awaited by
    a Wait runs as soon as its input is ready; the nodes it needs go first, those of the
    exchange needing the least work first (the last layer's gradient, in back-propagation);
    then the nodes needing no exchange; Waits and everything after them last. The same
    graph gives the same order on every rank. ``order`` itself where there is no Wait."""
    waits = [n for n in order if isinstance(n.op, Wait)]
    starts = [w.inputs[0].owner for w in waits if w.inputs[0].owner is not None and
              isinstance(w.inputs[0].owner.op, AllReduce)]
    if not starts:
        return order
    index = {n: i for i, n in enumerate(order)}
    deps = {n: {v.owner for v in n.inputs if v.owner is not None and v.owner in index}
            for n in order}
    for n, before in fgraph.orderings().items():
        if n in deps:
            deps[n].update(b for b in before if b in index)
    # the work each start needs: its ancestors
    need = {}
    for s in starts:
        seen, stack = set(), [s]
        while stack:
            n = stack.pop()
            for d in deps[n]:
                if d not in seen:
                    seen.add(d)
                    stack.append(d)
        need[s] = seen
    cost = {}
    for s in sorted(starts, key=lambda s: len(need[s]), reverse=True):
        for n in need[s]:
            cost[n] = len(need[s])
    succ = {n: [] for n in order}
    for n, ds in deps.items():
        for d in ds:
            succ[d].append(n)
    late = set()
    stack = list(waits)
    while stack:
        n = stack.pop()
        if n not in late:
            late.add(n)
            stack.extend(succ[n])
    start_set = set(starts)

    def key(n):
        if n in start_set:
            return (0, 0, index[n])
        if n in cost:
            return (1, cost[n], index[n])
        return (3 if n in late else 2, 0, index[n])
    waiting = {n: len(ds) for n, ds in deps.items()}
    ready = [key(n) + (n,) for n in order if not waiting[n]]
    heapq.heapify(ready)
    out = []
    while ready:
        n = heapq.heappop(ready)[-1]
        out.append(n)
        for m in succ[n]:
            waiting[m] -= 1
            if not waiting[m]:
                heapq.heappush(ready, key(m) + (m,))
    assert len(out) == len(order), 'overlap_schedule lost nodes'
    return out
