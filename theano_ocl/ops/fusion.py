"""Fusion, in one place: the passes that fold values into their one consumer.

* :func:`fuse_producers`, :func:`fuse_shared_producers`, :func:`fuse_kept_producers`: an
  elementwise producer folded into its consumer (a reduction, a small product, another
  elementwise kernel), which receives it as an ``ops.elemwise.Fused`` value;
* :func:`fuse_epilogues`: a small product folded into its one elementwise consumer, which
  receives it as an ``ops.elemwise.Deferred`` value (its code runs in the product's
  kernel per element, an ``ops.elemwise.Epilogue``);
* :func:`fused_value`: what the frame builder hands a consumer for a folded input;
* the exclusion rule every pass that moves reads later applies (:func:`destroyed_roots`,
  :func:`reads_cross_a_destroy`; ``linker.lazy_branches`` uses it too).

The value types live in ``ops/elemwise.py``: they are made of elementwise code, and a
consumer's plan tells them from DArrays by their type (``isinstance``), which the
elementwise family could not do if they were defined here (this module imports it).

Device implementations declare what they take: ``DeviceImpl.fusable_inputs`` (inputs that
may be a ``Fused`` value) and ``takes_epilogue`` (a product that runs an epilogue).
The passes run over the linked tasks (``linker.build_program``) under the function's
settings (``fuse``, ``epilogues``: ``runtime.settings``).
"""
from ..runtime import settings
from ..runtime.dispatch import dispatch_s
from ..runtime.context import provide
from ..runtime.host_tail import alias_root
from .elemwise import Deferred, ElemwiseImpl, Fused


def fused_value(task, dvals):
    """The value a task folded into its consumer stands for, from the VM's device values:
    a :class:`Fused` elementwise producer, or a :class:`Deferred` product."""
    ins = [fused_value(task.fused[j], dvals) if j in task.fused else dvals[v]
           for j, v in enumerate(task.node.inputs)]
    if isinstance(task.impl, ElemwiseImpl):
        return Fused.of(task.impl, ins)
    return Deferred(task, ins)


provide('fused_value', fused_value)


def fusable(impl):
    """Whether an elementwise implementation may be folded into its consumer: one output,
    no error flag (integer division checks), not float16 (its stored value is rounded), no
    complex operand (the consumers' templates load real values only)."""
    return (isinstance(impl, ElemwiseImpl) and not impl.checked and len(impl.out_dtypes) == 1
            and impl.out_dtypes[0] != 'float16'
            and not any(v.type.dtype.startswith('complex')
                        for v in impl.node.inputs + impl.node.outputs))


def destroyed_inputs(node):
    """The input positions ``node`` overwrites in place (its ``destroy_map``)."""
    return {j for js in (getattr(node.op, 'destroy_map', None) or {}).values() for j in js}


def destroyed_roots(tasks, skip=()):
    """Per task, the alias roots of the values it overwrites in place (its ``destroy_map``
    inputs'); None for the nodes in ``skip`` and where the destroy is void
    (:func:`void_destroy`). One half of the exclusion rule every pass that
    moves a task's reads later in the order applies (:func:`reads_cross_a_destroy`)."""
    out = []
    for t in tasks:
        node = t.node
        if node in skip or void_destroy(t):
            out.append(None)
            continue
        out.append({alias_root(node.inputs[j]) for j in destroyed_inputs(node)})
    return out


def void_destroy(task):
    """Whether a task Theano made in place overwrites nothing here: folded into its consumer
    (it stores nothing), or an elementwise node made to write fresh outputs."""
    return task.fused_into is not None or (task.kind == 'dev' and task.impl.writes_fresh)


def _blockers(reads, destroyed, start, stop):
    """The places strictly between ``start`` and ``stop`` whose task overwrites in place
    what ``reads`` (variables) read (:func:`reads_cross_a_destroy` as a list)."""
    roots = {alias_root(u) for u in reads}
    return [k for k in range(start + 1, stop) if destroyed[k] and roots & destroyed[k]]


def reads_cross_a_destroy(reads, destroyed, start, stop):
    """The exclusion rule: whether a task reading ``reads`` (variables) may not be moved
    from place ``start`` to ``stop`` in the order, because a task in between (``start`` <
    k < ``stop``) overwrites in place what it reads (``destroyed``: from
    :func:`destroyed_roots`)."""
    return bool(_blockers(reads, destroyed, start, stop))


