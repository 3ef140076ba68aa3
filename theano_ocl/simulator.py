"""The two-step API: take any compiled Theano function and run it on an OpenCL device.

    f = theano.function([x], y, updates=upd)          # any mode; pickles anywhere
    sim = theano_ocl.SimulatorOCL(f)                  # re-link f's optimized graph on a device
    sim(xv)                                           # one step, f's calling protocol
    probes = sim.run_steps(1000, inputs={'x': xs}, probes=['y'], probe_every=10)
    sim.add_method('g', g); sim.g(...)                # more functions, same device state

Re-linking takes the route of Theano's ``Function.copy``: a copy of ``f.maker.fgraph``
(already optimized; nothing is re-optimized) goes through ``FunctionMaker`` with an
:class:`~theano_ocl.mode.OCLMode`, and the new function's input containers are ``f``'s,
so shared variables are the same cells and their device copies (``shared.Resident``) are
shared with ``f`` and with every method. ``f`` itself is not touched.

``run_steps`` replays the device frame of one call ``n`` times with no host round trip:
per-step inputs are uploaded once (leading axis ``n``) and each step copies its slice
into the frame's input buffer (or re-points the kernels at it); probes are copied into
device buffers every ``probe_every`` steps and downloaded once at the end. Independent
same-kernel launches (and the updates' commit copies) are merged by
:mod:`theano_ocl.planner`. See docs/simulator.md for when each view of the state is
current.
"""
import copy
import time
import warnings

import numpy as np
import theano
from theano import gof
from theano.compile import function_module as fm
from theano.compile.sharedvalue import SharedVariable

from . import planner
from .darray import DArray, Root
from .device import get_device, NoOpenCLPlatform
from .runtime import commit, faults
from .planner import CommitPlan
from .runtime.context import Replan, bind_site


class SimulatorError(ValueError):
    """A request the simulator cannot honour (input, shape, method or probe mismatch)."""


def _relink(f, device):
    """A new Function computing ``f``'s optimized graph with the OCL linker, sharing
    ``f``'s input containers (shared variables) -- ``Function.copy``'s route."""
    from .mode import OCLMode
    maker = f.maker
    if not isinstance(maker, fm.FunctionMaker):
        raise TypeError('SimulatorOCL needs a compiled theano.function, got %r' % (f,))
    mode = OCLMode(device=device)
    ins = [copy.copy(i) for i in maker.inputs]
    memo = gof.graph.clone_get_equiv(maker.fgraph.inputs, maker.fgraph.outputs)
    fg = gof.fg.FunctionGraph([memo[i] for i in maker.fgraph.inputs],
                              [memo[o] for o in maker.fgraph.outputs], clone=False)
    # the optimized graph may hold inplace ops: the DestroyHandler orders them after
    # every other reader of the value they overwrite (as std_fgraph does)
    fg.attach_feature(gof.destroyhandler.DestroyHandler())
    outs = [fm.SymbolicOutput(o) for o in fg.outputs[:len(maker.outputs)]]
    for o_ori, o_cpy in zip(maker.outputs, outs):
        o_cpy.borrow = o_ori.borrow
    update_i = len(outs)
    for i, var in zip(ins, fg.inputs):
        i.variable = var
        if i.update is not None:
            i.update = fg.outputs[update_i]
            update_i += 1
    if maker.return_none:
        outs = None
    elif maker.unpack_single:
        outs = outs[0]
    g = maker.__class__(inputs=ins, outputs=outs, fgraph=fg, mode=mode,
                        on_unused_input='ignore', function_builder=maker.function_builder,
                        accept_inplace=True, output_keys=maker.output_keys,
                        name=maker.name).create([i.value for i in ins])
    for in_ori, in_cpy, ori, cpy in zip(maker.inputs, g.maker.inputs, f.input_storage,
                                        g.input_storage):
        if not in_ori.mutable:
            cpy.data = ori.data
            in_cpy.value = in_ori.value
        container = g.finder.pop(in_cpy.variable, None)
        if container is not None:
            g.finder[in_ori.variable] = container
    g.trust_input = f.trust_input
    return g


def _shared_inputs(f):
    """(SharedVariable, Container) of every shared variable ``f`` reads or updates."""
    return [(i.variable, c) for i, c in zip(f.maker.inputs, f.input_storage)
            if isinstance(i.variable, SharedVariable)]


