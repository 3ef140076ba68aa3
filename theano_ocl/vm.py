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

The runtime sees the function's ``RunContext`` (``runtime/run_context.py``: device, queue,
settings, program, profiler, counters) and its ``FrameCache`` (``runtime/frames.py``),
never the function: this module calls into the runtime, never the reverse.
"""
import time
import warnings
import weakref

import numpy as np

from . import darray as da
from .darray import DArray, Root
from .device import DeviceTooSmall
from .runtime import commit, cost, faults, host_tier, host_views, steps, waits
from .runtime.build import FrameBuilder
from .runtime.context import BranchFlip, Frame, Replan, RunOnHost
from .runtime.executor import Executor, RunStepsError
from .runtime.frames import FrameCache
from .runtime.host_tier import HostTier
from .runtime.plans import Fetch
from .runtime.memory import register_frames, upload
from .runtime.run_context import RunContext
from .runtime.settings import Settings, active


#: passes of a device-output function's frame timed in a row, as one, where the cost model
#: measures the device (``_measure_device``)
IN_ROW = 4


def _planning(method):
    """Run ``method`` (which plans: records frames) with the function's settings active
    (``runtime.settings.current``: how op families read them)."""
    def planning(self, *args):
        with active(self._rc.settings):
            return method(self, *args)
    planning.__name__ = method.__name__
    planning.__doc__ = method.__doc__
    return planning


def _forward(cls):
    """Give ``cls`` a property per name of ``cls.forwarded`` ({part: names}): the attribute
    of that name of the instance's ``part``, read and set through the instance."""
    def forwarded(part, name):
        def get(self):
            return getattr(getattr(self, part), name)

        def set_(self, value):
            setattr(getattr(self, part), name, value)
        return property(get, set_, doc='``%s.%s``' % (part, name))
    for part, names in cls.forwarded.items():
        for name in names:
            setattr(cls, name, forwarded(part, name))
    return cls