def fuse_producers(prog, tasks, need_host, update_sources):
    """Fold elementwise producers into their one consumer (a pass over the linked tasks).

    A device Elemwise node whose only output has exactly one client, a consumer input its
    implementation lists in ``fusable_inputs`` (the reduced value of a CAReduce or argmax,
    the vector/right operand of a product), is not launched: the consumer's kernel computes
    those values from the producer's inputs (``ops.fusion.Fused``), so the intermediate
    is never stored and a launch disappears. Not when the value is a function output, an
    update, read on the host, destroyed by its consumer, or when a task between the two
    (the consumer included) destroys what the producer reads: its reads move to the
    consumer's place in the order. Where every such task is an elementwise node Theano
    made in place, it writes a fresh output instead (``DeviceImpl.writes_fresh``) and the
    producer is folded; a folded producer's own in-place destroy is void.
    """
    if not settings.current().fuse:
        return
    pos = {t.node: k for k, t in enumerate(tasks)}
    destroyed = destroyed_roots(tasks)
    for c, task in enumerate(tasks):
        if task.kind != 'dev':
            continue
        destroyed_here = destroyed_inputs(task.node)
        for j in task.impl.fusable_inputs:
            v = task.node.inputs[j]
            if v.owner is None or j in destroyed_here or j in task.host_inputs:
                continue
            e = tasks[pos[v.owner]]
            if e.kind != 'dev' or e.fused_into is not None or not fusable(e.impl):
                continue
            if v in prog.keep_vars or v in need_host or v in update_sources or \
                    list(v.clients) != [(task.node, j)]:
                continue
            # the consumer itself included: it runs the producer's code where it reads. An
            # elementwise node in between that Theano made in place over what the producer
            # reads writes a fresh output instead (a buffer more, a launch less)
            blockers = _blockers(e.node.inputs, destroyed, pos[e.node], c + 1)
            if not all(k != c and tasks[k].kind == 'dev' and
                       isinstance(tasks[k].impl, ElemwiseImpl) for k in blockers):
                continue
            for k in blockers:
                tasks[k].impl.writes_fresh = True
                destroyed[k] = None
            destroyed[pos[e.node]] = None
            e.fused_into = task
            task.fused[j] = e
            _reads_move(prog, pos, e.node.inputs, task)


#: whether a shared producer folds into clients that are folded themselves: None on GPUs
#: only, else always (True) or never (False; tests). On PoCL computing the LSTM gradient's
#: gates twice cost more than the two launches a step it saved (CPU LSTM step 150-169 ms
#: against 124-127 without, 2 rounds)
NESTED = None


def fuse_shared_producers(prog, tasks, need_host, update_sources, dev):
    """Fold a cheap elementwise producer into each of its elementwise consumers (after
    ``fuse_producers``, which takes producers with one consumer).

    Theano's fusion makes one kernel per output, so a value that several elementwise
    nodes read stays a launch of its own: the momentum term ``mu * v`` of an SGD step, read
    by the parameter's update and by the velocity's; the gates of an LSTM's gradient step,
    ``sigmoid(g[:, a:b])``, each read by two elementwise nodes. Where every client of such
    a value is a device Elemwise node that can compose it (``ElemwiseImpl.takes_fused``),
    each client computes it from the producer's inputs in its own kernel and the producer
    is neither launched nor stored. On GPUs a client may itself be folded into its one
    consumer (``fuse_producers``: the gradient of a slice into its ``IncSubtensor``): its
    code, the producer's composed in, runs there. Only a producer reading at most one array that
    is not broadcastable in every dimension is duplicated so (one multiply per element
    instead of a store and a load: no more memory traffic). The exclusions of
    ``fuse_producers`` apply to every client, at the place where its code runs: a task
    between the producer and there (that task included) overwriting in place what the
    producer reads must be an elementwise node, and writes a fresh output instead; so does
    a client that Theano made in place over the producer's value.
    """
    if not settings.current().fuse:
        return
    pos = {t.node: k for k, t in enumerate(tasks)}
    destroyed = destroyed_roots(tasks)
    nested = dev.is_gpu if NESTED is None else NESTED
    for p, e in enumerate(tasks):
        takers = _shared_takers(prog, tasks, pos, e, need_host, update_sources, nested)
        if not takers:
            continue
        blockers = set()
        for _, t in takers:
            blockers.update(_blockers(e.node.inputs, destroyed, p, pos[runs_at(t).node] + 1))
        if not all(tasks[k].kind == 'dev' and isinstance(tasks[k].impl, ElemwiseImpl)
                   for k in blockers):
            continue
        for t in [tasks[k] for k in blockers] + \
                [t for j, t in takers if j in destroyed_inputs(t.node)]:
            t.impl.writes_fresh = True      # (a taker: in place over a value never stored)
            destroyed[pos[t.node]] = None
        destroyed[p] = None
        e.fused_into = takers[0][1]
        for j, t in takers:
            t.fused[j] = e
            _reads_move(prog, pos, e.node.inputs, runs_at(t))


