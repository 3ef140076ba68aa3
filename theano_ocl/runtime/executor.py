"""The one executor: runs a linked function's frame once per call, or ``n`` times.

Every way of running a frame goes through :class:`Executor`:

* ``replay(frame)`` / ``run_pass(frame)``: one pass of the frame's plans (its batched
  plan once hot), after re-pointing kernels at inputs that arrived in other buffers: a
  loop of one step (``pass_loop``) run by ``runtime.loop.drive``, as the loops are;
* ``run_checks(frame)``: the device error flags of that pass (bad index, division by zero);
* ``commit(frame)``: the updates, all or none (``runtime.commit``);
* ``run(n, feeds=..., probes=...)``: ``n`` passes with no host round trip. Pass 0 is an
  ordinary call of the function (it plans the frame when needed); passes 1..n-1 replay
  that frame. Per-step inputs (host or device arrays with a leading axis ``n``) are on the
  device once; each pass copies its slice into the frame's input buffer (``feed='copy'``)
  or re-points the kernels at it (``'rebind'``). Outputs asked for (``probes``) go into
  preallocated per-step slots of device buffers, every ``probe_every`` passes, and come back
  once at the end (or stay on the device). State lives in the shared variables' device
  buffers; each pass commits its updates. A signature whose calls run on the host runs
  its passes as calls (``runtime/host_steps.py``).

``OCLFunction.__call__`` (vm.py) is the one-pass form; ``SimulatorOCL.run_steps`` and its
methods are thin public API over ``OCLFunction.run``. The executor sees the function's
``RunContext`` and ``FrameCache`` (``runtime/run_context.py``, ``runtime/frames.py``), and
calls it back only through the ``call`` that ``run`` is handed.
"""
import time
import warnings

import numpy as np

from . import (commit, early, faults, host_steps, memory, planner, plans, probe_places,
               run_loop, uploads, waits)
from .context import family
from .loop import Loop, bind_input, drive, home, once
from .loop_plans import LoopPlans
from .memory import buffer_copier
from ..darray import DArray, Root


class RunStepsError(ValueError):
    """A request ``run`` cannot honour (inputs, shapes, probes)."""


