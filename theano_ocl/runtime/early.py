"""A call's host outputs and error flags read back as soon as their values are final.

A call waits for its host outputs and its error flags before it returns. Read at the end
of the pass, that wait is for everything the pass queued: on a GPU, the call returns only
once the device has run the whole frame. A training step's loss is final after the forward
pass, but its read would wait behind the backward pass and the updates, which the host
had already queued: on the H100 the MLP step's host waited about 120 us a call for them
with nothing left to do.

So a read is queued right after the last plan that may write its value (its root): the
in-order queue copies the value the pass computed, and the call waits only for that copy.
The rest of the pass runs on the device while the call returns, and while the next call
copies its inputs and queues its own launches behind it. Nothing the caller can see
changes: a later call, ``get_value`` and every transfer go through the same in-order
queue; the updates are committed on the host (``runtime.commit``) after the checks, as
before; buffers stay the frame's.

Only ordinary calls read early (``Executor.run_pass`` with ``armed``: the callables of
its pass loop, ``Executor.pass_loop``, have the reads interleaved): the passes of
``run(n)`` and of a device Scan fetch their outputs otherwise and queue no read.
"""
from .plans import Fetch



def _last_writer(plans_, root):
    """Index of the last plan that may write memory of ``root`` (-1: none does)."""
    for i in range(len(plans_) - 1, -1, -1):
        writes = plans_[i].writes
        if writes is None or any(w.root is root for w in writes):
            return i
    return -1


class Reads(object):
    """A frame's early reads: the callables that queue them, and what the current pass
    queued: ``outputs`` {output index: (host array, event)}, ``checks`` {Check: event},
    valid while ``live`` (from :meth:`start` to the end of the call)."""

    def __init__(self, frame):
        self.outputs = {}
        self.checks = {}
        self.live = False
        self._reads = _readers(frame, self)

    def start(self):
        """A pass begins: forget what an earlier one queued."""
        if self.outputs:
            self.outputs = {}
        if self.checks:
            self.checks = {}
        self.live = True

    def fns(self, plans_, fns):
        """``fns`` (the callables of ``plans_``: the frame's steps, its batched plan's) with
        the reads interleaved; None: read at the end as before (``Executor.pass_loop``
        keeps the result with the frame's pass loop)."""
        return interleave(plans_, fns, self._reads) if self._reads else None


def producers(frame):
    """Indices in ``frame.steps`` of the last plans writing what a call reads early: the
    batched plan emits them as soon as they can run (``planner.schedule``'s ``urgent``)."""
    found = (_last_writer(frame.steps, root) for root, _ in _readers(frame, None))
    return {i for i in found if i >= 0}


def _readers(frame, sink):
    """[(root, read)]: the frame's host outputs and flags that can be read early, ``read()``
    queueing the copy and leaving ``(host array, event)`` / the flag's event in ``sink``
    (the frame's :class:`Reads`)."""
    out = []
    for j, fetch in enumerate(frame.outputs or ()):
        early = fetch.early if type(fetch) is Fetch else None
        if early is not None:
            out.append((fetch.reads[0], _output_reader(sink, j, early)))
    for check in frame.checks:
        if check.reads:
            out.append((check.reads[0].root, _check_reader(sink, check)))
    return out


def _output_reader(sink, j, early):
    def read():
        sink.outputs[j] = early()
    return read


def _check_reader(sink, check):
    def read():
        sink.checks[check] = check.read()
    return read


def interleave(plans_, fns, reads):
    """``fns`` (the callables of ``plans_``, in order) with each of ``reads`` [(root, read)]
    run right after the last plan writing its root; None when none would run before the
    end of the pass (the call's own reads at the end do as well)."""
    after = {}
    last = len(plans_) - 1
    for root, read in reads:
        i = _last_writer(plans_, root)
        if 0 <= i < last:
            after.setdefault(i, []).append(read)
    if not after:
        return None
    out = list(fns)
    for i, extra in after.items():
        out[i] = _then(out[i], extra)
    return out


def _then(fn, extra):
    """``fn`` and then the reads (one callable: the pass's step indices stay the same)."""
    def run():
        fn()
        for read in extra:
            read()
    return run
