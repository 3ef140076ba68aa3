"""Scan family: ``theano.scan_module.scan_op.Scan`` on the device.

The inner graph is compiled at link time by the OCL linker with its outputs kept on the
device (the ``'scan_inner_function'`` capability, provided by ``linker.py``: op families
never import the executor). Planning a Scan node allocates its outer outputs, then records
ONE host step that runs the loop (:class:`Loop`); per iteration it only *enqueues*:

1. device-to-device copies of the step's sequence rows and state taps into fixed staging
   buffers (a tap whose row never moves -- a shared variable, a state kept one step deep --
   is handed over as it is, without a copy);
2. the inner function's call on those staging arrays (pyopencl arrays over fixed buffers,
   so its frame is planned once and replayed; inner nodes without device code fall back
   there like anywhere else);
3. device-to-device copies of its outputs into the outer buffers at the step's slot.

No host round trip happens per iteration. An ``until`` condition the inner function
computes on the device stays there: each step a kernel counts the step and sets a stop
flag, the step's writes are masked by the flag, and the host reads the flag after 4, 8, 16,
... steps (at most 64 apart). The run that plans the node reads the condition every step.
The steps after the first are lowered onto the runtime's loop with their condition
(``ops/scan_lower.py``); an error in a run reading the flag every few steps (a step past
the stop may have read a bad index) runs it again reading the condition every step.
An until loop that stops after another number of steps than planned changes its outputs'
shapes: it raises ``BranchFlip``, and the VM runs a frame of the same key planned for that
many steps (it keeps a few, as for IfElse branches; the first time it plans one), which
takes the loop's results instead of running it again (``Loop._take_stopped``).

As Theano's ``Scan.make_thunk``, the node sets ``op.fn`` to its inner function (code that
inspects what the optimizer did inside a scan reads ``op.fn.maker.fgraph``:
``ops/scan_fn.py``) and leaves that function's storage empty between runs.

Buffer sizes, slot positions, the final re-ordering of circular buffers and the zeroing of
steps not computed mirror ``Scan.execute`` (Theano's Python loop, the reference): Theano's
``scan_save_mem`` optimization decides how deep each output's buffer is, through the
lengths of the initial states and the nit-sot size inputs.
"""
import sys
import time

import numpy as np
import theano
from theano.scan_module.scan_op import Scan

from ..darray import DArray
from ..errors import NoDeviceImplementation
from ..runtime.context import BranchFlip, Replan, family
from ..runtime import waits
from ..runtime.loop import Until, drive
from ..runtime import settings
from ..runtime.kernel_cache import build_seconds
from ..runtime.memory import buffer_copier, download
from .base import DeviceImpl
from .registry import implemented_by, ocl_impl
from .scan_bind import RowBinding
from .scan_fn import expose_inner_function
from .scan_layout import ScanLayout
from .scan_lower import ChecksFailed, lowered
from .scan_rows import LoopCopies, _row


def _inner_profile(op):
    """The inner function's profile, as Theano's ``Scan.make_thunk`` makes it (the
    ``profile`` flag, or ``theano.scan(profile=...)``): a ``ScanProfileStats``, whose
    ``call_time`` Theano's summary of the outer function reads."""
    from theano.compile.profiling import ScanProfileStats
    if theano.config.profile or (isinstance(op.profile, (str, bool, int)) and op.profile):
        return ScanProfileStats(name=op.profile if isinstance(op.profile, str) else op.name)
    return op.profile or None


