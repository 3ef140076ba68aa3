"""``run``'s probes written into their slots by the kernels computing them, not copied.

A probe of ``run`` (``SimulatorOCL.run_steps(probes=...)``) fills slot ``t // k`` of its
buffer after each step ``t``. By default the loop copies the output's value there after
the pass (``runtime/loop.Copy``): on NVIDIA's driver one enqueued copy costs about as much
host time as a launch (~8 us), as much as a whole launch of a small step.

Where the frame allows it, the output's root follows the slots instead
(``runtime/loop.Follow``, as a device Scan's outputs follow their outer rows,
``ops/scan_bind.py``): before each pass the root is pointed at the step's slot, and the
kernels that write the value (and any that read it later in the pass) find it there
through their bound arguments. Steps past the last whole slot (``n`` not a multiple of
``k``) write into one spare slot after them.

What may follow its slots: an output that is the only value its root holds at the end
(the root is the value's size, the value C-contiguous at its start), that no other probe,
carry or commit reads, not an input's root, and whose every plan finds its memory where
the root is when it runs (``Plan.follows``: launches through their sites, copies and
library calls). A batched launch binds the buffers it merged once, so a launch touching
a root that moves stays a step of its own (``planner.analyse``'s ``pinned``); the executor
takes the placement only where that costs no more launches than the copies it saves.
The ``scan_bind`` setting (``runtime/settings.py``) turns it off, as it does a Scan's.
"""
from ..darray import fills_root
from .loop import Follow, Rows
from .plans import followed


def candidates(frame, outputs, probe_idx, carried):
    """{output index: its DArray} of the probes in ``probe_idx`` whose roots may follow
    their slots (see the module docstring); ``outputs``: the function's output variables,
    ``carried``: the output indices carried into an input."""
    seen = {}
    for j in probe_idx:
        d = frame.dvals.get(outputs[j])
        if d is not None:
            seen.setdefault(id(d.root), []).append((j, d))
    input_roots = {id(r) for r in frame.input_roots.values()}
    # roots the commits read (Commit.reads: roots; a batched commit binds them once)
    read_elsewhere = {id(r) for fn in frame.commits for r in (getattr(fn, 'reads', None) or ())}
    steps = frame.steps
    out = {}
    for rows in seen.values():
        if len(rows) != 1:
            continue                     # the same root probed twice
        j, d = rows[0]
        root = d.root
        if j in carried or id(root) in input_roots or id(root) in read_elsewhere or \
                not fills_root(d) or not followed(steps, root):
            continue
        out[j] = d
    return out


def choose(executor, frame, probe_idx, carried, batch):
    """({output index: DArray} of the probes the loop's kernels write into their slots,
    the roots its batched plan then keeps in place, or None for the frame's own):
    placed where that costs no more launches a step than the copies it saves.
    ``carried``: ``run``'s (input, output, stage) carries; ``batch``: as ``run`` takes it
    (False: the loop replays the frame's steps, each bound through its sites)."""
    if not executor.rc.settings.scan_bind:
        return {}, None
    # (decided once per frame, probes, carries and batching: a run of one step pays a
    # look-up)
    carried = frozenset(j for _, j, _ in carried)
    key = ('probes', tuple(probe_idx), carried, batch)
    hit = frame.memo.get(key)
    if hit is None:
        hit = frame.memo[key] = _decide(executor, frame, probe_idx, carried, batch)
    return hit


def _decide(executor, frame, probe_idx, carried, batch):
    outputs = executor.rc.program.fgraph.outputs
    cand = candidates(frame, outputs, probe_idx, carried)
    if not cand or batch is False:
        return cand, None
    pins = frame.pinned | frozenset(id(d.root) for d in cand.values())
    plain = executor.loop_plans.get(frame, batch)[2]['launches_per_step']
    pinned = executor.loop_plans.get(frame, batch, pins)[2]['launches_per_step']
    return (cand, pins) if pinned <= plain + len(cand) else ({}, None)


def follows(frame, placed, bufs, k):
    """The loop's feeds pointing each placed probe's root (``placed``: {j: DArray}) at the
    step's slot of ``bufs[j]`` (slot ``t // k``)."""
    return [Follow(d.root, frame.root_sites.get(id(d.root), ()),
                   Rows(bufs[j], 0, d.nbytes, every=k))
            for j, d in placed.items()]


def slots(n, k):
    """Slots a placed probe's buffer needs for ``n`` steps sampled every ``k``: the steps
    past the last whole slot write into one spare slot."""
    return -(-n // k)
