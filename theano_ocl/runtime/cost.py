"""Host or device, per input signature, on CPU devices: a cost model measured on the device.

A CPU device shares memory with the host, so a function can run either as PoCL kernels or
as Theano's own C code on the same values. Kernels win where the work is parallel and
large; for a small function the device's fixed costs (each launch, the round trip of a
call) exceed the whole of Theano C's time (the tutorial's logistic regression step, 20 x
784 float64: about 0.2 ms in C against 0.35-0.45 ms in 11 launches on the 2-core Xeon,
2026-11-29).

The choice is made once per input signature, at its first call, before any result is
returned, so a function never changes where it computes (code comparing results across
calls, ``verify_grad`` or a line search, sees no move in the last bits):

- the call runs on the host, dry (Theano's VM over the function's values; nothing is
  committed), until two runs agree within 10% (at most ``DRY_RUNS``: a process's first
  runs are cold), and the least run's wall time is ``host_s``; where merely reading the inputs once on the host (at the host's measured
  read bandwidth) takes longer than the device's least time below, nothing runs dry;
- the device's time is bounded below by what its calls cost whatever their work:
  ``call + launches * launch``, with ``call`` and ``launch`` measured once per device by
  theano_ocl's own runtime (:func:`constants`) and ``launches`` the device nodes that
  launch, plus the host work its call does as Theano's VM does it (:func:`host_work`: host
  fallbacks, small products run by the host's BLAS; timed node by node in a further dry
  run), plus the time its elementary functions (exp, log, expm1, ...) take the device,
  measured per function on the device (:func:`function_work`: PoCL runs some of them one
  element at a time). Nothing else is assumed of the device's speed on its kernels' work:
  fused kernels and a queued BLAS can beat Theano C's code on one core (the MLP
  784-1000-1000-10 step at batch 128 on one core of the 2-core Xeon: 24 ms on the device,
  73 ms in Theano's VM); a frame whose hot calls run its batched plan counts its
  launches as merged (:func:`batched`);
- where ``host_s`` is below ``MARGIN`` times that bound, the signature's calls run on the
  host from this one on (a frame ``on_host``, as for a value the device cannot hold); where
  it is below ``VERIFY`` times the bound, the device plans the call and its frame runs a
  few passes (nothing committed), then the host runs dry as many times, and the host is
  chosen where its least time is at most those passes' (:func:`measure`; not for step 0
  of a run, whose steps the device runs without a call's round trip each);
  ``report(f)`` prints why, either way.

Where a call's inputs are device arrays, the time to read them to the host (measured at
the choice) counts on the host's side: every call on the host reads them.

Where a call's inputs or outputs are device arrays and the device's buffers are the
host's memory (``runtime/host_views.py``), the host reads and writes them in place: the
reads cost nothing more, and results written into device buffers cost a copy each (counted
at the host's read bandwidth).

Functions it leaves alone: those on a GPU, those with device outputs where the host could
not write them in place (each result would be uploaded: a write of 4 KB or more costs
PoCL ~25 us, the device's call as much as it saves), profiled ones, and
those whose host run could be seen twice (a ``Print``, a random generator's state, a
collective, an op without a C or Python implementation Theano's VM can run dry). A dry run
that raises leaves the choice to the device, which raises the same error. The
``cost_model`` setting ('on', 'off') turns it off.
"""
import time

import numpy as np

from . import host_views

#: the ops whose host run is seen by the outside world (printed, a generator advanced, a
#: message sent): their functions always run as planned on the device
_SEEN = frozenset(['Print', 'RandomFunction', 'AllReduce', 'Broadcast', 'Wait',
                   'mrg_uniform'])

#: launches of the calibration function's longer variant (see :func:`constants`)
_CHAIN = 8


