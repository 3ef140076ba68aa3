"""Building a frame: the plans of one input signature, recorded from the linked program.

:class:`FrameBuilder` walks the program's tasks in order. For each it records typed plans
(``runtime.plans``) into the new :class:`~theano_ocl.runtime.context.Frame`: the inputs'
uploads and host copies, each device node's launches (its family's ``plan``), host nodes
with the uploads of what device nodes read from them, shape nodes, the output fetchers
and the commits' prepare steps. Buffers come from the frame's arena; a dead intermediate's
buffer (``reuse_min_bytes`` and larger) serves a later task (the one buffer-reuse rule:
an in-order queue makes that safe).

The first call of a signature runs the plans as they are recorded, in segments: plans
accumulate until planning needs a value they compute (a host value a device node takes,
an IfElse condition, a host task's output uploaded, a family that plans with values:
``DeviceImpl.plans_with_values``), and at the end; each segment is a one-step loop of the
driver (``runtime.loop.drive``), as a replay's pass is, so the profiler times it, the
fault hook sees its plans as ``step k`` and a failing plan names its task. Later calls
replay the frame (``runtime.executor``). IfElse branches: only the taken branch's tasks
are recorded, behind a guard on the condition.
"""
import collections

import numpy as np
from theano.gof.graph import Constant

from .. import darray as da
from . import faults, pinned, planner, steps, uploads
from .context import Frame, PlanContext, Replan, RunOnHost, family
from .loop import once
from .memory import download