def runs_at(task):
    """The task whose kernel runs ``task``'s code: itself, or the consumer it is folded into
    (through a chain of single consumers)."""
    while task.fused_into is not None:
        task = task.fused_into
    return task


def _shared_takers(prog, tasks, pos, e, need_host, update_sources, nested):
    """[(input position, client task)] of a producer ``e`` that ``fuse_shared_producers``
    may fold into all of its clients (``nested``: folded ones too), else None."""
    if e.kind != 'dev' or e.fused_into is not None or e.fused or not fusable(e.impl):
        return None
    v = e.node.outputs[0]
    if len(v.clients) < 2 or v in prog.keep_vars or v in need_host or v in update_sources:
        return None
    if sum(not all(u.type.broadcastable) for u in e.node.inputs) > 1:
        return None
    takers = []
    for node, j in v.clients:
        t = tasks[pos[node]] if node in pos else None
        if t is None or t.kind != 'dev' or not isinstance(t.impl, ElemwiseImpl) or \
                not t.impl.takes_fused() or \
                j in t.host_inputs or j in t.fused or t.node.inputs.count(v) > 1:
            return None
        if t.fused_into is not None and not (nested and _folded_once(t)):
            return None
        takers.append((j, t))
    return takers


def _folded_once(task):
    """Whether ``task`` and each consumer it is folded into are folded into one consumer
    only (``fuse_producers``), so its code runs at one place: :func:`runs_at`."""
    while task.fused_into is not None:
        if len(task.node.outputs[0].clients) != 1 or \
                not isinstance(task.impl, ElemwiseImpl):
            return False
        task = task.fused_into
    return True


def fuse_kept_producers(prog, tasks, need_host):
    """Compute an elementwise producer whose value is kept in its elementwise consumer's
    kernel, which stores it as an output more (after the other passes).

    Theano's fusion stops at a value something else needs too (a function output, a
    Scan's state, an update, a later node): the LSTM step's cell state ``c`` is kept and
    read by ``o * tanh(c)``, two launches that read the same gates. Where such a producer
    has one elementwise client of the same broadcast pattern (``ElemwiseImpl.takes_fused``)
    and every other use comes after that client, the client's kernel computes the value
    from the producer's inputs, uses it, and stores it (``Fused.stored``): a launch less
    and no reload of the value. Not for a value a host node reads, nor where the client
    is of an IfElse branch the producer is not of (``linker.lazy_branches``: the client may
    be skipped where the value is needed). The producer's reads
    move to the client's place: a task in between overwriting in place what it reads
    must be an elementwise node, and writes a fresh output instead, as the client does
    where Theano made it in place over what the producer reads.
    """
    if not settings.current().fuse:
        return
    pos = {t.node: k for k, t in enumerate(tasks)}
    destroyed = destroyed_roots(tasks)
    for p, e in enumerate(tasks):
        if e.kind != 'dev' or e.fused_into is not None or not fusable(e.impl) or \
                not all(isinstance(x.impl, ElemwiseImpl) and not x.stored
                        for x in e.fused.values()):
            continue
        v = e.node.outputs[0]
        if v in need_host or e.download_outputs:
            continue
        users = sorted((pos[n], j) for n, j in v.clients if n != 'output')
        if not users:
            continue
        c, j = users[0]
        t = tasks[c]
        if len(users) > 1 and users[1][0] == c:
            continue                          # the client reads it twice
        if t.kind != 'dev' or not isinstance(t.impl, ElemwiseImpl) or \
                t.fused_into is not None or not t.impl.takes_fused() or \
                j in t.host_inputs or j in t.fused or \
                not all(isinstance(x.impl, ElemwiseImpl) for x in t.fused.values()) or \
                t.node.outputs[0].type.broadcastable != v.type.broadcastable or \
                tuple(t.regions) != tuple(e.regions):
            continue                # (a client of an IfElse branch may not run at all)
        blockers = _blockers(_reads(e), destroyed, p, c + 1)
        if not all(tasks[k].kind == 'dev' and isinstance(tasks[k].impl, ElemwiseImpl)
                   for k in blockers):
            continue
        for k in blockers + ([c] if j in destroyed_inputs(t.node) else []):
            tasks[k].impl.writes_fresh = True
            destroyed[k] = None
        destroyed[p] = None
        e.fused_into = t
        e.stored = True
        t.fused[j] = e
        _reads_move(prog, pos, _reads(e), t)


