"""The in-thread host tier: tiny, hot functions run by Theano's own VM on host values.

A launch and a finish cost ~40 us on PoCL, and an upload, a launch and a download ~55 us on
a GPU: far more than the work of a node whose values are a few thousand elements. Once a
frame whose every value is tiny has been replayed ``OCLFunction.host_tier_after`` times
(inputs and outputs on the host), its calls run here: Theano's own VM for the function's
graph (the C loop, as Theano C runs it, where Theano has it), over fresh storage for every
intermediate and the function's own input and output cells.

Two things differ from Theano's own function, both for the all-or-nothing contract
(runtime/commit.py): the VM applies no update itself (the new values are committed in one
step after every node ran), and a shared variable a node would destroy in place is handed a
private copy, so that a call failing half-way (an IndexError, Ctrl-C) leaves every shared
variable as it was -- unless the nodes that write in place run last and provably cannot
fail or be interrupted part way (``runtime/host_tail.py``): then no copy is made.

Which frames it may take is the ``host_tier`` setting. A device computes floats with its own
rounding (fused multiply-adds, its own ``exp``), so a float function handed to Theano's VM at
its 21st call could return other last bits than its first 20 calls did, and code that
compares results across calls (finite differences, ``verify_grad``, a line search) would see
the function move where its inputs did not. By default ('exact') the tier takes a frame of a
function whose results cannot depend on where they run (:func:`computes_exactly`) as soon as
it is hot; one of a function doing float arithmetic after ``PROBES`` calls that ran both
ways (:func:`probes`) gave the same bits, else never.
"""
import copy
import functools
import time

import numpy as np

from . import commit, faults, host_math, host_scan, host_tail

# scalar ops of an elementwise node that reproduce bits of their inputs (or round once,
# as every IEEE implementation does: a cast), whichever side computes them
_EXACT_SCALAR = frozenset(['Identity', 'Cast', 'Second', 'Neg', 'Abs', 'Maximum', 'Minimum',
                           'Switch'])
# ops that only move, select or describe values
_MOVES = frozenset(['DimShuffle', 'Reshape', 'Flatten', 'Subtensor', 'AdvancedSubtensor1',
                    'AdvancedSubtensor', 'Join', 'Split', 'Rebroadcast', 'SpecifyShape',
                    'DeepCopyOp', 'OutputGuard', 'ViewOp', 'Alloc', 'AllocEmpty',
                    'TensorFromScalar', 'ScalarFromTensor', 'Shape', 'Shape_i', 'MakeVector',
                    'MaxAndArgmax', 'Argmax'])


def computes_exactly(fgraph):
    """Whether ``fgraph``'s results are the same bits wherever it runs: every node that
    produces a non-discrete value (float, complex) only moves, selects or casts values
    (integer and boolean arithmetic is exact on every device)."""
    return all(_exact_node(node) for node in fgraph.apply_nodes)


def _exact_node(node):
    if all(getattr(out.type, 'dtype', 'float') in _DISCRETE for out in node.outputs):
        return True
    op = node.op
    name = type(op).__name__
    if name in _MOVES:
        return True
    if name in ('IncSubtensor', 'AdvancedIncSubtensor1', 'AdvancedIncSubtensor'):
        return bool(getattr(op, 'set_instead_of_inc', False))
    scalar_op = getattr(op, 'scalar_op', None)
    if scalar_op is None:
        return False
    if name == 'Elemwise' and type(scalar_op).__name__ == 'Composite':
        return all(type(n.op).__name__ in _EXACT_SCALAR for n in scalar_op.fgraph.apply_nodes)
    # an elementwise or reducing node (max, min over floats: no rounding)
    return type(scalar_op).__name__ in _EXACT_SCALAR and (
        name == 'Elemwise' or type(scalar_op).__name__ in ('Maximum', 'Minimum'))


_DISCRETE = frozenset(['bool', 'int8', 'int16', 'int32', 'int64', 'uint8', 'uint16', 'uint32',
                       'uint64'])


#: calls of a tiny hot frame run both ways (on the device, and dry by Theano's VM) that
#: must agree in every bit before the tier takes a frame of a function that does float
#: arithmetic (the 'exact' setting)
PROBES = 3