class FrameBuilder(object):
    """Records (and runs, the first time) the frame of one key for one linked function
    (``rc``: its RunContext: program, device, queue, settings and profiler; ``executor``:
    its ``runtime.executor.Executor``, whose one-step loops run the segments)."""

    def __init__(self, rc, key, executor):
        self.rc = rc
        self.executor = executor
        self.prog = rc.program
        self.frame = Frame(key)
        self.dvals = {}                          # variable -> DArray of this frame
        self.live = collections.Counter()        # id(root) -> live values in it
        self.taken = {}                          # IfElse task -> branch this frame runs
        # the segment: plans recorded and not run yet, (plan, whether the frame keeps it)
        self.pending = []
        self.recorded = 0             # len(frame.steps) but for plans it dropped since

    def build(self):
        """The frame, recorded and run once; buffers are released on any error."""
        rc, prog, frame = self.rc, self.prog, self.frame
        if rc.profiler is not None:              # profile hook (profiling.py)
            rc.profiler.begin_plan()
        try:
            self._inputs()
            hooked = faults.hook is not None
            for t, task in enumerate(prog.tasks):
                rc.position_of_error = t
                if hooked:
                    faults.at('plan task %d' % t)
                ctx = PlanContext(rc, frame, t, rc.queue, self._run_recorded)
                ctx.node = task.node
                if task.regions and not self._taken(task, ctx):
                    frame.skipped.add(t)    # of a branch not taken: never planned nor run
                    continue
                if task.kind == 'dev':
                    if hasattr(task.impl, 'branches'):
                        self._decide(task, ctx)
                    if task.fused_into is None:
                        self._device(task, ctx)
                elif task.kind == 'shape':
                    self._shape(task, ctx)
                else:
                    self._host(task, ctx)
                self._release(task)
            rc.position_of_error = -1
            self._outputs()
            self._commits()
            self._settle()
        except BaseException as e:
            try:
                if isinstance(e, Exception) and not isinstance(e, (Replan, RunOnHost)):
                    # planning failed: the plans recorded before it would have run first,
                    # and their error (naming its node) comes first
                    self._settle()
            finally:
                frame.release()
            raise
        self._finish()
        return frame

    # ---------------------------------------------------------------- bookkeeping
    def _set(self, var, d):
        self.dvals[var] = d
        self.live[id(d.root)] += 1

    def _release(self, task):
        """Values whose last reader was ``task``: their arena buffers become reusable."""
        live, keep = self.live, self.prog.keep_vars
        for var in task.release:
            d = self.dvals.get(var)
            if d is None or var in keep:
                continue
            live[id(d.root)] -= 1
            if live[id(d.root)] == 0 and getattr(d.root, 'arena', False) \
                    and d.root.nbytes >= self.rc.reuse_min_bytes:
                self.frame.free.append(d.root)

    def _run_new(self, ctx, record=True):
        """Record the plans ``ctx`` collected (``record`` False: a task a replay skips, run
        this once only) into the segment; they run at the next :meth:`_settle`."""
        kept = self.frame.steps
        for step in ctx.new_steps:
            if record:
                kept.append(step)
                self.recorded += 1
            self.pending.append((step, record))
        ctx.new_steps = []

    def _run_recorded(self, ctx):
        """``PlanContext.run_recorded``: ``ctx``'s plans so far into the segment, and the
        segment run."""
        self._run_new(ctx)
        self._settle()

    def _settle(self, var=None):
        """Run the segment, the plans recorded since the last one ran, before planning reads
        a value they compute (``var``: where that value is a variable's: settled only when
        computed). One step of the driver, as a replay's pass."""
        if not self.pending or (var is not None and var.owner is None):
            return
        plans_, labels = self._segment()
        if plans_:
            once(self.executor.plans_loop(self.frame, plans_, labels))

    def _segment(self):
        """The segment's plans to run, and their fault hook boundaries (None with no hook):
        ``step k`` for the frame's ``steps[k]``, as a replay's pass names it; ``task t
        once`` for a plan of a task replays skip. A zero fill the frame dropped since it was
        recorded (``PlanContext.keep_zeros``) is left out, as replays leave it."""
        pending, self.pending = self.pending, []
        kept = self.frame.steps
        if faults.hook is None and len(kept) == self.recorded:
            return [step for step, _ in pending], None
        plans_, labels = [], []
        k = len(kept) - 1
        for step, record in reversed(pending):      # the kept ones are the frame's last
            if not record:
                plans_.append(step)
                labels.append('task %d once' % step.task)
            elif k >= 0 and kept[k] is step:
                plans_.append(step)
                labels.append('step %d' % k)
                k -= 1
        self.recorded = len(kept)
        plans_.reverse()
        labels.reverse()
        return plans_, labels

    def _finish(self):
        rc, prog, frame, dvals = self.rc, self.prog, self.frame, self.dvals
        if rc.settings.merge and not rc.profile:
            # replays run independent elementwise launches of one size as one (the first
            # call ran them apart)
            planner.merge_frame(rc, frame)
        frame.input_bufs = {i: r.buf for i, r in frame.input_roots.items()}
        frame.dvals = {v: dvals[v] for v in prog.keep_vars if v in dvals}
        frame.free = []
        frame.zeros = {}
        frame.tiny = (rc.host_tier_after is not None and rc.output_mode == 'host'
                      and not rc.profile
                      and all(d.size <= rc.tiny_size for d in dvals.values())
                      and not any(da.is_device_array(prog.input_cells[i][0])
                                  for i, k in prog.input_plan if k == 'dev'))
        frame.tier_probes = rc.tier_probes if frame.tiny else 0
        frame.nbytes = frame.owned_bytes()

    # ---------------------------------------------------------------- IfElse
    def _taken(self, task, ctx):
        """Whether every branch ``task`` is of (``lazy_branches``) is taken in this frame,
        deciding each IfElse at its first branch task, outermost first."""
        for x_task, branch in task.regions:
            if self._decide(x_task, ctx) != branch:
                return False
        return True

    def _decide(self, x_task, ctx):
        """The branch this frame takes at IfElse ``x_task``: its condition's value now (the
        tasks computing it ran). Unless the key decides it, a guard re-plans the calls
        where it turns the other way -- before any task of either branch runs."""
        branch = self.taken.get(x_task)
        if branch is None:
            cond = x_task.node.inputs[0]
            self._settle(cond)
            cell = self.prog.storage_map[cond]
            branch = self.taken[x_task] = steps.branch_taken(cell[0])
            if not isinstance(cond, Constant) and cond not in self.prog.key_determined:
                ctx.host_step(steps.branch_guard(cell, branch, cond), 'guard', reads=(), writes=())
                self._run_new(ctx)
        return branch

    # ---------------------------------------------------------------- inputs
    def _inputs(self):
        rc, frame = self.rc, self.frame
        ctx = PlanContext(rc, frame, 0, rc.queue)
        batch = uploads.UploadBatch(rc.dev, rc.queue)   # (_bind_inputs only records)
        self._bind_inputs(ctx, batch)
        batch.flush()
        for var, d in rc.const_dvals.items():
            self._set(var, d)
        self._run_new(ctx)

    def _bind_inputs(self, ctx, batch):
        rc, prog, frame = self.rc, self.prog, self.frame
        for i, var in enumerate(prog.fgraph.inputs):
            kind = prog.input_kinds[i]
            cell = prog.input_cells[i]
            if kind == 'resident':
                res = prog.residents[i]
                d = res.ensure_device(rc.dev, rc.queue, batch)
                frame.input_roots[i] = d.root
                frame.root_to_input[id(d.root)] = i
                self._set(var, d)
                if i in prog.host_read_inputs:
                    ctx.host_step(steps.sync_host_step(res), 'download', reads=(d,), writes=())
            elif kind == 'dev':
                v = cell[0]
                if v is None:
                    raise TypeError('input %s has no value' % (var,))
                if da.is_device_array(v):
                    d = da.from_pyopencl(v)
                    frame.input_roots[i] = d.root
                    frame.root_to_input[id(d.root)] = i
                    if i in prog.host_read_inputs:
                        ctx.host_step(steps.host_copy_of_device_input(rc.queue, cell),
                                      'download', reads=(d,), writes=())
                else:
                    d = ctx.alloc(np.shape(v), var.type.dtype)
                    frame.input_roots[i] = d.root
                    ctx.host_step(steps.upload_input_step(
                        rc.dev, rc.queue, d, cell, pinned.wanted(rc.settings.stage_inputs, rc.dev)),
                        'upload', reads=(), writes=(d,))
                self._set(var, d)

    # ---------------------------------------------------------------- tasks
    def _device(self, task, ctx):
        node = task.node
        prog, dvals = self.prog, self.dvals
        ins = []
        branch = getattr(task.impl, 'branch_input', None)
        stored = []         # folded producers whose values this task's kernel stores
        if getattr(task.impl, 'plans_with_values', True):
            self._settle()
        for j, var in enumerate(node.inputs):
            if j in task.fused:
                x = family('fused_value')(task.fused[j], dvals)
                if task.fused[j].stored:
                    x.stored = var
                    stored.append(x)
                ins.append(x)
            elif j in task.host_inputs:
                self._settle(var)
                value = prog.storage_map[var][0]
                ins.append(value)
                if var.owner is not None and var not in prog.key_determined and j != branch \
                        and j not in task.impl.dynamic_inputs:
                    ctx.host_step(steps.guard_host_value(prog.storage_map[var], value, var),
                                  'guard', reads=(), writes=())
            elif branch is not None:
                ins.append(dvals.get(var))     # None: of the branch not taken (_decide)
            else:
                ins.append(dvals[var])
        ctx.cells = [prog.storage_map[v] for v in node.inputs]
        ctx.destroyable = [j not in task.host_inputs and j not in task.fused
                           and self._destroyable(task, node.inputs[j])
                           for j in range(len(node.inputs))]
        ctx.kept = [v in prog.keep_vars for v in node.outputs]
        ctx.fresh = self.rc.loop_step and (any(ctx.kept) or
                                           any(x.stored in prog.keep_vars for x in stored))
        try:
            outs = task.impl.plan(ctx, ins)
        finally:
            ctx.fresh = False
        if len(outs) != len(node.outputs):
            raise AssertionError('%s planned %d outputs for %d' % (
                task.impl, len(outs), len(node.outputs)))
        for var, d in zip(node.outputs, outs):
            if d.dtype != np.dtype(var.type.dtype):
                raise AssertionError('%s produced %s for an output of type %s' % (
                    type(task.impl).__name__, d.dtype, var.type))
            self._set(var, d)
        for x in stored:
            self._set(x.stored, x.out)
        for var in task.download_outputs:
            self._download(ctx, dvals[var], prog.storage_map[var])
        self._run_new(ctx)

    def _destroyable(self, task, var):
        """Whether ``task`` may overwrite ``var``'s buffer: its last reader, the only value
        living there, an intermediate of the frame's arena."""
        d = self.dvals.get(var)
        if d is None or var.owner is None or var in self.prog.keep_vars:
            return False
        if self.prog.last_use.get(var) is not task:
            return False
        return self.live[id(d.root)] == 1 and getattr(d.root, 'arena', False)

    def _download(self, ctx, d, cell):
        dev, queue = self.rc.dev, self.rc.queue
        d = ctx.contiguous(d)

        def run():
            cell[0] = download(dev, queue, d)
        ctx.host_step(run, 'download', reads=(d,), writes=())

    def _shape(self, task, ctx):
        prog = self.prog
        node = task.node
        var = node.inputs[0]
        d = self.dvals.get(var)
        cell = prog.storage_map[node.outputs[0]]
        shape_value = task.impl.shape_value
        if d is not None:
            # a device value: the frame's key decides its shape
            value = shape_value(d.shape)

            def run():
                cell[0] = value.copy()
        else:
            # a host value (an input only shape nodes read is not in the key): read each call
            src = prog.storage_map[var]

            def run():
                cell[0] = shape_value(np.shape(src[0]))
        ctx.host_step(run, 'host', reads=(), writes=())
        self._run_new(ctx, record=task.replay)
        self._uploads(task, ctx)

    def _host(self, task, ctx):
        thunk = task.thunk

        def run():
            thunk()
        ctx.host_step(run, 'host', reads=(), writes=())      # host cells only
        self._run_new(ctx, record=task.replay)
        self._uploads(task, ctx)

    def _uploads(self, task, ctx):
        """Upload the outputs of a host task that device tasks consume (shape-guarded); a
        value the frame's key decides (a shape, arithmetic on shapes) once, as a constant
        of the frame (linker._mark_replay then skips the task on replays)."""
        storage_map = self.prog.storage_map
        dev, queue = self.rc.dev, self.rc.queue
        for var in task.upload_outputs:
            self._settle()
            value = storage_map[var][0]
            if var in self.prog.key_determined:
                self._set(var, ctx.constant(np.asarray(value, dtype=var.type.dtype)))
                continue
            d = ctx.alloc(np.shape(value), var.type.dtype)
            ctx.host_step(steps.upload_guarded_step(dev, queue, d, storage_map[var], var),
                          'upload', reads=(), writes=(d,))
            self._set(var, d)
        self._run_new(ctx)

    # ---------------------------------------------------------------- outputs, commits
    def _outputs(self):
        rc, prog, frame, dvals = self.rc, self.prog, self.frame, self.dvals
        ctx = PlanContext(rc, frame, len(prog.tasks) - 1, rc.queue)
        fetchers = []
        kept = []
        # an output's buffer is handed to the caller only where no other output (an update's
        # source included) views it: handing it over would leave that one reading the fresh
        # buffer (a scan's inner function returns ViewOp(x) and x.dimshuffle('x', 0))
        viewers = collections.Counter(id(dvals[v].root) for v in prog.fgraph.outputs
                                      if v in dvals)
        for j, var in enumerate(prog.fgraph.outputs):
            kept.append(None)
            if j in prog.update_outputs:
                fetchers.append(steps.none)
                continue
            d = dvals.get(var)
            cell = prog.storage_map[var]
            if d is None:
                fetchers.append(steps.host_value(cell, prog.residents.get(prog.input_index.get(var))))
                continue
            if rc.output_mode == 'device':
                kept[-1] = d
                donate = (d.root.arena and d.offset == 0 and d.is_c_contiguous()
                          and viewers[id(d.root)] == 1)
                fetchers.append(steps.donate_output(rc.dev, rc.queue, frame, d) if donate
                                else steps.device_output(rc.dev, rc.queue, ctx, d))
            elif self._hands_over(d, viewers):
                fetchers.append(steps.handed_host_output(rc.dev, rc.queue, frame, d))
            else:
                fetchers.append(steps.host_output(rc.dev, rc.queue, ctx.contiguous(d),
                                                  pinned.wanted(rc.settings.pinned, rc.dev)))
        for i, var in prog.write_back:
            d = dvals.get(var)
            src = ctx.contiguous(d) if d is not None else None
            ctx.host_step(steps.write_back_step(rc.dev, rc.queue, src, prog.storage_map[var],
                                                prog.input_cells[i]), 'download',
                          reads=() if src is None else (src,), writes=())
        self._run_new(ctx)
        frame.outputs = fetchers
        frame.kept_outputs = kept

    def _hands_over(self, d, viewers):
        """Whether host output ``d`` is handed over without a copy (``steps.handed_host_output``):
        on a CPU device, at least ``HANDED_MIN_BYTES``, all of an arena buffer no other
        output views, not read into page-locked blocks (the ``pinned`` setting), in a frame
        whose hot calls run no batched plan (``runtime/planner.py``: a buffer that moves
        every call would stop it)."""
        rc = self.rc
        if not rc.dev.is_cpu or d.nbytes < steps.HANDED_MIN_BYTES or not d.root.arena or \
                d.offset != 0 or not d.is_c_contiguous() or viewers[id(d.root)] != 1 or \
                pinned.wanted(rc.settings.pinned, rc.dev):
            return False
        return not planner.may_batch(rc, self.frame.steps)

    def _commits(self):
        rc, prog, frame, dvals = self.rc, self.prog, self.frame, self.dvals
        dev, queue = rc.dev, rc.queue
        ctx = PlanContext(rc, frame, len(prog.tasks) - 1, queue)
        pending = []
        dests = set()
        for i, j in prog.updates:
            if prog.input_kinds[i] == 'resident':
                dests.add(id(prog.residents[i].root))
        # Two phases, as Theano applies updates: every commit first reads its new value
        # (host values, downloads), then all are written; device sources living in a
        # buffer that some commit overwrites are staged into a copy first.
        for i, j in prog.updates:
            var = prog.fgraph.outputs[j]
            d = dvals.get(var)
            cell = prog.input_cells[i]
            if prog.input_kinds[i] != 'resident':
                if d is not None:
                    if id(d.root) in dests:
                        tmp = ctx.alloc(d.shape, d.dtype)
                        ctx.copy(tmp, d)
                        d = tmp
                    d = ctx.contiguous(d)
                    pending.append(steps.commit_host_from_device(dev, queue, d, cell))
                else:
                    pending.append(steps.commit_host(cell, prog.storage_map[var]))
                continue
            res = prog.residents[i]
            if d is None:
                pending.append(steps.commit_resident_from_host(res, dev, queue,
                                                               prog.storage_map[var]))
                continue
            if id(d.root) in dests or not d.is_c_contiguous():
                tmp = ctx.alloc(d.shape, d.dtype)
                ctx.copy(tmp, d)
                d = tmp
            pending.append(steps.commit_resident(res, dev, queue, d))
        # staging copies run with the steps; commits run after outputs were fetched
        self._run_new(ctx)
        frame.commits = pending
