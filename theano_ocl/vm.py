"""The device VM: runs one linked function against device storage.

Data flow of one call (``OCLFunction.__call__``), top to bottom:

1. key: the shapes of the inputs consumed on the device and the values of the
   small host inputs that decide shapes (indices, sizes); a call that comes back to the
   last call's frame with its inputs as planned (the steady state) skips this and the
   lookup: the frame's guard tells it (``OCLFunction._make_guard``);
2. if a *frame* exists for that key, replay it: a flat list of steps (kernel
   launches with arguments bound once, uploads into fixed buffers, host nodes),
   each guarded where its assumptions could break (then the frame is re-planned);
3. otherwise plan a new frame while running it: each task (device node, host node,
   transfer) allocates from the frame's arena, binds its kernels and runs;
4. commit the updates into the shared variables' resident device buffers (never
   before every step succeeded: a failed call leaves shared state as it was);
5. hand back the outputs: downloaded into fresh host arrays, or as device arrays.

A frame owns its buffers; buffers of dead intermediates (64 KiB and larger) are reused
by later tasks of the same frame (in-order queue), so steady-state calls allocate nothing.
The same frames serve ``SimulatorOCL.run_steps``: replay N times with no host
round trip when the frame has no host steps.
"""
import collections
import warnings
import weakref

import numpy as np
from theano.gof.graph import Constant

from . import _startup
from . import darray as da
from .darray import DArray, Root
from .device import DeviceTooSmall
from .runtime import commit, faults, steps
from .runtime.context import (BranchFlip, Frame, PlanContext, Replan, RunOnHost,  # noqa: F401
                              bind_site, family)
from .runtime.host_tier import HostTier
from .runtime.memory import download, register_function, upload  # noqa: F401
from .runtime.settings import Settings, active


#: bytes of buffers a function's cached frames (other than the one in use) may keep
MAX_CACHED_FRAME_BYTES = 256 << 20

def _arrays_match(arrays):
    """True when every (cell, shape) pair holds an ndarray of that shape."""
    ndarray = np.ndarray
    for cell, shape in arrays:
        v = cell[0]
        if type(v) is not ndarray or v.shape != shape:
            return False
    return True

def _planning(method):
    """Run ``method`` (which plans: records frames, builds batched plans) with the function's
    settings active (``runtime.settings.current``: how op families read them)."""
    def planning(self, *args):
        with active(self.settings):
            return method(self, *args)
    planning.__name__ = method.__name__
    planning.__doc__ = method.__doc__
    return planning


