"""OCLLinker: instruction selection at link time, on Theano's linker contract.

The optimized FunctionGraph is left as Theano made it. For each Apply node the
linker picks, in this order:

- ``shape``: ``Shape``/``Shape_i`` are read off the device arrays' shapes (no transfer);
- ``host`` (shape arithmetic): nodes computing small integers (scalars, shape
  vectors) from values already on the host run as Theano's own thunks, since a
  kernel launch would cost more than the work and would need a download;
- ``dev``: a device implementation from the registry (:mod:`theano_ocl.ops`);
- ``host`` (fallback): Theano's own implementation (its C code, else ``perform``)
  with automatic transfers, reported by :func:`theano_ocl.report`.

It then decides which values cross between host and device and where shared
variables live, and hands the resulting :class:`Program` to the VM.
"""
import copy
import json

import numpy as np
import theano
from theano.gof import cc as gof_cc, link as gof_link, vm as gof_vm
from theano.gof.graph import Constant
from theano.compile.sharedvalue import SharedVariable
from theano.tensor.type import TensorType
from theano.tensor import basic as tbasic, subtensor as tsubtensor
from theano.compile import ops as compile_ops
from theano import scalar as ts
from theano.tensor.type_other import SliceType, NoneTypeT

from .device import get_device
from .errors import NoDeviceImplementation
from .ops.base import DEVICE_DTYPES
from .ops.fusion import (destroyed_inputs, destroyed_roots, fuse_epilogues, fuse_kept_producers,
                         fuse_producers, fuse_shared_producers, reads_cross_a_destroy)
from .ops.registry import ocl_impl
from .runtime import kernel_cache, settings
from .runtime.context import provide
from . import shared as shared_mod
from .vm import OCLFunction

DTYPES = DEVICE_DTYPES


class Task(object):
    """Link-time decision for one Apply node: where it runs and how its values move.

    kind: 'dev' (a device implementation), 'host' (Theano's own thunk: a fallback,
    or cheap shape arithmetic), 'shape' (Shape/Shape_i read off device arrays).
    """

    def __init__(self, node, kind, impl=None, thunk=None, reason=None, meta=False):
        self.node = node
        self.kind = kind
        self.impl = impl
        self.thunk = thunk
        self.reason = reason
        self.meta = meta                # host task doing shape arithmetic, not a fallback
        self.host_inputs = frozenset(getattr(impl, 'host_inputs', ())) if impl is not None else frozenset()
        self.download_outputs = []      # output vars a later host consumer needs
        self.upload_outputs = []        # output vars (of host tasks) needed on the device
        self.release = []               # device vars whose last use is this task
        self.replay = True              # False: its result is decided by the frame key
        self.fused_into = None          # the consumer task that computes this node's output
        self.fused = {}                 # input index -> producer task folded into this one
        self.stored = False             # folded, and its consumer's kernel stores its value
        self.regions = ()               # (IfElse task, branch) it runs for (lazy_branches)