def constants(dev, make_mode):
    """(launch_s, call_s, read_bps) for ``dev``, measured once per process: ``call_s`` and
    ``launch_s`` with theano_ocl's own runtime (``make_mode(dev)``: the linker's mode for
    it), two small functions of 4096 floats (one launch, and a chain of reductions and
    elementwise steps of ``2 * _CHAIN + 1`` launches) each called until its times settle:
    ``call_s`` the one-launch function's call (the round trip every call pays: guard,
    launch, download), ``launch_s`` what each further launch adds; ``read_bps`` the bytes
    per second the host reads (the sum of 8 MiB of float64)."""
    c = getattr(dev, 'cost_constants', None)
    if c is not None:
        return c
    import theano
    import theano.tensor as T
    from ..counts import stats
    mode = make_mode(dev)
    x = T.fvector('x')
    y = x
    for _ in range(_CHAIN):
        y = T.exp(y - y.max())           # a reduction, then an elementwise step
    fns = [theano.function([x], x * 2, mode=mode), theano.function([x], y.sum(), mode=mode)]
    v = np.linspace(-1, 1, 4096).astype('float32')
    times = []
    for f in fns:
        for _ in range(3):
            f(v)
        times.append((_best(lambda: f(v), 10), stats(f)['launches']))
    (one, n1), (chain, n2) = times
    launch_s = max(chain - one, 0.0) / max(n2 - n1, 1)
    big = np.ones(1 << 20)
    read_bps = big.nbytes / _best(big.sum, 3)
    c = dev.cost_constants = (launch_s, max(one - launch_s * n1, 0.0), read_bps)
    f0 = fns[0]
    dev.cost_probe = (lambda: f0(v), one)
    return c


def slowdown(dev):
    """How much slower than when :func:`constants` measured it the device's one-launch
    calibration call runs now (at least 1): a machine shared with other work, or a virtual
    one whose host takes its cores for a while, runs everything slower for milliseconds
    at a time, the host's dry runs as well as the device's calls; the device's least time,
    measured once, is scaled by this when a choice is made."""
    probe = getattr(dev, 'cost_probe', None)
    if probe is None:
        return 1.0
    call, then = probe
    return max(_best(call, 5, rounds=3) / then, 1.0) if then > 0 else 1.0


def _best(fn, calls, rounds=5):
    """The least mean time of ``calls`` calls of ``fn`` over ``rounds`` rounds."""
    best = float('inf')
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls)
    return best


def _launching(t):
    """Whether task ``t`` launches (see :func:`launches`)."""
    if t.kind != 'dev' or t.fused_into is not None:
        return False
    return not (t.impl.is_view and not t.impl.dynamic_inputs)


def launches(prog, seen=None, batch_min=None):
    """The launches a call of ``prog`` would make at least: its device tasks not fused into
    another's kernel, less views (a host BLAS product queued on the device counts: it is a
    command of the queue). With ``seen`` ({Apply node: its input values in a host run}),
    a device loop (a Scan) also counts, for each step it was asked for
    (``impl.steps_for``), the longest
    chain of launches of its inner function that depend on each other (a step's launches
    are merged where independent, never where one reads another's result) and the launch
    that stores the step's outputs. Counted once,
    the tutorial's scan RNN training step (16 inputs, 64 hidden, 20 steps) was given 30
    launches, and the device chosen: 5.3 ms a call against Theano C's 2.7 (2-core EPYC,
    2026-11-30).

    ``batch_min``: the launches from which a hot frame's calls run its batched plan
    (``runtime/planner.py``; None: never): where the function has that many, its own
    launches count as :func:`batched` says, not one by one."""
    own = sum(1 for t in prog.tasks if _launching(t))
    n = 0
    for t, steps in _loops(prog, seen):
        for fn in t.impl.inner_functions:
            inner_prog = getattr(getattr(fn, 'fn', None), 'program', None)
            if inner_prog is not None and steps:
                # (+1: a step's outputs stored into their rows of the outer buffers,
                # one copy or one batched launch at least)
                n += steps * (chain(inner_prog) + 1)
    if batch_min is not None and own >= batch_min:
        own = min(own, batched(prog))
    return n + own


#: the implementations whose launches a batched plan merges: elementwise kernels and
#: products (small ones run as one batched kernel, ``ops/gemm_small.py``)
_BATCHING = ('ElemwiseImpl', 'DotImpl', 'GemmImpl', 'GemvImpl', 'GerImpl')


