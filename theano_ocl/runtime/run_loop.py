"""``Executor.run``'s loop, declared: what each of a run's steps feeds, runs, sinks and
commits (``runtime.loop.Loop``), and the loop a run keeps for the next run like it.

A run like the last one (its frame, steps, probes and probe rate, the inputs it feeds and
carries, the same staging buffers), where no root moved (``darray.moves``) and no shared
variable was placed anew (``shared.tally.moves``) since that run ended, takes the loop
that run declared: its probe buffers, probe places, double-buffered states, batched
plans and sinks, pointed at its own input arrays (``Loop.feed_anew``); ~30 us of a
``run_steps(1)`` on the H200's host. Device probes (the caller's arrays), profiled
functions, host probes and more than ``KEEP_PROBE_BYTES`` of probe buffers are declared
afresh every run.
"""
import operator

import numpy as np

from . import probe_places, state_swap
from .loop import Copy, Follow, HostRow, Loop, Rows, Strided
from .. import darray as da
from .. import shared

#: the most bytes of probe buffers a run keeps for the next run like it
KEEP_PROBE_BYTES = 8 << 20


def key(frame, first, n, k, probe_idx, batch, feed_mode, copies, host_feeds, carried,
        probes_on, profile):
    """What a run must share with the last one to take its loop (None: never kept)."""
    if probes_on != 'host' or profile:
        return None
    return (frame, first, n, k, tuple(probe_idx), batch, feed_mode,
            tuple(c[0] for c in copies), tuple(id(c) for c, _ in host_feeds),
            tuple(c[:2] for c in carried))


def take(kept, key, staged):
    """What the last run kept, where this run (``key``, its staging ``staged``: (cell,
    stage) pairs) may take it, else None."""
    if kept is None or kept[0] != key or kept[1] != da.moves.n or \
            kept[2] != shared.tally.moves or \
            not all(map(operator.is_, kept[3][-1], [s for _, s in staged])):
        return None
    return kept[3]


def keep(key, stop, n, n_slots, probe_bufs, staged, declared):
    """What a run that ended leaves for the next one (None: nothing): ``declared`` (probe
    places, probe buffers, loop, prologue, launch counts, states swapped), with the places
    of every root and resident as they are now."""
    if key is None or stop != n or None in probe_bufs or \
            n_slots * sum(pb[1].nbytes for pb in probe_bufs) > KEEP_PROBE_BYTES:
        return None
    return (key, da.moves.n, shared.tally.moves,
            declared + ([stage for _, stage in staged],))


def declare(executor, frame, first, n, k, probe_idx, probe_bufs, host_probes, placed, pinned,
            copies, host_feeds, carries, staged, batch, feed_mode, n_host, checks):
    """``run``'s loop over ``frame``: what each step feeds, its plans (batched, state
    double-buffered where that pays), its sinks (probes, carries) and commits; with the
    copies to make once before the passes, the plans' launch counts and how many states
    it double-buffers (``n_host``: the frame's host steps; ``checks(t)``: its device
    flags read after step ``t``)."""
    rc = executor.rc
    prog = rc.program
    feeds = input_feeds(frame, copies, host_feeds, feed_mode)
    # (the frame's small buffers may move into a slab: the places below after it)
    # state double-buffered where the frame allows it (runtime/state_swap.py): not
    # the roots a sink of the loop reads where they were planned
    sink_roots = {id(d.root) for _, d, _ in carries} | {
        id(pb[1].root) for j, pb in zip(probe_idx, probe_bufs)
        if pb is not None and j not in placed}
    swaps, pinned, skip = state_swap.choose(executor, frame, batch, pinned, sink_roots,
                                            n - first)
    step_fns, commit_actions, info, kept_actions, prologue = executor.loop_plans.get(
        frame, batch, pinned, skip)
    feeds += probe_places.follows(frame, placed, {j: pb[0] for j, pb in
                                                  zip(probe_idx, probe_bufs)
                                                  if j in placed}, k)
    if swaps:
        feeds += swaps
        commit_actions, kept_actions = _with_swaps(commit_actions, kept_actions, swaps)
    sinks = [Copy(Rows(d.root.buf, d.boff), Rows(dst, 0), nbytes)
             for dst, d, nbytes in carries]
    for j, pb in zip(probe_idx, probe_bufs):
        if pb is None:
            sinks.append(HostRow(fetch=_host_copy(frame.outputs[j]),
                                 into=host_probes[j], every=k))
        elif pb[1].nbytes and j not in placed:
            buf, d, strided = pb
            slots = Rows(buf, 0, d.nbytes, every=k)
            sinks.append(Copy(Rows(d.root.buf, d.boff), slots, d.nbytes)
                         if strided is None else Strided(strided[1], strided[0], slots))
    if n_host:
        kept_actions = commit_actions   # a host step may sync a resident's cell
    inputs = executor.cache.input_slots
    # each step starts as a call does: host output cells cleared (a host thunk must
    # not write into an array an earlier step handed on), fed inputs back in their
    # staging arrays, and shared variables whose update the frame computes on the
    # host (integer counters: host shape arithmetic) brought to the device
    loop = Loop(frame, step_fns, 'run_steps', rc.dev, rc.queue, feeds=feeds, sinks=sinks,
                cells=staged, clear=prog.host_output_cells,
                restage=[(i, root, inputs[i]) for i, root in executor.host_committed(frame)],
                commit=(commit_actions, kept_actions), checks=checks)
    return loop, prologue, info, len(swaps)


def input_feeds(frame, copies, host_feeds, feed_mode):
    """A loop's first feeds: each step's rows of a run's inputs (``copies``: device
    arrays, a copy into the staging array or the kernels pointed at the row; then
    ``host_feeds``: host arrays, a row into the cell)."""
    feeds = []
    for i, stage, big, nbytes, src0 in copies:
        rows = Rows(big.base_data, src0, nbytes)
        if feed_mode == 'rebind':
            # the kernels follow the step's slice in place of a copy
            feeds.append(Follow(frame.input_roots[i], frame.rebind_sites.get(i, ()), rows))
        else:
            feeds.append(Copy(rows, Rows(stage.base_data, stage.offset), nbytes))
    return feeds + [HostRow(cell, arr) for cell, arr in host_feeds]


def _with_swaps(actions, kept, swaps):
    """A loop's commit actions with its double-buffered variables' commit points
    (runtime/state_swap.py): in the same journal as the step's other updates."""
    marks = [sw.commit for sw in swaps]
    return (lambda: actions() + marks), (lambda: kept() + marks)


def _host_copy(fetch):
    """A host output's value at a step, kept (the next step's thunk may reuse its array)."""
    return lambda: np.array(fetch(), copy=True)