class Program(object):
    """The link-time result: tasks in order, storage, and how values move."""

    def __init__(self, fgraph, tasks, storage_map, compute_map, input_cells, output_cells):
        self.fgraph = fgraph
        self.tasks = tasks
        self.storage_map = storage_map
        self.compute_map = compute_map
        self.input_cells = input_cells
        self.output_cells = output_cells
        self.input_index = {v: i for i, v in enumerate(fgraph.inputs)}
        # an output that is an input or a constant already sits in its own cell
        self.computed_output_cells = [c if v.owner is not None else None
                                      for v, c in zip(fgraph.outputs, output_cells)]
        self.input_kinds = []          # per input: 'resident', 'dev' or 'host'
        self.input_plan = []           # (index, kind) that decide the frame key
        self.host_read_inputs = set()  # device inputs also read on the host
        self.cost_eligible = None      # runtime/cost.py: whether its graph may run dry
        self.residents = {}            # input index -> Resident
        self.updates = []              # (input index, output index)
        self.update_outputs = set()
        self.keep_vars = set()
        self.key_determined = set()
        self.host_output_cells = []
        self.last_use = {}
        self.consts = []
        self.write_back = []           # (input index, var): destroyed input's final value
        self.no_recycling = []         # variables whose cells are cleared before each call

    def host_thunk(self, node):
        """Theano's own thunk for ``node`` on the host values of this program's storage.

        A shared variable the node would destroy in place (Theano's inplace optimizations
        do so with updated shared variables: a counter's ``c + 1``) is handed a private
        copy instead, made right before the thunk runs: the variable's value changes only
        when the call commits (runtime/commit.py), never because a node ran, so a call
        that fails later leaves it as it was."""
        op = node.op
        destroyed = sorted(j for j in destroyed_inputs(node)
                           if isinstance(node.inputs[j], SharedVariable))
        if not destroyed:
            thunk = op.make_thunk(node, self.storage_map, self.compute_map, [])
            thunk.inputs = [self.storage_map[v] for v in node.inputs]
            thunk.outputs = [self.storage_map[v] for v in node.outputs]
            return thunk
        storage = dict(self.storage_map)
        pairs = []
        for j in destroyed:
            var = node.inputs[j]
            if var not in [p for p, _ in pairs]:
                storage[var] = [None]
                pairs.append((var, (self.storage_map[var], storage[var])))
        cells = [c for _, c in pairs]
        inner = op.make_thunk(node, storage, self.compute_map, [])

        def thunk():
            for cell, private in cells:
                private[0] = _private_copy(cell[0])
            return inner()
        thunk.inputs = [storage[v] for v in node.inputs]
        thunk.outputs = [storage[v] for v in node.outputs]
        if hasattr(inner, 'cthunk'):
            thunk.cthunk = inner.cthunk     # still Theano's C code (report, profile)
        return thunk

    def counts(self):
        dev = sum(1 for t in self.tasks if t.kind == 'dev')
        meta = sum(1 for t in self.tasks if t.kind == 'shape' or (t.kind == 'host' and t.meta))
        fb = [t for t in self.tasks if t.kind == 'host' and not t.meta]
        ops = {}
        for t in fb:
            name = type(t.node.op).__name__
            reason = t.reason or ''
            # the by-design reasons named, so a conformance table tells them apart
            for word, tag in (('complex', 'complex'), ('float64', 'no fp64'),
                              ('not a tensor', 'non-tensor')):
                if word in reason:
                    name += ' [%s]' % tag
                    break
            ops[name] = ops.get(name, 0) + 1
        return dict(device=dev, meta=meta, fallback=len(fb), fallback_ops=ops)


def _private_copy(value):
    if isinstance(value, np.ndarray):
        return value.copy()
    return copy.copy(value)


class ShapeOfDevice(object):
    """Shape / Shape_i: the value is read off the array's shape, never its data."""

    def __init__(self, node):
        op = node.op
        self.index = getattr(op, 'i', None)
        self.dtype = node.outputs[0].type.dtype

    def shape_value(self, shape):
        if self.index is None:
            return np.asarray(shape, dtype=self.dtype)
        return np.asarray(shape[self.index], dtype=self.dtype)


def _is_small_int(var):
    """Values of index arithmetic: scalars, slices, None, and short integer tensors."""
    t = var.type
    if isinstance(t, (ts.Scalar, SliceType, NoneTypeT)):
        return True
    if isinstance(t, TensorType):
        return t.ndim <= 1 and (t.dtype.startswith('int') or t.dtype.startswith('uint') or t.dtype == 'bool')
    return False


#: constants up to this many elements may enter host shape arithmetic (_shape_arithmetic)
SHAPE_CONSTANT_MAX = 64


