"""``profile=True`` under theano_ocl: Theano's usual summary, telling where each node ran.

Owns what a profiled ``OCLFunction`` measures and how it reaches Theano's ``ProfileStats``:

* node times: a device node's time is its kernels' and device copies' time from OpenCL
  events (a profiled function runs on the device's profiling queue); a host node's
  (fallback or shape arithmetic, host BLAS) is its step's wall time from an idle queue
  (the kernels queued before it are not its time). Transfers are not node time:
* transfers: every upload and download of a profiled call (inputs, outputs, shared
  variables placed on the device, values host nodes read or produce), with its bytes and
  its time from the copy's OpenCL event;
* kernel builds: programs a profiled call built (from source or from the disk cache,
  ``runtime/kernel_cache.py``) or found memoized, and their seconds, which count as
  compile time (``compile_time`` and ``linker_time``) and are taken out of the call times
  Theano measured around them (``fct_call_time``, ``vm_call_time``): they are what
  Theano's C linker does at compile time, done here when a node is first planned;
* the trace: each function keeps its last ``TRACE_EVENTS`` device commands (kernels,
  copies, transfers) with their start and end, which :func:`export_chrome_trace` writes
  as a Chrome / Perfetto trace.

Every event is read once, at the end of the call, after one wait for the queue.

The ``ProfileStats`` handed to the linker becomes an :class:`OCLProfileStats` (same data,
one more section): its ``<type>`` column says ``D`` for device nodes, ``C``/``Py`` for host
nodes by Theano's own rule (``hasattr(thunk, 'cthunk')``), as ``theano_ocl.report`` places
them, and ``summary()`` adds the device, builds and transfers to the function's section.
"""
import collections
import functools
import json
import threading
import time
import weakref

import pyopencl as cl
from theano.compile.profiling import ProfileStats, ScanProfileStats

from .runtime import kernel_cache

#: a device node's value in ``ProfileStats.apply_cimpl`` (Theano reads only its truth: a
#: device node is compiled code; a summed profile keeps it, as it merges apply_cimpl)
DEVICE = 'D'
#: build counters a profile reports (see runtime/kernel_cache.py)
BUILD_KEYS = ('source_builds', 'source_seconds', 'disk_hits', 'disk_seconds', 'memo_hits')

#: device events a profiled function keeps for :func:`export_chrome_trace` (its last ones)
TRACE_EVENTS = 100000

#: nanoseconds between two readings of the host clock against the device's (the trace
#: places host steps on the device's timeline)
CLOCK_EVERY = 10 ** 9
CLOCK_SAMPLES = 5

_tls = threading.local()
_START, _END = cl.profiling_info.START, cl.profiling_info.END


def transfer(kind, nbytes, event):
    """Record an ``'upload'``/``'download'`` made on a profiling queue (called by the VM
    and the shared variables); the profiled call of this thread collects it at its end,
    with the recorded step making it (None: a call's own input, output or flag copy)."""
    try:
        pending = _tls.transfers
    except AttributeError:
        pending = _tls.transfers = []
    pending.append((kind, nbytes, event, getattr(_tls, 'step', None)))


def _take_transfers():
    pending = getattr(_tls, 'transfers', None)
    if not pending:
        return []
    _tls.transfers = []
    return pending


def _event_span(ev):
    """(start, end) of a finished command in device nanoseconds; (0, 0) where the driver
    keeps no timestamps for it. ``get_profiling_info`` itself: ``ev.profile.end`` goes
    through a Python attribute look-up costing 8 times as much (1.6 us on PoCL)."""
    try:
        return ev.get_profiling_info(_START), ev.get_profiling_info(_END)
    except Exception:
        return 0, 0


def node_type(task):
    """``apply_cimpl``'s value for a task: ``DEVICE``, else Theano's rule for host thunks
    (True: C code, False: ``perform``)."""
    if task.kind == 'dev':
        return DEVICE
    return hasattr(task.thunk, 'cthunk')