def probes(setting, fgraph):
    """How many agreeing probe calls the host tier needs before it takes this function's
    tiny hot frames (``setting``: the function's ``host_tier`` setting); None: never.

    A function whose results cannot depend on where they run (:func:`computes_exactly`)
    needs none; nor does any under 'any'. Under 'exact' one doing float arithmetic needs
    ``PROBES``, and none is taken whose graph destroys a non-shared input (the dry run
    would change what the device then reads)."""
    if setting == 'off' or any(getattr(n.op, 'collective', False) for n in fgraph.apply_nodes):
        # a collective (theano_ocl.distributed) must run once per call on every rank: never
        # twice (a probe), never by a choice that could differ between ranks
        return None
    if setting == 'any' or computes_exactly(fgraph):
        return 0
    from theano.compile.sharedvalue import SharedVariable
    for node in fgraph.apply_nodes:
        for js in (getattr(node.op, 'destroy_map', None) or {}).values():
            for j in js:
                var = node.inputs[j]
                if var.owner is None and not isinstance(var, SharedVariable):
                    return None
    return PROBES


def same_bits(a, b):
    """Whether two results are the same values to the bit (dtype, shape and bytes)."""
    if a is None or b is None:
        return a is b
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


#: bytes the host tier's intermediates may keep from one call to the next (above it they
#: are freed after their last use, as Theano's allow_gc does)
KEEP_BYTES = 64 << 20