class ScanImpl(DeviceImpl):
    """Runs the loop of ``Scan.execute`` on the device (see the module docstring).

    Host inputs: ``n_steps``, the nit-sot sizes, and the non-sequences the inner function
    reads on the host. The inner function is :attr:`inner_functions`' one entry
    (``report(f)`` lists its placements under the Scan node).
    """
    dtypes = None
    plans_with_values = True        # (planning runs the loop: its outputs' shapes)
    host_when = ('the inner function reads on the host, at every step, a state it computes '
                 'on the device, or a sequence whose value decides its plan (an index, a '
                 'size); a value that is not a tensor')

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        op = node.op
        self.layout = lay = ScanLayout(op)
        compile_inner = family('scan_inner_function')
        try:
            self.fn = compile_inner(op.inputs, op.outputs, op.mode_instance, dev, op.name,
                                    given=op.mode is not None, profile=_inner_profile(op))
        except NoDeviceImplementation:
            raise
        except Exception as e:      # the node runs Theano's loop instead, and says why
            raise NoDeviceImplementation('the inner function could not be linked on the '
                                         'device: %s: %s' % (type(e).__name__, e))
        self.inner_functions = (self.fn,)
        self.stopped = None      # (flip, Loop, steps): a run its until condition cut short
        self.last_run = None     # what its last run did (theano_ocl.stats: 'scans')
        expose_inner_function(op, self.fn)
        vm = self.fn.fn
        prog = getattr(vm, 'program', None)
        if prog is None:     # pragma: no cover - the capability links with the OCL linker
            raise NoDeviceImplementation('the inner function is not linked on the device')
        vm.loop_step = True      # its frames replay once a step (runtime.planner.batched_plan)
        inner_ins = prog.fgraph.inputs
        # which inner inputs the inner function takes on the device, reads on the host, or
        # does not read at all
        self.inner_kind = []
        for i, var in enumerate(inner_ins):
            if prog.input_kinds[i] != 'host':
                self.inner_kind.append('dev')
            elif var.clients:
                self.inner_kind.append('host')
            else:
                self.inner_kind.append('unused')
        # a state (or shared variable) that the inner function only reads and computes on
        # the host (an iteration counter) stays there from step to step: a host copy of its
        # buffer is read once per run and written back once (``Loop.run``); any other
        # value read per step must be on the device
        self.host_states = set()
        # a sequence the inner function reads on the host, not to decide a plan (a value
        # its host nodes compute with): its rows come from a host copy read once per run
        self.host_seqs = set()
        keyed = {i for i, kind in prog.input_plan if kind == 'meta'}
        readers = {}
        for k, o, _ in lay.staged_inputs():
            if o is not None and self.inner_kind[k] != 'unused':
                readers.setdefault(o, []).append(k)
        writers = {}
        for k, o, _ in lay.sinks():
            writers.setdefault(o, []).append(prog.fgraph.outputs[k])
        for k, o, _ in lay.staged_inputs():
            if self.inner_kind[k] != 'host':
                continue
            if o is not None and \
                    all(self.inner_kind[r] == 'host' for r in readers[o]) and \
                    all(_computed_on_host(prog, v) for v in writers[o]):
                self.host_states.add(o)
                continue
            if o is None and k not in keyed:
                self.host_seqs.add(k)
                continue
            raise NoDeviceImplementation(
                'the inner function reads %s on the host at every step' % (op.inputs[k],))
        self.cond_on_device = lay.as_while and \
            not _computed_on_host(prog, prog.fgraph.outputs[-1])
        host = [0] + list(range(lay.nit_in, lay.other_in))
        for j in range(lay.other_in, len(node.inputs)):
            if self.inner_kind[lay.inner_other + j - lay.other_in] == 'host':
                host.append(j)
        self.host_inputs = tuple(host)

    def steps_for(self, values):
        """The steps a run takes for the node's input ``values`` (at most: an ``until``
        may stop it sooner); None where they are not known (the CPU device's cost model,
        ``runtime/cost.py``, counts the inner function's launches per step)."""
        try:
            return max(int(values[0]), 0)
        except (TypeError, ValueError, IndexError):
            return None

    def describe(self):
        c = self.fn.fn.program.counts()
        return 'device loop over %s (inner: %d device, %d host fallback)' % (
            self.node.op.name, c['device'], c['fallback'])

    def plan(self, ctx, ins):
        loop = Loop(self, ctx, ins)
        ctx.host_step(loop.run, 'host', reads=None, writes=None)
        ctx.run_recorded()      # now: its outputs' shapes depend on what its first run did
        return loop.outputs


def _computed_on_host(prog, var):
    """Whether the inner program ``prog`` hands ``var`` back as a host value: computed on
    the host and not also uploaded (a device-output function returns the device copy)."""
    if var.owner is None:
        i = prog.input_index.get(var)
        return i is None or prog.input_kinds[i] == 'host'      # a constant, a host input
    return any(t.node is var.owner and t.kind != 'dev' and var not in t.upload_outputs
               for t in prog.tasks)


@ocl_impl.register(Scan)
@implemented_by(ScanImpl)
def _scan(op, node, dev):
    return ScanImpl(node, dev)