def _closure(fn):
    """A step closure's free variables by name (empty when not a closure)."""
    code = getattr(fn, '__code__', None)
    cells = getattr(fn, '__closure__', None) or ()
    if code is None:
        return {}
    return {name: cell.cell_contents for name, cell in zip(code.co_freevars, cells)}


def _refs_root(fn, root):
    for v in _closure(fn).values():
        if isinstance(v, DArray) and v.root is root:
            return True
    return False


#: buffers up to this size are gathered into a frame's slab
SLAB_ROOT_MAX = 1 << 20


def gather_into_slab(vm, frame):
    """Move the frame's small buffers (intermediates, constants, resident shared variables) into
    regions of one slab buffer, once per frame.

    The planner can then bind each operand of a batched launch once (the slab) with
    offsets in its table, instead of one buffer argument per merged operation: a launch
    with hundreds of buffer arguments costs ~0.5 us per argument on NVIDIA's driver, and
    PoCL takes at most 1024 bytes of arguments. A region is a Root whose ``buf`` is the
    slab and ``origin`` its place there, not an OpenCL sub-buffer (NVIDIA charges ~50 ns
    per live sub-buffer of a buffer on every launch using it). Contents are copied; the
    kernels of this frame are re-bound here, other frames re-bind on their next call (the
    same path as a re-placed shared variable). Shared variables already in another
    frame's slab stay there.
    """
    if frame.slab is not None:
        return frame.slab
    dev, queue = vm.dev, vm.queue
    cl = dev.cl
    prog = vm.program
    align = max(int(dev.device.mem_base_addr_align) // 8, 128)
    consts = {id(d.root) for d in vm.const_dvals.values()}
    roots = [(r, None) for r in frame.arena + frame.owned
             + [d.root for d in vm.const_dvals.values()]
             if 0 < r.nbytes <= SLAB_ROOT_MAX and not r.slab]
    for i, root in frame.input_roots.items():
        if prog.input_kinds[i] == 'resident' and 0 < root.nbytes <= SLAB_ROOT_MAX \
                and root.buf is not None and not root.slab:
            roots.append((root, i))
    places, total = [], 0
    for root, i in roots:
        places.append(total)
        total += -(-root.nbytes // align) * align
    if len(roots) < 2 or total > dev.max_alloc:
        frame.slab = False
        return False
    try:
        slab = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, total)
    except cl.Error:
        frame.slab = False
        return False
    olds = []
    for (root, i), origin in zip(roots, places):
        old = root.buf
        cl.enqueue_copy(queue, slab, old, byte_count=root.nbytes, src_offset=root.origin,
                        dst_offset=origin)
        olds.append(old)
        root.move(slab, origin, slab=True)
        for site in frame.root_sites.get(id(root), ()):
            bind_site(site, root)
        if i is not None:
            frame.input_bufs[i] = slab
            for site in frame.rebind_sites.get(i, ()):
                bind_site(site, root)
    queue.finish()
    # a constant's old buffer still holds its value and the other frames' kernels may be
    # bound to it: kept; the others go back to the pool once unreferenced
    vm.retired.extend(old for (root, _), old in zip(roots, olds) if id(root) in consts)
    del olds
    frame.slab = slab          # the roots hold it; frames never release it
    frame.batched = None       # the VM's own batched plan bound the old buffers: plan again
    return slab


class Method(object):
    """One function re-linked on the simulator's device: callable like the original,
    and ``run_steps`` to run it many times with no host round trip."""

    def __init__(self, sim, name, f):
        self.sim = sim
        self.name = name
        self.original = f
        self.function = _relink(f, sim.device_spec)
        self.vm = self.function.fn
        self._stages = {}            # input index -> pyopencl array the frame reads
        self._plans = {}             # id(frame) -> (frame, plan of steps, plan of commits)
        self.stats = {}

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    # ----------------------------------------------------------------- names
    def _input_index(self, key):
        inputs = self.function.maker.inputs
        if isinstance(key, (int, np.integer)):
            if not 0 <= key < len(inputs) or isinstance(inputs[key].variable, SharedVariable):
                raise SimulatorError('%s: no input number %d (inputs: %s)' % (
                    self._what(), key, self._input_names()))
            return int(key)
        for i, inp in enumerate(inputs):
            if isinstance(inp.variable, SharedVariable):
                continue
            if key is inp.variable or (isinstance(key, str) and key == inp.name):
                return i
        orig = self.original.maker.inputs
        for i, inp in enumerate(orig):
            if key is inp.variable and not isinstance(inp.variable, SharedVariable):
                return i
        raise SimulatorError('%s: no input named %r (inputs: %s)' % (
            self._what(), key, self._input_names()))

    def _input_names(self):
        return ', '.join(repr(i.name) for i in self.function.maker.inputs
                         if not isinstance(i.variable, SharedVariable)) or 'none'

    def _what(self):
        return 'run_steps' if self.name is None else 'run_steps of method %r' % self.name

    def _output_index(self, key):
        maker = self.function.maker
        n = len(maker.outputs)
        if isinstance(key, (int, np.integer)):
            if not 0 <= key < n:
                raise SimulatorError('%s: probe %d: the function has %d outputs' % (
                    self._what(), key, n))
            return int(key)
        if maker.output_keys is not None and key in maker.output_keys:
            return list(maker.output_keys).index(key)
        for j, o in enumerate(self.original.maker.outputs):
            if key is o.variable or (isinstance(key, str) and o.variable.name == key):
                return j
        names = [o.variable.name for o in self.original.maker.outputs]
        raise SimulatorError('%s: no output %r to probe (outputs: %s)' % (
            self._what(), key, names))

    # ----------------------------------------------------------------- run_steps
    def run_steps(self, n, inputs=None, probes=None, probe_every=1, batch='auto', feed='copy'):
        """Run the function ``n`` times; updates apply every step; see SimulatorOCL.run_steps."""
        import pyopencl.array as cla
        n = int(n)
        k = int(probe_every)
        if n < 0 or k < 1:
            raise SimulatorError('run_steps: need n >= 0 and probe_every >= 1, got n=%r, '
                                 'probe_every=%r' % (n, probe_every))
        if feed not in ('copy', 'rebind', 'auto'):
            raise SimulatorError("run_steps: feed must be 'copy', 'rebind' or 'auto', got %r" % (feed,))
        maker = self.function.maker
        single = probes is not None and not isinstance(probes, (list, tuple))
        if probes is None:
            probe_idx = list(range(len(maker.outputs)))
        else:
            probe_idx = [self._output_index(p) for p in ([probes] if single else probes)]
        per_step = self._per_step_inputs(n, inputs)
        vm = self.vm
        prog = vm.program
        dev, queue = vm.dev, vm.queue
        cells = prog.input_cells
        # the per-step inputs' cells get each step's value: their own values come back after
        saved = [(cells[i], cells[i][0]) for i in per_step]
        n_slots = n // k
        host_probes = {}
        try:
            if n == 0:
                return self._probe_result([np.empty((0,))] * len(probe_idx), probe_idx, single, 0)
            # ------------------------------------------------------ inputs, step 0
            feeds, host_feeds, rebinds, bigs = [], [], [], []
            for i, arr in per_step.items():
                kind = prog.input_kinds[i]
                cell = cells[i]
                if kind == 'dev':
                    big = cla.to_device(queue, np.ascontiguousarray(arr))
                    bigs.append(big)
                    stage = self._stage(i, arr.shape[1:], arr.dtype)
                    nbytes = stage.nbytes
                    if nbytes:
                        dev.cl.enqueue_copy(queue, stage.base_data, big.base_data,
                                            byte_count=nbytes, src_offset=0)
                    cell[0] = stage
                    feeds.append((i, stage, big, nbytes))
                else:
                    host_feeds.append((cell, arr))
                    cell[0] = arr[0]
            t_start = time.perf_counter()
            outs0 = vm()
            t_first = time.perf_counter()
            frame = vm.last_frame
            key1 = vm._key()
            if key1 != frame.key:
                raise SimulatorError(self._shape_change(frame.key, key1))
            # ------------------------------------------------------ probes
            probe_bufs = []
            for j in probe_idx:
                var = prog.fgraph.outputs[j]
                d = frame.dvals.get(var)
                if d is None:
                    host_probes[j] = []
                    probe_bufs.append(None)
                    continue
                buf = dev.alloc(max(d.nbytes * n_slots, 1))
                probe_bufs.append((buf, d))
                if k == 1 and d.nbytes:
                    host0 = np.ascontiguousarray(outs0[j], dtype=d.dtype)
                    dev.cl.enqueue_copy(queue, buf, host0, dst_offset=0)
            if k == 1:
                for j in host_probes:
                    host_probes[j].append(np.array(outs0[j], copy=True))
            # ------------------------------------------------------ feeding, plans
            feed_mode = self._feed_mode(feed, frame, feeds)
            if feed_mode == 'rebind':
                for i, stage, big, nbytes in feeds:
                    for kernel, argi, off, _ in frame.rebind_sites.get(i, ()):
                        kernel.set_arg(argi, big.base_data)
                        rebinds.append((kernel, argi, off, stage.dtype.itemsize, nbytes,
                                        stage.base_data))
                feeds = []
            if rebinds:
                batch = False     # batched kernels bind the input buffer itself
            t_plan = time.perf_counter()
            steps_fns, commit_actions, info = self._plans_for(frame, batch)
            t_plan = time.perf_counter() - t_plan
            hsteps = [s for s in frame.steps if s.kind in ('host', 'upload', 'download', 'guard')]
            host_steps = len(hsteps)
            if host_steps:
                tasks = prog.tasks
                ops = sorted({type(tasks[s.task].node.op).__name__ for s in hsteps
                              if 0 <= s.task < len(tasks)})
                warnings.warn('run_steps: the frame has %d host steps (of %s; host fallbacks: '
                              '%s); every step returns to the host for them' % (
                                  host_steps, ', '.join(ops) or '?', self._fallbacks()),
                              stacklevel=3)
            self.stats = dict(info, host_steps=host_steps, feed=feed_mode, steps=n,
                              first_step_s=t_first - t_start, plan_s=t_plan, steps_done=1)
            t_loop = time.perf_counter()
            # a device check (bad index, integer division by zero) is read once after the
            # loop, not every step; should one fail, the state before step 1 comes back
            # and the steps run again reading the flags after each, so the call ends as n
            # separate calls would: at the failing step, with the steps before it committed
            snapshot = self._snapshot() if frame.checks else None

            def loop(first, check_each):
                enqueue_copy = dev.cl.enqueue_copy
                slot = first if k == 1 else first // k
                hooked = faults.hook is not None
                step = first
                try:
                    for step in range(first, n):
                        if hooked:
                            faults.at('run_steps step %d' % step)
                        for i, stage, big, nbytes in feeds:
                            enqueue_copy(queue, stage.base_data, big.base_data,
                                         byte_count=nbytes, src_offset=step * nbytes)
                        for kernel, argi, off, itemsize, nbytes, _ in rebinds:
                            kernel.set_arg(argi + 1, np.int64((step * nbytes + off) // itemsize))
                        for cell, arr in host_feeds:
                            cell[0] = arr[step]
                        for fn in steps_fns:
                            fn()
                        if (step + 1) % k == 0:
                            self._probe(frame, probe_idx, probe_bufs, host_probes, slot)
                            slot += 1
                        if check_each and frame.checks:
                            self._checked(frame, step)
                        if hooked:
                            faults.at('run_steps step %d commit' % step)
                        # one commit per step, all of its updates or none (runtime/commit.py)
                        commit.apply(commit_actions())
                        self.stats['steps_done'] = step + 1
                except Replan as e:
                    raise SimulatorError(
                        '%s: step %d: a host value or shape the device plan relied on changed '
                        '(%s); the state holds the result of %d steps' % (
                            self._what(), step, e, step)) from None

            try:
                loop(1, False)
                queue.finish()
                self.stats['loop_s'] = time.perf_counter() - t_loop
                if frame.checks:
                    try:
                        vm.run_checks(frame)
                    except Exception:
                        self._restore(snapshot)
                        self.stats['steps_done'] = 1
                        loop(1, True)
                        raise AssertionError('run_steps: a device check failed once and not '
                                             'when the steps ran again')  # pragma: no cover
            except BaseException as e:
                if not isinstance(e, Exception):
                    vm._drop(frame.key)     # interrupted mid-way: plan afresh next time
                raise
            finally:
                # the frame's kernels point at the input buffer again for later calls
                for kernel, argi, off, itemsize, nbytes, stage_buf in rebinds:
                    kernel.set_arg(argi, stage_buf)
                    kernel.set_arg(argi + 1, np.int64(off // itemsize))
            results = []
            for j, pb in zip(probe_idx, probe_bufs):
                if pb is None:
                    results.append(np.array(host_probes[j]).reshape(
                        (n_slots,) + np.shape(host_probes[j][0]) if host_probes[j] else (0,)))
                    continue
                buf, d = pb
                host = np.empty((n_slots,) + d.shape, d.dtype)
                if host.size:
                    dev.cl.enqueue_copy(queue, host, buf, is_blocking=True)
                results.append(host)
            return self._probe_result(results, probe_idx, single, n_slots)
        finally:
            for c, v in saved:
                c[0] = v

    def _checked(self, frame, step):
        try:
            self.vm.run_checks(frame)
        except Exception as e:
            e.args = ('%s [SimulatorOCL.run_steps: at step %d; the shared variables hold the '
                      'state after steps 0..%d]' % (e.args[0] if e.args else e, step, step - 1),
                      ) + tuple(e.args[1:])
            raise

    def _snapshot(self):
        """Device copies of the updated shared variables' values (and the host values of
        the others), to go back to the state before a run of steps."""
        vm = self.vm
        prog = vm.program
        dev, queue = vm.dev, vm.queue
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

    def _restore(self, saved):
        vm = self.vm
        prog = vm.program
        dev, queue = vm.dev, vm.queue
        for i, dev_value, host_value in saved:
            if dev_value is None:
                prog.input_cells[i][0] = host_value
                continue
            res, d, copy = dev_value
            if copy is not None:
                dev.cl.enqueue_copy(queue, d.root.buf, copy, byte_count=d.nbytes,
                                    dst_offset=d.boff)
            res.mark_device_newer()

    def _probe(self, frame, probe_idx, probe_bufs, host_probes, slot):
        cl = self.vm.dev.cl
        queue = self.vm.queue
        for j, pb in zip(probe_idx, probe_bufs):
            if pb is None:
                host_probes[j].append(np.array(frame.outputs[j](), copy=True))
                continue
            buf, d = pb
            if not d.nbytes:
                continue
            if d.is_c_contiguous():
                cl.enqueue_copy(queue, buf, d.root.buf, byte_count=d.nbytes,
                                src_offset=d.boff, dst_offset=slot * d.nbytes)
            else:
                from .ops.elemwise import strided_copy_now
                dst = DArray(Root(buf, d.nbytes), d.shape, d.dtype, offset=slot * d.nbytes)
                strided_copy_now(self.vm.dev, queue, dst, d)

    def _probe_result(self, results, probe_idx, single, n_slots):
        if single:
            return results[0]
        return results

    def _stage(self, i, shape, dtype):
        import pyopencl.array as cla
        stage = self._stages.get(i)
        if stage is None or stage.shape != tuple(shape) or stage.dtype != dtype:
            vm = self.vm
            nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
            stage = cla.Array(vm.queue, tuple(shape), dtype, data=vm.dev.alloc(nbytes))
            self._stages[i] = stage
        return stage

    def _feed_mode(self, feed, frame, feeds):
        if feed == 'copy' or not feeds:
            return 'copy'
        # re-pointing kernels is exact only when launches are the input's only readers
        ok = True
        for i, stage, big, nbytes in feeds:
            root = frame.input_roots.get(i)
            if root is None or i in self.vm.program.host_read_inputs:
                ok = False
            for s in frame.steps:
                if s.kind != 'launch' and s.touches(root):
                    ok = False
            for fn in list(frame.outputs) + list(frame.commits):
                if _refs_root(fn, root):
                    ok = False
        if feed == 'rebind' and not ok:
            raise SimulatorError("%s: feed='rebind' is not possible here: an input is read by "
                                 "a copy, a host step or an output; use feed='copy'" % self._what())
        if feed == 'auto':
            sites = sum(len(frame.rebind_sites.get(i, ())) for i, _, _, _ in feeds)
            return 'rebind' if ok and sites <= len(feeds) else 'copy'
        return 'rebind'

    def _plans_for(self, frame, batch):
        """(step callables, per-step commit actions, launch counts) for replaying ``frame``;
        ``commit_actions()`` prepares one step's commit (runtime/commit.py)."""
        vm = self.vm
        commits = frame.commits
        unbatched = sum(1 for s in frame.steps if s.kind in ('launch', 'copy')) + \
            sum(1 for c in commits if getattr(c, 'resident', None) is not None)

        def plain_commit():
            return [prepare() for prepare in commits]
        info = dict(launches_per_step_unbatched=unbatched)
        if batch is False:
            info.update(launches_per_step=unbatched, batched=False)
            return [s.fn for s in frame.steps], plain_commit, info
        hit = self._plans.get(id(frame))
        if hit is None or hit[0] is not frame or not hit[1].valid() or not hit[2].valid():
            gather_into_slab(vm, frame)
            p_steps = planner.plan_steps(frame.steps, vm.dev, vm.queue,
                                         cpu_group=vm.settings.cpu_group)
            p_commits = CommitPlan(vm, frame)
            self._plans = {id(frame): (frame, p_steps, p_commits)}
            if frame.batched is None and p_steps.pays():
                # ordinary calls of the frame (step 0 of run_steps, sim(...)) replay it too
                frame.batched = p_steps
            hit = self._plans[id(frame)]
        _, p_steps, p_commits = hit
        after = p_steps.n_launches_after + p_commits.plan.n_launches_after
        if batch == 'auto' and after >= unbatched:
            info.update(launches_per_step=unbatched, batched=False)
            return [s.fn for s in frame.steps], plain_commit, info
        info.update(launches_per_step=after, batched=True)
        return p_steps.fns, p_commits.actions, info

    def _per_step_inputs(self, n, inputs):
        """{input index: host array with leading axis n}, checked against the input types."""
        maker = self.function.maker
        given = {}
        if inputs is None:
            inputs = {}
        if isinstance(inputs, (list, tuple)):
            explicit = [i for i, inp in enumerate(maker.inputs)
                        if not isinstance(inp.variable, SharedVariable)]
            if len(inputs) > len(explicit):
                raise SimulatorError('%s: %d per-step inputs given, the function takes %d (%s)' % (
                    self._what(), len(inputs), len(explicit), self._input_names()))
            inputs = dict(zip(explicit, inputs))
        for key, value in inputs.items():
            i = self._input_index(key)
            given[i] = value
        out = {}
        prog = self.vm.program
        for i, inp in enumerate(maker.inputs):
            if isinstance(inp.variable, SharedVariable):
                continue
            name = inp.name or 'input %d' % i
            if i not in given:
                cell = prog.input_cells[i]
                if inp.value is None or cell[0] is None:
                    raise SimulatorError('%s: input %r needs a value per step (an array with '
                                         'leading axis n=%d)' % (self._what(), name, n))
                given[i] = np.repeat(np.asarray(cell[0])[None], n, axis=0)
            t = inp.variable.type
            if not hasattr(t, 'ndim') or not hasattr(t, 'dtype'):
                raise SimulatorError('%s: input %r is a %s; run_steps feeds tensors only' % (
                    self._what(), name, type(t).__name__))
            arr = np.asarray(given[i])
            if arr.ndim != t.ndim + 1 or arr.shape[0] != n:
                raise SimulatorError(
                    '%s: input %r: expected an array of shape (n=%d, ...) with %d dimensions '
                    '(%d per step), got shape %s' % (self._what(), name, n, t.ndim + 1, t.ndim,
                                                      arr.shape))
            for d, b in enumerate(t.broadcastable):
                if b and arr.shape[d + 1] != 1:
                    raise SimulatorError('%s: input %r: dimension %d of each step is broadcastable '
                                         '(must be 1), got per-step shape %s' % (
                                             self._what(), name, d, arr.shape[1:]))
            if arr.dtype != np.dtype(t.dtype):
                if n:
                    try:
                        t.filter(arr[0], strict=False, allow_downcast=inp.allow_downcast)
                    except TypeError as e:
                        raise SimulatorError('%s: input %r: per-step values of dtype %s do not fit '
                                             'the input type %s (%s)' % (
                                                 self._what(), name, arr.dtype, t, e)) from None
                arr = arr.astype(t.dtype)
            if prog.input_kinds[i] != 'dev' and any(k == i for k, kind in prog.input_plan
                                                    if kind == 'meta'):
                if n and not all(np.array_equal(arr[0], a) for a in arr[1:]):
                    raise SimulatorError('%s: input %r decides shapes in the graph; its per-step '
                                         'values must not change between steps' % (self._what(), name))
            out[i] = arr
        return out

    def _shape_change(self, before, after):
        prog = self.vm.program
        parts = []
        for (i, kind), b, a in zip(prog.input_plan, before[1:], after[1:]):
            if b != a:
                parts.append('%s %r: %s before the step, %s after' % (
                    'shared variable' if kind == 'resident' else 'input',
                    prog.fgraph.inputs[i].name or i, _fmt(b), _fmt(a)))
        return ('%s: shapes would change between steps (%s); run_steps needs every step to '
                'have the same shapes (a new device plan per step): call the simulator once per '
                'step instead' % (self._what(), '; '.join(parts) or 'key changed'))

    def _fallbacks(self):
        from .report import fallback_nodes
        names = sorted({type(n.op).__name__ for n in fallback_nodes(self.function)})
        return ', '.join(names) or 'none'


def _fmt(part):
    if isinstance(part, tuple) and len(part) == 4 and part[0] == 'd':
        return 'shape %s' % (part[1],)
    if isinstance(part, tuple) and len(part) == 3 and isinstance(part[2], bytes):
        return 'value %s' % (np.frombuffer(part[2], dtype=part[1]).reshape(part[0]),)
    return 'shape %s' % (part,)


class SimulatorOCL(object):
    """Run a compiled Theano function (any mode) on an OpenCL device.

    ``SimulatorOCL(f, device=None)``: re-links ``f``'s optimized graph with the OCL linker
    (nothing is re-optimized); ``f`` keeps working, and both see the same shared
    variables. ``sim(*args, **kwargs)`` calls it like ``f``; ``sim.run_steps`` runs it many
    times on the device; ``sim.add_method(name, g)`` adds functions sharing the state.
    """

    def __init__(self, f, device=None, batch='auto'):
        self.device_spec = device
        self.device = get_device(device)     # NoOpenCLPlatform when there is no OpenCL
        self.batch = batch
        self._methods = {}
        self._main = Method(self, None, f)
        self._shared = {}                    # name -> SharedVariable, for conflict checks
        self._objects = {}                   # id(container) -> SharedVariable
        self._register_shared(f, None)

    # ----------------------------------------------------------------- calls
    def __call__(self, *args, **kwargs):
        return self._main(*args, **kwargs)

    @property
    def function(self):
        """The re-linked Theano Function (OCL linker)."""
        return self._main.function

    @property
    def stats(self):
        """Facts about the last ``run_steps``: launches per step (batched and not), host steps."""
        return self._main.stats

    def run_steps(self, n, inputs=None, probes=None, probe_every=1, batch=None, feed='copy'):
        """Run the function ``n`` times on the device, updates applied every step.

        ``inputs``: per-step values, a dict (input name, index or variable -> array) or a
        list in the order of the function's inputs; each array has leading axis ``n`` and
        step ``i`` gets ``array[i]``. Inputs with a default value may be left out.
        ``probes``: output indices or names (default: every output); each is sampled after
        steps ``k-1, 2k-1, ...`` (``k = probe_every``) and returned as a host array with
        leading axis ``n // k``; a list for a list, one array for one probe.
        ``batch``: True / False / 'auto' (merge independent same-kernel launches where that
        lowers the launch count). ``feed``: 'copy' (a device copy of each step's slice into
        the frame's input buffer), 'rebind' (re-point the kernels at the slice) or 'auto'.
        After the call the shared variables hold the state after ``n`` steps (on the
        device; the host view is refreshed when read).
        """
        return self._main.run_steps(n, inputs=inputs, probes=probes, probe_every=probe_every,
                                    batch=self.batch if batch is None else batch, feed=feed)

    # ----------------------------------------------------------------- methods
    def add_method(self, name, g):
        """Add ``g`` (a compiled theano.function) as ``sim.<name>``, sharing device state.

        Shared variables are shared by object (the same container). A shared variable of
        ``g`` that has the name of one of the simulator's but is another object must agree
        with it in dtype and shape (it then stays a separate variable); else SimulatorError.
        """
        if not isinstance(name, str) or not name.isidentifier() or name.startswith('_'):
            raise SimulatorError('add_method: %r is not a usable method name' % (name,))
        if name in self._methods or hasattr(type(self), name) or name in self.__dict__:
            raise SimulatorError('add_method: the simulator already has an attribute %r' % name)
        self._check_shared(g, name)
        method = Method(self, name, g)
        self._methods[name] = method
        self._register_shared(g, name)
        return method

    def __getattr__(self, name):
        methods = self.__dict__.get('_methods')
        if methods is not None and name in methods:
            return methods[name]
        raise AttributeError('%r object has no attribute %r' % (type(self).__name__, name))

    def _register_shared(self, f, owner):
        for var, container in _shared_inputs(f):
            self._objects[id(container)] = var
            if var.name is not None:
                self._shared.setdefault(var.name, (var, container, owner))

    def _check_shared(self, g, method):
        for var, container in _shared_inputs(g):
            if id(container) in self._objects:
                continue             # the same variable: shared
            known = self._shared.get(var.name) if var.name is not None else None
            if known is None:
                continue
            other, ocont, owner = known
            mine = np.asarray(container.storage[0]) if container.storage[0] is not None else None
            theirs = _host_value(ocont)
            problems = []
            if var.type.dtype != other.type.dtype:
                problems.append('dtype %s, the simulator has %s' % (var.type.dtype, other.type.dtype))
            if mine is not None and theirs is not None and mine.shape != theirs.shape:
                problems.append('shape %s, the simulator has %s' % (mine.shape, theirs.shape))
            elif var.type.ndim != other.type.ndim:
                problems.append('%d dimensions, the simulator has %d' % (var.type.ndim, other.type.ndim))
            if problems:
                raise SimulatorError(
                    'add_method(%r): shared variable %r conflicts with the simulator\'s shared '
                    'variable of that name (%s, from %s): %s. Use the same shared variable object '
                    'to share state, or give it another name' % (
                        method, var.name, 'another object', 'the main function' if owner is None
                        else 'method %r' % owner, '; '.join(problems)))

    def methods(self):
        return dict(self._methods)

    def _all(self):
        return [self._main] + list(self._methods.values())

    # ----------------------------------------------------------------- coherence
    def _residents(self):
        seen = {}
        for m in self._all():
            for res in m.vm.program.residents.values():
                seen[id(res)] = res
        return list(seen.values())

    def sync_to_theano(self):
        """Download every device-newer shared value into its host cell (``get_value`` is then
        current without a transfer)."""
        self.device.queue.finish()
        for res in self._residents():
            res.sync_to_host()

    def sync_from_theano(self):
        """Upload every shared variable's host value now, discarding device-side values not
        yet synced (use after changing a host array in place, which the lazy coherence cannot
        see)."""
        for res in self._residents():
            if res.dev is None:
                continue
            res.device_newer = False
            res.host_dirty = True
            res.ensure_device(res.dev, res.dev.queue)
        self.device.settle_uploads()

    # ----------------------------------------------------------------- pickling
    def __getstate__(self):
        self.sync_to_theano()
        return dict(version=1, device=self.device_spec, batch=self.batch,
                    main=self._main.original,
                    methods=[(name, m.original) for name, m in self._methods.items()])

    def __setstate__(self, state):
        try:
            self.__init__(state['main'], device=state['device'], batch=state['batch'])
        except NoOpenCLPlatform as e:
            raise NoOpenCLPlatform('a pickled SimulatorOCL needs an OpenCL device to be '
                                   'unpickled (its graph and state are in the pickle: the plain '
                                   'Theano functions). %s' % e) from None
        for name, g in state['methods']:
            self.add_method(name, g)


def _host_value(container):
    v = container.storage[0]
    from . import shared as shared_mod
    shared_mod.sync_cell(container.storage)
    v = container.storage[0]
    return None if v is None else np.asarray(v)


def optimize(f, device=None, **kwargs):
    """Functional alias: ``SimulatorOCL(f, device=device)``."""
    return SimulatorOCL(f, device=device, **kwargs)