def batched(prog):
    """The launches ``prog``'s call makes at least once its batched plan runs: launches of
    one kind at one depth of the graph (each reads nothing another of them writes) are one
    launch, where their implementation batches (``_BATCHING``; a kind: the same op over the
    same input and output types); every other launch counts one. Counted one by one, the
    Nengo-like E=500 step was given 2,501 launches, and the host chosen at 20-30 ms a call
    where its batched plan makes 9 launches a step in 1.1-1.3 ms (2-core EPYC,
    2026-11-30)."""
    kinds = set()
    n = 0
    for t, d, launching in _depths(prog):
        if not launching:
            continue
        if type(t.impl).__name__ not in _BATCHING:
            n += 1
            continue
        node = t.node
        kind = (d, type(t.impl).__name__, node.op, tuple(v.type for v in node.inputs),
                tuple(v.type for v in node.outputs))
        if kind not in kinds:
            kinds.add(kind)
            n += 1
    return n


def loop_steps(prog, seen):
    """The steps ``prog``'s device loops (Scans) make for the inputs of a host run
    (``seen``, as :func:`launches` takes it). Each costs at least a call's round trip
    besides its launches: a step moves its rows in and out and runs its inner frame from
    the host (the tutorial's scan RNN training step on the 2-core EPYC's PoCL: about 130
    us a step against 3-4 launches of 5-21 us, 2026-11-30)."""
    return sum(steps or 0 for _, steps in _loops(prog, seen))


def _loops(prog, seen):
    """(task, steps) of ``prog``'s device loops whose inputs a host run saw (``seen``)."""
    if not seen:
        return
    for t in prog.tasks:
        if _launching(t) and getattr(t.impl, 'inner_functions', None) \
                and seen.get(t.node) is not None:
            yield t, t.impl.steps_for(seen[t.node])


def chain(prog):
    """The longest chain of ``prog``'s launches each of which reads the one before (its
    tasks are in an order where a task follows those whose results it reads)."""
    return max([d for _, d, _ in _depths(prog)] or [0])


def _depths(prog):
    """(task, depth, launching) over ``prog``'s tasks: a task's depth is the longest
    chain of launches it ends, itself included where it launches."""
    depth = {}
    for t in prog.tasks:
        launching = _launching(t)
        d = max([depth.get(v, 0) for v in t.node.inputs] or [0]) + (1 if launching else 0)
        for out in t.node.outputs:
            depth[out] = d
        yield t, d, launching


def eligible(prog, dev, rc):
    """Whether the cost model may choose for ``prog``'s calls (see the module docstring)."""
    if not dev.is_cpu or rc.profile or rc.loop_step or rc.settings.cost_model != 'on':
        return False
    if rc.output_mode != 'host' and host_views.of(dev) is None:
        return False
    ok = prog.cost_eligible
    if ok is None:          # (what the program's graph allows: once per program)
        ok = prog.cost_eligible = program_eligible(prog)
    return ok


def program_eligible(prog):
    """Whether ``prog``'s graph lets the cost model run its calls dry on the host: no op
    whose run is seen outside (``_SEEN``), no input other than tensors (a generator's
    state, a list)."""
    if any(type(t.node.op).__name__ in _SEEN for t in prog.tasks):
        return False
    return all(hasattr(var.type, 'dtype') for var in prog.fgraph.inputs)


#: the host is chosen where its time is below this many times the device's least time.
#: That is a bound, not an estimate: the device's kernels add their own work to it (the
#: tutorial's MLP test function, 20 x 784 -> 500 -> 10 float64, on the 2-core EPYC,
#: 2026-11-30: a least time of 560-650 us, calls of 700-850 us), and a first call's dry
#: runs take longer than the same code's settled calls (690-920 us against 570-620 us in
#: Theano C, four processes). Near the line the host, which runs Theano C's own code, is
#: the choice that is never slower than Theano C; with 1.25 that function still went to
#: the device in two processes of four, and ran 0.8x Theano C there.
MARGIN = 1.5


#: where the host's time is at least ``MARGIN`` but below ``VERIFY`` times the device's least
#: time, the device's calls are measured too (:meth:`Choice.measured`) before the first
#: call returns: the least time is a bound, and a function's real calls can sit well above
#: it (the quick MLP of ``bench``, 784-128-10 at batch 64, on the 2-core Xeon: a least time
#: of ~500 us, calls of ~900 us, its host runs 570-760 us, 2026-12-01)
VERIFY = 3.0