def _shape_arithmetic(node, placement):
    """Whether ``node`` is elementwise arithmetic, a broadcast or an indexing of values
    computed on the host from shapes (and small constants), whatever their dtype:
    ``T.mean``'s ``1 / cast(n)``, a vector of shapes cast to float and indexed. It runs
    on the host as shape arithmetic does, once per frame where the key decides its inputs,
    and its value is a constant of the frame, not a launch per call."""
    if not isinstance(node.op, (tbasic.Elemwise, tbasic.DimShuffle, tsubtensor.Subtensor)):
        return False
    if not all(isinstance(o.type, TensorType) and (o.type.ndim <= 1 or all(o.type.broadcastable))
               for o in node.outputs):
        return False
    return all(placement.get(v) == 'meta' or
               (isinstance(v, Constant) and np.size(v.data) <= SHAPE_CONSTANT_MAX)
               for v in node.inputs)


def _host_available(var, placement):
    if isinstance(var, Constant):
        return True
    if var.owner is None:
        t = var.type
        return isinstance(t, ts.Scalar) or (isinstance(t, TensorType) and t.ndim == 0 and _is_small_int(var))
    return placement.get(var) in ('host', 'meta')


def _dtype_reason(dtype, impl, dev):
    if dtype not in DTYPES:
        return 'dtype %s is not supported on devices' % dtype
    if dtype.startswith('complex') and not impl.complex_ok:
        return 'no device %s for dtype %s' % (impl.describe(), dtype)
    if impl.dtypes is not None and dtype not in impl.dtypes:
        return 'no device %s for dtype %s' % (impl.describe(), dtype)
    if not dev.supports_dtype(dtype):
        return 'the device has no float64 (cl_khr_fp64)'
    return None


def _device_types_ok(node, impl, dev):
    host_inputs = set(getattr(impl, 'host_inputs', ()))
    for j, v in enumerate(node.inputs):
        if j in host_inputs:
            continue
        if not isinstance(v.type, TensorType):
            return 'input %d is a %s, not a tensor' % (j, type(v.type).__name__)
        reason = _dtype_reason(v.type.dtype, impl, dev)
        if reason:
            return reason
    for v in node.outputs:
        if not isinstance(v.type, TensorType):
            return 'output is a %s, not a tensor' % type(v.type).__name__
        reason = _dtype_reason(v.type.dtype, impl, dev)
        if reason:
            return reason
    return None


def select(node, dev, placement):
    """Pick the task kind and implementation for one Apply node."""
    op = node.op
    if isinstance(op, (tbasic.Shape, compile_ops.Shape)) or isinstance(op, compile_ops.Shape_i):
        return Task(node, 'shape', impl=ShapeOfDevice(node))
    if all(_is_small_int(o) for o in node.outputs) and \
            all(_host_available(v, placement) for v in node.inputs):
        return Task(node, 'host', meta=True)
    if _shape_arithmetic(node, placement):
        return Task(node, 'host', meta=True)
    try:
        impl = ocl_impl(op, node, dev)
    except NoDeviceImplementation as e:
        return Task(node, 'host', reason=str(e) or 'no device implementation')
    either = getattr(impl, 'host_if_available', None)
    if either:
        # inputs the implementation takes on the host where they already are, else on the
        # device (Assert's conditions: shape checks on the host, tensor tests by a kernel)
        impl.host_inputs = tuple(j for j in either if _host_available(node.inputs[j], placement))
    reason = _device_types_ok(node, impl, dev)
    if reason is not None:
        return Task(node, 'host', reason=reason)
    return Task(node, 'dev', impl=impl)


