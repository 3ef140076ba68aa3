"""Collectives as Theano ops: ``allreduce(x, op)`` and ``broadcast(x, root)``.

Each is an ordinary Theano op with a host ``perform`` (so the same graph runs under Theano C,
Python or OCL); the device implementation (``ops/collective.py``) records the same
collective as a step of the frame, on the device's buffers. Both go through
:func:`reduce_into` / :func:`broadcast_into`, so the two give the same bits.

Every rank must run the same collectives in the same order (MPI's rule): the same graph,
compiled the same way, runs its nodes in the same order on every rank. At the first call of
each collective op, and every ``CHECK_EVERY`` calls after, the ranks compare what they are
about to exchange (one 20-integer allreduce: the tensor's name, dtype and shape); where any
differs, every rank raises :class:`CollectiveMismatch` naming the tensor and what each rank
has, instead of reducing garbage or waiting forever. (Not at every call: on a loaded host
each collective costs a meeting of all ranks, and a gradient's shape does not change. The
calls are counted per op, so every rank checks at the same calls.)
"""
import queue
import threading
import zlib

import numpy as np
import theano
import theano.tensor as T
from theano.gof import Apply, Op

from . import world

#: after its first call, a collective op checks the ranks agree every this many calls
CHECK_EVERY = 64
#: dimensions the agreement check compares (more: the shape's product and its last
#: dimensions stand for the rest)
CHECK_DIMS = 6
REDUCTIONS = ('sum', 'mean', 'max')


class CollectiveMismatch(ValueError):
    """Ranks came to a collective with tensors of other names, shapes or dtypes."""


def _signature(name, shape, dtype):
    shape = tuple(int(s) for s in shape)
    dims = list(shape[-CHECK_DIMS:]) + [0] * (CHECK_DIMS - min(len(shape), CHECK_DIMS))
    return np.array([zlib.crc32(name.encode()), np.dtype(dtype).num, len(shape),
                     int(np.prod(shape, dtype=np.int64))] + dims, dtype=np.int64)


def check_agreement(comm, name, shape, dtype):
    """Raise :class:`CollectiveMismatch` on every rank where the ranks' (name, shape, dtype)
    for this collective differ (one allreduce of the max of each field and of its negation)."""
    from mpi4py import MPI
    sig = _signature(name, shape, dtype)
    both = np.concatenate([sig, -sig])
    out = np.empty_like(both)
    comm.Allreduce(both, out, op=MPI.MAX)
    n = sig.size
    if np.array_equal(out[:n], -out[n:]):
        return
    mine = (comm.Get_rank(), name, tuple(int(s) for s in shape), str(np.dtype(dtype)))
    everyone = comm.allgather(mine)
    raise CollectiveMismatch(
        'collective on %r: the ranks disagree on what they exchange (the same graph must run '
        'on every rank, with tensors of one shape and dtype):\n%s' % (
            name, '\n'.join('  rank %d: %r %s %s' % r for r in everyone)))


def reduce_into(src, dst, op, name, check=True):
    """``dst[...] = op over ranks of src`` (both C-contiguous host arrays of one shape and
    dtype; they may be the same array). One rank: a copy. ``check``: compare the ranks'
    (name, shape, dtype) first."""
    w = world.init()
    if w.size == 1:
        if dst is not src:
            np.copyto(dst, src)
        return dst
    from mpi4py import MPI
    if check:
        check_agreement(w.comm, name, src.shape, src.dtype)
    mpi_op = MPI.MAX if op == 'max' else MPI.SUM
    if src.dtype == np.float16:
        # MPI has no half type: the values are exchanged in float32 (exact: every half is a
        # float) and the result rounded to half once, the mean after its division
        wide = src.astype(np.float32)
        if wide.size:
            w.comm.Allreduce(MPI.IN_PLACE, wide, op=mpi_op)
        if op == 'mean':
            wide /= np.float32(w.size)
        dst[...] = wide
        return dst
    if src.size:
        sendbuf = MPI.IN_PLACE if dst is src else src
        w.comm.Allreduce(sendbuf, dst, op=mpi_op)
    if op == 'mean':
        dst /= dst.dtype.type(w.size)
    return dst


def broadcast_into(src, dst, root, name, check=True):
    """``dst[...] = src of rank root`` (C-contiguous host arrays, possibly the same)."""
    w = world.init()
    if dst is not src:
        np.copyto(dst, src)
    if w.size == 1:
        return dst
    if check:
        check_agreement(w.comm, name, src.shape, src.dtype)
    if dst.size:
        # (half values as their bits: MPI has no half type)
        w.comm.Bcast(dst.view(np.uint16) if dst.dtype == np.float16 else dst, root=root)
    return dst


class Job(object):
    """One exchange handed to the :class:`Exchanger` thread. ``deferred``: no thread waits
    for it (its call has returned, its updates queued behind it on the device)."""

    def __init__(self, fn, deferred=False):
        self.fn = fn
        self.deferred = deferred
        self.error = None
        self.over = threading.Event()

    def run(self):
        try:
            self.fn()
        except BaseException as e:         # delivered to the waiting thread
            self.error = e
            if self.deferred:
                # its call returned and committed updates that read this exchange: on this
                # rank they are now wrong, and the other ranks may wait for this one
                world.abort('an exchange failed after its call had returned (%s: %s): that '
                            "call's updates are wrong on this rank" % (type(e).__name__, e))
        finally:
            self.over.set()

    def result(self):
        """Wait for the exchange (interruptible: Ctrl-C reaches the caller) and raise its
        error, if it had one."""
        while not self.over.wait(0.05):
            pass
        if self.error is not None:
            raise self.error

    def settle(self):
        """Wait for the exchange, whatever its outcome (its call failed before awaiting it)."""
        self.over.wait()