#: the host is chosen where its measured time is at most this many times the device's
#: measured passes (a tie: the host, which runs Theano C's own code). Passes timed back to
#: back are what a loop of calls sees (exp of 230,400 floats on the 2-core Xeon, host
#: output: passes of 354-363 us, calls of 346-376 us, the host's 385 us, 2026-12-01);
#: a margin above 1 sent that function to the host, 9% slower
PASSES_MARGIN = 1.0


#: for a function with device outputs (written in place by the host,
#: ``runtime/host_views.py``) the host is chosen where its measured time is at most this
#: many times the device's passes in a row. Near a tie the device: in a loop alternating
#: with other work, the host's calls lose more to the caches than the queue's (2-core Xeon,
#: 2026-12-01, ``bench --quick``: a*b + c*exp(-d) over 2^16 float32, measured at a tie, ran
#: 139 us a call on the host, 102 on the device; SGEMM 256, 156 us against 150, ran 223-227
#: against ~205 us)
WRITES_MARGIN = 0.8


class Choice(object):
    """What the model found for one input signature: ``host`` (True: its calls run on the
    host), the seconds measured (``host_s``; None where its inputs were too large to try)
    and estimated (``device_s``), ``detail`` (how they were found) and ``why``, a sentence
    for ``report(f)``. ``verify``: the device is measured before the choice is final
    (``measured``: then ``host_run_s`` and ``device_run_s``)."""

    def __init__(self, host_s, device_s, detail):
        self.host_s = host_s
        self.device_s = device_s
        self.detail = detail
        self.reads_s = 0.0          # (of host_s: reading device inputs to the host)
        self.writes = False         # (results written into device buffers: WRITES_MARGIN)
        self.host_run_s = self.device_run_s = None
        self.host = host_s is not None and host_s < MARGIN * device_s
        self.verify = host_s is not None and not self.host and host_s < VERIFY * device_s

    def measured(self, device_run_s, host_s):
        """The device's own calls took ``device_run_s`` and the host's ``host_s`` (their least
        times, measured on the planned frame, then on Theano's VM, before the first call
        returned; device inputs' reads are added to the host's): the host where its time is
        at most ``PASSES_MARGIN`` times the device's."""
        self.host_run_s = host_s + self.reads_s
        self.device_run_s = device_run_s
        self.verify = False
        self.host = self.host_run_s <= (WRITES_MARGIN if self.writes else PASSES_MARGIN) * \
            device_run_s

    @property
    def why(self):
        where = 'on the host' if self.host else 'on the device'
        if self.device_run_s is None:
            return '%s: %s' % (where, self.detail)
        return '%s: %s; measured, the host\'s calls took %.0f us, the device\'s %.0f us' % (
            where, self.detail, self.host_run_s * 1e6, self.device_run_s * 1e6)


def measure(host_run, device_run, bound):
    """(host_s, device_s): the least wall times of ``DRY_RUNS`` calls of ``device_run`` (a
    pass of the planned frame, its outputs read as a call reads them), then of as many of
    ``host_run`` (a dry run on the host), fewer where a side's runs took 20 times ``bound``;
    each side after one untimed call (a first run is cold: the first pass after planning
    took 1.6-2x the others in a process's first function; the quick MLP's first dry runs
    900-1000 us, later ones 500-550). Not in turns: taken in turns, the host runs of
    ``bench``'s quick MLP took 823-830 us where its calls take 570-620 us (2-core Xeon,
    2026-12-01; taken apart, 545-596 us, just after device passes or not)."""
    device_run()
    device_s = _settled(device_run, bound, settle=False)
    host_run()
    return _settled(host_run, bound, settle=False), device_s


#: ops that read part of an input, or only its shape
_PARTIAL = frozenset(['Subtensor', 'AdvancedSubtensor1', 'AdvancedSubtensor', 'Shape',
                      'Shape_i'])


def input_bytes(prog):
    """The bytes of the values in ``prog``'s input cells (arguments and shared variables)
    that a call reads whole: an input only sliced, indexed or measured (a data set held in
    a shared variable, a minibatch taken from it per call) is not counted."""
    total = 0
    for var, cell in zip(prog.fgraph.inputs, prog.input_cells):
        clients = [node for node, _ in prog.fgraph.clients(var) if node != 'output']
        if clients and all(type(node.op).__name__ in _PARTIAL for node in clients):
            continue
        total += getattr(cell[0], 'nbytes', 0)
    return total