def build_program(fgraph, order, storage_map, compute_map, input_storage, output_storage,
                  updated_vars, dev, no_recycling):
    input_cells = list(input_storage)
    output_cells = list(output_storage)
    placement = {}
    tasks = []
    for node in order:
        task = select(node, dev, placement)
        where = 'dev' if task.kind == 'dev' else 'host'
        if task.kind == 'shape' or task.meta:
            where = 'meta'          # host values computed from shapes
        for o in node.outputs:
            placement[o] = where
        tasks.append(task)
    tasks = lazy_branches(tasks)

    prog = Program(fgraph, tasks, storage_map, compute_map, input_cells, output_cells)
    prog.no_recycling = list(no_recycling or ())
    inputs = fgraph.inputs
    index = prog.input_index

    need_dev, need_host = set(), set()
    producer = {}
    for t, task in enumerate(tasks):
        node = task.node
        for j, v in enumerate(node.inputs):
            prog.last_use[v] = task
            if task.kind == 'dev':
                if j in task.host_inputs:
                    need_host.add(v)
                else:
                    need_dev.add(v)
            elif task.kind == 'host':
                need_host.add(v)
        for o in node.outputs:
            producer[o] = task
    mark_dynamic(tasks, need_dev)
    key_inputs = _plan_deciding(tasks) & set(index)

    # updates: fgraph input -> output computing its next value
    out_index = {}
    for j, o in enumerate(fgraph.outputs):
        out_index.setdefault(o, j)
    for ivar, ovar in (updated_vars or {}).items():
        i = index[ivar]
        # the same variable may be an output too: the update is the last one
        j = max(k for k, o in enumerate(fgraph.outputs) if o is ovar)
        prog.updates.append((i, j))
        prog.update_outputs.add(j)
    update_sources = {fgraph.outputs[j] for _, j in prog.updates}
    prog.keep_vars = set(fgraph.outputs)

    # where each fgraph input lives
    for i, var in enumerate(inputs):
        is_shared = isinstance(var, SharedVariable)
        updated_on_dev = any(i == ii and placement.get(fgraph.outputs[j]) == 'dev'
                             for ii, j in prog.updates)
        on_dev = var in need_dev or (is_shared and updated_on_dev)
        if on_dev and is_shared:
            kind = 'resident'
            prog.residents[i] = shared_mod.resident_for(input_cells[i])
        elif on_dev:
            kind = 'dev'
        else:
            kind = 'host'
        prog.input_kinds.append(kind)
        if kind != 'host':
            prog.input_plan.append((i, kind))
            if var in need_host:
                prog.host_read_inputs.add(i)
        if var in key_inputs:
            prog.input_plan.append((i, 'meta'))

    # inputs destroyed in place (accept_inplace / In(mutable=True)): Theano's own linkers
    # leave the caller's array holding the destroyed value; on the device the input's copy
    # is never written (a fresh buffer takes the result), so that value goes back into the
    # caller's array at the end of the call (prog.write_back)
    for i, var in enumerate(inputs):
        if prog.input_kinds[i] != 'dev':
            continue
        final = var
        while True:
            nxt = None
            for node, j in getattr(final, 'clients', ()):
                if node == 'output':
                    continue
                for k, js in (getattr(node.op, 'destroy_map', None) or {}).items():
                    if j in js and node.inputs[j] is final:
                        nxt = node.outputs[k]
            if nxt is None:
                break
            final = nxt
        if final is not var:
            prog.write_back.append((i, final))
            prog.keep_vars.add(final)

    # transfers between tasks
    for var in need_host:
        p = producer.get(var)
        if p is not None and p.kind == 'dev':
            p.download_outputs.append(var)
    for var in need_dev:
        p = producer.get(var)
        if p is not None and p.kind != 'dev':
            p.upload_outputs.append(var)
    prog.host_output_cells = [storage_map[v] for v in set(fgraph.outputs)
                              if v.owner is not None and producer[v].kind != 'dev']
    fuse_producers(prog, tasks, need_host, update_sources)
    fuse_shared_producers(prog, tasks, need_host, update_sources, dev)
    fuse_epilogues(prog, tasks, need_host, update_sources, dev)
    fuse_kept_producers(prog, tasks, need_host)
    _mark_replay(prog, tasks, need_dev, key_inputs, update_sources)
    # constants consumed on the device are uploaded once per program
    prog.consts = sorted({v for v in need_dev if isinstance(v, Constant)}, key=id)
    for var, task in prog.last_use.items():
        if var.owner is not None and task.kind != 'shape':
            task.release.append(var)
    return prog