def _reads_move(prog, pos, reads, task):
    """The values a folded task reads are read at its consumer ``task``'s place: none of them
    may be released (its buffer reused, or taken in place) before that. A task between the
    two may have been the last to read one: the consumer becomes its last use."""
    here = pos[task.node]
    for u in reads:
        last = prog.last_use.get(u)
        if last is not None and pos[last.node] < here:
            prog.last_use[u] = task


def _reads(task):
    """Variables a task's kernel reads, its folded producers' inputs included."""
    out = set()
    for j, v in enumerate(task.node.inputs):
        if j in task.fused:
            out |= _reads(task.fused[j])
        else:
            out.add(v)
    return out


#: CPU devices whose launch costs at least this (seconds: ``runtime.dispatch``) take
#: epilogues. On PoCL the product kernel does not vectorize the consumer's work across
#: work-items as the batched elementwise kernel does: on the 2-core Xeon (empty launches of
#: 4-6 us) a Nengo-like step was slower with the launch less; on the H200 machine's 16-core
#: PoCL (41 us) its step took 612-617 us with the synapse update folded into its reduction
#: (and the products fused, ``ops.reduce.fuse_max_cpu``) against 708-724 us (one process
#: each, twice, 2026-12-01).
EPILOGUE_CPU_DISPATCH_S = 15e-6


def fuse_epilogues(prog, tasks, need_host, update_sources, dev):
    """Fold products and reductions into their one elementwise consumer (after
    ``fuse_producers``).

    A device Dot/Gemv or reduction (``takes_epilogue``) whose output's only client is a fusable
    elementwise node, of the same broadcast pattern as that node's output, is not launched
    at its place: the consumer plans it with itself as the epilogue
    (``ops.fusion.Deferred``), so the product's kernel writes the consumer's output and
    the product's value is never stored (a launch less: the LIF update reading its
    encoder's product, an MLP layer's ``tanh(dot(h, W) + b)``, a Nengo synapse reading its
    decoders' sum). The small-product kernel, the tiled GEMM kernel and the reduction's
    generic kernel in one part (``ops.reduce.plan_reduce_epilogue``) take it; a product
    another backend computes, or a reduction in several parts, is planned before its
    consumer, which then runs as usual (there, a launch more than unfolded is possible:
    the consumer's launch no longer merges with elementwise launches planned before the
    reduction, 9 against 8 launches in one case on the H200). The same exclusions as ``fuse_producers`` apply, the product's
    reads (its folded producer's too) moving to the consumer's place. On GPUs, and on CPU
    devices whose launches cost at least ``EPILOGUE_CPU_DISPATCH_S`` (``runtime.dispatch``),
    unless the ``epilogues`` setting is 'always' (every device) or '0' (never:
    ``runtime.settings``).
    """
    s = settings.current()
    if not s.fuse or s.epilogues == '0' or (dev.is_cpu and s.epilogues != 'always' and
                                            dispatch_s(dev) < EPILOGUE_CPU_DISPATCH_S):
        return
    pos = {t.node: k for k, t in enumerate(tasks)}
    destroyed = destroyed_roots(tasks)
    for c, task in enumerate(tasks):
        if task.kind != 'dev' or not isinstance(task.impl, ElemwiseImpl) or \
                task.fused_into is not None or task.fused or not fusable(task.impl):
            continue
        out_bcast = task.node.outputs[0].type.broadcastable
        for j, v in enumerate(task.node.inputs):
            if v.owner is None or v.type.broadcastable != out_bcast:
                continue
            p = tasks[pos[v.owner]]
            if p.kind != 'dev' or p.fused_into is not None or \
                    not p.impl.takes_epilogue:
                continue
            if v in prog.keep_vars or v in need_host or v in update_sources or \
                    list(v.clients) != [(task.node, j)] or len(p.node.outputs) != 1:
                continue
            reads = _reads(p)
            # tasks between the two only: the consumer itself writes a fresh output when
            # it takes the epilogue, and runs after the product when it does not
            if reads_cross_a_destroy(reads, destroyed, pos[p.node], c):
                continue
            p.fused_into = task
            task.fused[j] = p
            _reads_move(prog, pos, reads, task)
            break             # one product per consumer