def choose(prog, dev, tier, make_mode, batch_min=None, loop=1, reads_s=0.0, writes=False):
    """The :class:`Choice` for the call now in ``prog``'s cells (``tier``: a ``HostTier``
    of ``prog``); None where the host run raised (the device runs the call and raises its
    own error). ``make_mode``: see :func:`constants`; ``batch_min``: see :func:`launches`;
    ``loop``: the steps of the run (``run_steps``) whose step 0 the call is, 1 for a call;
    ``reads_s``: the seconds it took to read the call's device inputs (device arrays) to
    the host, which every call on the host does, added to the host's time; ``writes``: the
    call's results are written into device buffers in place (``runtime/host_views.py``),
    their bytes at the host's read bandwidth added to the host's time.

    The device's least time is ``call + launches * launch``. Where reading the inputs once
    on the host already takes longer, the device is chosen without a host run; otherwise
    the call runs dry on the host until its times settle (:func:`_settled`), then node by
    node (twice, the lesser time of each node counting), and again until settled where it
    was within twice the bound: the least time decides.

    For a step of a run of ``loop`` steps, both sides are a step's: the host's a call
    (a run on the host calls the function once a step: ``runtime/host_steps.py``), the
    device's its launches as the run's batched plan makes them (every run batches where
    that saves launches) and a share of the one round trip of the run. Weighed as a call,
    the Nengo-like E=500 step was given the host on the H200 machine's 16-core PoCL, where
    its steps took 0.80-0.92 ms against 0.70-0.72 ms on the device (2026-11-30)."""
    launch_s, call_s, read_bps = constants(dev, make_mode)
    loop = max(1, int(loop))
    if loop > 1:
        batch_min = 0
    n = launches(prog, batch_min=batch_min)
    bound = call_s / loop + n * launch_s
    nbytes = input_bytes(prog)
    if nbytes / read_bps >= bound and not costly_functions(prog, dev):
        return Choice(None, bound, 'reading its %.1f MB of inputs on the host takes longer '
                      'than the device\'s least time, %.0f us (a call %.0f us + %d launches '
                      'x %.1f us)' % (nbytes / 1e6, bound * 1e6, call_s * 1e6, n,
                                      launch_s * 1e6))
    try:
        run, outputs = tier.dry_run, []
        if writes:
            def run():
                # (the results' bytes, for their copies into device buffers: any run's)
                outputs[:] = tier.dry_run()[0]
        host_s = _settled(run, bound)
        if writes:
            reads_s += sum(getattr(v, 'nbytes', 0) for v in outputs) / read_bps
        host_s += reads_s
        seen = {t.node: None for t in prog.tasks if hasattr(t.impl, 'steps_for')}
        times = tier.timed_run(seen)
        if times:
            again = tier.timed_run()
            times = {node: min(s, again[node]) for node, s in times.items()}
        both = host_work(prog, times, tier.storage_map) if times else 0.0
        work = function_work(prog, dev, tier.storage_map)
        n = launches(prog, seen, batch_min)
        steps = loop_steps(prog, seen)
        slow = slowdown(dev)
        bound = ((1 / loop + steps) * call_s + n * launch_s) * slow + both + work
        if host_s < 2 * bound:
            host_s = min(host_s, _settled(tier.dry_run, bound) + reads_s)
    except Exception:
        return None
    choice = Choice(host_s, bound, 'Theano\'s VM took %.0f us on the host%s; the device at '
                    'least %.0f us (a call %.0f us%s%s + %d launches x %.1f us + host work '
                    '%.0f us + elementary functions %.0f us)%s'
                    % (host_s * 1e6, ' (%.0f us of it moving device arrays to or from the host)'
                       % (reads_s * 1e6) if reads_s else '', bound * 1e6, call_s * 1e6,
                       ' / %d steps of a run' % loop if loop > 1 else '',
                       ' + %d loop steps x the same' % steps if steps else '', n,
                       launch_s * 1e6, both * 1e6, work * 1e6,
                       '; its calls %.2f times slower now than when measured' % slow
                       if slow > 1.05 else ''))
    choice.reads_s = reads_s
    # (a pass timed alone is a call; a run's steps run in one batched loop, no round trip
    # each: the Nengo-like step of ``bench``, E=5, measured so went to the device and ran
    # 0.63x Theano C, 2-core Xeon, 2026-12-01; the host 1.05x)
    choice.verify = choice.verify and loop == 1
    if writes and choice.host_s is not None:
        # device outputs: the device's calls return before its work is done, and calls
        # in a row overlap it, so the least time of one call bounds nothing; only passes
        # measured in a row decide (a*b + c*exp(-d) over 2^16 float32: 134 us a call on
        # the host, 190 us on the device waited for, ~100 us in a row; 2-core Xeon,
        # 2026-12-01)
        choice.verify = loop == 1
        choice.host = False
        choice.writes = True
    return choice