def lazy_branches(tasks):
    """Order the tasks so that each device IfElse's branches can be skipped (a pass).

    A task is *of a branch* of an IfElse when every use of its outputs is that branch's
    input of the IfElse or another task of the branch (never a function output, never
    the other branch, never the condition). Those tasks move, in their order, to just
    before the IfElse: then-branch first, else-branch next, after everything else the
    IfElse needs (its condition among it). ``task.regions`` lists the (IfElse task,
    branch) a task belongs to, outermost first; the VM plans a task only where every one
    of those branches is taken (``OCLFunction._taken``), so a frame runs one branch.

    An IfElse stays eager (both branches run, as before) where a task between a branch
    task's place and the IfElse destroys in place a value that task reads: moving it
    later would read the destroyed value. Returns the new task list.
    """
    for x_task in [t for t in tasks if t.kind == 'dev' and hasattr(t.impl, 'branches')]:
        x = x_task.node
        p = tasks.index(x_task)
        members = {}
        for taken, positions in x_task.impl.branches.items():
            ours = set()
            for task in reversed(tasks[:p]):
                uses = [(c, j) for o in task.node.outputs for c, j in o.clients]
                if uses and all(c in ours or (c is x and j in positions) for c, j in uses):
                    ours.add(task.node)
                    members[task.node] = taken
        if not members:
            continue
        moved = [t for t in tasks[:p] if t.node in members]
        stay = [t for t in tasks[:p] if t.node not in members]
        if _destroyed_between(tasks[:p], members):
            continue
        for t in moved:
            t.regions = ((x_task, members[t.node]),) + tuple(t.regions)
        tasks = stay + [t for t in moved if members[t.node]] + \
            [t for t in moved if not members[t.node]] + tasks[p:]
    return tasks


def _destroyed_between(tasks, members):
    """Whether a task that stays destroys what a moved task (in ``members``) reads before
    it would run at its new place (the end of ``tasks``): fusion's exclusion rule."""
    destroyed = destroyed_roots(tasks, skip=members)
    return any(reads_cross_a_destroy(task.node.inputs, destroyed, k, len(tasks))
               for k, task in enumerate(tasks) if task.node in members)


def _determined(tasks, need_dev, given=()):
    """The values fixed by the shapes of device values, constants and ``given`` (keyed
    inputs): those, shapes read off them, and host shape arithmetic on them."""
    kd = set(given)
    for task in tasks:
        node = task.node
        if task.kind == 'shape':
            if node.inputs[0] in need_dev or node.inputs[0] in kd:
                kd.update(node.outputs)
        elif task.kind == 'host' and task.meta:
            if all(isinstance(v, Constant) or v in kd for v in node.inputs):
                kd.update(node.outputs)
    return kd


def mark_dynamic(tasks, need_dev):
    """Set ``impl.dynamic_inputs``: the ``dynamic_capable`` inputs whose values change
    between calls of one key -- not constants, not shape arithmetic on device values (the
    key fixes those, and the implementation's cheaper fixed plan serves). A sequence
    element used as an index inside a device Scan, or ``X[i]`` with ``i`` an input, then
    runs one plan for every value."""
    fixed = _determined(tasks, need_dev)
    for task in tasks:
        if task.kind != 'dev' or not task.impl.dynamic_capable:
            continue
        ins = task.node.inputs
        task.impl.dynamic_inputs = tuple(j for j in task.impl.dynamic_capable
                                         if not isinstance(ins[j], Constant)
                                         and ins[j] not in fixed)


def _plan_deciding(tasks):
    """The variables whose *values* a device plan depends on: the host inputs of device
    tasks (sizes, indices, shapes) and, through host shape arithmetic, what they are
    computed from. Only these key a frame: a value that decides no plan (a shared
    iteration counter incremented by host arithmetic, a scalar only uploaded) is read
    every call and never makes one re-plan."""
    deciding = set()
    for task in tasks:
        if task.kind == 'dev':
            branch = getattr(task.impl, 'branch_input', None)   # guarded, never keyed
            free = task.impl.dynamic_inputs                      # read at every call
            deciding.update(task.node.inputs[j] for j in task.host_inputs
                            if j != branch and j not in free)
    for task in reversed(tasks):
        if task.kind == 'host' and task.meta and any(o in deciding for o in task.node.outputs):
            deciding.update(task.node.inputs)
    return deciding


