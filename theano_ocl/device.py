"""Choosing an OpenCL device and holding one context + in-order queue per device.

Owns: the device specification syntax (``'P:D'``, a name fragment, ``'gpu'``/``'cpu'``),
which request wins (``OCLMode(device=...)`` > ``THEANO_OCL_DEVICE`` > Theano's
``device=openclP:D`` / ``contexts=`` flags > ``PYOPENCL_CTX`` > the default: a GPU if one
exists, else a CPU device) and the errors that name the variable, the capability facts
the kernel generators ask for (fp64, fp16, unified host memory, local memory, allocation
limits), the per-device memory pool, and the error that says how to install PoCL when
no platform exists.
"""
import collections
import os
import re
import threading

import numpy as np

from . import _device_flags
from .runtime import invokers, kernel_cache, settings, waits
from .scalar import own_functions

ENV_VAR = 'THEANO_OCL_DEVICE'
#: pyopencl's variable (``create_some_context``), honoured after theano_ocl's and Theano's
PYOPENCL_VAR = 'PYOPENCL_CTX'
#: name fragments that stand for another
SPEC_ALIASES = {'pocl': 'portable computing language'}
#: programs memoized per device (each holds the device's compiled binary; a long-running
#: process compiling thousands of distinct functions must not keep them all)
MAX_PROGRAMS = 512
#: bytes of freed buffers the pool may keep for reuse after frames were dropped
TRIM_KEEP = 64 << 20

INSTALL_HINT = (
    "No OpenCL platform was found. theano_ocl needs an OpenCL driver (an ICD).\n"
    "  CPU (any machine):  sudo apt-get install -y pocl-opencl-icd   (Debian/Ubuntu, PoCL)\n"
    "                      or, where apt cannot be used: pip install pocl-binary-distribution\n"
    "                      (a generic, much slower PoCL build)\n"
    "  NVIDIA GPU:         the NVIDIA driver ships libnvidia-opencl; register it with\n"
    "                      echo libnvidia-opencl.so.1 > /etc/OpenCL/vendors/nvidia.icd\n"
    "Then check with: python -m theano_ocl info")


class NoOpenCLPlatform(RuntimeError):
    """Raised when no OpenCL platform/device can be found."""


class DeviceTooSmall(MemoryError):
    """One buffer larger than the device's largest allocation: no amount of freeing helps
    (the VM then runs the call on the host, where Theano C would run it)."""


def _cl():
    try:
        import pyopencl as cl
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise NoOpenCLPlatform("pyopencl is not installed (pip install pyopencl).\n"
                               + INSTALL_HINT) from e
    invokers.install()
    return cl