#: dry runs of one signature at most, and the least of them counts: the first runs of a
#: process are cold (OpenBLAS starting its threads, PoCL's workers still spinning after the
#: device's calibration), 1.5-4x a settled run's time on the 2-core EPYC (2026-11-30:
#: the tutorial's MLP test function, 1.8-2.0 ms, then 0.5-0.9 ms)
DRY_RUNS = 6


def _settled(run, bound, settle=True):
    """The least wall time of up to ``DRY_RUNS`` calls of ``run``: it stops early once a
    run is within 10% of the least before it (``settle``), or once two or more runs
    together took 20 times ``bound`` (a host far slower than the device's least time needs
    no settling; a first run alone may be that slow by being first)."""
    best, spent = float('inf'), 0.0
    for n in range(DRY_RUNS):
        t = time.perf_counter()
        run()
        s = time.perf_counter() - t
        spent += s
        settled = settle and n > 0 and abs(s - best) <= 0.1 * best
        best = min(best, s)
        if settled or (n and spent > 20 * bound):
            break
    return best


def host_work(prog, times, storage):
    """Seconds of a host run, timed node by node (``times``: {Apply node: seconds};
    ``storage``: the run's storage map), that the device's call spends on the host as
    well: its host fallbacks (Theano's own thunks, each call) and the work its
    implementations say runs there (``impl.host_work(values)``: products by the host's
    BLAS: up to ``ONE_THREAD_MACS`` multiply-adds on one thread, timed so by
    ``impl.host_work_seconds``, not as Theano's VM ran them on OpenBLAS's threads (the
    quickstart's step, 784 -> 10 at batch 256, float32: 490 of its 520 us in two such
    products, 2026-11-29, 2-core Xeon); above it on OpenBLAS's threads over the mapped
    buffers, as the VM ran them, so the VM's time counts (SGEMM 256 alone counted as free
    went to the device and took 400 us against Theano C's 193, 2026-12-01, 2-core Xeon). A
    device of one compute unit queues its larger products on PoCL's thread: those are not
    counted."""
    total = 0.0
    for t in prog.tasks:
        s = times.get(t.node)
        if s is None:
            continue
        if t.kind == 'host' and not t.meta:
            total += s
        elif t.kind == 'dev' and hasattr(t.impl, 'host_work'):
            values = [storage[v][0] if v in storage else None for v in t.node.inputs]
            if t.impl.host_work(values):
                own = t.impl.host_work_seconds(values)
                total += s if own is None else own
    return total


#: elements of the kernel that measures what an elementary function costs the device,
#: and its launches timed (the least counts)
_PROBE_ELEMENTS = 1 << 16
_PROBE_LAUNCHES = 6


def function_work(prog, dev, storage):
    """Seconds the device spends at least in the elementary functions (OpenCL builtins:
    ``scalar.functions.builtin_name``) of ``prog``'s elementwise nodes, for the shapes of a
    host run (``storage``: its storage map): per node, its output's elements times what
    each of its functions costs the device per element (:func:`function_cost`). Everything
    else in the kernels is counted as free. PoCL 3.1 runs some of them one element at a
    time (log, log1p, expm1, sin: 10-60 times exp's time, which it vectorizes): the
    Nengo-like LIF step of ``bench/nengo_compare.py`` at E=500 took 1.9-2.4 ms on the
    device against Theano C's 1.0, with 1.3 ms in its expm1 and log1p (2-core EPYC,
    2026-11-30)."""
    total = 0.0
    for t, names in _functions(prog):
        out = storage.get(t.node.outputs[0], [None])[0]
        size = getattr(out, 'size', 0)
        if size:
            total += size * sum(function_cost(dev, name, dtype) for name, dtype in names)
    return total


