"""The device VM: runs one linked function against device storage.

Data flow of one call (``OCLFunction.__call__``), top to bottom:

1. key: the shapes of the inputs consumed on the device and the values of the
   small host inputs that decide shapes (indices, sizes); a call that comes back to the
   last call's frame with its inputs as planned (the steady state) skips this and the
   lookup: the frame's guard tells it (``runtime/frames.py``);
2. if a *frame* exists for that key, the executor replays it (``runtime/executor.py``): a
   flat list of typed plans (kernel launches with arguments bound once, copies, uploads
   into fixed buffers, host nodes), guarded where its assumptions could break (then the
   frame is re-planned), merged into a batched plan once hot (``runtime/planner.py``);
3. otherwise build a new frame (``runtime/build.py``), which runs it this once;
4. fetch the outputs, read the device checks, and commit the updates into the shared
   variables' resident device buffers, all or none (``runtime/commit.py``);
5. hand back the outputs: downloaded into fresh host arrays, or as device arrays.

Tiny hot frames run in this thread on Theano's own thunks (``runtime/host_tier.py``).
``OCLFunction.run(n, ...)`` runs the same frames n times with no host round trip
(``SimulatorOCL.run_steps`` is that call).
"""
import collections
import warnings
import weakref

import numpy as np

from . import darray as da
from .darray import DArray, Root
from .device import DeviceTooSmall
from .runtime import commit, early, faults, host_tier, planner, plans, steps
from .runtime.build import FrameBuilder
from .runtime.context import BranchFlip, Frame, Replan, RunOnHost
from .runtime.executor import Executor, RunStepsError
from .runtime.frames import frame_key, make_guard
from .runtime.host_tier import HostTier
from .runtime.plans import Fetch
from .runtime.memory import register_function, upload
from .runtime.settings import Settings, active


