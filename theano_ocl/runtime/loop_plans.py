"""A loop's plans: ``run``'s passes of a frame, batched once per frame and what the loop
re-points (``runtime/probe_places.py``, ``runtime/state_swap.py``), and the copies a loop
makes once instead of every pass."""
from ..darray import overlaps
from . import settings
from .planner import CommitPlan, plan_steps
from .plans import launches
from .slab import gather_into_slab


class LoopPlans(object):
    """The batched plans of one function's loops (one frame's at a time), by the roots
    the loop re-points and the residents it double-buffers."""

    def __init__(self, rc):
        self.rc = rc
        self.cache = {}            # (id(frame), pinned, skip) -> (frame, batched steps, commits)

    def get(self, frame, batch, pinned=None, skip=frozenset()):
        """(pass callables, per-pass commit actions, launch counts, the same actions for the
        passes after a first, callables to run once before the passes) for replaying
        ``frame`` in a loop; ``commit_actions()`` prepares one pass's commit
        (runtime/commit.py). ``pinned``: the roots the loop
        re-points between passes, which its batched plan keeps in place (None: the
        frame's own, ``Frame.pinned``); ``skip``: ids of the residents the loop
        double-buffers, whose commits copy nothing (runtime/state_swap.py)."""
        rc = self.rc
        commits = frame.commits
        unbatched = frame.memo.get('launches')
        if unbatched is None:
            unbatched = frame.memo['launches'] = launches(frame.steps) + \
                sum(1 for c in commits if c.resident is not None)

        def plain_commit():
            return [prepare() for prepare in commits]
        info = dict(launches_per_step_unbatched=unbatched)
        if batch is False:
            info.update(launches_per_step=unbatched, batched=False, hoisted=0)
            return [s.fn for s in frame.steps], plain_commit, info, plain_commit, []
        pins = frame.pinned if pinned is None else pinned
        key = (id(frame), pins, skip)
        hit = self.cache.get(key)
        if hit is None or hit[0] is not frame or not hit[1].valid() or not hit[2].valid():
            gather_into_slab(rc, frame)
            p_steps, p_commits = plans_of(rc, frame, pins, skip)
            # (one frame's plans at a time: the frame's own pins, and the probes' pins)
            self.cache = {k: v for k, v in self.cache.items() if v[0] is frame}
            self.cache[key] = hit = (frame, p_steps, p_commits)
            if frame.batched is None and pins == frame.pinned and not skip and \
                    not p_steps.prologue and p_steps.pays():
                # ordinary calls of the frame (pass 0 of run, f(...)) replay it too (not
                # one that leaves copies to a prologue: a call's outputs may take memory
                # a prologue filled)
                frame.batched = p_steps
        _, p_steps, p_commits = hit
        after = p_steps.n_launches_after + p_commits.plan.n_launches_after
        if batch == 'auto' and after >= unbatched:
            info.update(launches_per_step=unbatched, batched=False, hoisted=0)
            return [s.fn for s in frame.steps], plain_commit, info, plain_commit, []
        info.update(launches_per_step=after, batched=True, hoisted=len(p_steps.prologue))
        return p_steps.fns, p_commits.actions, info, p_commits.actions_kept, p_steps.prologue


def plans_of(rc, frame, pinned=None, skip=frozenset()):
    """(batched steps, batched commits) of ``frame`` for a loop of ``run``, whether or not
    they pay (the executor compares launch counts); ``pinned``: the roots the loop
    re-points between passes (default ``frame.pinned``); ``skip``: ids of the residents
    whose commits copy nothing (``runtime/state_swap.py``). The batched steps leave out
    the copies of :func:`invariant_copies`, which their ``prologue`` makes once, before
    the loop's first pass."""
    pinned = frame.pinned if pinned is None else pinned
    hoisted = invariant_copies(frame, pinned)
    with settings.active(rc.settings):
        batched = plan_steps([s for k, s in enumerate(frame.steps) if k not in hoisted],
                             rc.dev, rc.queue, cpu_group=rc.settings.cpu_group, pinned=pinned)
        batched.prologue = [frame.steps[k].fn for k in sorted(hoisted)]
        return batched, CommitPlan(rc, frame, skip)


def invariant_copies(frame, pinned=frozenset()):
    """Indices of the frame's copies whose every pass writes what the last one left:
    a constant's value (a root no plan writes, not an input's) into memory no other plan
    writes (a Join's constant part), neither root re-pointed by a loop (``pinned``). A
    loop of passes makes them once, before its first pass (:func:`plans_of`)."""
    steps = frame.steps
    inputs = {id(r) for r in frame.input_roots.values()}
    out = set()
    for k, s in enumerate(steps):
        if s.kind != 'copy':
            continue
        src, dst = s.src, s.dst
        if {id(src.root), id(dst.root)} & (inputs | pinned):
            continue
        for m, o in enumerate(steps):
            if o.writes is None:
                if o.touches(src.root) or o.touches(dst.root):
                    break
                continue
            if any(overlaps(w, src) or (m != k and overlaps(w, dst)) for w in o.writes):
                break
        else:
            out.add(k)
    return out