class Loop(LoopCopies):
    """One planned Scan node: its buffers, and the loop that fills them.

    ``run()`` enqueues the whole loop: the frame's one plan for the node, run once while
    the frame is planned (``PlanContext.run_recorded``: the outputs' shapes follow what
    that first run did) and on every replay. The number of steps is fixed by the frame (a
    host input); an ``until`` condition that stops after another number of steps than the
    first run changes the outputs' shapes: another frame of the same key runs (see the
    module docstring). The first run is the one before ``done`` is known: it makes the
    nit-sot buffers and reads an ``until`` condition every step.
    """

    def __init__(self, impl, ctx, ins):
        self.impl = impl
        self.lay = lay = impl.layout
        self.dev = ctx.dev
        # the loop enqueues on the inner function's queue (a profiled outer function has its
        # own: then the run waits for the one, and the other waits for the run)
        self.outer_queue = ctx.queue
        self.queue = getattr(impl.fn.fn, 'queue', ctx.queue)
        self.ctx = ctx
        self.fn = impl.fn
        self.cells = [c.storage for c in impl.fn.input_storage]
        self.outputs = None          # the outer outputs, as the last run left them
        n_steps = int(ins[0])
        if n_steps < 0:
            raise IndexError('Scan was asked to run for negative number of step %d' % n_steps)
        if n_steps == 0:
            raise NotImplementedError(
                "We didn't implemented yet the case where scan do 0 iteration")
        self.n_steps = n_steps
        node = impl.node
        # copied at the start of every run (not recorded as plans: the loop runs while
        # planning, before the plans this node records would)
        self.init = []
        seqs = []
        for k in range(lay.n_seqs):
            s = ins[1 + k]
            if s.shape[0] < n_steps:
                raise ValueError(('Sequence is shorter then the required number of steps : '
                                  '(n_steps, seq, seq.shape):'), n_steps, node.inputs[1 + k],
                                 s.shape)
            seqs.append(self._contiguous(s))     # (a reversed sequence: go_backwards)
        self.seqs = seqs
        self.store = [ins[lay.state_in + idx].shape[0] for idx in range(lay.n_outs)]
        self.store += [int(ins[lay.nit_in + k]) for k in range(lay.n_nit_sot)]
        # outer outputs: states (copies of their initial values), shared variables
        self.outs = [None] * (lay.n_outs + lay.n_nit_sot + lay.n_shared)
        for idx in range(lay.n_outs):
            src = ins[lay.state_in + idx]
            self.outs[idx] = ctx.alloc(src.shape, src.dtype)
            self.init.append((self.outs[idx], src))
        for j in range(lay.n_shared):
            src = ins[lay.shared_in + j]
            o = lay.n_outs + lay.n_nit_sot + j
            self.outs[o] = ctx.alloc(src.shape, src.dtype)
            self.init.append((self.outs[o], src))
        # what the inner function reads each step
        self.fixed = []          # (cell, value) set once per run
        self.stage = []     # (cell, staging DArray, source, outer output or None, tap, k)
        self.mirrors = {}        # outer output -> its host copy (impl.host_states)
        self.host_reads = []     # (cell, outer output, tap)
        self.host_seq_reads = []  # (cell, sequence index): impl.host_seqs
        for o in impl.host_states:
            self.mirrors[o] = np.empty(self.outs[o].shape, self.outs[o].dtype)
        for k, o, tap in lay.staged_inputs():
            if impl.inner_kind[k] == 'unused':
                continue
            if o in self.mirrors:
                self.host_reads.append((self.cells[k], o, tap))
                continue
            if o is None and k in impl.host_seqs:
                self.host_seq_reads.append((self.cells[k], k))
                continue
            if o is None:
                src = seqs[k]
            else:
                src = self.outs[o]
            if o is not None and (tap is None or self.store[o] == 1):
                # the same rows every step: handed over as they are
                view = src if tap is None else _row(src, 0)
                self.fixed.append((self.cells[k], view))
                continue
            staging = ctx.alloc(src.shape[1:], src.dtype)
            self.stage.append((self.cells[k], staging, src, o, tap, k))
        for j in range(lay.other_in, len(ins)):
            k = lay.inner_other + j - lay.other_in
            kind = impl.inner_kind[k]
            if kind == 'unused':
                continue
            self.fixed.append((self.cells[k], ins[j]))
        self.sinks = lay.sinks()
        self.done = None         # steps the first run did (an until condition may stop it)
        # an until condition computed on the device is kept there on replays (``masked``):
        # a stop flag and a step count, read every few steps (``CHECKS``), later steps'
        # writes masked by the flag; the run while planning reads it every step
        self.masked = impl.cond_on_device and not impl.host_states
        if self.masked:
            self.flags = ctx.alloc((2,), 'int32')
            self.masked_copies = {}
            self.host_flags = np.zeros(2, np.int32)
        self.copy_buffer = buffer_copier(self.dev.cl)
        self.tmp = {}            # outer output -> buffer for re-ordering it
        self.uploads = []        # events of host values copied in during this run
        self.strided = {}        # the places of (dst, src) -> strided copy, for _copy
        self.keep = []           # the DArrays those copies were built on
        self.wrapped = {}        # id(DArray) -> pyopencl array over it, for as_pyopencl
        self.wrappers = {}       # device values handed back per step, for _wrap
        # a step's copies in one launch each way (ops/scan_rows.py), once built
        self.use_rows = settings.current().scan_rows
        self.rows_in = None      # RowCopies of the staged rows, False where not possible
        self.rows_out = None     # (inner output values, RowCopies) of the sinks
        # the inner frame pointed at the rows in place of copies (ops/scan_bind.py)
        self.use_bind = settings.current().scan_bind and not self.use_rows
        self.bindings = {}       # id(inner frame) -> (that frame, RowBinding or None)
        self.bound = None        # the RowBinding in effect during a run

    def _contiguous(self, d):
        """``d``, or a C-contiguous copy of it made at the start of every run."""
        if d.is_c_contiguous():
            return d
        c = self.ctx.alloc(d.shape, d.dtype)
        self.init.append((c, d))
        return c

    # ---------------------------------------------------------------- running
    def run(self):
        first = self.done is None
        if self.outer_queue is not self.queue:
            self.outer_queue.finish()     # what the plans before this one wrote
        profile = self.fn.profile
        start = time.perf_counter() if profile else None
        built = build_seconds() if profile else 0
        try:
            try:
                result = self._run(True, first)
            except Replan:
                raise
            except Exception as e:
                # an error flag set in the lowered steps, or an error in a step past the stop
                # of a run reading its device stop flag every few steps: the run again as
                # passes, which read the flags and the condition every step and fail where
                # Theano's loop does
                if not isinstance(e, ChecksFailed) and not (self.masked and not first):
                    raise
                if self.bound is not None:
                    self.bound.restore()
                    self.bound = None
                result = self._run(False, first)
            if self.outer_queue is not self.queue:
                self.queue.finish()           # before the plans after this one read it
            if profile and hasattr(profile, 'nbsteps'):     # as Scan.execute counts
                profile.callcount += 1
                profile.nbsteps += self.n_steps
                # (the inner function's kernel builds are compile time)
                profile.call_time += time.perf_counter() - start - (build_seconds() - built)
            self.outputs = result
            return result
        finally:
            if self.bound is not None:       # the inner frame's roots back where planned
                self.bound.restore()
                self.bound = None
            # as Scan.execute: the inner function's cells hold nothing between runs (no
            # host value kept alive, no device array in a function that may be pickled)
            for c in self.fn.input_storage:
                c.storage[0] = None
            for c in self.fn.output_storage:
                c.storage[0] = None

    def _run(self, lower, first):
        lay = self.lay
        t_run = time.perf_counter()
        stopped, self.impl.stopped = self.impl.stopped, None
        if stopped is not None and not first:
            outs = self._take_stopped(*stopped)
            if outs is not None:
                return outs               # (what it did: the stopped run's last_run)
        self.impl.last_run = None
        queue = self.queue
        cl = self.dev.cl
        copy = self.copy_buffer
        for dst, src in self.init:
            self._copy(dst, src)
        fixed = [(cell, self.as_pyopencl(v) if isinstance(v, DArray) else v)
                 for cell, v in self.fixed]
        staged = []
        for cell, staging, src, o, tap, k in self.stage:
            staged.append((cell, self.as_pyopencl(staging), staging.root.buf,
                           staging.boff, src.root.buf, src.boff, src.strides[0],
                           staging.nbytes, o, None if o is None else self.store[o], tap, k))
        rows_in = self._rows_in()
        if rows_in:
            meta = [(o, st, tap) for _, _, _, _, _, _, _, nbytes, o, st, tap, _ in staged
                    if nbytes]
            staged_cells = [(row[0], row[1]) for row in staged]
        # the host states' initial values: one read per run (it waits for earlier plans)
        mirrors = self.mirrors
        for o, m in mirrors.items():
            download(self.dev, queue, self.outs[o], m)
        host_seqs = [(cell, download(self.dev, queue, self.seqs[k]))
                     for cell, k in self.host_seq_reads]
        store = self.store
        pos = [(-m) % s for m, s in zip(lay.mintaps, store)]
        pos0 = pos
        # one pass of the inner function per step, its device outputs left in its frame's
        # buffers (copied into the outer ones right after): nothing is handed over, so the
        # frame's buffers, kernels and batched plan stay bound from step to step
        fn = self.fn.fn.pass_values
        n_steps = self.n_steps
        # (a run again after an error flag of the lowered steps reads the condition every
        # step: it fails where Theano's loop fails, not at a step past the stop)
        masked = self.masked and not first and lower
        if masked:
            self._zero(self.flags)
            check = CHECKS[0]
        def copy_rows(rows, i, pos):
            for cell, arr, dbuf, doff, sbuf, soff, stride, nbytes, o, st, tap, _ in rows:
                if nbytes:
                    row = i if o is None else (pos[o] + tap) % st
                    copy(queue, dbuf, sbuf, nbytes, soff + row * stride, doff)
                cell[0] = arr
        # from step 1 on, the inner frame may follow the rows itself (ops/scan_bind.py):
        # then only the rows it does not follow are copied
        copied = staged
        binding = None
        inner = self.fn.fn
        i = 0
        while i < n_steps:
            if binding is not None:
                binding.place(i, pos)
            if rows_in:
                rows_in.run([i if o is None else (pos[o] + tap) % st for o, st, tap in meta])
                for cell, arr in staged_cells:
                    cell[0] = arr
            else:
                copy_rows(copied, i, pos)
            # (set every step: the inner function may swap a cell's array for its host copy)
            for cell, value in fixed:
                cell[0] = value
            for cell, o, tap in self.host_reads:
                m = mirrors[o]
                if tap is None:
                    cell[0] = m
                else:
                    r = (pos[o] + tap) % store[o]
                    cell[0] = m[r:r + 1].reshape(m.shape[1:])
            for cell, h in host_seqs:
                cell[0] = h[i:i + 1].reshape(h.shape[1:])
            results = fn()
            if binding is not None and inner.last_frame is not binding.frame:
                # another frame of the inner function ran (a re-plan, an IfElse branch): it
                # read staging arrays this step did not fill; the step again, copied
                binding.restore()
                binding = self.bound = None
                copied = staged
                copy_rows(staged, i, pos)
                results = fn()
            self._store(results, pos, i, masked, () if binding is None else binding.sinks)
            pos = [(p + 1) % s for p, s in zip(pos, store)]
            i += 1
            if i == 1 and i < n_steps and self.use_bind and not rows_in:
                binding = self.bound = self._binding(results)
                if binding is not None:
                    bound = binding.bound_inputs
                    # (a followed row: no bytes to copy, its staging array still in its cell)
                    copied = [r[:7] + (0,) + r[8:] if r[-1] in bound else r for r in staged]
            if masked:
                self._count(results[-1])
                if i == check or i == n_steps:
                    check = i + min(i, CHECKS[1])
                    download(self.dev, queue, self.flags, self.host_flags)
                    if self.host_flags[0]:
                        i = int(self.host_flags[1])
                        pos = [(p + i) % s for p, s in zip(pos0, store)]
                        break
            elif lay.as_while and self._stop(results[-1]):
                break
            if i == 1 and i < n_steps and lower:
                # the steps after the first as one loop of the runtime (ops/scan_lower.py)
                loop, launches = lowered(self, results, copied, meta if rows_in else (),
                                         binding, pos0, host_seqs, check if masked else None)
                if loop is not None:
                    i = drive(loop, 1, n_steps, copy)
                    frame = inner.last_frame
                    frame.replays += i - 1
                    if frame.checks:
                        try:
                            inner.executor.run_checks(frame)
                        except Exception:
                            raise ChecksFailed()
                    until = loop.sinks[-1] if lay.as_while else None
                    if until is not None and until.done is not None:
                        i = until.done            # (the steps its condition let run)
                    pos = [(p + i) % s for p, s in zip(pos0, store)]
                    self.impl.last_run = dict(launches_per_step=launches, lowered_steps=i - 1)
                    if i == n_steps or until is not None and until.done is not None:
                        break
                    # (a Replan at step i: the steps left run as passes)
                    if until is not None:
                        check = max(until.next, i + 1)
        for o, m in mirrors.items():
            self._put(self.outs[o], m)
        run = self.impl.last_run = self.impl.last_run or dict(launches_per_step=None,
                                                              lowered_steps=0)
        run.update(steps=i, loop_s=time.perf_counter() - t_run)
        if self.uploads:
            waits.wait(self.dev, self.uploads)
            self.uploads = []
        return self._finish(i, pos)

    def until(self, cond, check):
        """The :class:`~theano_ocl.runtime.loop.Until` of the lowered steps: ``cond`` (the
        inner frame's until condition) counted on the device, the flags read after
        ``check`` steps, then 2x, ... (None: the run planning the node, whose first
        step's condition was downloaded, not counted: after every step); a condition
        computed on the host read after every step."""
        if not isinstance(cond, DArray):
            fetch = self.fn.fn.last_frame.outputs[-1]
            return Until(None, lambda i: i if np.asarray(fetch()) != 0 else None,
                         self.n_steps, 2, 1)
        flags, host = self.flags, self.host_flags
        base, most = 0, CHECKS[1]
        if check is None:
            self._zero(flags)             # (the first step not counted)
            base, check, most = 1, 2, 1
        dev, queue = self.dev, self.queue

        def read(_):
            download(dev, queue, flags, host)
            return base + int(host[1]) if host[0] else None
        return Until(self._counter(cond), read, self.n_steps, check, most)

    def _binding(self, results):
        """The RowBinding of the inner frame that ran the first step (kept from run to run
        for the last few frames), its places for this run taken; or None."""
        frame = self.fn.fn.last_frame
        kept = self.bindings.get(id(frame))
        if kept is None or kept[0] is not frame:
            if len(self.bindings) >= 4:           # (IfElse branches' frames: a few)
                self.bindings.clear()
            kept = self.bindings[id(frame)] = (frame, RowBinding.build(self, frame, results))
        binding = kept[1]
        if binding is not None:
            binding.start(self.store)
        return binding

    def _take_stopped(self, flip, other, steps):
        """The outputs of ``other``'s run, stopped after ``steps`` steps, when this frame was
        planned for that many and the run belongs to this very call: the VM is handling the
        ``flip`` it raised (or the IfElse flip it raised under), and the frames it tries
        compute the same inputs again. Their buffers are copied into this frame's, then put
        in order as after a run of its own. None where it does not apply."""
        if sys.exc_info()[1] is not flip or other is self or steps != self.done or \
                other.n_steps != self.n_steps or other.store != self.store or \
                any(a is None or b is None or a.shape != b.shape or a.dtype != b.dtype
                    for a, b in zip(other.outs, self.outs)):
            return None
        for dst, src in zip(self.outs, other.outs):
            self._copy(dst, src)
        pos = [(-m + steps) % s for m, s in zip(self.lay.mintaps, self.store)]
        return self._finish(steps, pos)

    def _slot(self, j, tap, pos):
        """The row of outer output ``j`` a sink writes at positions ``pos`` (as Theano's
        loop indexes it: a mit-mot tap past the buffer raises)."""
        if tap is None:
            return pos[j]
        r = tap + pos[j]
        if r < 0:
            r += self.store[j]
        if not 0 <= r < self.store[j]:
            raise IndexError('index %d is out of bounds for axis 0 with size %d'
                             % (tap + pos[j], self.store[j]))
        return r

    def _store(self, results, pos, i, masked=False, written=()):
        """Copy the step's inner outputs into the outer buffers at the step's slots (once
        the stop flag is set, not: ``masked``); those in ``written`` the inner frame wrote
        there itself (``RowBinding.sinks``)."""
        lay = self.lay
        outs = self.outs
        batched = self.rows_out
        if batched and i and not masked and all(
                results[k] is v for (k, _, _), v in zip(self.sinks, batched[0])):
            rows = batched[1]       # (its buffers checked at step 0 of the run)
            n_kept = lay.n_outs + lay.n_nit_sot
            rows.run(None, [0 if j >= n_kept else self._slot(j, tap, pos)
                            for (k, j, tap), v in zip(self.sinks, batched[0]) if v.nbytes])
            return
        for k, j, tap in self.sinks:
            if k in written:
                continue
            value = results[k]
            buf = outs[j]
            if j >= lay.n_outs + lay.n_nit_sot:          # a shared variable: its value
                dst = buf
            else:
                if buf is None:                           # a nit-sot's first step
                    buf = outs[j] = self._nit_sot(j, value)
                r = self._slot(j, tap, pos)
                dst = _row(buf, r)
            shape = value.shape if isinstance(value, DArray) else np.shape(value)
            if shape != dst.shape:
                if j >= lay.n_outs + lay.n_nit_sot or i == 0:
                    raise ValueError('could not broadcast input array from shape %s into '
                                     'shape %s' % (shape, dst.shape))
                raise ValueError('An output of the scan has changed shape. This may be '
                                 'caused by a pushout optimization. Try adding '
                                 "'optimizer_excluding=scanOp_pushout_output' to your "
                                 'Theano flags.')
            m = self.mirrors.get(j)
            if masked:
                self._masked_put(k, r if j < lay.n_outs + lay.n_nit_sot else None, dst,
                                 value)
            elif m is None:
                self._put(dst, value)
            elif j >= lay.n_outs + lay.n_nit_sot:
                m[...] = value
            else:
                m[r] = value
        if i == 0 and not masked:
            self.rows_out = self._rows_out(results)

    def _nit_sot(self, j, value):
        """The buffer of nit-sot output ``j``, shaped by its first step's value (planning:
        the first run of the loop makes it; its shape is then fixed)."""
        if self.done is not None:
            raise Replan(self.impl.node)   # pragma: no cover - made by the first run
        shape = (self.store[j],) + tuple(value.shape)
        d = self.ctx.alloc(shape, self.impl.node.outputs[j].type.dtype)
        return d

    def _finish(self, i, pos):
        """Theano's step 6: put circular buffers in order, zero the steps not computed,
        cut what an ``until`` condition left out. Returns the outer outputs."""
        lay = self.lay
        if self.done is None:
            self.done = i
        elif self.done != i:
            # an until condition stopped elsewhere: the outputs' shapes differ from the
            # frame's, a frame of the same key planned for that many steps runs instead
            # (the VM keeps a few, as for IfElse branches) and takes this run's results
            # (``_take_stopped``) rather than running the loop again
            flip = BranchFlip(self.impl.node)
            handled = sys.exc_info()[1]
            self.impl.stopped = (handled if isinstance(handled, BranchFlip) else flip, self, i)
            raise flip
        result = list(self.outs)
        for idx in range(lay.n_mit_mot, lay.n_outs + lay.n_nit_sot):
            d = self.outs[idx]
            st = self.store[idx]
            m = lay.mintaps[idx]
            if st < i - m and pos[idx] < st:
                p = pos[idx]
                if p:
                    tmp = self.tmp.get(idx)
                    if tmp is None:
                        tmp = self.tmp[idx] = self.ctx.alloc(d.shape, d.dtype)
                    self._copy(tmp, d)
                    n = st - p
                    self._copy(_rows(d, 0, n), _rows(tmp, p, st))
                    self._copy(_rows(d, n, st), _rows(tmp, 0, p))
            elif st > i - m:
                self._zero(_rows(d, i - m, st))
                if i < self.n_steps:
                    result[idx] = _rows(d, 0, st - (self.n_steps - i))
        return result


#: steps after which a masked run first reads its stop flag, and the most steps between reads
#: (the gaps double: 4, 8, 16, ... up to 64)
CHECKS = (4, 64)


def _rows(d, a, b):
    """Rows ``a:b`` of ``d`` (a view)."""
    return d.view((b - a,) + d.shape[1:], d.strides, d.offset + a * d.strides[0])