def _functions(prog):
    """(task, [(builtin name, dtype)]) of ``prog``'s elementwise device tasks that compute
    elementary functions (``scalar.functions.builtin_name``)."""
    from ..scalar.functions import builtin_name
    for t in prog.tasks:
        scalar_op = getattr(t.node.op, 'scalar_op', None)
        if t.kind != 'dev' or scalar_op is None:
            continue
        inner = scalar_op.fgraph.toposort() if hasattr(scalar_op, 'fgraph') else [None]
        names = []
        for node in inner:
            op = scalar_op if node is None else node.op
            name = builtin_name(op)
            if name is not None:
                names.append((name, (node or t.node).outputs[0].type.dtype))
        if names:
            yield t, names


def costly_functions(prog, dev):
    """Whether some elementary function of ``prog`` costs ``dev`` time per element (then
    its inputs' size alone does not bound the device's time: the host runs it dry)."""
    return any(function_cost(dev, name, dtype) > 0
               for _, names in _functions(prog) for name, dtype in names)


def function_cost(dev, name, dtype):
    """Seconds per element of the OpenCL builtin ``name`` on ``dtype`` (float32 or float64)
    on ``dev``, beyond a copy's: measured once per process (a kernel applying it to
    ``_PROBE_ELEMENTS`` values in its domain, against one copying them; the least of a few
    launches by the device's events, on its profiling queue). One program per dtype holds
    every builtin's kernel."""
    costs = dev.__dict__.setdefault('function_costs', {})
    key = (name, dtype)
    if key not in costs:
        costs[key] = _measure_function(dev, name, dtype)
    return costs[key]


def _measure_function(dev, name, dtype):
    from ..scalar import own_functions
    from ..scalar.functions import builtin_names
    if dtype not in ('float32', 'float64') or (dtype == 'float64' and not dev.has_fp64):
        return 0.0
    cl = dev.cl
    ctype = 'float' if dtype == 'float32' else 'double'
    # (the functions as the kernels call them: float32 log, log1p, expm1, tanh and float64
    # tanh by the versions the device's build chooses, scalar/own_functions.py)
    _, source, calls = own_functions.BY_TYPE[ctype]
    kernel = '__kernel void k_%(f)s(__global const %(t)s *x, __global %(t)s *y) {\n' \
             '    const size_t i = get_global_id(0); y[i] = %(c)s(x[i]); }\n'
    src = ('#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' if ctype == 'double' else '') + \
        source + \
        ''.join(kernel % dict(t=ctype, f=f, c=calls.get(f, f)) for f in builtin_names()) + \
        '__kernel void k_copy(__global const %(t)s *x, __global %(t)s *y) {\n' \
        '    const size_t i = get_global_id(0); y[i] = x[i]; }\n' % dict(t=ctype)
    prg = dev.build(src)
    # values in every builtin's domain (acosh: >= 1; atanh, asin, acos: below 1)
    x = np.linspace(0.2, 0.8, _PROBE_ELEMENTS).astype(dtype)
    if name == 'acosh':
        x = x + 1
    mf = cl.mem_flags
    # (timed by the device's events: a wall-clock time around a launch and its wait is a
    # round trip through PoCL's queue, whose noise is as large as the work: float32 exp
    # came out at 1.8 ns an element beyond a copy that way in one process and 0.46 in
    # another, 0.41 by events; 2-core Xeon, 2026-12-02)
    queue = dev.profiling_queue
    bx = cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    by = cl.Buffer(dev.context, mf.WRITE_ONLY, x.nbytes)
    times = []
    for k in (cl.Kernel(prg, 'k_' + name), cl.Kernel(prg, 'k_copy')):
        k.set_args(bx, by)
        best = float('inf')
        for _ in range(_PROBE_LAUNCHES):
            ev = cl.enqueue_nd_range_kernel(queue, k, (_PROBE_ELEMENTS,), None)
            ev.wait()
            best = min(best, (ev.profile.end - ev.profile.start) * 1e-9)
        times.append(best)
    return max(times[0] - times[1], 0.0) / _PROBE_ELEMENTS
