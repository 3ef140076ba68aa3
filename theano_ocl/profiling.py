"""``profile=True`` under theano_ocl: Theano's usual summary, telling where each node ran.

Owns what a profiled ``OCLFunction`` measures and how it reaches Theano's ``ProfileStats``:

* node times: a device node's time is its kernels' and device copies' time from OpenCL
  events (a profiled function runs on the device's profiling queue); a host node's
  (fallback or shape arithmetic) is its thunk's wall time. Transfers are not node time:
* transfers: every upload and download of a profiled call (inputs, outputs, shared
  variables placed on the device, values host nodes read or produce), with its bytes and
  its time from the copy's OpenCL event;
* kernel builds: programs a profiled call built (from source or from the disk cache,
  ``runtime/kernel_cache.py``) or found memoized, and their seconds, which count as
  compile time (``compile_time`` and ``linker_time``): they are what Theano's C linker
  does at compile time, done here when a node is first planned.

The ``ProfileStats`` handed to the linker becomes an :class:`OCLProfileStats` (same data,
one more section): its ``<type>`` column says ``D`` for device nodes, ``C``/``Py`` for host
nodes by Theano's own rule (``hasattr(thunk, 'cthunk')``), as ``theano_ocl.report`` places
them, and ``summary()`` adds the device, builds and transfers to the function's section.
"""
import threading
import time

from theano.compile.profiling import ProfileStats, ScanProfileStats

from .runtime import kernel_cache

#: a device node's value in ``ProfileStats.apply_cimpl`` (Theano reads only its truth: a
#: device node is compiled code; a summed profile keeps it, as it merges apply_cimpl)
DEVICE = 'D'
#: build counters a profile reports (see runtime/kernel_cache.py)
BUILD_KEYS = ('source_builds', 'source_seconds', 'disk_hits', 'disk_seconds', 'memo_hits')

_tls = threading.local()


def transfer(kind, nbytes, event):
    """Record an ``'upload'``/``'download'`` made on a profiling queue (called by the VM
    and the shared variables); the profiled call of this thread collects it at its end."""
    try:
        pending = _tls.transfers
    except AttributeError:
        pending = _tls.transfers = []
    pending.append((kind, nbytes, event))


def _take_transfers():
    pending = getattr(_tls, 'transfers', None)
    if not pending:
        return []
    _tls.transfers = []
    return pending


def _event_seconds(ev):
    try:
        return (ev.profile.end - ev.profile.start) * 1e-9
    except Exception:        # a driver without timestamps for this command
        return 0.0


def node_type(task):
    """``apply_cimpl``'s value for a task: ``DEVICE``, else Theano's rule for host thunks
    (True: C code, False: ``perform``)."""
    if task.kind == 'dev':
        return DEVICE
    return hasattr(task.thunk, 'cthunk')


class Profiler(object):
    """The measurements of one profiled ``OCLFunction`` not yet handed to Theano."""

    def __init__(self, fn, profile):
        self.fn = fn
        self.device_name = fn.dev.name
        adopt(profile)
        n = len(fn.program.tasks)
        self.times = [0.0] * n
        self.counts = [0] * n
        self.events = []              # (task index, event) of this call's launches, copies
        self.transfers = {'upload': [0, 0, 0.0], 'download': [0, 0, 0.0]}
        self.builds = dict.fromkeys(BUILD_KEYS, 0)
        self._builds_at = None        # this thread's build counters when planning began

    # -- during a call (hooks in vm.py) -------------------------------------------------
    def begin_plan(self):
        if self._builds_at is None:
            self._builds_at = kernel_cache.thread_counts()

    def run(self, step):
        """Run one recorded step, timing it: kernels and copies by their events (read at
        the end of the call), host steps by the clock; transfers are timed apart."""
        kind = step.kind
        if kind == 'upload' or kind == 'download':
            return step.fn()
        t0 = time.perf_counter()
        ev = step.fn()
        if ev is not None and (kind == 'launch' or kind == 'copy'):
            self.events.append((step.task, ev))
        else:
            self.times[step.task] += time.perf_counter() - t0
        return ev

    def add_host_time(self, task, seconds):
        """Host work of ``task`` done outside its recorded steps (a device Scan's loop in
        the call that plans it)."""
        self.times[task] += seconds

    def run_steps(self, frame):
        fn = self.fn
        for step in frame.steps:
            fn.position_of_error = step.task
            self.run(step)

    def end_call(self):
        """Once the call's outputs are back: device times from the events, transfers and
        kernel builds of this call."""
        self.fn.queue.finish()
        times = self.times
        for t, ev in self.events:
            times[t] += _event_seconds(ev)
        self.events = []
        last = self.fn.last_frame
        skipped = last.skipped if last is not None else ()
        for t in range(len(self.counts)):
            if t not in skipped:            # of an IfElse branch not taken: did not run
                self.counts[t] += 1
        for kind, nbytes, ev in _take_transfers():
            row = self.transfers[kind]
            row[0] += 1
            row[1] += nbytes
            row[2] += _event_seconds(ev)
        if self._builds_at is not None:
            now = kernel_cache.thread_counts()
            for k in BUILD_KEYS:
                self.builds[k] += now[k] - self._builds_at[k]
            self._builds_at = None

    # -- after a call (Function.__call__ -> fn.update_profile) ------------------------
    def update(self, profile):
        """Hand what was measured since the last update to ``profile`` (Theano's
        ``VM.update_profile`` contract, plus the OCL section)."""
        adopt(profile)
        for task, t, c in zip(self.fn.program.tasks, self.times, self.counts):
            node = task.node
            profile.apply_time[node] = profile.apply_time.get(node, 0.0) + t
            profile.apply_callcount[node] = profile.apply_callcount.get(node, 0) + c
            profile.apply_cimpl[node] = node_type(task)
        self.times = [0.0] * len(self.times)
        self.counts = [0] * len(self.counts)
        build_s = self.builds['source_seconds'] + self.builds['disk_seconds']
        profile.compile_time += build_s
        profile.linker_time += build_s
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