class HostTier(object):
    """Theano's VM over ``prog``'s host values; call it for one call's outputs."""

    def __init__(self, prog, no_recycling=(), math='c'):
        fgraph = prog.fgraph
        self.prog = prog
        self.math_backend = host_math.backend(math)       # None: Theano C's code
        self.math_loops = host_math.vector_loops(self.math_backend)
        self.math_fast = host_math.fast_names(self.math_loops)
        self.math_counts = [0, 0]
        self.thunk_counts = {}           # (op name -> nodes given a registered thunk)
        self.c_bits = math == 'c'        # (Theano C's code for every node: its bits)
        self.scan_counts = [0, 0, 0]
        destroyed = host_tail.destroyed_roots(fgraph)
        cells = []
        # (an input a node destroys, shared or given as mutable: a run that commits
        # nothing, the cost model's or a probe, must leave it as it was)
        self.private = []            # (the input's cell, the copy the VM reads)
        for var, cell in zip(fgraph.inputs, prog.input_cells):
            if var in destroyed:
                copy = [None]
                self.private.append((cell, copy))
                cell = copy
            cells.append(cell)
        outputs = []
        inputs_map = dict(zip(fgraph.inputs, cells))
        for var, cell in zip(fgraph.outputs, prog.output_cells):
            outputs.append(inputs_map.get(var, cell))
        self.cells = cells
        self.output_cells = outputs
        # every output, and whatever an output may be a view of, is computed into fresh
        # storage each call (an update's new value becomes a shared variable's value: a
        # later run must not write into it before its commit); the other intermediates
        # keep theirs from call to call, as Theano with allow_gc=False keeps them
        from theano.compile.function_module import infer_reuse_pattern
        self.fresh = list(set(no_recycling) | set(infer_reuse_pattern(fgraph, fgraph.outputs)))
        self.updates = [(i, outputs[j]) for i, j in prog.updates]
        self.update_outputs = prog.update_outputs
        self.residents = list(prog.residents.values())
        self.calls = 0
        privates = [var for var in fgraph.inputs if var in destroyed]
        self.tail = host_tail.Tail(fgraph, privates) if privates and self.updates else None
        self.in_place = None
        self.in_place_counts = [0, 0]
        self.last_why_not = None   # (of the VMs linked before: stats)
        self._link(keep=True)

    def _link(self, keep):
        """Link Theano's VM over the cells; ``keep``: intermediates keep their storage
        between calls (no re-allocation of each one every call: the Nengo-like step's 2,000
        small nodes, 2026-11-29, 2-core Xeon: 3.5-6.5 ms a call against 11-12 ms freeing
        them, Theano C 12-17 ms) while they hold at most ``KEEP_BYTES``."""
        from theano.compile.mode import predefined_linkers
        fgraph = self.prog.fgraph
        storage_map = dict(zip(fgraph.inputs, self.cells))
        base = predefined_linkers['cvm']          # Theano C's own VM, the C loop where built
        linker = _host_linker(type(base))(allow_gc=not keep, use_cloop=base.use_cloop,
                                          lazy=base.lazy)
        self.math_counts[0] = self.scan_counts[0] = 0     # (counted again)
        self.thunk_counts.clear()
        linker.tier = self
        linker = linker.accept(fgraph, no_recycling=self.fresh)
        if self.in_place is not None:
            for k, n in enumerate(self.in_place.counts):
                self.in_place_counts[k] += n
        self.in_place = None
        tail = self.tail if keep and self.tail is not None and self.tail.why_not is None \
            else None
        linker.in_place_tail = tail
        if tail is not None:
            fgraph.attach_feature(tail)      # (its orderings: the head first, then the tail)
        try:
            fn, _, _, thunks, order = linker.make_all(input_storage=self.cells,
                                                      output_storage=self.output_cells,
                                                      storage_map=storage_map)
        finally:
            if tail is not None:
                fgraph.remove_feature(tail)
        made = linker.in_place_made
        if made is not None and type(fn).__name__ == 'CVM':
            self.in_place = made        # (Theano's C loop: no Python between C thunks)
        self.fn = fn
        self.storage_map = storage_map
        self.order = order
        self.thunks = thunks
        self.keeps = keep
        fresh = set(self.fresh)
        self.kept = [cell for var, cell in storage_map.items()
                     if var.owner is not None and var not in fresh] if keep else []
        self.call = self._make_call()

    def held_bytes(self):
        """The bytes the intermediates keep between calls."""
        return sum(getattr(cell[0], 'nbytes', 0) for cell in self.kept)

    def _check_held(self):
        """Past ``KEEP_BYTES`` kept (checked at the first calls and every 64th): link again
        with every intermediate freed after its last use."""
        if self.keeps and self.held_bytes() > KEEP_BYTES:
            self.free_intermediates()

    def free_intermediates(self):
        """From now on every intermediate is freed after its last use (a function that
        runs on the host because its values are too large for the device: all of them
        alive at once could be too large for the host)."""
        if self.keeps:
            self._link(keep=False)

    def _make_call(self):
        """``__call__``, with what every call reads looked up once: a steady call of the
        overhead case (``x * 2 + 1`` on a scalar) is a few microseconds, and each attribute
        chain, list built and branch taken for nothing shows in it."""
        fn, residents, private = self.fn, tuple(self.residents), tuple(self.private)
        out_spec = tuple((cell, j in self.update_outputs)
                         for j, cell in enumerate(self.output_cells))
        upd_cells = tuple(cell for _, cell in self.updates)
        targets = tuple((self.prog.input_cells[i], self.prog.residents.get(i))
                        for i, _ in self.updates)
        in_place = self.in_place
        new = [None]        # the values the journal's action writes: one call's, set first
        # (the new values taken before any is written: an update may read another input's
        # cell, as chained default updates do)
        journal = commit.Journal([
            host_tail.taker(upd_cells, new, in_place.marker if in_place else None),
            _host_commit(targets, new)]) if upd_cells else None
        if in_place is not None:
            in_place.journal, in_place.new = journal, new
        pending = commit.pending

        tier, keeps = self, self.keeps

        def call():
            """Run one call; returns the outputs (None for update outputs) and commits the
            updates, all or none."""
            if tier.call is not call:
                return tier.call()          # (linked again since this one was made)
            tier.calls += 1
            if keeps and (tier.calls < 3 or not tier.calls & 63):
                tier._check_held()
                if tier.call is not call:
                    return tier.call()
            for res in residents:
                if res.newer:              # (device_newer without the property: per call)
                    res.sync_to_host()
            if in_place is None:
                for cell, copy in private:
                    value = cell[0]
                    copy[0] = value.copy() if isinstance(value, np.ndarray) else value
                new[0] = None
            else:
                in_place.arm()              # (copies at the boundary, where it must)
            if faults.hook is not None:
                faults.at('host tier run')
            if in_place is None:
                fn()
            else:
                try:
                    if in_place.head_empty:
                        in_place.guard()
                    fn()
                except BaseException:
                    in_place.done(False)
                    if in_place.passed:     # (published: the tail ran whole, or not at all)
                        journal.run()
                        commit.forget(journal)
                    raise
                in_place.done(True)
            outputs = [None if is_update else cell[0] for cell, is_update in out_spec]
            if journal is not None:
                if faults.hook is not None:
                    faults.at('host tier commit')
                if in_place is None or not in_place.passed:   # (else published at the guard)
                    journal.done = 0
                    pending.append(journal)          # the commit point (runtime/commit.py)
                journal.run()
                commit.forget(journal)
            return outputs
        return call

    def __call__(self):
        return self.call()

    def dry_run(self):
        """Run one call committing nothing: (the outputs, [(shared input index, its new
        value)]) -- what a call would return and commit (the probes of a tiny frame the
        tier may take: ``OCLFunction._tier_probe``)."""
        return self._run('host tier probe')

    def timed_run(self, seen=None):
        """Run one call committing nothing, node by node: {Apply node: seconds}, or None
        where a node is lazy (an IfElse: its thunk runs only what its condition needs, as
        Theano's VM alone can tell it). ``seen``: {Apply node: None} to fill with the
        node's input values as the node got them (0-d values copied: a later node may
        overwrite them in place)."""
        if any(getattr(thunk, 'lazy', False) for thunk in self.thunks):
            return None
        self._prepare('host tier probe')
        storage = self.storage_map
        for var in self.fresh:              # (as the VM clears them before each run)
            if var.owner is not None and var in storage:
                storage[var][0] = None
        times = {}
        clock = time.perf_counter
        for node, thunk in zip(self.order, self.thunks):
            if seen is not None and node in seen:
                seen[node] = [np.array(v) if np.ndim(v) == 0 and v is not None else v
                              for v in (storage[var][0] for var in node.inputs)]
            t = clock()
            thunk()
            times[node] = clock() - t
        return times

    def _prepare(self, where):
        if self.in_place is not None:
            self.in_place.armed = False
            self.in_place.known = None   # (the tail may run here over other shapes)
        for res in self.residents:
            if res.device_newer:
                res.sync_to_host()
        for cell, copy in self.private:
            value = cell[0]
            copy[0] = value.copy() if isinstance(value, np.ndarray) else value
        if faults.hook is not None:
            faults.at(where)

    def _run(self, where):
        self._prepare(where)
        self.fn()
        outputs = [None if j in self.update_outputs else cell[0]
                   for j, cell in enumerate(self.output_cells)]
        return outputs, [(i, cell[0]) for i, cell in self.updates]

    def in_place_counts_now(self):
        """[calls whose tail wrote the shared values in place, calls that copied them]."""
        counts = list(self.in_place_counts)
        if self.in_place is not None:
            counts = [a + b for a, b in zip(counts, self.in_place.counts)]
        return counts

    def in_place_why_not(self):
        """None where the tail writes in place; else why every call copies."""
        if self.in_place is not None:
            return None
        if self.tail.why_not is not None:
            return self.tail.why_not
        if not self.keeps:
            return 'intermediates are freed after use'
        return self.last_why_not or "Theano's VM is not its C loop"

    def error_task(self):
        """The index in ``prog.tasks`` of the node at which the VM's last run failed, or
        -1 (the function's ``position_of_error``)."""
        pos = getattr(self.fn, 'position_of_error', None)
        if pos is None or pos < 0:
            return -1
        node = self.order[pos]
        for t, task in enumerate(self.prog.tasks):
            if task.node is node:
                return t
        return -1


