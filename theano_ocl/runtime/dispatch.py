"""What a kernel launch costs a CPU device whatever the kernel does, measured once per
device: the fusion rules weigh a launch saved against the work a fused kernel does less
well (``ops.reduce.fuse_pays``, ``ops.fusion.fuse_epilogues``).

PoCL hands every launch to all of its worker threads: measured so (2026-12-01), an empty
launch costs the 2-core Xeon here 4-6 us and the H200 machine's 16-core Xeon 41 us (47-54
us through theano_ocl's runtime there: ``runtime.cost``'s ``launch``), so that a Nengo
step's 100-element probe sum cost as much as its 50,000-element spike cast. A fused
kernel's scalar loop loses to the vectorized fast paths by some nanoseconds an element
and a core (``ops/reduce.py``'s measurements): on many cores a launch saved is worth far
more elements of that loss than on two.
"""
import time

#: launches timed in a row (after one to warm), the least of ``_ROUNDS`` rounds counting
_LAUNCHES = 32
_ROUNDS = 5

_SOURCE = '__kernel void theano_ocl_empty(__global int *a) { }\n'


def dispatch_s(dev):
    """Seconds a launch of an empty kernel of one work-group costs ``dev`` from enqueue
    to completion, enqueued back to back (the least of a few rounds); 0.0 on GPUs, where
    the fusion rules do not ask (and where it does not fail: 0.0 where it cannot be
    measured)."""
    got = getattr(dev, '_dispatch_s', None)
    if got is not None:
        return got
    got = 0.0
    if dev.is_cpu:
        try:
            got = _measure(dev)
        except Exception:        # pragma: no cover - a device refusing an empty kernel
            got = 0.0
    dev._dispatch_s = got
    return got


def _measure(dev):
    cl = dev.cl
    queue = cl.CommandQueue(dev.context, dev.device)
    buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 64)
    kernel = cl.Kernel(dev.build(_SOURCE), 'theano_ocl_empty')
    kernel.set_args(buf)
    best = None
    for _ in range(_ROUNDS):
        cl.enqueue_nd_range_kernel(queue, kernel, (1,), (1,))
        queue.finish()
        t0 = time.perf_counter()
        for _ in range(_LAUNCHES):
            cl.enqueue_nd_range_kernel(queue, kernel, (1,), (1,))
        queue.finish()
        t = (time.perf_counter() - t0) / _LAUNCHES
        best = t if best is None else min(best, t)
    return best