class Executor(object):
    """Runs the frames of one linked function: ``rc``, its RunContext (device, queue,
    program, profiler, settings, counters), and ``cache``, its FrameCache (the input
    slots, the keys, the last call's frame)."""

    def __init__(self, rc, cache):
        self.rc = rc
        self.cache = cache
        self.stages = {}           # input index -> pyopencl array a frame reads step inputs from
        self.loop_plans = LoopPlans(rc)   # run's batched plans (runtime/loop_plans.py)
        # what the last run declared, for the next run like it (runtime/run_loop.py)
        self.kept_loop = None
        # a call's pass (the function's call sets it): its host outputs and flags are read as
        # soon as they are final (runtime/early.py); the passes of run(n) read none
        self.armed = False

    # ------------------------------------------------------------------ one pass
    def replay(self, frame):
        """One pass of ``frame`` with its input buffers re-bound to this call's."""
        rc = self.rc
        inputs = self.cache.input_slots
        dev, queue = rc.dev, rc.queue
        roots = frame.input_roots
        # (many shared variables set on the host: their uploads as one, runtime/uploads.py)
        batch = uploads.UploadBatch(dev, queue) if len(roots) >= uploads.GROUP_MIN else None
        for i, root in roots.items():
            bind_input(dev, queue, frame, i, root, inputs[i], batch)
        if batch is not None:
            batch.flush()
        self.run_pass(frame)

    def host_committed(self, frame):
        """The device inputs of ``frame`` that are shared variables whose update the frame
        computes on the host ((index, root) pairs): their device copy is stale after each
        commit, so every pass of a loop brings them to the device, as a call does."""
        out = frame.memo.get('host_committed')
        if out is not None:
            return out
        prog = self.rc.program
        out = frame.memo['host_committed'] = []
        for i, j in prog.updates:
            root = frame.input_roots.get(i)
            if root is not None and prog.input_kinds[i] == 'resident' \
                    and frame.dvals.get(prog.fgraph.outputs[j]) is None:
                out.append((i, root))
        return out

    def batched(self, frame):
        """The frame's batched plan when a pass runs it now (made once the frame is hot),
        else None."""
        rc = self.rc
        if frame.batched is not False and rc.batch_after is not None and not rc.profile:
            plan = frame.batched
            if plan is None and frame.replays >= rc.batch_after:
                plan = frame.batched = planner.batched_plan(rc, frame)
            if plan:
                if plan.valid():
                    return plan
                # a buffer the plan bound changed (a donated output, another input
                # buffer): plans would go stale every call, so this frame stays unbatched
                frame.batched = False
        return None

    def pass_fns(self, frame):
        """The callables of one unprofiled pass of ``frame`` as a loop's step runs them
        (``runtime.loop.drive``), and how many launches they make."""
        plan = self.batched(frame)
        if plan is not None:
            return plan.fns, plan.n_launches_after
        return [s.fn for s in frame.steps], plans.launches(frame.steps)

    def run_pass(self, frame):
        """One pass of the frame's recorded plans (or its batched plan) as they are bound:
        the frame's pass loop, one step of ``runtime.loop.drive`` (see :meth:`pass_loop`).
        A plan finding the frame's assumptions broken raises its ``Replan``."""
        plan = self.batched(frame)
        plans_ = frame.steps if plan is None else plan.plans
        armed = self.armed
        got = frame.passes[armed]
        if got is None or got[0] is not plans_ or got[1] != len(plans_):
            got = self.pass_loop(frame, plan, armed)
        elif got[3] is not None:
            got[3].start()              # (early reads: this pass's, runtime/early.py)
        once(got[2])

    def pass_loop(self, frame, plan, armed):
        """A call's pass of ``frame`` as a one-step ``runtime.loop.Loop``, kept in
        ``frame.passes[armed]`` as (plans, their number, loop, early reads or None): the
        callables of its recorded steps (``plan`` None; wrapped by the profiler when the
        function is profiled) or of the batched ``plan``; for a call that hands its
        outputs over (``armed``), its host outputs and flags read as soon as their values
        are final (``runtime/early.py``). A failing recorded step sets the function's
        ``position_of_error`` to its task (a batched plan's: -1); the fault hook sees
        ``'step k'`` / ``'batched step k'`` before each."""
        rc = self.rc
        if plan is not None:
            plans_ = plan.plans
            loop = Loop(frame, plan.fns, None, rc.dev, rc.queue, plan_label='batched step %d',
                        owner=rc)
        else:
            plans_ = frame.steps
            loop = self.plans_loop(frame, plans_, 'step %d')
        reads = None
        if armed and rc.profiler is None:
            reads = frame.early_reads
            if reads is None:
                reads = frame.early_reads = early.Reads(frame)
            reads.start()
            loop.fns = reads.fns(plans_, loop.fns) or loop.fns
        got = frame.passes[armed] = (plans_, len(plans_), loop, reads)
        return got

    def plans_loop(self, frame, plans_, label):
        """A one-step loop over recorded plans ``plans_`` of ``frame`` (a call's pass, or a
        segment of the frame being built, ``runtime/build.py``): timed by the profiler when
        the function is profiled, a failing plan setting ``position_of_error`` to its task,
        the fault hook's boundary ``label`` before each (``'step %d'``, or a list)."""
        rc = self.rc
        profiler = rc.profiler
        fns = profiler.fns(plans_) if profiler is not None else [s.fn for s in plans_]
        return Loop(frame, fns, None, rc.dev, rc.queue, tasks=[s.task for s in plans_],
                    plan_label=label, owner=rc)

    def run_checks(self, frame, events=None):
        """Read the frame's device error flags (see PlanContext.deferred_check), the reads
        of those that declare one enqueued together and waited for once with ``events``
        (the call's output downloads, already enqueued)."""
        rc = self.rc
        events = [] if events is None else events
        reads = frame.early_reads
        queued = reads.checks if reads is not None and reads.live else None
        for check in frame.checks:
            # (read already where the flag was final: runtime/early.py)
            ev = queued.pop(check, None) if queued else None
            if ev is None:
                ev = check.read()
            if ev is not None:
                events.append(ev)
        if events:
            waits.wait(rc.dev, events)
            del events[:]
        first = None
        for check in frame.checks:
            # every check runs (each clears its own flag), so a flag set in this call
            # never fails a later call; the first error is raised
            try:
                check.fn()
            except Exception as e:
                if first is None:
                    first = (check.task, e)
        if first is not None:
            rc.position_of_error = first[0]
            raise first[1]
        rc.position_of_error = -1

    def commit(self, frame):
        """Apply the frame's updates (after its outputs were fetched and checks passed),
        all or none (runtime/commit.py)."""
        rc = self.rc
        plan = frame.commit_plan
        if plan is None and rc.batch_after is not None and not rc.profile \
                and frame.replays >= rc.batch_after:
            plan = frame.commit_plan = planner.commit_plan(rc, frame)
        if plan and plan.valid():
            commit.apply(plan.actions())
        else:
            commit.apply([prepare() for prepare in frame.commits])

    # ------------------------------------------------------------------ n passes
    def run(self, call, n, feeds=None, probes=None, probe_every=1, batch='auto', feed='copy',
            probes_on='host', carry=None, stats=None, what='run', error=RunStepsError,
            stacklevel=1):
        """Run the function ``n`` times, updates committed after every pass; ``call()``
        makes one ordinary call of it (pass 0, and the passes after a ``Replan``).

        ``feeds``: {input index: array with leading axis n} (numpy or pyopencl arrays,
        already of the input's dtype); inputs left out keep their value. ``probes``: output
        indices, each sampled after passes ``k-1, 2k-1, ...`` (``k = probe_every``) into a
        slot of a buffer with leading axis ``n // k``; returned as host arrays, or as
        pyopencl arrays with ``probes_on='device'``. ``carry``: {input index: (output index,
        initial value)}: the input takes ``initial value`` in pass 0 and the output of pass
        ``t`` in pass ``t+1`` (a device copy; state of a recurrence, as Scan carries it).
        ``stats``: a dict filled as the passes
        run (``steps_done`` stays true when a pass fails). ``error``: the exception class
        of the requests it cannot honour; ``what`` names the caller in messages (and
        ``stacklevel`` counts its frames, for the warning about host steps).
        """
        rc, cache = self.rc, self.cache
        prog = rc.program
        dev, queue = rc.dev, rc.queue
        cl = dev.cl
        k = int(probe_every)
        n = int(n)
        feeds = feeds or {}
        carry = carry or {}
        probe_idx = list(range(len(prog.fgraph.outputs))) if probes is None else list(probes)
        stats = {} if stats is None else stats
        cells = prog.input_cells
        saved = [(cells[i], cells[i][0]) for i in list(feeds) + list(carry)]
        n_slots = n // k
        host_probes = {}
        try:
            if n == 0:
                return [np.empty((0,))] * len(probe_idx)
            last = cache.last_frame
            if last is not None and last.on_host and not rc.profile:
                # the last call ran on the host (runtime/cost.py): its steps are calls on
                # host values, so the feeds stay on the host (staged on the device, every
                # step's input came back by a download: three queue round trips a run,
                # ~45 us each on PoCL). A call of this run that plans another frame only
                # costs speed: every step is a call either way.
                return host_steps.host_run(rc, call, n, feeds, carry, probe_idx, k, stats,
                                           probes_on, what, error)
            # ---------------------------------------------------- inputs, pass 0
            copies, host_feeds, bigs = [], [], []
            for i, arr in feeds.items():
                cell = cells[i]
                if prog.input_kinds[i] == 'dev':
                    big = arr if hasattr(arr, 'base_data') else self._upload(arr)
                    bigs.append(big)
                    stage = self._stage(i, arr.shape[1:], arr.dtype)
                    nbytes = stage.nbytes
                    src0 = big.offset if hasattr(big, 'offset') else 0
                    if nbytes:
                        cl.enqueue_copy(queue, stage.base_data, big.base_data,
                                        byte_count=nbytes, src_offset=src0)
                    cell[0] = stage
                    copies.append((i, stage, big, nbytes, src0))
                else:
                    host_feeds.append((cell, arr))
                    # a 0-d array, never a numpy scalar: Theano's C code takes ndarrays
                    cell[0] = arr[0, ...]
            carried = []
            for i, (j, init) in carry.items():
                e = host_steps.carry_error(prog, i, feeds, what, error)
                if e is not None:
                    raise e
                init = np.asarray(init, dtype=prog.fgraph.inputs[i].type.dtype) \
                    if not hasattr(init, 'base_data') else init
                stage = self._stage(i, init.shape, init.dtype)
                if stage.nbytes:
                    if hasattr(init, 'base_data'):
                        cl.enqueue_copy(queue, stage.base_data, init.base_data,
                                        byte_count=stage.nbytes, src_offset=init.offset)
                    else:
                        cl.enqueue_copy(queue, stage.base_data, np.ascontiguousarray(init))
                cell = cells[i]
                cell[0] = stage
                carried.append((i, j, stage))
            t_start = time.perf_counter()
            frame = self._steady_frame()
            if frame is not None:
                # the last call's frame, which its guard says this pass replays: step 0 is
                # a step of the loop below, not a call (a call's outputs, commit marks and
                # key cost a simulator's thousands of shared variables some milliseconds)
                outs0, first = None, 0
            else:
                rc.run_steps = n
                try:
                    outs0, first = call(), 1
                finally:
                    rc.run_steps = 1
                frame = cache.last_frame
            t_first = time.perf_counter()
            if outs0 is not None and frame.on_host:
                # the signature's calls run on the host (runtime/cost.py, or a value the
                # device cannot hold): the other steps are calls too
                out = host_steps.calls(rc, call, outs0, n, feeds, carry, probe_idx, k, stats,
                                       t_first - t_start)
                return host_steps.on(queue, out, probes_on)
            # a host step may have replaced a fed device input's cell with its host copy
            # (an input read on the host too): every pass starts from the staged input
            staged = [(cells[i], stage) for i, stage, _, _, _ in copies] + \
                [(cells[i], stage) for i, _, stage in carried]
            for cell, stage in staged:
                cell[0] = stage
            if first and not cache.holds(frame):
                key1 = cache.key()
                if key1 != frame.key:
                    raise error(cache.shape_change(frame.key, key1, what))
            carries = []
            for i, j, stage in carried:
                d = frame.dvals.get(prog.fgraph.outputs[j])
                if d is None or d.shape != stage.shape or d.dtype != stage.dtype \
                        or not d.is_c_contiguous():
                    raise error('%s: output %d cannot carry into input %d: %s on the device, '
                                'the input is %s %s' % (
                                    what, j, i, 'not' if d is None else '%s %s' % (
                                        d.dtype, d.shape), stage.dtype, stage.shape))
                if stage.nbytes and not (d.root.buf == stage.base_data and d.boff == stage.offset):
                    carries.append((stage.base_data, d, stage.nbytes))
                    if not first:
                        continue        # (the loop's step 0 carries it as the others do)
                    # pass 0's state into pass 1's inputs: the value pass 0 returned (a
                    # device output may have been handed over with its buffer)
                    v0 = outs0[j]
                    if hasattr(v0, 'base_data'):
                        cl.enqueue_copy(queue, stage.base_data, v0.base_data,
                                        byte_count=stage.nbytes, src_offset=v0.offset)
                    else:
                        cl.enqueue_copy(queue, stage.base_data,
                                        np.ascontiguousarray(v0, dtype=stage.dtype))
            feed_mode = self.feed_mode(feed, frame, copies, what, error)
            if feed_mode == 'rebind':
                batch = False     # batched kernels bind the input buffer itself
            # a run like the last one takes the loop that run declared (runtime/run_loop.py)
            key = run_loop.key(frame, first, n, k, probe_idx, batch, feed_mode, copies,
                               host_feeds, carried, probes_on, rc.profile)
            kept = run_loop.take(self.kept_loop, key, staged)
            if kept is None:
                self.kept_loop = None
            # ---------------------------------------------------- probes
            # (written into their slots by their kernels where the frame allows it)
            if kept is None:
                placed, pinned = probe_places.choose(self, frame, probe_idx, carried, batch)
                probe_bufs = []
                for j in probe_idx:
                    d = frame.dvals.get(prog.fgraph.outputs[j])
                    if d is None:
                        host_probes[j] = []
                        probe_bufs.append(None)
                        continue
                    buf = dev.alloc(max(d.nbytes * (probe_places.slots(n, k) if j in placed
                                                    else n_slots), 1))
                    strided = None
                    if d.nbytes and not d.is_c_contiguous():
                        # one copy kernel per probe, its destination moved slot by slot
                        slot_root = Root(buf, d.nbytes)
                        strided = (slot_root, family('strided_copy_later')(
                            dev, queue, DArray(slot_root, d.shape, d.dtype), d))
                    probe_bufs.append((buf, d, strided))
            else:
                placed, probe_bufs, loop, prologue, info, n_swaps, _ = kept
                if copies or host_feeds:
                    loop.feed_anew(run_loop.input_feeds(frame, copies, host_feeds, feed_mode))
            if k == 1 and first:
                for j, pb in zip(probe_idx, probe_bufs):
                    if pb is None:
                        host_probes[j].append(np.array(outs0[j], copy=True))
                    elif pb[1].nbytes:
                        v0 = outs0[j]
                        if hasattr(v0, 'base_data'):
                            cl.enqueue_copy(queue, pb[0], v0.base_data,
                                            byte_count=pb[1].nbytes, src_offset=v0.offset)
                        else:
                            cl.enqueue_copy(queue, pb[0], np.ascontiguousarray(
                                v0, dtype=pb[1].dtype), dst_offset=0)
            n_host = self._warn_host_steps(frame, what, stacklevel + 3)
            t_plan = time.perf_counter()
            if kept is None:
                loop, prologue, info, n_swaps = run_loop.declare(
                    self, frame, first, n, k, probe_idx, probe_bufs, host_probes, placed,
                    pinned, copies, host_feeds, carries, staged, batch, feed_mode, n_host,
                    checks=lambda t: self._checked(frame, t))
            t_plan = time.perf_counter() - t_plan
            stats.update(info, host_steps=n_host, feed=feed_mode, steps=n, loop_kept=bool(kept),
                         probes_in_place=len(placed), states_swapped=n_swaps,
                         first_step_s=t_first - t_start, plan_s=t_plan, steps_done=first,
                         loop_steps=n - first)
            loop.replan = None
            copy = buffer_copier(cl)
            t_loop = time.perf_counter()
            for fn in prologue:
                fn()            # copies every pass would make alike (loop_plans.invariant_copies)
            # a device check (bad index, integer division by zero) is read once after the
            # loop, not every step; should one fail, the state before step 1 comes back
            # and the steps run again reading the flags after each, so the run ends as n
            # separate calls would: at the failing step, with the steps before it committed
            snapshot = self.snapshot() if frame.checks else None
            hooked = faults.hook is not None
            try:
                stop = drive(loop, first, n, copy, stats=stats)
                results = None
                if stop == n and not frame.checks:
                    # the probes' downloads enqueued behind the steps and waited for: the
                    # queue's end in one round trip, where a finish and then blocking reads
                    # took two or more (~70 us a run on the 2-core Xeon's PoCL)
                    results = self._results(probe_idx, probe_bufs, host_probes, n_slots,
                                            probes_on, finish=True)
                else:
                    queue.finish()
                stats['loop_s'] = time.perf_counter() - t_loop
                if frame.checks:
                    try:
                        self.run_checks(frame)
                    except Exception:
                        self.restore(snapshot)
                        stats['steps_done'] = first
                        drive(loop, first, n, copy, check_each=True, stats=stats)
                        raise AssertionError('run_steps: a device check failed once and not '
                                             'when the steps ran again')  # pragma: no cover
                stats['call_steps'] = n - stop
                if stop < n:
                    # another frame from this step on (an IfElse's other branch, a host
                    # value the plan relied on): nothing of this step was committed, and
                    # the steps left run as calls, which choose their frame
                    warnings.warn(
                        '%s: step %d needs another device plan than step 0 (%s); steps '
                        '%d..%d run as calls' % (what, stop, loop.replan, stop, n - 1),
                        stacklevel=stacklevel + 2)
                    home(loop)
                    slot = stop if k == 1 else stop // k
                    for step in range(stop, n):
                        if hooked:
                            faults.at('run_steps call %d' % step)
                        for i, stage, big, nbytes, src0 in copies:
                            cl.enqueue_copy(queue, stage.base_data, big.base_data,
                                            byte_count=nbytes, src_offset=src0 + step * nbytes,
                                            dst_offset=stage.offset)
                        for cell, arr in host_feeds:
                            cell[0] = arr[step, ...]
                        for cell, stage in staged:
                            cell[0] = stage
                        outs = call()
                        for i, j, stage in carried:
                            if stage.nbytes:
                                self._write(stage.base_data, stage.offset, outs[j], stage)
                        if (step + 1) % k == 0:
                            for j, pb in zip(probe_idx, probe_bufs):
                                if pb is None:
                                    host_probes[j].append(np.array(outs[j], copy=True))
                                elif pb[1].nbytes:
                                    self._write(pb[0], slot * pb[1].nbytes, outs[j], pb[1],
                                                what, error, j)
                            slot += 1
                        stats['steps_done'] = step + 1
            except BaseException as e:
                self.kept_loop = None
                if not isinstance(e, Exception):
                    cache.drop(frame.key)     # interrupted mid-way: plan afresh next time
                raise
            finally:
                home(loop)      # the frame's kernels point at its input buffers again
            self.kept_loop = run_loop.keep(key, stop, n, n_slots, probe_bufs, staged, (
                placed, probe_bufs, loop, prologue, info, n_swaps))
            if results is None:
                results = self._results(probe_idx, probe_bufs, host_probes, n_slots,
                                        probes_on)
            return results
        finally:
            for c, v in saved:
                c[0] = v

    # ------------------------------------------------------------------ parts of run
    def _steady_frame(self):
        """The last call's frame where its steady-state guard holds for the inputs now in
        the cells (the stale shared variables' values then uploaded, as a call would),
        so that ``run``'s step 0 can be a step of its loop; else None (step 0 is a call:
        the first run of a signature, a frame of the host or of the in-thread tier, a
        profiled function, inputs that changed)."""
        cache = self.cache
        frame = cache.last_frame
        if cache.hot_guard is None or frame is None or frame.on_host or frame.tiny or \
                self.rc.profile:
            return None
        if commit.pending:
            commit.finish_pending()     # an interrupted call's commit, finished first
        up = self.rc.dev.upload_tally
        up0 = tuple(up)
        if not cache.holds(frame):
            return None
        # (theano_ocl.stats' 'last_call': this pass 0's facts, as its call would have set)
        self.rc.last_call = (True, up[0] - up0[0], up[1] - up0[1], up[2] - up0[2])
        return frame

    def _write(self, buf, offset, value, like, what='run', error=RunStepsError, j=None):
        """Copy a call's output ``value`` (host or device array) into ``buf`` at byte
        ``offset``, where the loop keeps values shaped as ``like``."""
        cl, queue = self.rc.dev.cl, self.rc.queue
        if hasattr(value, 'base_data'):
            if value.shape == like.shape and value.flags.c_contiguous:
                cl.enqueue_copy(queue, buf, value.base_data, byte_count=like.nbytes,
                                src_offset=value.offset, dst_offset=offset)
                return
            value = value.get(queue=queue)
        value = np.ascontiguousarray(value, dtype=like.dtype)
        if value.shape != tuple(like.shape):
            raise error('%s: output %s has shape %s in this step and %s in step 0; probes '
                        'and carries need the same shape every step' % (
                            what, j, value.shape, like.shape))
        cl.enqueue_copy(queue, buf, value, dst_offset=offset, is_blocking=True)

    def _results(self, probe_idx, probe_bufs, host_probes, n_slots, probes_on, finish=False):
        """The probes' values: host arrays (downloaded, waited for together) or device
        arrays over the probe buffers (``probes_on``). With ``finish``, every command of
        the queue is done when this returns (the downloads are its last commands, an
        in-order queue's; a finish where there are none)."""
        import pyopencl.array as cla
        dev, queue = self.rc.dev, self.rc.queue
        results, reads = [], []
        for j, pb in zip(probe_idx, probe_bufs):
            if pb is None:
                results.append(np.array(host_probes[j]).reshape(
                    (n_slots,) + np.shape(host_probes[j][0]) if host_probes[j] else (0,)))
                continue
            buf, d, _ = pb
            if probes_on == 'device':
                results.append(cla.Array(queue, (n_slots,) + d.shape, d.dtype, data=buf))
                continue
            host = np.empty((n_slots,) + d.shape, d.dtype)
            if host.size:
                reads.append(memory.read_later(dev, queue, buf, host))
            results.append(host)
        if reads:
            waits.wait(dev, reads)
        elif finish:
            queue.finish()
        return results

    def _warn_host_steps(self, frame, what, stacklevel):
        from ..report import host_fallbacks          # (report imports theano)
        hsteps = frame.memo.get('host_steps')
        if hsteps is None:
            hsteps = frame.memo['host_steps'] = [s for s in frame.steps
                                                 if s.kind in plans.HOST_KINDS]
        if not hsteps:
            return 0
        prog = self.rc.program
        tasks = prog.tasks
        # a collective (theano_ocl.distributed) is host work by design: no warning for it
        if any(not (0 <= s.task < len(tasks) and
                    getattr(tasks[s.task].node.op, 'collective', False)) for s in hsteps):
            ops = sorted({type(tasks[s.task].node.op).__name__ for s in hsteps
                          if 0 <= s.task < len(tasks)})
            fallbacks = sorted({type(node.op).__name__ for node in host_fallbacks(prog)})
            warnings.warn('%s: the frame has %d host steps (of %s; host fallbacks: %s); every '
                          'step returns to the host for them' % (
                              what, len(hsteps), ', '.join(ops) or '?',
                              ', '.join(fallbacks) or 'none'), stacklevel=stacklevel)
        return len(hsteps)

    def _checked(self, frame, step):
        try:
            self.run_checks(frame)
        except Exception as e:
            e.args = ('%s [SimulatorOCL.run_steps: at step %d; the shared variables hold the '
                      'state after steps 0..%d]' % (e.args[0] if e.args else e, step, step - 1),
                      ) + tuple(e.args[1:])
            raise

    def snapshot(self):
        """Device copies of the updated shared variables' values (and the host values of
        the others), to go back to the state before a run of passes."""
        rc = self.rc
        prog = rc.program
        dev, queue = rc.dev, rc.queue
        saved = []
        for i, _ in prog.updates:
            res = prog.residents.get(i)
            if res is None:
                saved.append((i, None, prog.input_cells[i][0]))
                continue
            d = res.ensure_device(dev, queue)
            copy = None
            if d.nbytes:
                copy = dev.alloc(d.nbytes)
                dev.cl.enqueue_copy(queue, copy, d.root.buf, byte_count=d.nbytes,
                                    src_offset=d.boff)
            saved.append((i, (res, d, copy), None))
        return saved

    def restore(self, saved):
        rc = self.rc
        prog = rc.program
        dev, queue = rc.dev, rc.queue
        for i, dev_value, host_value in saved:
            if dev_value is None:
                prog.input_cells[i][0] = host_value
                continue
            res, d, copy = dev_value
            if copy is not None:
                dev.cl.enqueue_copy(queue, d.root.buf, copy, byte_count=d.nbytes,
                                    dst_offset=d.boff)
            res.mark_device_newer()

    def _upload(self, arr):
        """A run's per-step host input ``arr`` on the device (a pyopencl array over a
        buffer of the device's pool), its upload enqueued without waiting (the device holds
        it until the run settles its uploads, ``OCLDevice.pending_upload``): a blocking one
        waited for everything the run had enqueued before it (~200 us of a simulator
        reset's step 0 on the 2-core Xeon's PoCL, uploading 140 shared variables' values)."""
        import pyopencl.array as cla
        rc = self.rc
        dev = rc.dev
        host = np.ascontiguousarray(arr)
        big = cla.Array(rc.queue, host.shape, host.dtype, data=dev.alloc(max(host.nbytes, 1)))
        if host.nbytes:
            dev.pending_upload(memory.write_later(dev, rc.queue, big.base_data, host))
        return big

    def _stage(self, i, shape, dtype):
        import pyopencl.array as cla
        stage = self.stages.get(i)
        if stage is None or stage.shape != tuple(shape) or stage.dtype != dtype:
            rc = self.rc
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            stage = cla.Array(rc.queue, tuple(shape), dtype, data=rc.dev.alloc(nbytes))
            self.stages[i] = stage
        return stage

    def feed_mode(self, feed, frame, copies, what, error):
        """'copy' or 'rebind' for ``feed`` ('auto' picks): re-pointing the kernels at each
        step's slice is exact only when launches are the input's only readers."""
        if feed == 'copy' or not copies:
            return 'copy'
        ok = True
        for i, _, _, _, _ in copies:
            root = frame.input_roots.get(i)
            if root is None or i in self.rc.program.host_read_inputs:
                ok = False
            for s in frame.steps:
                if s.kind != 'launch' and s.touches(root):
                    ok = False
            for fn in list(frame.outputs) + list(frame.commits):
                if root in fn.reads:          # declared by runtime.steps
                    ok = False
        if feed == 'rebind' and not ok:
            raise error("%s: feed='rebind' is not possible here: an input is read by a copy, "
                        "a host step or an output; use feed='copy'" % what)
        if feed == 'auto':
            sites = sum(len(frame.rebind_sites.get(i, ())) for i, _, _, _, _ in copies)
            return 'rebind' if ok and sites <= len(copies) else 'copy'
        return 'rebind'