class Profiler(object):
    """The measurements of one profiled ``OCLFunction`` not yet handed to Theano, and the
    device events of its last calls (:attr:`trace`, for :func:`export_chrome_trace`)."""

    def __init__(self, fn, profile):
        self.fn = fn
        self.device_name = fn.dev.name
        adopt(profile)
        n = len(fn.program.tasks)
        self.times = [0.0] * n
        self.counts = [0] * n
        # this call's commands with an event: (task index, trace category, event, label)
        self.events = []
        self.transfers = {'upload': [0, 0, 0.0], 'download': [0, 0, 0.0]}
        self.builds = dict.fromkeys(BUILD_KEYS, 0)
        self._builds_at = None        # this thread's build counters when planning began
        self._tail = None             # the last kernel or copy queued since a host step waited
        self.host_spans = []          # this call's host steps: (task index, start, end) in ns
        self._clock = None            # (host ns when read, host clock - device clock)
        self.calls = 0
        #: (call, task index or None, category, label, start ns, end ns, bytes), oldest first
        self.trace = collections.deque(maxlen=TRACE_EVENTS)
        self.types = {task.node: node_type(task) for task in fn.program.tasks}
        self.label = getattr(profile, 'message', None)
        if isinstance(profile, OCLProfileMixin):
            profile._ocl_profilers.append(weakref.ref(self))

    # -- during a call (hooks in vm.py) -------------------------------------------------
    def begin_plan(self):
        if self._builds_at is None:
            self._builds_at = kernel_cache.thread_counts()

    def run(self, step):
        """Run one recorded step, timing it: kernels and copies by their events (read at
        the end of the call), host steps by the clock; transfers are timed apart."""
        kind = step.kind
        if kind == 'upload' or kind == 'download':
            _tls.step = step                  # names the transfers it makes
            try:
                return step.fn()
            finally:
                _tls.step = None
        if kind == 'host' and self._tail is not None:
            # a host step may wait for the kernels queued before it (host BLAS maps its
            # buffers): their time is theirs, from their events, not this node's
            self._tail.wait()
            self._tail = None
        built = kernel_cache.build_seconds() if kind == 'host' else 0.0
        t0 = time.perf_counter_ns()
        ev = step.fn()
        if ev is not None and (kind == 'launch' or kind == 'copy'):
            self.events.append((step.task, 'kernel' if kind == 'launch' else 'copy', ev,
                                getattr(step, 'name', None)))
            self._tail = ev
        else:
            t1 = time.perf_counter_ns()
            # (less the kernels it built: compile time, counted once -- a device Scan's
            # first run plans its inner function)
            if kind == 'host':
                t1 -= int((kernel_cache.build_seconds() - built) * 1e9)
            self.times[step.task] += (t1 - t0) * 1e-9
            if kind != 'guard':
                self.host_spans.append((step.task, t0, t1))
        return ev

    def fns(self, steps):
        """The callables of a profiled call's pass over the recorded ``steps``, each timed
        by :meth:`run` (``Executor.pass_loop``: the loop driver runs them)."""
        return [functools.partial(self.run, step) for step in steps]

    def end_call(self):
        """Once the call's outputs are back: device times from the events (each read once,
        here), transfers and kernel builds of this call."""
        self.fn.queue.finish()
        self._tail = None
        self.calls += 1
        call, times, trace = self.calls, self.times, self.trace
        for t, cat, ev, label in self.events:
            start, end = _event_span(ev)
            times[t] += (end - start) * 1e-9
            trace.append((call, t, cat, label, start, end, 0))
        self.events = []
        last = self.fn.last_frame
        skipped = last.skipped if last is not None else ()
        for t in range(len(self.counts)):
            if t not in skipped:            # of an IfElse branch not taken: did not run
                self.counts[t] += 1
        for kind, nbytes, ev, step in _take_transfers():
            start, end = _event_span(ev)
            row = self.transfers[kind]
            row[0] += 1
            row[1] += nbytes
            row[2] += (end - start) * 1e-9
            t, label = self._transfer_source(last, step, kind)
            trace.append((call, t, kind, label, start, end, nbytes))
        if self.host_spans:
            offset = self._clock_offset()
            for t, start, end in self.host_spans:
                trace.append((call, t, 'host', None, start - offset, end - offset, 0))
            self.host_spans = []
        if self._builds_at is not None:
            now = kernel_cache.thread_counts()
            for k in BUILD_KEYS:
                self.builds[k] += now[k] - self._builds_at[k]
            self._builds_at = None

    def _clock_offset(self):
        """Host clock (``perf_counter_ns``) minus device clock, read again every
        ``CLOCK_EVERY`` ns: the host's time around enqueueing a marker on the idle queue
        against the device's time of its queueing (QUEUED), from the quickest of
        ``CLOCK_SAMPLES`` markers (an enqueue took 14 us to 0.4 ms on PoCL)."""
        now = time.perf_counter_ns()
        if self._clock is None or now - self._clock[0] > CLOCK_EVERY:
            best = None
            for _ in range(CLOCK_SAMPLES):
                h0 = time.perf_counter_ns()
                ev = cl.enqueue_marker(self.fn.queue)
                h1 = time.perf_counter_ns()
                ev.wait()
                if best is None or h1 - h0 < best[1] - best[0]:
                    best = (h0, h1, ev)
            h0, h1, ev = best
            try:
                offset = (h0 + h1) // 2 - ev.get_profiling_info(cl.profiling_info.QUEUED)
            except Exception:           # no timestamps: the host steps stay where they are
                offset = 0
            self._clock = (h1, offset)
        return self._clock[1]

    def _transfer_source(self, frame, step, kind):
        """(task index or None, label) of a transfer made by ``step`` (None: the call's
        own): a function input's copy is named by the input, not by the task it was
        recorded with."""
        if step is None:
            return None, None
        darrs = step.writes if kind == 'upload' else step.reads
        if frame is not None and darrs:
            root = darrs[0].root
            for i, planned in frame.input_roots.items():
                if planned is root:
                    return None, 'input %s' % (self.fn.program.fgraph.inputs[i],)
        return step.task, None

    # -- after a call (Function.__call__ -> fn.update_profile) ------------------------
    def update(self, profile):
        """Hand what was measured since the last update to ``profile`` (Theano's
        ``VM.update_profile`` contract, plus the OCL section)."""
        adopt(profile)
        apply_time, apply_callcount = profile.apply_time, profile.apply_callcount
        for node, t, c in zip(self.fn.nodes, self.times, self.counts):
            apply_time[node] = apply_time.get(node, 0.0) + t
            apply_callcount[node] = apply_callcount.get(node, 0) + c
        profile.apply_cimpl.update(self.types)
        self.times = [0.0] * len(self.times)
        self.counts = [0] * len(self.counts)
        # Theano counted the calls that built them in its call times (fct_call_time,
        # vm_call_time, just before this): builds are compile time, as the C linker's
        # compilation is, and count there only
        build_s = self.builds['source_seconds'] + self.builds['disk_seconds']
        profile.compile_time += build_s
        profile.linker_time += build_s
        profile.fct_call_time -= build_s
        profile.vm_call_time -= build_s
        if isinstance(profile, OCLProfileMixin):
            profile.ocl_devices.add(self.device_name)
            for k, v in self.builds.items():
                profile.ocl_builds[k] = profile.ocl_builds.get(k, 0) + v
            for kind, row in self.transfers.items():
                acc = profile.ocl_transfers.setdefault(kind, [0, 0, 0.0])
                for j in range(3):
                    acc[j] += row[j]
        self.builds = dict.fromkeys(BUILD_KEYS, 0)
        self.transfers = {'upload': [0, 0, 0.0], 'download': [0, 0, 0.0]}