class Exchanger(object):
    """The thread that runs the exchanges started by the device's collectives, one at a
    time, in the order they were started (the same order on every rank: MPI's rule), while
    the calling thread goes on queueing kernels."""

    def __init__(self):
        self.jobs = queue.Queue()
        self.thread = threading.Thread(target=self._serve, name='theano_ocl exchanges',
                                       daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            self.jobs.get().run()

    def submit(self, fn, deferred=False):
        job = Job(fn, deferred)
        self.jobs.put(job)
        return job


_exchanger = []
_exchanger_lock = threading.Lock()


def exchanger():
    """The process's :class:`Exchanger` (started at the first asynchronous collective)."""
    with _exchanger_lock:
        if not _exchanger:
            _exchanger.append(Exchanger())
        return _exchanger[0]


class _Collective(Op):
    """What the two collectives share: one input, an output of its type, no folding."""
    #: read by the runtime: the node talks to the other ranks, so it runs exactly once per
    #: call on every rank (the host tier never takes a function holding one)
    collective = True

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def do_constant_folding(self, node):
        return False          # folding would run it once, at compile time, on some ranks

    def due(self):
        """Whether this call checks the ranks agree (counted per op: the same calls on every
        rank, which run the same graph)."""
        calls = self.__dict__.get('_calls', 0)
        self._calls = calls + 1
        return calls % CHECK_EVERY == 0

    def label(self, node):
        """The name the agreement check and its errors use: the input's name where it has
        one, else the op and the input's type."""
        x = node.inputs[0]
        return x.name or '%s of %s' % (self, x.type)


class AllReduce(_Collective):
    """``op`` ('sum', 'mean', 'max') of ``x`` over every rank, on every rank."""
    __props__ = ('op',)

    def __init__(self, op='sum'):
        if op not in REDUCTIONS:
            raise ValueError('allreduce: op must be one of %s, got %r' % (REDUCTIONS, op))
        self.op = op

    def make_node(self, x):
        node = super(AllReduce, self).make_node(x)
        if self.op == 'mean' and node.inputs[0].dtype not in T.float_dtypes:
            raise TypeError("allreduce(op='mean') needs a float tensor, got %s"
                            % node.inputs[0].dtype)
        return node

    def perform(self, node, inputs, out):
        x = np.ascontiguousarray(inputs[0])
        out[0][0] = reduce_into(x, np.empty_like(x), self.op, self.label(node), self.due())

    def grad(self, inputs, grads):
        if self.op == 'max':
            return [theano.gradient.grad_not_implemented(self, 0, inputs[0])]
        # every rank's output holds every rank's input: the gradient of one input is the
        # sum (the mean) of the output gradients of all ranks
        return [allreduce(grads[0], self.op)]

    def __str__(self):
        return 'AllReduce{%s}' % self.op


class Broadcast(_Collective):
    """Rank ``root``'s ``x`` on every rank."""
    __props__ = ('root',)

    def __init__(self, root=0):
        self.root = int(root)

    def perform(self, node, inputs, out):
        x = np.ascontiguousarray(inputs[0])
        out[0][0] = broadcast_into(x, np.empty_like(x), self.root, self.label(node),
                                   self.due())

    def grad(self, inputs, grads):
        return [theano.gradient.grad_not_implemented(self, 0, inputs[0])]

    def __str__(self):
        return 'Broadcast{root=%d}' % self.root


class Wait(Op):
    """A collective's result, awaited: :func:`allreduce` returns ``Wait(AllReduce(x))``.

    On the host the exchange is over when the AllReduce node has run, so ``Wait`` is the
    identity (a view). On a GPU, theano_ocl starts the exchange where the AllReduce node
    runs (the gradient is copied out and handed to a communication thread) and waits for
    it here; its linker schedules the AllReduce as early and the Wait as late as the graph
    allows, so the exchange overlaps the computation in between (the earlier layers'
    gradients)."""
    __props__ = ()
    view_map = {0: [0]}
    #: the runtime keeps functions with a collective off the host tier (see _Collective)
    collective = True

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return Apply(self, [x], [x.type()])

    def perform(self, node, inputs, out):
        out[0][0] = inputs[0]

    def infer_shape(self, node, shapes):
        return [shapes[0]]

    def grad(self, inputs, grads):
        return [grads[0]]

    def do_constant_folding(self, node):
        return False

    def __str__(self):
        return 'Wait'


def allreduce(x, op='sum'):
    """``op`` ('sum', 'mean' or 'max') of tensor ``x`` over every rank, on every rank: a
    graph op (host ``perform``; a step of the frame under OCL, which on a GPU overlaps the
    exchange with the computation that does not need its result: :class:`Wait`)."""
    world.init()
    return Wait()(AllReduce(op)(x))


def broadcast(x, root=0):
    """Rank ``root``'s value of tensor ``x`` on every rank (a graph op)."""
    world.init()
    return Broadcast(root)(x)