def list_devices():
    """All (platform_index, device_index, platform, device) visible to the ICD loader."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.LogicError:  # CL_PLATFORM_NOT_FOUND_KHR
        platforms = []
    out = []
    for pi, p in enumerate(platforms):
        try:
            devs = p.get_devices()
        except cl.Error:
            devs = []
        for di, d in enumerate(devs):
            out.append((pi, di, p, d))
    return out


def is_gpu_device(d):
    cl = _cl()
    return bool(d.type & cl.device_type.GPU)


class DeviceSelectionError(ValueError):
    """A device specification that names no device; the message names where it came from
    (``THEANO_OCL_DEVICE='3:0'``, ``PYOPENCL_CTX='1'``, ...) and what exists."""


def requested_device(spec=None):
    """Where the device choice comes from: ``(source, syntax, value)``, by precedence.

    1. ``spec`` (``OCLMode(device=...)``, ``SimulatorOCL(..., device=...)``): code wins;
    2. ``$THEANO_OCL_DEVICE``: theano_ocl's own variable, for one process or one shell;
    3. Theano's ``device=openclP:D``, ``contexts=name->openclP:D`` or
       ``init_gpu_device=openclP:D`` flag (``THEANO_FLAGS`` or ``.theanorc``), the
       convention of Theano's gpuarray back-end that existing scripts carry;
    4. ``$PYOPENCL_CTX`` (pyopencl's convention, often set machine-wide for every
       OpenCL program), so it yields to anything that names theano_ocl or Theano;
    5. the default: a GPU if there is one, else the first device.

    ``spec='default'`` is None. ``syntax`` is ``'spec'`` (theano_ocl's: ``'P:D'``,
    ``'gpu'``, ``'cpu'``, a name fragment), ``'theano'`` or ``'pyopencl'``; ``value``
    None means the default.
    """
    if spec is not None and spec != 'default':
        return 'device=%r' % (spec,), 'spec', spec
    env = os.environ.get(ENV_VAR)
    if env:
        return '%s=%r' % (ENV_VAR, env), 'spec', env
    flags = _device_flags.theano_device_flags()
    if flags:
        name, value = flags[0]
        return 'Theano flag %s=%r' % (name, value), 'theano', (name, value)
    ctx = os.environ.get(PYOPENCL_VAR)
    if ctx is not None:
        return '%s=%r' % (PYOPENCL_VAR, ctx), 'pyopencl', ctx
    return 'default (a GPU if there is one, else the first device)', 'spec', None


def resolve_spec(spec=None):
    """Return (platform_index, device_index) of the device to use (see
    :func:`requested_device` for where the choice comes from and in which order).
    :class:`DeviceSelectionError` (a ValueError) names the variable when it names no device."""
    source, syntax, value = requested_device(spec)
    devs = list_devices()
    if not devs:
        raise NoOpenCLPlatform(INSTALL_HINT)
    if syntax == 'theano':
        return _pick_theano_flag(devs, source, *value)
    if syntax == 'pyopencl':
        return _pick_pyopencl(devs, source, value)
    return _pick_spec(devs, source, value)


def _pick_spec(devs, source, spec):
    if spec is None:
        gpus = [t for t in devs if is_gpu_device(t[3])]
        pick = (gpus or devs)[0]
        return pick[0], pick[1]
    spec = str(spec).strip()
    if ':' in spec and all(part.isdigit() for part in spec.split(':', 1)):
        pi, di = (int(part) for part in spec.split(':', 1))
        return _by_index(devs, source, pi, di)
    low = spec.lower()
    if low in ('gpu', 'cpu'):
        want_gpu = low == 'gpu'
        for t in devs:
            if is_gpu_device(t[3]) == want_gpu:
                return t[0], t[1]
        raise DeviceSelectionError('%s: no OpenCL %s device; devices: %s'
                                   % (source, low.upper(), describe_choices(devs)))
    low = SPEC_ALIASES.get(low, low)
    for t in devs:
        names = (t[2].name, t[2].vendor, t[3].name, t[3].vendor)
        if any(low in n.lower() for n in names):
            return t[0], t[1]
    raise DeviceSelectionError('%s: no OpenCL device matches %r in its platform or device '
                               'name; devices: %s' % (source, spec, describe_choices(devs)))

#: a Theano device name theano_ocl takes (gpuarray's syntax, ``openclP:D``)
_THEANO_OPENCL = re.compile(r'opencl(\d+):(\d+)$')


def _pick_theano_flag(devs, source, name, value):
    if name == 'contexts':
        names = [d for d in _device_flags.context_devices(value) if d.startswith('opencl')]
    else:
        names = [value.strip()]
    picks = []
    for dev_name in names:
        m = _THEANO_OPENCL.match(dev_name)
        if m is None:
            raise DeviceSelectionError(
                '%s: %r is not an OpenCL device name: expected openclP:D, P the platform '
                'and D the device index as python -m theano_ocl info lists them'
                % (source, dev_name))
        pick = int(m.group(1)), int(m.group(2))
        if pick not in picks:
            picks.append(pick)
    if len(picks) > 1:
        raise DeviceSelectionError(
            '%s names %d OpenCL devices; theano_ocl runs a function on one device: '
            'choose it with OCLMode(device=\'P:D\') or %s=P:D'
            % (source, len(picks), ENV_VAR))
    return _by_index(devs, source, *picks[0])


def _pick_pyopencl(devs, source, value):
    """pyopencl's ``create_some_context`` reading of ``PYOPENCL_CTX``: ``platform[:device]``,
    each an index or a case-insensitive name fragment (an empty part is 0; of a device list
    ``0,1`` theano_ocl takes the first: it runs on one device)."""
    parts = value.split(':')
    if len(parts) > 2:
        raise DeviceSelectionError('%s: expected platform[:device], got %d parts'
                                   % (source, len(parts)))
    plat, dev = (parts + [''])[:2]
    dev = dev.split(',')[0].strip()
    plat = plat.strip()
    platforms = _platforms(devs)
    if plat.isdigit() or not plat:
        pi = int(plat or 0)
    else:
        # pyopencl keeps the last platform whose name matches
        matches = [i for i, (pname, _) in platforms.items() if plat.lower() in pname.lower()]
        if not matches:
            raise DeviceSelectionError('%s: no OpenCL platform name contains %r; platforms: %s'
                                       % (source, plat, _describe_platforms(platforms)))
        pi = matches[-1]
    if dev.isdigit() or not dev:
        return _by_index(devs, source, pi, int(dev or 0))
    _check_platform(source, pi, platforms)
    for t in devs:
        if t[0] == pi and dev.lower() in t[3].name.lower():
            return t[0], t[1]
    raise DeviceSelectionError('%s: no device name of platform %d contains %r; its devices: %s'
                               % (source, pi, dev, _describe_devices(devs, pi)))


def _platforms(devs):
    """platform index -> (name, number of devices), for the platforms with devices."""
    out = collections.OrderedDict()
    for pi, _, p, _ in devs:
        name, n = out.get(pi, (p.name.strip(), 0))
        out[pi] = (name, n + 1)
    return out


def _describe_platforms(platforms):
    return ', '.join('%d %s (%d device%s)' % (pi, name, n, '' if n == 1 else 's')
                     for pi, (name, n) in platforms.items())


def _describe_devices(devs, pi):
    return ', '.join('%d %s' % (di, d.name.strip()) for p_i, di, _, d in devs if p_i == pi)


def _check_platform(source, pi, platforms):
    if pi not in platforms:
        raise DeviceSelectionError('%s: platform %d does not exist; platforms: %s'
                                   % (source, pi, _describe_platforms(platforms)))


def _by_index(devs, source, pi, di):
    _check_platform(source, pi, _platforms(devs))
    if not any(t[:2] == (pi, di) for t in devs):
        raise DeviceSelectionError('%s: platform %d has no device %d; its devices: %s'
                                   % (source, pi, di, _describe_devices(devs, pi)))
    return pi, di


def describe_choices(devs=None):
    devs = list_devices() if devs is None else devs
    return ', '.join("'%d:%d' (%s / %s)" % (pi, di, p.name.strip(), d.name.strip())
                     for pi, di, p, d in devs)


class OCLDevice(object):
    """One OpenCL device with its context, in-order queue and capability facts.

    Instances are shared per (platform, device) index pair through :func:`get_device`.
    They never pickle: code that must pickle keeps ``spec`` and calls ``get_device``.
    """

    def __init__(self, pi, di):
        cl = _cl()
        plat = cl.get_platforms()[pi]
        dev = plat.get_devices()[di]
        self.cl = cl
        self.spec = '%d:%d' % (pi, di)
        self.platform = plat
        self.device = dev
        self.name = dev.name.strip()
        self.platform_name = plat.name.strip()
        self.context = cl.Context([dev])
        self.queue = cl.CommandQueue(self.context)
        # events of non-blocking uploads on ``queue`` (shared variables, input arrays):
        # waited for once at the end of the call that made them (settle_uploads); one list
        # per thread, so a call never returns before its own uploads are done
        self._tls = threading.local()
        # shared variables' values uploaded: [values, bytes, transfers] (runtime/uploads.py)
        self.upload_tally = [0, 0, 0]
        self._profiling_queue = None
        ext = dev.extensions.split()
        self.extensions = set(ext)
        self.is_gpu = is_gpu_device(dev)
        # a device declaring both (Oclgrind's simulator declares every type) takes the GPU
        # code paths: what its checks are for
        self.is_cpu = bool(dev.type & cl.device_type.CPU) and not self.is_gpu
        self.has_fp64 = 'cl_khr_fp64' in self.extensions or dev.double_fp_config != 0
        self.has_fp16 = 'cl_khr_fp16' in self.extensions
        try:
            self.unified_memory = bool(dev.host_unified_memory)
        except cl.Error:
            self.unified_memory = self.is_cpu
        self.global_mem_size = dev.global_mem_size
        self.max_alloc = dev.max_mem_alloc_size
        self.local_mem_size = dev.local_mem_size
        self.compute_units = dev.max_compute_units
        self.max_work_group_size = dev.max_work_group_size
        self.has_command_buffer = 'cl_khr_command_buffer' in self.extensions
        from pyopencl.tools import MemoryPool, ImmediateAllocator
        self.pool = MemoryPool(ImmediateAllocator(self.queue))
        # the memory theano_ocl may hold: the device's reported size (PoCL does not enforce
        # it; a GPU driver does, and then fails later and less clearly)
        self.memory_limit = self.global_mem_size
        self.released = 0            # times the pool gave held buffers back (free_held)
        # the handles of the buffers the pool made, since it last gave any back: a buffer
        # of another pool (the caller's own) is not one of them (runtime/host_views.py)
        self.pool_handles = set()
        self._programs = collections.OrderedDict()   # (source, options) -> Program, LRU
        self.max_programs = MAX_PROGRAMS
        self.program_builds = 0      # memo misses (built from source or the disk cache)
        self.program_hits = 0
        self.build_fingerprint = kernel_cache.fingerprint(dev)
        self._reclaimers = []      # callables freeing cached device memory (frames)
        self._lock = threading.Lock()
        # calls of functions on this device, one at a time: they share its queue, pool and
        # caches, and concurrent calls from several threads crashed NVIDIA's driver (a
        # segfault in 4 threads' downloads, 2026-11-25); the queue is in order anyway
        self.call_lock = threading.RLock()

    def __repr__(self):
        return '<OCLDevice %s %s / %s>' % (self.spec, self.platform_name, self.name)

    def __reduce__(self):
        # Device handles never travel: a pickled device re-resolves by index.
        return (get_device, (self.spec,))

    @property
    def profiling_queue(self):
        """A second in-order queue with event profiling, for ``profile=True`` functions."""
        if self._profiling_queue is None:
            cl = self.cl
            self._profiling_queue = cl.CommandQueue(
                self.context, properties=cl.command_queue_properties.PROFILING_ENABLE)
        return self._profiling_queue

    @property
    def base_align(self):
        """Bytes at which the places this runtime lays out in buffers or host memory start
        (the device's base-address alignment, 128 at least)."""
        return max(int(self.device.mem_base_addr_align) // 8, 128)

    def flush(self):
        """Submit what this device's queues hold (the profiling queue where one was made)."""
        self.queue.flush()
        if self._profiling_queue is not None:
            self._profiling_queue.flush()

    def profiles(self, queue):
        """Whether ``queue`` is the profiling queue (the transfers of a ``profile=True``
        function are timed; asking makes no queue)."""
        return queue is self._profiling_queue

    def supports_dtype(self, dtype):
        return np.dtype(dtype) not in (np.float64, np.complex128) or self.has_fp64

    def build(self, source, options=()):
        """Build (memoized per device, least recently used dropped past ``max_programs``) an
        OpenCL program; errors show numbered source and log. A program dropped from the
        memo lives on as long as a kernel of it does (a frame of a live function). A memo
        miss looks in the disk cache first (runtime/kernel_cache.py)."""
        if own_functions.MACRO in source and \
                own_functions.used(settings.current(), self):
            options = tuple(options) + ('-D' + own_functions.MACRO,)
        key = (source, tuple(options))
        programs = self._programs
        prg = programs.get(key)
        if prg is not None:
            self.program_hits += 1
            kernel_cache.counts.add('memo_hits')
            programs.move_to_end(key)
            return prg
        from .errors import KernelBuildError
        cl = self.cl
        try:
            prg = kernel_cache.build(cl, self.context, self.device, self.build_fingerprint,
                                     source, options)
        except cl.RuntimeError as e:
            raise KernelBuildError(source, str(e), self) from None
        self.program_builds += 1
        with self._lock:
            programs[key] = prg
            while len(programs) > self.max_programs:
                programs.popitem(last=False)
        return prg

    @property
    def pending_uploads(self):
        """This thread's uploads still in flight (see ``pending_upload``)."""
        tls = self._tls
        try:
            return tls.uploads
        except AttributeError:
            tls.uploads = []
            return tls.uploads

    def pending_upload(self, ev):
        """Remember the event of a non-blocking upload from a host array the caller may
        change later (waited for by ``settle_uploads`` at the end of the call; every 256 when
        one call makes many, as ``run_steps`` does)."""
        if len(self.pending_uploads) >= 256:
            self.settle_uploads()
        self.pending_uploads.append(ev)

    def settle_uploads(self):
        """Wait for the non-blocking uploads still in flight (shared variables, input
        arrays), so that the host arrays they read may change again."""
        events = self.pending_uploads
        if events:
            waits.wait(self, events)
            del events[:]

    @property
    def pinned(self):
        """This device's pool of page-locked host blocks for downloaded outputs
        (``runtime/pinned.py``), made at first use."""
        pool = self.__dict__.get('_pinned')
        if pool is None:
            from .runtime.pinned import PinnedPool
            pool = self._pinned = PinnedPool(self.cl, self.context, self.queue)
        return pool

    def add_reclaimer(self, fn):
        """Register ``fn()``: frees device memory held in caches (a function's cached frames)
        when an allocation would not fit; a weak reference is fine (it returns None)."""
        self._reclaimers.append(fn)

    def held_bytes(self):
        """Bytes the pool holds for reuse (freed by theano_ocl, not yet given back)."""
        return self.pool.managed_bytes - self.pool.active_bytes

    def trim(self, keep=TRIM_KEEP):
        """Give the pool's held buffers back to the driver when they exceed ``keep`` bytes
        (after frames were dropped: a function deleted, a large frame evicted)."""
        if self.held_bytes() > keep:
            self.free_held()

    def free_held(self):
        """Give every buffer the pool holds back to the driver. ``released`` moves on: a
        buffer made later may get a released one's handle with other memory behind it, so
        whatever was keyed by handle (``blas_queued.Addresses``) is stale from then on."""
        self.pool.free_held()
        self.released += 1
        self.pool_handles.clear()

    def _reclaim(self):
        self.free_held()
        alive = []
        for fn in self._reclaimers:
            if fn() is not False:
                alive.append(fn)
        self._reclaimers = alive
        self.free_held()

    def alloc(self, nbytes):
        """A device buffer of at least ``nbytes`` from the pool.

        ``DeviceTooSmall`` (a MemoryError) when one buffer exceeds the device's largest
        allocation; ``MemoryError`` with the sizes when the device (its reported global
        memory, which theano_ocl holds itself to, or the driver) cannot take it after the
        pool's held buffers and the cached frames of every function were let go."""
        cl = self.cl
        nbytes = max(int(nbytes), 1)
        if nbytes > self.max_alloc:
            raise DeviceTooSmall(
                "OpenCL device %s cannot hold one buffer of %s: its largest allocation is %s "
                "(global memory %s)" % (self.name, fmt_bytes(nbytes), fmt_bytes(self.max_alloc),
                                        fmt_bytes(self.global_mem_size)))
        for attempt in (0, 1):
            if self.pool.active_bytes + nbytes <= self.memory_limit:
                if self.pool.managed_bytes + nbytes > self.memory_limit:
                    self.free_held()
                try:
                    return self._allocate(nbytes)
                except (cl.MemoryError, cl.RuntimeError, cl.LogicError) as e:
                    error = e
            else:
                error = None
            if attempt == 0:
                self._reclaim()
        raise MemoryError(
            "OpenCL device %s is out of memory allocating %s: theano_ocl holds %s in use of "
            "the device's %s%s" % (
                self.name, fmt_bytes(nbytes), fmt_bytes(self.pool.active_bytes),
                fmt_bytes(self.memory_limit), (' (driver: %s)' % error) if error else ''))

    def _allocate(self, nbytes):
        pool = self.pool
        held, managed = pool.held_blocks, pool.managed_bytes
        try:
            buf = pool.allocate(nbytes)
        finally:
            # one held block taken (managed unchanged) or none (a new one): anything else
            # means the pool let held blocks go itself (its retry after the driver refused)
            after = pool.held_blocks
            if after < held - 1 or (after == held - 1 and pool.managed_bytes != managed):
                self.released += 1
                self.pool_handles.clear()
        self.pool_handles.add(buf.int_ptr)
        return buf

    def memory_info(self):
        return dict(device=self.name, global_mem=self.global_mem_size,
                    memory_limit=self.memory_limit, max_alloc=self.max_alloc,
                    in_use=self.pool.active_bytes, held=self.held_bytes(),
                    programs=len(self._programs), max_programs=self.max_programs,
                    program_builds=self.program_builds, program_hits=self.program_hits)


def fmt_bytes(n):
    n = float(n)
    for unit in ('B', 'KiB', 'MiB', 'GiB', 'TiB'):
        if n < 1024 or unit == 'TiB':
            return ('%d %s' % (n, unit)) if unit == 'B' else ('%.1f %s' % (n, unit))
        n /= 1024.0


opened_devices = {}
_devices_lock = threading.Lock()


def get_device(spec=None):
    """The shared :class:`OCLDevice` for ``spec`` (see :func:`resolve_spec`)."""
    key = resolve_spec(spec)
    with _devices_lock:
        d = opened_devices.get(key)
        if d is None:
            d = opened_devices[key] = OCLDevice(*key)
    return d


def device_info():
    """One dict per visible device, for ``python -m theano_ocl info`` and the docs."""
    devs = list_devices()
    try:
        default = resolve_spec(None)
    except (NoOpenCLPlatform, ValueError):
        default = None
    cl = _cl()
    rows = []
    for pi, di, p, d in devs:
        ext = set(d.extensions.split())
        try:
            unified = bool(d.host_unified_memory)
        except cl.Error:
            unified = None
        rows.append(dict(
            spec='%d:%d' % (pi, di), platform=p.name.strip(), platform_version=p.version.strip(),
            device=d.name.strip(), type='GPU' if is_gpu_device(d) else ('CPU' if d.type & cl.device_type.CPU else 'other'),
            version=d.version.strip(), compute_units=d.max_compute_units,
            global_mem=d.global_mem_size, max_alloc=d.max_mem_alloc_size,
            local_mem=d.local_mem_size, fp64='cl_khr_fp64' in ext or d.double_fp_config != 0,
            fp16='cl_khr_fp16' in ext, unified_memory=unified,
            command_buffer='cl_khr_command_buffer' in ext,
            default=(pi, di) == default))
    return rows
