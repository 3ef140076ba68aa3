"""The host tier's in-place updates: no private copy of a destroyed shared variable, all or
nothing all the same.

Theano's optimizer turns ``W - lr * g`` and ``mu * v - lr * g`` into nodes that overwrite
``W`` and ``v`` in place. The host tier (``runtime/host_tier.py``) commits a call's updates
all or none, so it used to hand each such node a private copy of the shared value every
call: 35-48 us of a ~600 us step for a 784-128-10 MLP on a 2-core CPU, 4-5% of a larger
one's. The copy is only needed when the call could stop after the first in-place write;
this module arranges that, where it can be proven, the call cannot:

- **The tail.** The nodes that write a shared value in place, with everything that must
  run after them (their clients, and whatever the destroy handler orders after them), form
  the *tail*; every other node, the *head*, is ordered before it. The head only reads the
  shared values: an error or an interrupt there leaves them as they were.
- **A tail that cannot fail.** Every tail node is one whose C code fails only for its
  inputs' shapes (``SHAPE_ONLY``: elementwise nodes, products, reductions, views), runs as
  a C thunk, and allocates nothing (its outputs are written in place, are views, or keep
  their storage between calls). At the boundary between head and tail a guard compares the
  shapes of the values the tail reads with those of the tail's last complete run: equal,
  the tail runs again as it ran then, and cannot raise.
- **A tail that cannot be interrupted.** Theano's C loop (``CVM``) runs C thunks without
  running Python code between them, so a Ctrl-C arriving during the tail is only raised
  once the whole tail has run. The guard publishes the call's commit (``runtime/commit.py``)
  before the tail starts; the commit then reads whether the tail ran (a cell the first
  in-place node sets): it commits every update if so, none if the interrupt came first.

Where the shapes differ (the first call, a new batch size) the guard copies the values the
tail destroys, as before, and the tail's run with them teaches the guard the new shapes.
A function whose tail does not qualify (a Python thunk, a node with a value-dependent
error such as an index, an allocating node, Theano's Python VM, a lazy graph) copies at the
start of every call, as before.
"""
from collections import OrderedDict

import numpy as np

from . import commit, faults

#: ops whose C code raises only for its inputs' shapes (and types, fixed by the graph)
SHAPE_ONLY = frozenset([
    'Elemwise', 'DimShuffle', 'Dot22', 'Dot22Scalar', 'Gemm', 'CGemv', 'CGer', 'Gemv', 'Ger',
    'Dot', 'CAReduce', 'CAReduceDtype', 'Sum', 'Prod', 'Max', 'Min', 'MaxAndArgmax',
    'Argmax', 'Rebroadcast', 'DeepCopyOp', 'ViewOp', 'OutputGuard', 'Shape', 'Shape_i'])


def destroyed_roots(fgraph):
    """The graph's inputs that some node overwrites in place, directly or through a view."""
    roots = set()
    for node in fgraph.apply_nodes:
        for js in (getattr(node.op, 'destroy_map', None) or {}).values():
            for j in js:
                roots.add(alias_root(node.inputs[j]))
    return roots


def _writes(node, private):
    """The index of an output of ``node`` written over one of ``private``, or None."""
    for k, js in sorted((getattr(node.op, 'destroy_map', None) or {}).items()):
        if any(alias_root(node.inputs[j]) in private for j in js):
            return k
    return None


def alias_root(var):
    """The variable whose storage ``var`` views or was computed in place over."""
    while var.owner is not None:
        op = var.owner.op
        k = var.owner.outputs.index(var)
        src = (getattr(op, 'view_map', None) or {}).get(k) or \
            (getattr(op, 'destroy_map', None) or {}).get(k)
        if not src:
            return var
        var = var.owner.inputs[src[0]]
    return var