class OCLProfileMixin(object):
    """What an ``OCLProfileStats`` adds to Theano's ``ProfileStats``."""

    def _ocl_init(self):
        if '_ocl' not in self.__dict__:
            self._ocl = True
            self.ocl_devices = set()
            self.ocl_builds = {}
            self.ocl_transfers = {}
            self._ocl_profilers = []     # weak references: a profile outlives its functions

    @property
    def ocl_profilers(self):
        """The :class:`Profiler` of each live function adding to this profile."""
        live = [ref() for ref in self._ocl_profilers]
        return [p for p in live if p is not None]

    def __getstate__(self):
        state = dict(self.__dict__)
        state['_ocl_profilers'] = []       # (weak references; the functions stay here)
        return state

    def export_chrome_trace(self, path):
        """Write the device events and host steps of the functions adding to this profile
        as a Chrome trace (see :func:`export_chrome_trace`)."""
        return export_chrome_trace(self, path)

    def _impl(self, node):
        cimpl = self.apply_cimpl[node]
        if cimpl == DEVICE:
            return 'D '
        return 'C ' if cimpl else 'Py'

    def _impl_by(self, key):
        # Theano's class_impl rule, with a third kind: 'D ' (and 'D C ' for a class with
        # nodes of both kinds)
        rval = {}
        for node in self.apply_callcount:
            k = key(node)
            impl = self._impl(node)
            rval.setdefault(k, impl)
            if impl not in rval[k]:
                rval[k] += impl
        return rval

    def class_impl(self):
        return self._impl_by(lambda node: type(node.op))

    def op_impl(self):
        return self._impl_by(lambda node: node.op)

    def reset(self):
        super(OCLProfileMixin, self).reset()
        self.ocl_transfers = {}        # per call, as apply_time; builds are compile time
        for p in self.ocl_profilers:
            p.trace.clear()

    def summary_function(self, file):
        super(OCLProfileMixin, self).summary_function(file)
        self.summary_ocl(file)

    def __copy__(self):
        # Theano sums the profiles printed at exit into a copy of the first one, merging
        # the per-node dicts (types included) but not the theano_ocl counters
        new = self.__class__.__new__(self.__class__)
        new.__dict__.update(self.__dict__)
        new._ocl_summed = True
        return new

    def summary_ocl(self, file):
        if self.__dict__.get('_ocl_summed'):
            print("  theano_ocl: kernel builds and transfers are in each function's profile",
                  file=file)
            print('', file=file)
            return
        b = self.ocl_builds
        built = b.get('source_builds', 0) + b.get('disk_hits', 0)
        print('  theano_ocl on %s:' % (', '.join(sorted(self.ocl_devices)) or '?'), file=file)
        print('    Kernel builds: %d programs in %es (counted in the compile and linker times '
              'above): %d from source (%es), %d from the disk cache (%es); %d memoized in '
              'this process' % (
                  built, b.get('source_seconds', 0) + b.get('disk_seconds', 0),
                  b.get('source_builds', 0), b.get('source_seconds', 0),
                  b.get('disk_hits', 0), b.get('disk_seconds', 0), b.get('memo_hits', 0)),
              file=file)
        for kind in ('upload', 'download'):
            n, nbytes, secs = self.ocl_transfers.get(kind, (0, 0, 0.0))
            print('    Transfers, %ss: %d, %d bytes, %es (device time; not in the node times)'
                  % (kind, n, nbytes, secs), file=file)
        types = list(self.apply_cimpl.values())
        print('    Nodes: %d on the device (type D), %d on the host (C or Py)' % (
            types.count(DEVICE), len(types) - types.count(DEVICE)), file=file)
        print('', file=file)