#: op class name -> makers of a faster thunk for the host's VM, registered by op families
#: (``ops/host_blas.py``): ``maker(node, storage_map, compute_map, no_recycling)`` returns
#: a thunk over the same storage cells, or None (Theano's own thunk stays)
_THUNK_MAKERS = {}


def register_thunk_maker(op_names, maker):
    """Have the host's VM run the nodes of ops named ``op_names`` by ``maker``'s thunks."""
    for name in op_names:
        _THUNK_MAKERS.setdefault(name, []).append(maker)


def _registered_thunk(node, storage_map, compute_map, no_recycling):
    for maker in _THUNK_MAKERS.get(type(node.op).__name__, ()):
        made = maker(node, storage_map, compute_map, no_recycling)
        if made is not None:
            return made
    return None


@functools.lru_cache(maxsize=None)
def _host_linker(base):
    """Theano's VM linker ``base`` for the host's VM: nodes of an op an op family
    registered a thunk maker for run its thunk (not under ``host_math='c'``); with a
    ``math_backend`` its elementwise nodes computing one of its vector functions run its
    program over enough elements (``runtime/host_math.py``); its Scan nodes run a copy of
    their op whose inner function this linker links and whose loop is
    ``runtime/host_scan.py``'s."""
    class Linker(base):
        #: the ``HostTier`` linking (set on each instance): which vector functions compute
        #: (``math_backend``), and its ``math_counts``, ``scan_counts`` (``stats(f)``)
        tier = None
        #: the tail to run in place (``runtime/host_tail.py``), and the path made for it
        in_place_tail = in_place_made = None

        def make_vm(self, nodes, thunks, input_storage, output_storage, storage_map,
                    post_thunk_clear, computed, compute_map, updated_vars):
            tier = self.tier
            counts = tier.math_counts
            for k, node in enumerate(nodes):
                made = None if tier.c_bits else _registered_thunk(
                    node, storage_map, compute_map, self.no_recycling)
                if made is not None:
                    thunks[k] = made
                    tier.thunk_counts[type(node.op).__name__] = \
                        tier.thunk_counts.get(type(node.op).__name__, 0) + 1
                    continue
                program = (host_math.plan(node, tier.math_fast) if tier.math_backend
                           else None)
                if program is not None:
                    thunks[k] = host_math.thunk(node, storage_map, compute_map, thunks[k],
                                                program, counts, tier.math_loops)
                    counts[0] += 1
                    continue
                scan = _host_scan(node.op, self)
                if scan is not None:
                    thunks[k] = scan.make_thunk(node, storage_map, compute_map,
                                                self.no_recycling)
            tail = self.in_place_tail           # (None for a Scan's inner function)
            if tail is not None:
                tier.last_why_not = tail.check_thunks(nodes, thunks, set(tier.fresh))
            if tail is not None and tier.last_why_not is None:
                made = self.in_place_made = host_tail.InPlace(tail, storage_map, tier.private)
                if tail.boundary is not None:
                    k = nodes.index(tail.boundary)
                    thunks[k] = host_tail.wrap_boundary(thunks[k], made.guard)
            return super(Linker, self).make_vm(
                nodes, thunks, input_storage, output_storage, storage_map,
                post_thunk_clear, computed, compute_map, updated_vars)
    return Linker