class Tail(object):
    """The tail of ``fgraph`` for the inputs ``private`` (see the module doc): ``nodes``,
    ``boundary`` (the head's last node, None for an empty head), ``external`` (the variables
    the tail reads and does not compute), ``marker`` (an output of an in-place node: set
    once the tail ran), and ``why_not`` (None, or why the tail cannot run in place)."""

    def __init__(self, fgraph, private):
        ords = fgraph.orderings()
        after = {}
        for node, before in ords.items():
            for b in before:
                after.setdefault(b, []).append(node)
        private = set(private)
        starts = [node for node in fgraph.apply_nodes if _writes(node, private) is not None]
        tail, stack = set(), list(starts)
        while stack:
            node = stack.pop()
            if node in tail:
                continue
            tail.add(node)
            for out in node.outputs:
                stack.extend(client for client, _ in out.clients if client != 'output')
            stack.extend(after.get(node, ()))
        order = fgraph.toposort()
        self._head_order = [node for node in order if node not in tail]
        self._tail_order = [node for node in order if node in tail]
        self.nodes = tail
        self.boundary = self._head_order[-1] if self._head_order else None
        computed = set(out for node in tail for out in node.outputs)
        external = []
        for node in self._tail_order:
            for var in node.inputs:
                if var not in computed and var not in external and \
                        not hasattr(var, 'data'):          # (a constant's shape is fixed)
                    external.append(var)
        self.external = external
        first = self._tail_order[0] if starts else None    # (a start: it reads no tail node)
        self.marker = None if first is None else first.outputs[_writes(first, private)]
        self.why_not = self._static_reason()

    def _static_reason(self):
        if self.marker is None:
            return 'nothing is written in place'
        for node in self.nodes:
            if type(node.op).__name__ not in SHAPE_ONLY:
                return '%s can fail for its values' % type(node.op).__name__
        return None

    def orderings(self, fgraph):
        """A graph feature's orderings (attached while the VM is linked): the boundary after
        every other head node, every tail node after the boundary."""
        ords = OrderedDict()
        if self.boundary is None:
            return ords
        ords[self.boundary] = [node for node in self._head_order if node is not self.boundary]
        for node in self._tail_order:
            ords[node] = [self.boundary]
        return ords

    def check_thunks(self, nodes, thunks, fresh):
        """Why the linked tail cannot run in place (a thunk that is not Theano's C code, an
        output allocated every call), or None."""
        for node, thunk in zip(nodes, thunks):
            if node not in self.nodes:
                continue
            if not hasattr(thunk, 'cthunk') or getattr(thunk, 'lazy', False):
                return '%s runs Python code' % type(node.op).__name__
            written = set((getattr(node.op, 'destroy_map', None) or {}).keys()) | \
                set((getattr(node.op, 'view_map', None) or {}).keys())
            for k, out in enumerate(node.outputs):
                if k not in written and out in fresh:
                    return '%s allocates its output every call' % type(node.op).__name__
        return None


def wrap_boundary(thunk, guard):
    """The boundary node's thunk, then ``guard`` (a Python thunk for Theano's VM)."""
    def boundary():
        thunk()
        guard()
    boundary.lazy = False
    for attr in ('inputs', 'outputs'):
        if hasattr(thunk, attr):
            setattr(boundary, attr, getattr(thunk, attr))
    return boundary


class InPlace(object):
    """One linked VM's in-place path: ``guard`` (the boundary's check), ``arm``, and the
    counts (calls run in place, calls that copied)."""

    def __init__(self, tail, storage_map, private):
        self.cells = tuple(storage_map[var] for var in tail.external)
        self.marker = storage_map[tail.marker]
        self.private = private
        self.journal = self.new = None     # (the call's commit: set when the call is made)
        self.known = None           # the tail's input shapes at its last complete run
        self.seen = None            # this call's, when it copied
        self.armed = False
        self.passed = False
        self.head_empty = tail.boundary is None
        self.counts = [0, 0]

    def arm(self):
        """Before the VM runs: the destroyed values handed over as they are."""
        for cell, copy in self.private:
            copy[0] = cell[0]
        self.marker[0] = None
        self.new[0] = None
        self.seen = None
        self.passed = False
        self.armed = True

    def guard(self):
        if not self.armed:          # (a probe's or a timed run: it copied before)
            return
        self.armed = False
        shapes = tuple([getattr(cell[0], 'shape', None) for cell in self.cells])
        if shapes == self.known:
            if faults.hook is not None:
                faults.at('host tier in place')
            journal = self.journal
            journal.done = 0
            commit.pending.append(journal)      # the commit point (the module doc)
            self.passed = True
            self.counts[0] += 1
            if faults.hook is not None:
                faults.at('host tier tail')
            return
        for cell, copy in self.private:
            value = copy[0]
            copy[0] = value.copy() if isinstance(value, np.ndarray) else value
        self.seen = shapes
        self.counts[1] += 1

    def done(self, ok):
        """After the VM's run: ``ok``, it completed."""
        self.armed = False
        if ok:
            if not self.passed:
                self.known = self.seen
        elif not self.passed:
            self.known = None       # (a tail may have run part way over other shapes)


def taker(upd_cells, new, marker):
    """The commit's first action: the new values read from the update cells, once, and
    only where the tail ran (``marker``: its cell, None where every run completes it)."""
    def take():
        if new[0] is None and (marker is None or marker[0] is not None):
            new[0] = [cell[0] for cell in upd_cells]
    return take