class OCLProfileStats(OCLProfileMixin, ProfileStats):
    """Theano's ``ProfileStats`` with the theano_ocl section (see the module doc)."""


class OCLScanProfileStats(OCLProfileMixin, ScanProfileStats):
    """Theano's ``ScanProfileStats`` (a Scan's inner function) with the theano_ocl section."""


_OCL_CLASSES = {ProfileStats: OCLProfileStats, ScanProfileStats: OCLScanProfileStats}


def adopt(profile):
    """Make ``profile`` (the ``ProfileStats`` Theano handed the linker) an OCL one in place:
    every function sharing it keeps adding to the same object. Subclasses other than
    Theano's two are left as they are (their nodes then show Theano's C/Py types)."""
    cls = _OCL_CLASSES.get(type(profile))
    if cls is not None:
        profile.__class__ = cls
    if isinstance(profile, OCLProfileMixin):
        profile._ocl_init()
    return profile


def export_chrome_trace(f, path):
    """Write the device events and host steps of the last profiled calls of ``f`` to
    ``path`` as a Chrome trace (JSON, the Trace Event Format that ``chrome://tracing`` and Perfetto open, as
    ``torch.profiler``'s ``export_chrome_trace`` writes); returns the number of events.

    ``f``: a function compiled with ``mode='OCL', profile=True`` (or its ``fn``), or its
    profile (then every function adding to it, one process each). One complete event
    (``"ph": "X"``) per kernel launch, device copy, upload and download (thread 1: the
    device's queue), named by its node's op (a function input's upload by the input, a
    call's output and flag reads ``download``), timed by its OpenCL event in microseconds
    from the first event; one per host step (thread 2: host nodes' thunks, host BLAS),
    timed by the host's clock, placed on the device's timeline by a reading of both clocks
    (every ``CLOCK_EVERY`` ns). ``args`` say the call, the node (its index and Apply), the
    kernel and the bytes moved. Each function keeps the events of its last
    ``TRACE_EVENTS`` commands and host steps.
    """
    profilers = _profilers_of(f)
    spans = [r[4] for p in profilers for r in p.trace if r[5] >= r[4] > 0]
    origin = min(spans) if spans else 0
    events = []
    for pid, p in enumerate(profilers, 1):
        what = '%s on %s' % (p.label, p.device_name) if p.label else p.device_name
        events.append({'name': 'process_name', 'ph': 'M', 'pid': pid, 'tid': 1,
                       'args': {'name': 'theano_ocl: %s' % what}})
        for tid, name in ((1, 'device queue'), (2, 'host steps')):
            events.append({'name': 'thread_name', 'ph': 'M', 'pid': pid, 'tid': tid,
                           'args': {'name': name}})
        events.extend(_trace_events(p, pid, origin))
    with open(path, 'w') as out:
        json.dump({'traceEvents': events, 'displayTimeUnit': 'ms'}, out)
    return sum(1 for e in events if e['ph'] == 'X')


