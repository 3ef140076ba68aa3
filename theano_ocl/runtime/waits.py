"""Waiting for a call's results: polled on CPU devices, blocked on elsewhere.

A call that returns host values ends waiting for its downloads (and its error flags, and
a host BLAS product's mapped operands). ``clWaitForEvents`` puts the calling thread to
sleep until the driver wakes it; on PoCL's CPU device that wake-up is most of a small
call's round trip. Asking the event's status in a loop that yields the core between asks
(``os.sched_yield``: the device's own worker threads run meanwhile) returns as soon as the
work is done. Measured with pyopencl on the 2-core Intel Xeon's PoCL 3.1 (2026-12-01,
``bench/wait_latency.py``), a 4096-float kernel and the download of its result: 71-90 us
blocked, 28-37 us polled; a 7 ms kernel took the same either way.

``os.sched_yield`` lets go of Python's lock, as ``clWaitForEvents`` does: another thread
goes on meanwhile (a thread counting in Python beside a polling one ran at its own speed,
0.092 s against 0.097 alone; beside a loop that does not yield, 0.160 s). A poll gives up
after ``POLL_S`` and blocks: a long call's wait costs the host a core for that long at
most (the device's workers get it back whenever they need it: each poll yields). GPUs
keep the blocking wait (their drivers spin or block by their own rules, and a GPU's work
does not share the host's cores).
"""
import os
import time

#: how long a CPU device's wait polls before it blocks (seconds)
POLL_S = 1e-3

#: the ``command_execution_status`` of a finished command (``CL_COMPLETE``)
_COMPLETE = 0


def polls(dev):
    """Whether waits on ``dev`` poll (a CPU device, ``POLL_S`` above 0)."""
    return dev.is_cpu and POLL_S > 0


def wait(dev, events):
    """Wait until every event of ``events`` (pyopencl events; a list) completed; raise as
    ``clWaitForEvents`` does where one failed."""
    if not events:
        return
    cl = dev.cl
    if not polls(dev):
        cl.wait_for_events(events)
        return
    dev.flush()
    give_up = None
    failed = False
    yield_ = os.sched_yield
    for ev in events:
        status = ev.command_execution_status
        while status > _COMPLETE:
            if give_up is None:
                give_up = time.perf_counter() + POLL_S
            elif time.perf_counter() > give_up:
                cl.wait_for_events(events)
                return
            yield_()
            status = ev.command_execution_status
        failed = failed or status < _COMPLETE
    if failed:      # (a failed command's status is negative: the driver's wait raises)
        cl.wait_for_events(events)