def _mark_replay(prog, tasks, need_dev, key_inputs, update_sources):
    """Find host values a frame's key already decides, and tasks a replay may skip.

    A shape read off a device value, a constant, a keyed input, and shape arithmetic
    on those are the same on every call with the same key: their tasks need not run
    again on replay (a value device tasks consume is uploaded once, as a constant of the
    frame: ``runtime.build``), and device plans that consumed them need no guard, unless
    a host task that does run (a fallback) or an output still reads them.
    """
    kd = prog.key_determined = _determined(tasks, need_dev, key_inputs)
    needed = set(prog.fgraph.outputs) | set(update_sources)
    for task in reversed(tasks):
        outs = task.node.outputs
        if (task.kind == 'shape' or (task.kind == 'host' and task.meta)) and \
                all(o in kd for o in outs) and not any(o in needed for o in outs):
            task.replay = False
            continue
        if task.kind == 'host':
            needed.update(task.node.inputs)


def _stats(prog, path):
    if not path:
        return
    try:
        with open(path, 'a') as f:
            f.write(json.dumps(prog.counts()) + '\n')
    except OSError:
        pass


class OCLLinker(gof_link.LocalLinker):
    """Links an optimized FunctionGraph onto an OpenCL device (see module doc).

    ``device``: a device specification (``'P:D'``, ``'gpu'``, ``'cpu'`` or a name
    fragment; default ``$THEANO_OCL_DEVICE``, else a GPU, else the CPU device).
    ``output_mode``: ``'host'`` (numpy arrays, Theano's behaviour) or ``'device'``
    (``pyopencl.array.Array`` results that stay on the device).
    ``fuse``, ``epilogues``, ``blas``, ``conv``, ``cpu_group``, ``stats``: the settings
    (:mod:`theano_ocl.runtime.settings`); one left out (None) takes its environment
    variable when a function is linked.
    """

    def __init__(self, allow_gc=None, schedule=None, device=None, output_mode='host',
                 **given):
        if output_mode not in ('host', 'device'):
            raise ValueError("output_mode must be 'host' or 'device', got %r" % (output_mode,))
        self.settings = {k: v for k, v in given.items() if v is not None}
        # a bad argument raises here; the environment is read (and checked) at link time,
        # so a bad variable never keeps mode 'OCL' from registering
        settings.Settings(**self.settings)
        self.fgraph = None
        self.allow_gc = allow_gc
        self.device = device
        self.output_mode = output_mode
        self.updated_vars = {}
        self.no_recycling = []
        self.profile = None
        if schedule:
            self.schedule = schedule

    def __getstate__(self):
        d = dict(self.__dict__)
        return d

    def __setstate__(self, d):
        d.setdefault('settings', {})        # pickled before settings were arguments
        self.__dict__.update(d)

    def accept(self, fgraph, no_recycling=None, profile=None):
        if no_recycling is None:
            no_recycling = []
        if self.fgraph is not None and self.fgraph is not fgraph:
            return type(self)(allow_gc=self.allow_gc, device=self.device,
                              output_mode=self.output_mode,
                              **self.settings).accept(fgraph, no_recycling, profile)
        self.fgraph = fgraph
        self.no_recycling = no_recycling
        self.profile = profile
        return self

    def schedule(self, fgraph):
        """Theano's topological order, rearranged where asynchronous exchanges (the
        collectives of ``theano_ocl.distributed``) can overlap the computation
        (``ops.collective.overlap_schedule``)."""
        from .ops.collective import overlap_schedule
        return overlap_schedule(fgraph, fgraph.toposort())

    def accept_var_updates(self, updated_vars):
        self.updated_vars = updated_vars

    def clone(self, allow_gc=None):
        return type(self)(allow_gc=self.allow_gc if allow_gc is None else allow_gc,
                          device=self.device, output_mode=self.output_mode, **self.settings)

    def make_all(self, input_storage=None, output_storage=None, storage_map=None):
        fgraph = self.fgraph
        order = self.schedule(fgraph)
        input_storage, output_storage, storage_map = gof_link.map_storage(
            fgraph, order, input_storage, output_storage, storage_map)
        # every value is computed before its consumers run (no lazy evaluation), so lazy
        # host thunks (IfElse) must see all their inputs as computed
        compute_map = {v: [True] for v in storage_map}
        # the environment's values checked here, at the first function linked: a bad one
        # raises SettingError naming the variable (registration never reads them)
        s = settings.Settings.resolve(self.settings)
        kernel_cache.get_cache()
        kernel_cache.quiet()
        dev = get_device(self.device)
        shared_mod.install_patches()
        with settings.active(s):
            prog = build_program(fgraph, order, storage_map, compute_map, input_storage,
                                 output_storage, self.updated_vars, dev, self.no_recycling)
        for task in prog.tasks:
            if task.kind == 'host':
                task.thunk = prog.host_thunk(task.node)
        fn = OCLFunction(prog, dev, profile=self.profile, output_mode=self.output_mode,
                         settings=s)
        fn.calibration_mode = calibration_mode
        fn.upload_constants()
        _stats(prog, s.stats)
        in_containers = [gof_link.Container(v, s) for v, s in zip(fgraph.inputs, input_storage)]
        out_containers = [gof_link.Container(v, s, readonly=True)
                          for v, s in zip(fgraph.outputs, output_storage)]
        return fn, in_containers, out_containers, fn.thunks, order