@_forward
class OCLFunction(object):
    """The callable handed to Theano's Function (``Function.fn``).

    Follows Theano's storage conventions: inputs are read from the input cells,
    outputs are written to the output cells and also returned as a list; updates
    are applied here (``need_update_inputs = False``).
    """
    need_update_inputs = False
    allow_gc = False
    is_ocl = True

    #: attributes the runtime holds, read and set through the function as before they moved
    #: there: its RunContext's (runtime/run_context.py) and its FrameCache's (runtime/frames.py)
    forwarded = {
        '_rc': ('program', 'dev', 'queue', 'settings', 'profile', 'profiler', 'output_mode',
                'const_dvals', 'position_of_error', 'replans', 'last_call', 'tier_probes',
                'host_tier_after', 'tiny_size', 'reuse_min_bytes', 'batch_after',
                'batch_min_launches', 'loop_step'),
        '_cache': ('frames', 'last_frame', 'hot_guard', 'max_frames', 'max_alternates',
                   'max_cached_bytes', 'max_cached_steps'),
    }

    def __init__(self, program, dev, profile=None, output_mode='host', settings=None):
        settings = settings if settings is not None else Settings.resolve({})
        self._rc = rc = RunContext(program, dev, settings, profile, output_mode)
        self.storage_map = program.storage_map
        self.nodes = [t.node for t in program.tasks]
        self.thunks = [t.thunk if t.thunk is not None else steps.NodeThunk(t, program.storage_map)
                       for t in program.tasks]
        self.time_thunks = bool(profile)
        if profile:
            from .profiling import Profiler
            rc.profiler = Profiler(self, profile)
        self._host_tier = None
        self._hot = self._hot_guard = None     # the tier's steady calls (_make_hot)
        self.cost_choices = {}      # frame key -> runtime.cost.Choice (None: not chosen)
        # dev -> a Mode for the cost model's calibration functions (linker.py sets it)
        self.calibration_mode = None
        self._lock = dev.call_lock           # one call at a time per device (shared.py)
        self._warned_host = False
        self._cache = cache = FrameCache(rc)
        ref = weakref.ref(self)
        dev.add_reclaimer(lambda: False if ref() is None else ref().release_cached())
        register_frames(cache)
        self.executor = Executor(rc, cache)
        # what every call reads, looked up once (a call costs a few microseconds of host
        # time: each attribute chain and method call in it shows)
        self.host_output_cells = list(program.host_output_cells)
        self._output_cells = [(j, cell) for j, cell in enumerate(program.computed_output_cells)
                              if cell is not None]
        # the input cells consumed on the device (the host's VM reads device arrays there)
        self._dev_cells = tuple(program.input_cells[i] for i, kind in program.input_plan
                                if kind == 'dev')

    def upload_constants(self):
        rc = self._rc
        dev = rc.dev
        for var in rc.program.consts:
            value = np.require(var.data, requirements="C")
            buf = dev.alloc(value.nbytes)
            d = DArray(Root(buf, max(value.nbytes, 1)), value.shape, value.dtype)
            upload(dev, dev.queue, d, value, blocking=True)
            rc.const_dvals[var] = d

    # ---------------------------------------------------------------- the call
    def __call__(self, output_subset=None):
        hot = self._hot
        if hot is not None:
            outputs = hot()
            if outputs is not None:
                return outputs
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
        rc, cache, executor = self._rc, self._cache, self.executor
        dev = rc.dev
        if rc.queue is not dev.queue:
            dev.queue.finish()   # (a profiled call: after what set_value sent, shared.py)
        up0 = tuple(dev.upload_tally)
        guard = cache.hot_guard
        frame = guard() if guard is not None else None
        steady = frame is not None
        reads = None        # the host outputs' downloads, waited for once with the checks'
        probe = None        # what Theano's VM gave for this call (_tier_probe), if it ran
        executor.armed = hand_over
        try:
            if frame is not None:
                # steady state: the last call's frame, whose key, input buffers and place in
                # the cache (the most recent) still hold; what the key, the frame lookup and
                # the executor's re-binding would find, in a fraction of their time
                frame.replays += 1
                if frame.tiny or frame.on_host:
                    if self._hot_guard is not guard:
                        self._hot = self._make_hot(frame, guard)
                    return self._run_in_thread(True, up0)
                frame = self._run_or_replan(frame, executor.run_pass)
            else:
                cache.hot_guard = None      # set again once this call's frame has run
                key = cache.key()
                frame = cache.frames.get(key) if key is not None else None
                if frame is not None:
                    cache.frames.move_to_end(key)
                    last = cache.last_frame
                    if frame is not last and (last is None or last.nbytes > frame.nbytes or
                                              len(last.steps) > len(frame.steps)):
                        # another frame in use: the budget counts the others, which now
                        # include the last call's; unless that one is no bigger than this
                        # one, they may have grown (checking costs O(frames): 40 us with
                        # 200 kept, a tenth of a replayed call of a small function)
                        cache.evict(keep=frame)
                    frame.replays += 1
                    if frame.on_host or (frame.tiny and frame.replays > rc.host_tier_after):
                        if frame.on_host or not frame.tier_probes:
                            cache.last_frame = frame
                            if frame.on_host:
                                # (the next call may skip the key: the tier's guard)
                                if frame.guard is None:
                                    frame.guard = cache.guard_of(frame)
                                cache.hot_guard = frame.guard or None
                            return self._run_in_thread(False, up0)
                        probe = self._tier_probe(frame)   # then the device call, compared
                    frame = self._run_or_replan(frame, executor.replay)
                if frame is None:
                    self._choose_host(key)      # raises RunOnHost where the host wins
                    frame = self._plan(key)
                    self._measure_device(key, frame)        # the same, once measured
                guard = frame.guard
                if guard is None:
                    guard = frame.guard = cache.guard_of(frame)
                cache.hot_guard = guard or None
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
                executor.run_checks(frame, reads)
            elif reads:
                waits.wait(dev, reads)
                reads = None
            if frame.commits:
                if hooked:
                    faults.at('commit')
                executor.commit(frame)
        except RunOnHost:
            return self._run_in_thread(steady, up0)
        except Exception:
            raise
        except BaseException:
            # an interrupt may have arrived while the frame's own structures changed (an
            # output buffer handed over and kernels half re-pointed, an input re-bound):
            # the next call plans afresh; nothing was committed (or all was: commit.py)
            if frame is not None:
                cache.drop(frame.key)
            raise
        finally:
            executor.armed = False
            if frame is not None and frame.early_reads is not None:
                frame.early_reads.live = False     # (what it queued is taken, or dropped)
            if reads:       # (an error on the way: the host arrays must outlive the copies)
                dev.cl.wait_for_events(reads)
        if dev.pending_uploads:
            dev.settle_uploads()
        cache.last_frame = frame
        up = dev.upload_tally      # (theano_ocl.stats: the facts of the last call)
        rc.last_call = (steady, up[0] - up0[0], up[1] - up0[1], up[2] - up0[2])
        if hand_over:
            for j, cell in self._output_cells:
                cell[0] = outputs[j]
        if probe is not None:
            self._judge_probe(frame, probe, outputs)
        if rc.profiler is not None:            # profile hook (profiling.py)
            rc.profiler.end_call()
        return outputs

    def run(self, n, feeds=None, probes=None, probe_every=1, batch='auto', feed='copy',
            probes_on='host', carry=None, stats=None, what='run', error=RunStepsError,
            stacklevel=1):
        """Run the function ``n`` times on the device, updates committed after each pass, with
        no host round trip where the frame has no host steps (``runtime.executor.Executor.run``:
        ``feeds`` {input index: array with leading axis n}, ``probes`` output indices)."""
        with self._lock:
            out = self.executor.run(self.__call__, n, feeds=feeds, probes=probes,
                                    probe_every=probe_every, batch=batch, feed=feed,
                                    probes_on=probes_on, carry=carry, stats=stats,
                                    what=what, error=error, stacklevel=stacklevel + 1)
            # the host arrays of the run's uploads (step 0's, after set_value) are let go, as
            # a call's are (else their events held them until 256 more uploads); a run that
            # raised leaves them to the next call, as a call that raised does
            dev = self._rc.dev
            if dev.pending_uploads:
                dev.settle_uploads()
            return out

    def _run_or_replan(self, frame, run):
        """``run(frame)``; the frame that ran: ``frame``, another IfElse branch's frame of
        its key (``BranchFlip``), or a new plan of its key (``Replan``: an assumption broke)."""
        try:
            run(frame)
            return frame
        except BranchFlip:
            return self._other_branch(frame)
        except Replan:
            self._cache.drop(frame.key)
            self._rc.replans += 1
            return self._plan(frame.key)

    # ---------------------------------------------------------------- in-thread tier
    def _run_in_thread(self, steady, up0):
        """Run the call on the host by Theano's own VM (runtime/host_tier.py); ``steady``:
        the steady-state guard sent it there, ``up0``: the upload tally when the call began
        (``theano_ocl.stats``' ``last_call``)."""
        rc = self._rc
        up = rc.dev.upload_tally
        rc.last_call = (steady, up[0] - up0[0], up[1] - up0[1], up[2] - up0[2])
        tier = self._tier()
        if not steady or rc.dev.is_cpu:
            # (a steady guard found host arrays in every keyed input, or one read in place)
            host_views.read_inputs(self._dev_cells, rc.dev, rc.queue)
        try:
            outputs = tier()
        except BaseException:
            rc.position_of_error = tier.error_task()
            raise
        if rc.output_mode == 'device':
            views = host_views.of(rc.dev)
            if views is not None:
                views.idle(rc.queue)
            outputs = [self._to_device(v, views) for v in outputs]
            for j, cell in self._output_cells:
                cell[0] = outputs[j]
        return outputs

    def _make_hot(self, frame, guard):
        """The steady calls of a frame the in-thread tier runs (``guard``: its steady-state
        guard, while it is the cache's): what ``_pass`` then does -- the guard, the counters,
        the tier's call -- as one closure, which ``__call__`` tries first. It gives None
        where the general path must run: another guard in use, a commit to finish, the
        fault hook set, the guard failing (then ``_pass`` tests it again)."""
        self._hot_guard = guard
        rc, cache = self._rc, self._cache
        views = host_views.of(rc.dev) if rc.output_mode == 'device' else None
        if rc.profiler is not None or (rc.output_mode != 'host' and views is None):
            return None
        tier = self._tier()
        run, pending, cells = tier.call, commit.pending, tuple(self.host_output_cells)
        steady = (True, 0, 0, 0)        # rc.last_call: a tier call uploads nothing
        # device arrays read and written in place (runtime/host_views.py): inputs where the
        # key has them (the guard passes them only where the host reads them in place)
        keyed = any(type(part) is tuple and part[:1] == ('d',) for part in (frame.key or ())[1:])
        dev_cells = self._dev_cells if keyed else ()
        out_cells = tuple(self._output_cells) if views is not None else None
        read, dev, queue, on_device = host_views.read_inputs, rc.dev, rc.queue, self._to_device

        def hot():
            if cache.hot_guard is not guard or pending or faults.hook is not None or \
                    guard() is None:
                return None
            frame.replays += 1
            rc.last_call = steady
            for cell in cells:
                cell[0] = None
            if dev_cells:
                read(dev_cells, dev, queue)
            try:
                outputs = run()
            except BaseException:
                rc.position_of_error = tier.error_task()
                raise
            if out_cells is None:
                return outputs
            views.idle(queue)
            outputs = [on_device(v, views) for v in outputs]
            for j, cell in out_cells:
                cell[0] = outputs[j]
            return outputs
        return hot

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
        prog = self._rc.program
        agree = probe is not False and self._cache.last_frame is frame and \
            all(host_tier.same_bits(w, g) for w, g in zip(probe[0], outputs))
        for i, value in (probe[1] if agree else ()):
            res = prog.residents.get(i)
            if res is not None and res.device_newer:
                res.sync_to_host()
            agree = agree and host_tier.same_bits(value, prog.input_cells[i][0])
        if not agree:
            frame.tiny = False
            frame.tier_probes = 0
            frame.guard = self._cache.hot_guard = None

    @property
    def host_kept_bytes(self):
        """Bytes the host tier's intermediates keep between calls (``theano_ocl.stats``)."""
        return 0 if self._host_tier is None else self._host_tier.held_bytes()

    @property
    def host_math(self):
        """``theano_ocl.stats(f)['host_math']``."""
        tier = self._host_tier
        if tier is None or not tier.math_backend:
            return None
        return dict(nodes=tier.math_counts[0], runs=tier.math_counts[1],
                    backend=tier.math_backend)

    @property
    def host_thunks(self):
        """``theano_ocl.stats(f)['host_thunks']``."""
        tier = self._host_tier
        return None if tier is None else dict(tier.thunk_counts)

    @property
    def host_scan(self):
        """``theano_ocl.stats(f)['host_scan']``."""
        tier = self._host_tier
        if tier is None:
            return None
        scans, runs, plain = tier.scan_counts
        return dict(scans=scans, runs=runs, plain_runs=plain)

    @property
    def host_in_place(self):
        """``theano_ocl.stats(f)['host_in_place']``."""
        tier = self._host_tier
        if tier is None or tier.tail is None:
            return None
        done, copied = tier.in_place_counts_now()
        return dict(in_place=done, copied=copied, why_not=tier.in_place_why_not())

    def _tier(self):
        if self._host_tier is None:
            prog = self._rc.program
            self._host_tier = HostTier(prog, prog.no_recycling, self._rc.settings.host_math)
        return self._host_tier

    def _to_device(self, value, views=None):
        """A host result as a device array where the device can hold it (the host array
        where it cannot: the call ran on the host for that reason). The copy is queued,
        not waited for (the array reads it in the queue's order; the host array is kept
        until it is done); with ``views`` (the device's buffers are the host's, the queue
        idle) it is written into the buffer's memory at once."""
        rc = self._rc
        dev = rc.dev
        if not isinstance(value, np.ndarray) or value.nbytes > dev.max_alloc:
            return value
        if views is not None:
            return views.fill(value, rc.queue)
        import pyopencl.array as cla
        if not value.size:
            return cla.empty(rc.queue, value.shape, value.dtype)
        value = np.require(value, requirements='C')     # (0-d stays 0-d)
        out = cla.Array(rc.queue, value.shape, value.dtype, data=dev.alloc(value.nbytes))
        upload(dev, rc.queue, da.from_pyopencl(out), value)
        return out

    # ---------------------------------------------------------------- frames
    def drop_frame(self, key):
        self._cache.drop(key)

    @_planning
    def _plan(self, key):
        """Build (and run, this once) the frame of ``key`` (runtime/build.py); cache it."""
        try:
            frame = FrameBuilder(self._rc, key, self.executor).build()
        except DeviceTooSmall as e:
            self._on_host(key, e)
        self._cache.add(key, frame)
        return frame

    def _other_branch(self, frame):
        """``frame``'s IfElse guard found its condition turned: run a frame of the same key
        planned for the branches this call takes, planning one the first time. Frames of
        one key keep one another as alternates (``max_alternates``), so alternating calls
        re-run only the tasks before the condition, never re-plan. Returns the frame run."""
        cache = self._cache
        frames = cache.frames
        cache.hot_guard = None
        key = frame.key
        tried = [frame]
        alternates, frame.alternates = frame.alternates, []
        frames.pop(key, None)
        found = None
        while alternates and found is None:
            alt = alternates.pop(0)
            if key is not None:
                frames[key] = alt
            try:
                alt.replays += 1
                self.executor.replay(alt)
                found = alt
            except BranchFlip:
                tried.append(alt)
            except Replan:
                alt.release()
            if found is None:
                frames.pop(key, None)
        if found is None:
            self._rc.replans += 1
            found = self._plan(key)
        if key is None:
            for f in tried + alternates:
                f.release()
            return found
        keep = tried + alternates
        for f in keep[cache.max_alternates:]:
            f.release()
        found.alternates = keep[:cache.max_alternates]
        found.nbytes = found.owned_bytes() + sum(f.owned_bytes() for f in found.alternates)
        cache.evict(keep=found)
        return found

    def release_cached(self):
        """Drop every cached frame but the last call's (the device needs the memory); False
        once this function is gone (``OCLDevice.add_reclaimer``)."""
        if not self._lock.acquire(blocking=False):
            return None             # mid-call in another thread: leave it
        try:
            self._cache.release_cached()
            self.executor.kept_loop = None      # (its probe buffers: Executor.run)
        finally:
            self._lock.release()
        return None

    def _choose_host(self, key):
        """On a CPU device, the first call of ``key``: the cost model (runtime/cost.py)
        runs it dry on the host and, where the host wins, its calls run there from now on
        (RunOnHost); otherwise nothing happens and the device plans it. The choice is kept
        for the key: a frame dropped since (evicted, interrupted) is planned again where
        the key's calls ran, never chosen anew."""
        rc = self._rc
        if key is None:
            return
        if key in self.cost_choices:
            choice = self.cost_choices[key]
        else:
            if self.calibration_mode is None or not cost.eligible(rc.program, rc.dev, rc):
                return
            # (inputs staged on the device, as run_steps stages them: their host copies,
            # so that its steps choose as calls of the same shapes do)
            cells, dev, queue = self._dev_cells, rc.dev, rc.queue
            with host_views.reading(cells, dev, queue):
                pass            # (each buffer's address learnt, not timed)
            t = time.perf_counter()
            with host_views.reading(cells, dev, queue) as swapped:
                reads_s = time.perf_counter() - t
                choice = cost.choose(rc.program, rc.dev, self._tier(), self.calibration_mode,
                                     None if rc.batch_after is None else rc.batch_min_launches,
                                     rc.run_steps, reads_s if swapped and not rc.run_steps > 1
                                     else 0.0, writes=rc.output_mode == 'device')
            self.cost_choices[key] = choice
        if choice is None or not choice.host:
            return
        self._go_host(key)

    def _go_host(self, key):
        """Calls with ``key`` run on the host from this one on: raise RunOnHost."""
        frame = Frame(key)
        frame.on_host = True
        self._cache.add(key, frame)
        self._cache.hot_guard = None
        self._cache.last_frame = frame
        raise RunOnHost()

    def _measure_device(self, key, frame):
        """Where the cost model's choice for ``key`` waits on the device's own time
        (``cost.Choice.verify``): time a few passes of the frame just planned, each with
        its inputs bound and its outputs read as a call does (nothing committed: a pass
        recomputes the same values; what it reads is dropped), then as many dry runs of
        Theano's VM, and move the key's calls to the host where the host's took no longer
        (``cost.PASSES_MARGIN`` times those passes; RunOnHost, the frame released)."""
        choice = self.cost_choices.get(key)
        if choice is None or not choice.verify:
            return
        rc, executor = self._rc, self.executor
        dev, queue = rc.dev, rc.queue
        fetches = [f for f in frame.outputs if type(f) is Fetch]

        # (device outputs: passes in a row, as calls in a row overlap; cost.choose)
        in_row = IN_ROW if rc.output_mode == 'device' else 1

        def run():
            for _ in range(in_row - 1):
                frame.replays += 1
                executor.replay(frame)
            frame.replays += 1          # (as calls would: its batched plan once hot)
            executor.replay(frame)      # (the inputs uploaded again, as a call does)
            reads, got = [], []
            try:
                # (read as a call reads them: queued, a large one on a CPU device handed
                # over, runtime/steps.py; one wait, after which the queue's work is done.
                # What they return is kept until then: the queued commands write into it,
                # or map it. Dropped at once, a handed array was freed under its map, and
                # a test worker crashed)
                for fetch in fetches:
                    got.append(fetch.later(reads))
            finally:
                waits.wait(dev, reads or [dev.cl.enqueue_marker(queue)])
            del got

        armed, replays = executor.armed, frame.replays
        executor.armed = False
        try:
            host_s, run_s = cost.measure(self._host_dry_run, run, choice.device_s)
        except Exception:
            choice.verify = False       # (the device's call raises, or plans again)
            return
        finally:
            executor.armed, frame.replays = armed, replays
        choice.measured(run_s / in_row, host_s)
        if choice.host:
            self._cache.drop(key)
            self._go_host(key)
        # the call's own pass: a timed pass that handed an output over bound its buffer
        # anew (runtime/steps.py), which no kernel has written since
        executor.run_pass(frame)

    def _host_dry_run(self):
        """A dry run of Theano's VM (``HostTier.dry_run``) on this call's inputs, device
        arrays read as a call on the host reads them (in place, or downloaded)."""
        rc = self._rc
        with host_views.reading(self._dev_cells, rc.dev, rc.queue):
            return self._tier().dry_run()

    def _on_host(self, key, error):
        """Remember that calls with ``key`` run on the host, warn once, raise RunOnHost."""
        if not self._warned_host:
            self._warned_host = True
            warnings.warn('theano_ocl: %s; %s runs on the host for these shapes, as Theano C '
                          'would (the device keeps its other shapes)' % (
                              error, self._rc.program.fgraph.outputs[0].name or 'the function'),
                          RuntimeWarning, stacklevel=4)
        self._tier().free_intermediates()
        frame = Frame(key)
        frame.on_host = True
        self._cache.add(key, frame)
        self._cache.hot_guard = None
        raise RunOnHost()

    # ---------------------------------------------------------------- profile
    def update_profile(self, profile):
        """Theano's Function hands its ProfileStats after each call (profiling.py)."""
        profiler = self._rc.profiler
        if profiler is not None:
            profiler.update(profile)

    @property
    def lock(self):
        return self._lock

    @property
    def run_context(self):
        """What the runtime sees of this function (``runtime.run_context.RunContext``)."""
        return self._rc

    def free(self):
        """Drop every frame (their buffers go back to the device), and the loop the last
        run kept."""
        self._cache.free()
        self.executor.kept_loop = None

    def cached_bytes(self):
        return self._cache.cached_bytes()

    def __del__(self):
        try:
            cache = self.__dict__.get('_cache')
            if cache is not None:
                for frame in cache.frames.values():
                    frame.release()
                cache.frames.clear()
                cache.dev.trim()
        except Exception:       # pragma: no cover - interpreter shutdown
            pass