def _host_scan(op, outer):
    """A copy of Scan ``op`` whose inner function is linked as ``outer`` (a linker of
    :func:`_host_linker`) links, with the options of the VM linker it had, and whose loop
    is ``host_scan.executor``'s; None for another op, or a Scan whose mode links otherwise
    (the Python linker, DebugMode's, theano_ocl's). Not kept on ``op``: a function holding
    it would no longer pickle."""
    if type(op).__name__ != 'Scan':
        return None
    from theano.compile.mode import Mode
    from theano.gof.vm import VM_Linker
    mode = op.mode_instance
    linker = getattr(mode, 'linker', None)
    if type(linker) is type(outer) or not isinstance(linker, VM_Linker):
        return None
    made = copy.copy(op)
    made.fn = None                      # (Scan.make_thunk compiles its inner function)
    inner = type(outer)(allow_gc=linker.allow_gc, use_cloop=linker.use_cloop,
                        lazy=linker.lazy)
    inner.tier = outer.tier
    made.mode_instance = Mode(linker=inner, optimizer=mode.provided_optimizer)
    made.execute = host_scan.executor(made, outer.tier.scan_counts)  # (make_thunk binds)
    return made


def _host_commit(targets, new):
    """The commit action of :meth:`HostTier._make_call`: ``new[0]`` (one call's new values,
    in the order of ``targets``) into the shared variables' cells (their device copies are
    then stale). Writing them twice writes the same."""
    def action():
        if new[0] is None:              # (the tail never ran: nothing to commit)
            return
        for (cell, res), value in zip(targets, new[0]):
            cell[0] = value
            if res is not None:
                res.host_set()          # (host_dirty = True: device_newer cleared)
    return action