def _profilers_of(f):
    if isinstance(f, OCLProfileMixin):
        return f.ocl_profilers
    profiler = getattr(getattr(f, 'fn', f), 'profiler', None)
    if profiler is None:
        raise TypeError('%r has no device events: compile it with mode="OCL" and '
                        'profile=True' % (f,))
    return [profiler]


def _trace_events(profiler, pid, origin):
    """The complete events of ``profiler``'s trace, in the order they ran."""
    nodes = profiler.fn.nodes
    applies = {}
    out = []
    for call, t, cat, label, start, end, nbytes in sorted(profiler.trace,
                                                          key=lambda r: (r[0], r[4])):
        args = {'call': call}
        if t is not None:
            node = nodes[t]
            if t not in applies:
                applies[t] = str(node)
            args['node'] = t
            args['apply'] = applies[t]
            name = str(node.op)
        else:
            name = label or cat
        if cat == 'kernel' and label:
            args['kernel'] = label
        if nbytes:
            args['bytes'] = nbytes
        out.append({'name': name, 'cat': cat, 'ph': 'X', 'pid': pid,
                    'tid': 2 if cat == 'host' else 1,
                    'ts': (start - origin) / 1000.0, 'dur': max(end - start, 0) / 1000.0,
                    'args': args})
    return out