class OCLFunction(object):
    """The callable handed to Theano's Function (``Function.fn``).

    Follows Theano's storage conventions: inputs are read from the input cells,
    outputs are written to the output cells and also returned as a list; updates
    are applied here (``need_update_inputs = False``).
    """
    need_update_inputs = False
    allow_gc = False
    is_ocl = True
    max_frames = 4
    #: frames one key keeps for other IfElse branches than its current one's
    max_alternates = 3

    def __init__(self, program, dev, profile=None, output_mode='host', settings=None):
        self.program = program
        self.dev = dev
        self.settings = settings if settings is not None else Settings.resolve({})
        self.profile = profile
        self.output_mode = output_mode
        self.storage_map = program.storage_map
        self.nodes = [t.node for t in program.tasks]
        self.thunks = [t.thunk if t.thunk is not None else steps.NodeThunk(t, program.storage_map)
                       for t in program.tasks]
        self.position_of_error = -1
        self.frames = collections.OrderedDict()
        self.time_thunks = bool(profile)
        self.profiler = None                     # profile hook (profiling.py)
        if profile:
            from .profiling import Profiler
            self.profiler = Profiler(self, profile)
        self.last_frame = None
        self.replans = 0
        self.queue = dev.profiling_queue if profile else dev.queue
        self.const_dvals = {}
        self.retired = []          # buffers kept alive for kernels still bound to them
        # A launch + finish costs ~40 us on PoCL, and an upload, a launch and a download
        # ~60 us on a GPU: far more than a tiny node's work. Once a frame of tiny values
        # (every value at most tiny_size elements, inputs and outputs on the host) is
        # hot, run Theano's own thunks in this thread (see _run_in_thread); shared
        # variables then live on the host until a device frame needs them.
        self.host_tier_after = 20
        self.tiny_size = 4096
        # buffers of dead intermediates smaller than this are not reused: they cost little
        # memory, and reusing them would chain independent small ops through false
        # (write-after-read) dependencies that stop the planner from batching them
        self.reuse_min_bytes = 1 << 16
        # one-step calls replay a batched plan (planner.py) once a frame has been replayed
        # batch_after times, when it has batch_min_launches launches and batching removes
        # at least a quarter of them; None turns this off
        self.batch_after = 3
        self.batch_min_launches = 16
        self._host_tier = None
        self._lock = dev.call_lock           # one call at a time per device (shared.py)
        self._warned_host = False
        # frames other than the one in use keep at most this many bytes of buffers
        self.max_cached_bytes = min(MAX_CACHED_FRAME_BYTES, dev.memory_limit // 8)
        ref = weakref.ref(self)
        dev.add_reclaimer(lambda: False if ref() is None else ref().release_cached())
        register_function(self)
        # what every call reads, looked up once (a call costs a few microseconds of host
        # time: each attribute chain and method call in it shows)
        prog = program
        self._inputs = [(cell, prog.residents.get(i)) for i, cell in enumerate(prog.input_cells)]
        self._key_plan = [(kind,) + self._inputs[i] + (i,) for i, kind in prog.input_plan]
        self._hot = None           # the guard of the last call's frame (see _make_guard)
        self._host_output_cells = list(prog.host_output_cells)
        self._output_cells = [(j, cell) for j, cell in enumerate(prog.computed_output_cells)
                              if cell is not None]

    def upload_constants(self):
        for var in self.program.consts:
            value = np.require(var.data, requirements="C")
            buf = self.dev.alloc(value.nbytes)
            d = DArray(Root(buf, max(value.nbytes, 1)), value.shape, value.dtype)
            upload(self.dev, self.dev.queue, d, value, blocking=True)
            self.const_dvals[var] = d

    # ---------------------------------------------------------------- the call
    def __call__(self, output_subset=None):
        if commit._pending:
            commit.finish_pending()     # an interrupted call's commit, finished first
        for cell in self._host_output_cells:
            cell[0] = None    # a host thunk must not write into an array returned before
        hooked = faults.hook is not None
        guard = self._hot
        frame = guard() if guard is not None else None
        try:
            if frame is not None:
                # steady state: the last call's frame, whose key, input buffers and place in
                # self.frames (the most recent) still hold; what _key, the frame lookup and
                # _replay's re-binding would find, in a fraction of their time
                frame.replays += 1
                if frame.tiny or frame.on_host:
                    return self._run_in_thread()
                frame = self._run_or_replan(frame, self._run_steps)
            else:
                self._hot = None      # set again once this call's frame has run
                key = self._key()
                frame = self.frames.get(key) if key is not None else None
                if frame is not None:
                    self.frames.move_to_end(key)
                    if frame is not self.last_frame:
                        self._evict(keep=frame)      # another frame in use: within budget?
                    frame.replays += 1
                    if frame.on_host or (frame.tiny and frame.replays > self.host_tier_after):
                        return self._run_in_thread()
                    frame = self._run_or_replan(frame, self._replay)
                if frame is None:
                    frame = self._plan(key)
                guard = frame.guard
                if guard is None:
                    guard = frame.guard = self._make_guard(frame)
                self._hot = guard or None
            if hooked:
                faults.at('outputs')
            outputs = []
            for fetch in frame.outputs:     # (a loop: cheaper than a comprehension for a few)
                outputs.append(fetch())
            if frame.checks:
                if hooked:
                    faults.at('checks')
                self.run_checks(frame)
            if frame.commits:
                if hooked:
                    faults.at('commit')
                self._commit(frame)
        except RunOnHost:
            return self._run_in_thread()
        except Exception:
            raise
        except BaseException:
            # an interrupt may have arrived while the frame's own structures changed (an
            # output buffer handed over and kernels half re-pointed, an input re-bound):
            # the next call plans afresh; nothing was committed (or all was: commit.py)
            if frame is not None:
                self._drop(frame.key)
            raise
        dev = self.dev
        if dev.pending_uploads:
            dev.settle_uploads()
        self.last_frame = frame
        for j, cell in self._output_cells:
            cell[0] = outputs[j]
        if self.profiler is not None:            # profile hook (profiling.py)
            self.profiler.end_call()
        return outputs

    def _run_or_replan(self, frame, run):
        """``run(frame)``; the frame that ran: ``frame``, another IfElse branch's frame of
        its key (``BranchFlip``), or a new plan of its key (``Replan``: an assumption broke)."""
        try:
            run(frame)
            return frame
        except BranchFlip:
            return self._other_branch(frame)
        except Replan:
            self._drop(frame.key)
            self.replans += 1
            return self._plan(frame.key)

    def _commit(self, frame):
        """Apply the frame's updates (after its outputs were fetched and checks passed),
        all or none (runtime/commit.py)."""
        plan = frame.commit_plan
        if plan is None and self.batch_after is not None and not self.profile \
                and frame.replays >= self.batch_after:
            plan = frame.commit_plan = self._commit_plan(frame)
        if plan and plan.valid():
            commit.apply(plan.actions())
        else:
            commit.apply([prepare() for prepare in frame.commits])

    # ---------------------------------------------------------------- in-thread tier
    def _run_in_thread(self):
        """Run the call on the host by Theano's own VM (runtime/host_tier.py)."""
        tier = self._host_tier
        if tier is None:
            tier = self._host_tier = HostTier(self.program, self.program.no_recycling)
        for i, kind in self.program.input_plan:
            cell = self.program.input_cells[i]
            if kind == 'dev' and da.is_device_array(cell[0]):
                cell[0] = cell[0].get(queue=self.queue)
        try:
            outputs = tier()
        except BaseException:
            pos = getattr(tier.fn, 'position_of_error', None)
            self.position_of_error = -1 if pos is None or pos < 0 else tier.position_of(pos)
            raise
        if self.output_mode == 'device':
            outputs = [self._to_device(v) for v in outputs]
            for j, cell in self._output_cells:
                cell[0] = outputs[j]
        return outputs

    def _to_device(self, value):
        """A host result as a device array where the device can hold it (the host array
        where it cannot: the call ran on the host for that reason)."""
        if not isinstance(value, np.ndarray) or value.nbytes > self.dev.max_alloc:
            return value
        import pyopencl.array as cla
        return cla.to_device(self.queue, np.ascontiguousarray(value))

    # ---------------------------------------------------------------- keys
    def _key(self):
        parts = [self.output_mode]
        dev = self.dev
        for kind, cell, res, _ in self._key_plan:
            if kind == 'resident':
                parts.append(res.device_shape(dev))
                continue
            v = cell[0]
            if kind == 'dev':
                if isinstance(v, np.ndarray):
                    parts.append(v.shape)
                elif v is None:
                    parts.append(None)
                elif da.is_device_array(v):
                    parts.append(('d', v.shape, v.strides, v.offset))
                else:
                    parts.append(np.shape(v))
            else:  # 'meta': small host values that decide shapes
                a = np.asarray(v)
                if a.size > 64:
                    return None
                parts.append((a.shape, a.dtype.str, a.tobytes()))
        return tuple(parts)

    def _drop(self, key):
        self._hot = None
        frame = self.frames.pop(key, None)
        if frame is not None:
            frame.release()

    def _make_guard(self, frame):
        """A closure for calls that come back to ``frame`` (the steady state): it returns the
        frame when this call's inputs give ``frame.key`` and sit in the buffers its kernels
        are bound to (so that _key, the lookup and _replay's re-binding would find just
        that), else None: the call then takes the general path. False where it cannot
        tell cheaply (inputs that are device arrays or keyed host values; profiling;
        frames of the in-thread tier).

        It tests what _key and _replay read, for each keyed input: a shared variable's
        device copy current (Resident.ensure_device's tests), of the planned shape, in the
        planned buffer; an input array of the planned shape. Whoever drops a frame or
        plans one clears ``self._hot`` (_drop, _plan); every general call sets it."""
        if frame.key is None or self.profile:
            return False
        residents, arrays = [], []
        for (kind, cell, res, i), part in zip(self._key_plan, frame.key[1:]):
            if kind == 'resident':
                residents.append((res, part, i))
            elif kind == 'dev' and type(part) is tuple and \
                    all(type(n) is int for n in part):
                arrays.append((cell, part))
            else:
                return False
        dev = self.dev
        residents = tuple(residents)
        arrays = tuple(arrays)
        if frame.tiny or frame.on_host:
            return self._tier_guard(frame, residents, arrays)

        def guard():
            bufs = frame.input_bufs
            for res, shape, i in residents:
                d = res.current(dev)
                if d is None or d.shape != shape or d.root.buf is not bufs[i]:
                    return None
            return frame if _arrays_match(arrays) else None
        return guard

    def _tier_guard(self, frame, residents, arrays):
        """The steady-state guard of a tiny frame: once the in-thread tier runs its calls,
        the frame when the inputs still have its key's shapes (wherever a shared variable's
        value is current: its device copy or its host cell), else None."""
        after = 0 if frame.on_host else self.host_tier_after
        ndarray = np.ndarray

        def guard():
            if frame.replays < after:
                return None
            for res, shape, _ in residents:
                if res.device_newer:
                    if res.darr.shape != shape:
                        return None
                else:
                    v = res.cell[0]
                    if type(v) is not ndarray or v.shape != shape:
                        return None
            return frame if _arrays_match(arrays) else None
        return guard

    # ---------------------------------------------------------------- replay
    def _replay(self, frame):
        bufs = frame.input_bufs
        inputs = self._inputs
        dev = self.dev
        for i, root in frame.input_roots.items():
            cell, res = inputs[i]
            # the buffer this input is in now (a device array's: rebound to, no copy)
            if res is not None:
                cur = res.ensure_device(dev, self.queue).root.buf
            else:
                v = cell[0]
                cur = v.base_data if da.is_device_array(v) else None
            if cur is not None and cur is not bufs[i]:
                # same shapes, another buffer (a new device array, a re-placed shared
                # variable): point the bound kernels at it instead of re-planning
                bufs[i] = cur
                if res is None:
                    root.move(cur)          # origin 0, as planned: only buffers change
                    for site in frame.rebind_sites.get(i, ()):
                        site[0].set_arg(site[1], cur)
                else:
                    for site in frame.rebind_sites.get(i, ()):
                        bind_site(site, root)
        self._run_steps(frame)

    def _run_steps(self, frame):
        """Run a frame's recorded steps (or its batched plan) with its buffers bound."""
        if frame.batched is not False and self.batch_after is not None and not self.profile:
            plan = frame.batched
            if plan is None and frame.replays >= self.batch_after:
                plan = frame.batched = self._batched_plan(frame)
            if plan:
                if plan.valid():
                    hooked = faults.hook is not None
                    try:
                        for k, fn in enumerate(plan.fns):
                            if hooked:
                                faults.at('batched step %d' % k)
                            fn()
                    except Replan:
                        raise
                    except BaseException:
                        self.position_of_error = -1
                        raise
                    return
                # a buffer the plan bound changed (a donated output, another input
                # buffer): plans would go stale every call, so this frame stays unbatched
                frame.batched = False
        if self.profiler is not None:            # profile hook (profiling.py)
            return self.profiler.run_steps(frame)
        hooked = faults.hook is not None
        step = None
        try:
            for k, step in enumerate(frame.steps):
                if hooked:
                    faults.at('step %d' % k)
                step.fn()
        except Replan:
            raise
        except BaseException:
            if step is not None:
                self.position_of_error = step.task
            raise

    def run_checks(self, frame):
        """Read the frame's device error flags (see PlanContext.deferred_check)."""
        if frame.checks:
            self.queue.finish()
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
            self.position_of_error = first[0]
            raise first[1]
        self.position_of_error = -1

    @_planning
    def _commit_plan(self, frame):
        """The frame's commits as a CommitPlan when batching merges some of its copies,
        else False."""
        from . import planner      # (imports the op families, hence theano)
        plan = planner.CommitPlan(self, frame)
        return plan if plan.pays() else False

    @_planning
    def _batched_plan(self, frame):
        """The frame's steps with independent same-kernel launches merged (planner.py),
        or False when that does not remove at least a quarter of the launches."""
        before = sum(1 for st in frame.steps if st.kind in ('launch', 'copy'))
        if before < self.batch_min_launches:
            return False
        from . import planner      # (imports the op families, hence theano)
        plan = planner.plan_steps(frame.steps, self.dev, self.queue,
                                  cpu_group=self.settings.cpu_group)
        return plan if plan.pays() else False

    # ---------------------------------------------------------------- planning
    @_planning
    def _plan(self, key):
        prog = self.program
        frame = Frame(key)
        if self.profiler is not None:            # profile hook (profiling.py)
            self.profiler.begin_plan()
        dvals = {}
        live = collections.Counter()
        taken = {}              # IfElse task -> the branch this frame runs
        try:
            self._plan_inputs(frame, dvals, live)
            hooked = faults.hook is not None
            for t, task in enumerate(prog.tasks):
                self.position_of_error = t
                if hooked:
                    faults.at('plan task %d' % t)
                ctx = PlanContext(self, frame, t, self.queue)
                ctx.node = task.node
                if task.regions and not self._taken(task, ctx, taken):
                    frame.skipped.add(t)    # of a branch not taken: never planned nor run
                    continue
                if task.kind == 'dev':
                    if hasattr(task.impl, 'branches'):
                        self._decide(task, ctx, taken)
                    if task.fused_into is None:
                        self._plan_dev(task, ctx, dvals, live)
                elif task.kind == 'shape':
                    self._plan_shape(task, ctx, dvals, live)
                else:
                    self._plan_host(task, ctx, dvals, live)
                for var in task.release:
                    d = dvals.get(var)
                    if d is None or var in prog.keep_vars:
                        continue
                    live[id(d.root)] -= 1
                    if live[id(d.root)] == 0 and getattr(d.root, 'arena', False) \
                            and d.root.nbytes >= self.reuse_min_bytes:
                        frame.free.append(d.root)
            self.position_of_error = -1
            self._plan_outputs(frame, dvals)
            self._plan_commits(frame, dvals)
        except DeviceTooSmall as e:
            frame.release()
            self._on_host(key, e)
        except BaseException:
            frame.release()
            raise
        frame.input_bufs = {i: r.buf for i, r in frame.input_roots.items()}
        frame.has_host_steps = any(st.kind in ('host', 'download', 'guard') for st in frame.steps)
        frame.dvals = {v: dvals[v] for v in prog.keep_vars if v in dvals}
        frame.free = []
        frame.tiny = (self.host_tier_after is not None and self.output_mode == 'host'
                      and not self.profile
                      and all(d.size <= self.tiny_size for d in dvals.values())
                      and not any(da.is_device_array(prog.input_cells[i][0])
                                  for i, k in prog.input_plan if k == 'dev'))
        frame.nbytes = frame.owned_bytes()
        if key is not None:
            self.frames[key] = frame
            self._evict(keep=frame)
        return frame

    def _other_branch(self, frame):
        """``frame``'s IfElse guard found its condition turned: run a frame of the same key
        planned for the branches this call takes, planning one the first time. Frames of
        one key keep one another as alternates (``max_alternates``), so alternating calls
        re-run only the tasks before the condition, never re-plan. Returns the frame run."""
        self._hot = None
        key = frame.key
        tried = [frame]
        alternates, frame.alternates = frame.alternates, []
        self.frames.pop(key, None)
        found = None
        while alternates and found is None:
            alt = alternates.pop(0)
            if key is not None:
                self.frames[key] = alt
            try:
                alt.replays += 1
                self._replay(alt)
                found = alt
            except BranchFlip:
                tried.append(alt)
            except Replan:
                alt.release()
            if found is None:
                self.frames.pop(key, None)
        if found is None:
            self.replans += 1
            found = self._plan(key)
        if key is None:
            for f in tried + alternates:
                f.release()
            return found
        keep = tried + alternates
        for f in keep[self.max_alternates:]:
            f.release()
        found.alternates = keep[:self.max_alternates]
        found.nbytes = found.owned_bytes() + sum(f.owned_bytes() for f in found.alternates)
        self._evict(keep=found)
        return found

    def _taken(self, task, ctx, taken):
        """Whether every branch ``task`` is of (``lazy_branches``) is taken in this frame,
        deciding each IfElse at its first branch task, outermost first."""
        for x_task, branch in task.regions:
            if self._decide(x_task, ctx, taken) != branch:
                return False
        return True

    def _decide(self, x_task, ctx, taken):
        """The branch this frame takes at IfElse ``x_task``: its condition's value now (the
        tasks computing it ran). Unless the key decides it, a guard re-plans the calls
        where it turns the other way -- before any task of either branch runs."""
        branch = taken.get(x_task)
        if branch is None:
            from .ops.basic import branch_taken
            cond = x_task.node.inputs[0]
            cell = self.program.storage_map[cond]
            branch = taken[x_task] = branch_taken(cell[0])
            if not isinstance(cond, Constant) and cond not in self.program.key_determined:
                ctx.host_step(steps.branch_guard(cell, branch, cond), 'guard', reads=(), writes=())
                self._run_new(ctx.frame, ctx)
        return branch

    def _evict(self, keep):
        """Drop the least recently used frames past ``max_frames`` or past
        ``max_cached_bytes`` of buffers held by frames other than ``keep`` (the one in use),
        and give the pool's freed buffers back to the driver when they are many."""
        frames = self.frames
        dropped = False
        while len(frames) > 1:
            cached = sum(f.nbytes for f in frames.values() if f is not keep)
            if len(frames) <= self.max_frames and cached <= self.max_cached_bytes:
                break
            key, old = next(iter(frames.items()))
            if old is keep:
                frames.move_to_end(key)
                continue
            del frames[key]
            old.release()
            dropped = True
            self._hot = None
        if dropped:
            self.dev.trim()

    def release_cached(self):
        """Drop every cached frame but the last call's (the device needs the memory); False
        once this function is gone (``OCLDevice.add_reclaimer``)."""
        if not self._lock.acquire(blocking=False):
            return None             # mid-call in another thread: leave it
        try:
            for key, frame in list(self.frames.items()):
                if frame is not self.last_frame:
                    self._drop(key)
        finally:
            self._lock.release()
        return None

    def _on_host(self, key, error):
        """Remember that calls with ``key`` run on the host, warn once, raise RunOnHost."""
        if not self._warned_host:
            self._warned_host = True
            warnings.warn('theano_ocl: %s; %s runs on the host for these shapes, as Theano C '
                          'would (the device keeps its other shapes)' % (
                              error, self.program.fgraph.outputs[0].name or 'the function'),
                          RuntimeWarning, stacklevel=4)
        frame = Frame(key)
        frame.on_host = True
        if key is not None:
            self.frames[key] = frame
            self._evict(keep=frame)
        self._hot = None
        raise RunOnHost()

    def _run_new(self, frame, ctx, record=True):
        for step in ctx.new_steps:
            if record:
                frame.steps.append(step)
            if self.profiler is not None:        # profile hook (profiling.py)
                self.profiler.run(step)
            else:
                step.fn()
        ctx.new_steps = []

    def _set_dval(self, dvals, live, var, d):
        dvals[var] = d
        live[id(d.root)] += 1

    def _plan_inputs(self, frame, dvals, live):
        prog = self.program
        ctx = PlanContext(self, frame, 0, self.queue)
        for i, var in enumerate(prog.fgraph.inputs):
            kind = prog.input_kinds[i]
            cell = prog.input_cells[i]
            if kind == 'resident':
                res = prog.residents[i]
                d = res.ensure_device(self.dev, self.queue)
                frame.input_roots[i] = d.root
                frame.root_to_input[id(d.root)] = i
                self._set_dval(dvals, live, var, d)
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
                        ctx.host_step(steps.host_copy_of_device_input(self, cell), 'download',
                                      reads=(d,), writes=())
                else:
                    d = ctx.alloc(np.shape(v), var.type.dtype)
                    frame.input_roots[i] = d.root
                    ctx.host_step(steps.upload_input_step(self.dev, self.queue, d, cell), 'upload',
                                  reads=(), writes=(d,))
                self._set_dval(dvals, live, var, d)
        for var, d in self.const_dvals.items():
            dvals[var] = d
            live[id(d.root)] += 1
        self._run_new(frame, ctx)

    def _plan_dev(self, task, ctx, dvals, live):
        node = task.node
        prog = self.program
        ins = []
        branch = getattr(task.impl, 'branch_input', None)
        for j, var in enumerate(node.inputs):
            if j in task.fused:
                ins.append(family('fused_value')(task.fused[j], dvals))
            elif j in task.host_inputs:
                value = prog.storage_map[var][0]
                ins.append(value)
                if var.owner is not None and var not in prog.key_determined and j != branch:
                    ctx.host_step(steps.guard_host_value(prog.storage_map[var], value, var), 'guard',
                                  reads=(), writes=())
            elif branch is not None:
                ins.append(dvals.get(var))     # None: of the branch not taken (_decide)
            else:
                ins.append(dvals[var])
        ctx.destroyable = [j not in task.host_inputs and j not in task.fused
                           and self._destroyable(task, node.inputs[j], dvals, live)
                           for j in range(len(node.inputs))]
        outs = task.impl.plan(ctx, ins)
        if len(outs) != len(node.outputs):
            raise AssertionError('%s planned %d outputs for %d' % (task.impl, len(outs), len(node.outputs)))
        for var, d in zip(node.outputs, outs):
            if d.dtype != np.dtype(var.type.dtype):
                raise AssertionError('%s produced %s for an output of type %s' % (
                    type(task.impl).__name__, d.dtype, var.type))
            self._set_dval(dvals, live, var, d)
        for var in task.download_outputs:
            self._plan_download(ctx, dvals[var], prog.storage_map[var])
        self._run_new(ctx.frame, ctx)

    def _destroyable(self, task, var, dvals, live):
        d = dvals.get(var)
        if d is None or var.owner is None or var in self.program.keep_vars:
            return False
        if self.program.last_use.get(var) is not task:
            return False
        return live[id(d.root)] == 1 and getattr(d.root, 'arena', False)

    def _plan_download(self, ctx, d, cell):
        dev, queue = self.dev, self.queue
        d = ctx.contiguous(d)

        def run():
            cell[0] = download(dev, queue, d)
        ctx.host_step(run, 'download', reads=(d,), writes=())

    def _plan_shape(self, task, ctx, dvals, live):
        prog = self.program
        node = task.node
        var = node.inputs[0]
        d = dvals.get(var)
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
        self._run_new(ctx.frame, ctx, record=task.replay)
        self._plan_uploads(task, ctx, dvals, live)

    def _plan_uploads(self, task, ctx, dvals, live):
        """Upload the outputs of a host task that device tasks consume (shape-guarded)."""
        storage_map = self.program.storage_map
        for var in task.upload_outputs:
            value = storage_map[var][0]
            d = ctx.alloc(np.shape(value), var.type.dtype)
            ctx.host_step(steps.upload_guarded_step(self.dev, self.queue, d, storage_map[var], var),
                          'upload', reads=(), writes=(d,))
            self._set_dval(dvals, live, var, d)
        self._run_new(ctx.frame, ctx)

    def _plan_host(self, task, ctx, dvals, live):
        thunk = task.thunk

        def run():
            thunk()
        ctx.host_step(run, 'host', reads=(), writes=())      # host cells only
        self._run_new(ctx.frame, ctx, record=task.replay)
        self._plan_uploads(task, ctx, dvals, live)

    def _plan_outputs(self, frame, dvals):
        prog = self.program
        ctx = PlanContext(self, frame, len(prog.tasks) - 1, self.queue)
        fetchers = []
        donated = set()
        for j, var in enumerate(prog.fgraph.outputs):
            if j in prog.update_outputs:
                fetchers.append(steps.none)
                continue
            d = dvals.get(var)
            cell = prog.storage_map[var]
            if d is None:
                fetchers.append(steps.host_value(cell, prog.residents.get(prog.input_index.get(var)), self))
                continue
            if self.output_mode == 'device':
                donate = (d.root.arena and d.offset == 0 and d.is_c_contiguous()
                          and id(d.root) not in donated)
                donated.add(id(d.root))
                fetchers.append(steps.donate_output(self, frame, d) if donate
                                else steps.device_output(self, ctx, d))
            else:
                fetchers.append(steps.host_output(self.dev, self.queue, ctx.contiguous(d)))
        for i, var in prog.write_back:
            d = dvals.get(var)
            src = ctx.contiguous(d) if d is not None else None
            ctx.host_step(steps.write_back_step(self.dev, self.queue, src, prog.storage_map[var],
                                           prog.input_cells[i]), 'download',
                          reads=() if src is None else (src,), writes=())
        self._run_new(frame, ctx)
        frame.outputs = fetchers

    def _plan_commits(self, frame, dvals):
        prog = self.program
        ctx = PlanContext(self, frame, len(prog.tasks) - 1, self.queue)
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
                    pending.append(steps.commit_host_from_device(self.dev, self.queue, d, cell))
                else:
                    pending.append(steps.commit_host(cell, prog.storage_map[var]))
                continue
            res = prog.residents[i]
            if d is None:
                pending.append(steps.commit_resident_from_host(res, self.dev, self.queue, prog.storage_map[var]))
                continue
            if id(d.root) in dests or not d.is_c_contiguous():
                tmp = ctx.alloc(d.shape, d.dtype)
                ctx.copy(tmp, d)
                d = tmp
            pending.append(steps.commit_resident(res, self.dev, self.queue, d))
        # staging copies run with the steps; commits run after outputs were fetched
        for step in ctx.new_steps:
            frame.steps.append(step)
            step.fn()
        ctx.new_steps = []
        frame.commits = pending

    # ---------------------------------------------------------------- profile
    def update_profile(self, profile):
        """Theano's Function hands its ProfileStats after each call (profiling.py)."""
        if self.profiler is not None:
            self.profiler.update(profile)

    @property
    def lock(self):
        return self._lock

    def free(self):
        """Drop every frame (their buffers go back to the device)."""
        for key in list(self.frames):
            self._drop(key)
        self.last_frame = None
        self.dev.trim()

    def cached_bytes(self):
        return sum(f.nbytes for f in self.frames.values())

    def __del__(self):
        try:
            frames = self.__dict__.get('frames') or {}
            for frame in frames.values():
                frame.release()
            frames.clear()
            self.dev.trim()
        except Exception:       # pragma: no cover - interpreter shutdown
            pass


_startup.register_deferred(__name__)    # when importing this module deferred registration