#: the linkers a mode given to ``theano.scan(mode=...)`` may have for the Scan to run on the
#: device anyway (Theano's own ways of running the same code); another one (MonitorMode's,
#: DebugMode's) is asked for by name: the Scan runs under it, on the host
_PLAIN_LINKERS = (gof_link.PerformLinker, gof_vm.VM_Linker, gof_cc.CLinker,
                  gof_cc.OpWiseCLinker)


def scan_inner_function(inputs, outputs, mode, dev, name=None, given=False, profile=None):
    """The inner function of a device Scan (``ops/scan.py`` gets it through the
    ``'scan_inner_function'`` capability: op families never import the linker): the inner
    graph optimized by ``mode``'s optimizer (the Scan's own mode), linked by this linker on
    ``dev`` with the settings of the function being linked, its outputs left on the device.
    ``given``: the mode was given to ``theano.scan``; unless its linker is one of Theano's
    plain ones or this one, the Scan stays on the host (NoDeviceImplementation).
    ``profile``: the inner function's (a ``ScanProfileStats``, as Theano's Scan makes it)."""
    if given and not isinstance(mode.linker, _PLAIN_LINKERS + (OCLLinker,)):
        raise NoDeviceImplementation('theano.scan(mode=...) asks for the %s linker'
                                     % type(mode.linker).__name__)
    linker = OCLLinker(device=dev.spec, output_mode='device', **settings.current().as_dict())
    # the optimizer as the mode was given it (a Query, a name), not the optimizer it made:
    # that one does not pickle (Scan's op.fn, this function, pickles with the Scan)
    mode = theano.compile.mode.Mode(linker=linker, optimizer=mode.provided_optimizer)
    return theano.function([theano.In(v, borrow=True) for v in inputs],
                           [theano.Out(v, borrow=True) for v in outputs],
                           mode=mode, name=name, on_unused_input='ignore', profile=profile)


provide('scan_inner_function', scan_inner_function)


def calibration_mode(dev):
    """A mode of this linker on ``dev`` for the cost model's calibration functions
    (``runtime/cost.py``: ``constants``), which must not choose, batch or go to the host
    tier themselves."""
    from theano.compile.mode import Mode
    return Mode(linker=OCLLinker(device=dev.spec, cost_model='off', host_tier='off',
                                 batch_after='never'), optimizer='fast_run')