#: bytes of buffers a function's cached frames (other than the one in use) may keep
MAX_CACHED_FRAME_BYTES = 256 << 20

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
    #: frames kept besides the one in use (least recently used dropped first), also bounded
    #: by the bytes of their buffers (``max_cached_bytes``) and by their plans' steps
    #: (``max_cached_steps``, host memory): calls cycling over many keys (input shapes,
    #: sizes given to Alloc or reshape) plan each key once per process, not once per call.
    #: Index values are not keys (``linker.mark_dynamic``).
    max_frames = 256
    max_cached_steps = 1 << 15
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
        self.last_call = None      # (steady state, values, bytes, transfers uploaded)
        self.replans = 0
        self.queue = dev.profiling_queue if profile else dev.queue
        self.const_dvals = {}
        self.retired = []          # buffers kept alive for kernels still bound to them
        # A launch + finish costs ~40 us on PoCL, and an upload, a launch and a download
        # ~60 us on a GPU: far more than a tiny node's work. Once a frame of tiny values
        # (every value at most tiny_size elements, inputs and outputs on the host) is
        # hot, run Theano's own thunks in this thread (see _run_in_thread); shared
        # variables then live on the host until a device frame needs them.
        # (where the host_tier setting lets it, after tier_probes calls run both ways
        # agreed: runtime/host_tier.py's probes)
        self.tier_probes = host_tier.probes(self.settings.host_tier, program.fgraph)
        settings = self.settings
        self.host_tier_after = None if self.tier_probes is None else settings.host_tier_after
        self.tiny_size = 4096
        # buffers of dead intermediates smaller than this are not reused: they cost little
        # memory, and reusing them would chain independent small ops through false
        # (write-after-read) dependencies that stop the planner from batching them
        self.reuse_min_bytes = settings.reuse_min_bytes
        # one-step calls replay a batched plan (runtime/planner.py) once a frame has been replayed
        # batch_after times, when it has batch_min_launches launches and batching removes
        # at least a quarter of them; None turns this off
        self.batch_after = settings.batch_after
        self.batch_min_launches = settings.batch_min_launches
        # plans kept (LRU, under max_cached_bytes), and per key for other IfElse outcomes
        self.max_frames = settings.max_frames
        self.max_alternates = settings.max_alternates
        # a device Scan's inner function (set by ops/scan.py when it links the node): its
        # frames replay once a step, so a batched plan pays for any launch it saves
        self.loop_step = False
        self._host_tier = None
        self._lock = dev.call_lock           # one call at a time per device (shared.py)
        self._warned_host = False
        # frames other than the one in use keep at most this many bytes of buffers
        self.max_cached_bytes = min(MAX_CACHED_FRAME_BYTES, dev.memory_limit // 8)
        ref = weakref.ref(self)
        dev.add_reclaimer(lambda: False if ref() is None else ref().release_cached())
        register_function(self)
        self.executor = Executor(self)
        # what every call reads, looked up once (a call costs a few microseconds of host
        # time: each attribute chain and method call in it shows)
        prog = program
        self.input_slots = [(cell, prog.residents.get(i)) for i, cell in enumerate(prog.input_cells)]
        self.key_plan = [(kind,) + self.input_slots[i] + (i,) for i, kind in prog.input_plan]
        self.hot_guard = None           # the guard of the last call's frame (runtime.frames.make_guard)
        self.host_output_cells = list(prog.host_output_cells)
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
        return self._pass(True)

    def pass_values(self):
        """One pass, as a call, that hands nothing over: each device output is the frame's
        own DArray, valid until the next pass of this function (a call hands the caller a
        buffer of its own, and the frame takes a fresh one); host outputs as a call
        returns them; a pass run on the host (``runtime/host_tier.py``) returns what a call
        returns. For a loop that passes one function's outputs on to its next pass (a
        device Scan, ``ops/scan.py``): the frame's buffers, and the kernels and batched
        plan bound to them, stay as they are from pass to pass."""
        return self._pass(False)

    def _pass(self, hand_over):
        if commit.pending:
            commit.finish_pending()     # an interrupted call's commit, finished first
        for cell in self.host_output_cells:
            cell[0] = None    # a host thunk must not write into an array returned before
        hooked = faults.hook is not None
        up0 = tuple(self.dev.upload_tally)
        guard = self.hot_guard
        frame = guard() if guard is not None else None
        steady = frame is not None
        reads = None        # the host outputs' downloads, waited for once with the checks'
        probe = None        # what Theano's VM gave for this call (_tier_probe), if it ran
        self.executor.armed = hand_over
        try:
            if frame is not None:
                # steady state: the last call's frame, whose key, input buffers and place in
                # self.frames (the most recent) still hold; what the key, the frame lookup and
                # the executor's re-binding would find, in a fraction of their time
                frame.replays += 1
                if frame.tiny or frame.on_host:
                    return self._run_in_thread(True, up0)
                frame = self._run_or_replan(frame, self.executor.run_pass)
            else:
                self.hot_guard = None      # set again once this call's frame has run
                key = frame_key(self)
                frame = self.frames.get(key) if key is not None else None
                if frame is not None:
                    self.frames.move_to_end(key)
                    last = self.last_frame
                    if frame is not last and (last is None or last.nbytes > frame.nbytes or
                                              len(last.steps) > len(frame.steps)):
                        # another frame in use: the budget counts the others, which now
                        # include the last call's; unless that one is no bigger than this
                        # one, they may have grown (checking costs O(frames): 40 us with
                        # 200 kept, a tenth of a replayed call of a small function)
                        self._evict(keep=frame)
                    frame.replays += 1
                    if frame.on_host or (frame.tiny and frame.replays > self.host_tier_after):
                        if frame.on_host or not frame.tier_probes:
                            return self._run_in_thread(False, up0)
                        probe = self._tier_probe(frame)   # then the device call, compared
                    frame = self._run_or_replan(frame, self.executor.replay)
                if frame is None:
                    frame = self._plan(key)
                guard = frame.guard
                if guard is None:
                    guard = frame.guard = make_guard(self, frame)
                self.hot_guard = guard or None
            if hooked:
                faults.at('outputs')
            if hand_over:
                outputs = []
                reads = []
                ahead = frame.early_reads
                queued = ahead.outputs if ahead is not None and ahead.live else None
                for j, fetch in enumerate(frame.outputs):
                    got = queued.pop(j, None) if queued else None
                    if got is not None:       # read as soon as it was final (runtime/early.py)
                        if got[1] is not None:
                            reads.append(got[1])
                        outputs.append(got[0])
                        continue
                    later = fetch.later if type(fetch) is Fetch else None
                    outputs.append(fetch() if later is None else later(reads))
            else:
                outputs = [fetch() if d is None else d
                           for d, fetch in zip(frame.kept_outputs, frame.outputs)]
            if frame.checks:
                if hooked:
                    faults.at('checks')
                self.executor.run_checks(frame, reads)
            elif reads:
                self.dev.cl.wait_for_events(reads)
                reads = None
            if frame.commits:
                if hooked:
                    faults.at('commit')
                self.executor.commit(frame)
        except RunOnHost:
            return self._run_in_thread(steady, up0)
        except Exception:
            raise
        except BaseException:
            # an interrupt may have arrived while the frame's own structures changed (an
            # output buffer handed over and kernels half re-pointed, an input re-bound):
            # the next call plans afresh; nothing was committed (or all was: commit.py)
            if frame is not None:
                self.drop_frame(frame.key)
            raise
        finally:
            self.executor.armed = False
            if frame is not None and frame.early_reads is not None:
                frame.early_reads.live = False     # (what it queued is taken, or dropped)
            if reads:       # (an error on the way: the host arrays must outlive the copies)
                self.dev.cl.wait_for_events(reads)
        dev = self.dev
        if dev.pending_uploads:
            dev.settle_uploads()
        self.last_frame = frame
        up = dev.upload_tally      # (theano_ocl.stats: the facts of the last call)
        self.last_call = (steady, up[0] - up0[0], up[1] - up0[1], up[2] - up0[2])
        if hand_over:
            for j, cell in self._output_cells:
                cell[0] = outputs[j]
        if probe is not None:
            self._judge_probe(frame, probe, outputs)
        if self.profiler is not None:            # profile hook (profiling.py)
            self.profiler.end_call()
        return outputs

    def run(self, n, feeds=None, probes=None, probe_every=1, batch='auto', feed='copy',
            probes_on='host', carry=None, stats=None, what='run', error=RunStepsError,
            stacklevel=1):
        """Run the function ``n`` times on the device, updates committed after each pass, with
        no host round trip where the frame has no host steps (``runtime.executor.Executor.run``:
        ``feeds`` {input index: array with leading axis n}, ``probes`` output indices)."""
        with self._lock:
            return self.executor.run(n, feeds=feeds, probes=probes, probe_every=probe_every,
                                     batch=batch, feed=feed, probes_on=probes_on, carry=carry,
                                     stats=stats,
                                     what=what, error=error,
                                     stacklevel=stacklevel + 1)

    def _run_or_replan(self, frame, run):
        """``run(frame)``; the frame that ran: ``frame``, another IfElse branch's frame of
        its key (``BranchFlip``), or a new plan of its key (``Replan``: an assumption broke)."""
        try:
            run(frame)
            return frame
        except BranchFlip:
            return self._other_branch(frame)
        except Replan:
            self.drop_frame(frame.key)
            self.replans += 1
            return self._plan(frame.key)

    # ---------------------------------------------------------------- in-thread tier
    def _run_in_thread(self, steady, up0):
        """Run the call on the host by Theano's own VM (runtime/host_tier.py); ``steady``:
        the steady-state guard sent it there, ``up0``: the upload tally when the call began
        (``theano_ocl.stats``' ``last_call``)."""
        up = self.dev.upload_tally
        self.last_call = (steady, up[0] - up0[0], up[1] - up0[1], up[2] - up0[2])
        tier = self._tier()
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

    def _tier_probe(self, frame):
        """A call of a tiny hot frame that the tier may take only once it computes what
        the device does (``runtime/host_tier.py``, :func:`~.host_tier.probes`): Theano's
        VM runs it first, committing nothing; the call then runs on the device as before,
        and ``_judge_probe`` compares. Returns (outputs, updates), or False where the VM
        raised (the device call raises too, or the frame stays on the device)."""
        frame.tier_probes -= 1
        try:
            return self._tier().dry_run()
        except Exception:
            return False

    def _judge_probe(self, frame, probe, outputs):
        """An output or an update differing in any bit from the probe keeps ``frame`` on
        the device for good (with the device frame's own guard from now on)."""
        prog = self.program
        agree = probe is not False and self.last_frame is frame and \
            all(host_tier.same_bits(w, g) for w, g in zip(probe[0], outputs))
        for i, value in (probe[1] if agree else ()):
            res = prog.residents.get(i)
            if res is not None and res.device_newer:
                res.sync_to_host()
            agree = agree and host_tier.same_bits(value, prog.input_cells[i][0])
        if not agree:
            frame.tiny = False
            frame.tier_probes = 0
            frame.guard = self.hot_guard = None

    def _tier(self):
        if self._host_tier is None:
            self._host_tier = HostTier(self.program, self.program.no_recycling)
        return self._host_tier

    def _to_device(self, value):
        """A host result as a device array where the device can hold it (the host array
        where it cannot: the call ran on the host for that reason)."""
        if not isinstance(value, np.ndarray) or value.nbytes > self.dev.max_alloc:
            return value
        import pyopencl.array as cla
        return cla.to_device(self.queue, np.ascontiguousarray(value))

    # ---------------------------------------------------------------- keys
    def drop_frame(self, key):
        self.hot_guard = None
        frame = self.frames.pop(key, None)
        if frame is not None:
            frame.release()

    # ---------------------------------------------------------------- planners
    @_planning
    def commit_plan(self, frame):
        """The frame's commits as a CommitPlan when batching merges some of its copies,
        else False (the executor asks once the frame is hot)."""
        plan = planner.CommitPlan(self, frame)
        return plan if plan.pays() else False

    @_planning
    def batched_plan(self, frame):
        """The frame's steps with independent same-kernel launches merged (runtime/planner.py),
        or False when that does not remove at least a quarter of the launches (on GPUs and
        for a loop's step, ``loop_step``: any; ``BatchedPlan.pays``)."""
        before = plans.launches(frame.steps)
        if before < (2 if self.loop_step else self.batch_min_launches):
            return False
        plan = planner.plan_steps(frame.steps, self.dev, self.queue,
                                  cpu_group=self.settings.cpu_group, pinned=frame.pinned,
                                  urgent=early.producers(frame))
        return plan if plan.pays(looped=self.loop_step, gpu=self.dev.is_gpu) else False

    @_planning
    def loop_plans(self, frame):
        """(batched steps, batched commits) of ``frame`` for ``run``'s loop, whether or not
        they pay (the executor compares launch counts)."""
        return (planner.plan_steps(frame.steps, self.dev, self.queue,
                                   cpu_group=self.settings.cpu_group, pinned=frame.pinned),
                planner.CommitPlan(self, frame))

    # ---------------------------------------------------------------- building
    @_planning
    def _plan(self, key):
        """Build (and run, this once) the frame of ``key`` (runtime/build.py); cache it."""
        try:
            frame = FrameBuilder(self, key).build()
        except DeviceTooSmall as e:
            self._on_host(key, e)
        if key is not None:
            self.frames[key] = frame
            self._evict(keep=frame)
        return frame

    def _other_branch(self, frame):
        """``frame``'s IfElse guard found its condition turned: run a frame of the same key
        planned for the branches this call takes, planning one the first time. Frames of
        one key keep one another as alternates (``max_alternates``), so alternating calls
        re-run only the tasks before the condition, never re-plan. Returns the frame run."""
        self.hot_guard = None
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
                self.executor.replay(alt)
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

    def _evict(self, keep):
        """Drop the least recently used frames past ``max_frames``, or past
        ``max_cached_bytes`` of buffers or ``max_cached_steps`` plan steps held by frames
        other than ``keep`` (the one in use), and give the pool's freed buffers back to the
        driver when they are many."""
        frames = self.frames
        dropped = False
        while len(frames) > 1:
            others = [f for f in frames.values() if f is not keep]
            if len(frames) <= self.max_frames and \
                    sum(f.nbytes for f in others) <= self.max_cached_bytes and \
                    sum(len(f.steps) for f in others) <= self.max_cached_steps:
                break
            key, old = next(iter(frames.items()))
            if old is keep:
                frames.move_to_end(key)
                continue
            del frames[key]
            old.release()
            dropped = True
            self.hot_guard = None
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
                    self.drop_frame(key)
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
        self.hot_guard = None
        raise RunOnHost()

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
            self.drop_frame(key)
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
