"""Compiled OpenCL programs kept on disk: a second process that builds the same function
builds no program from source.

Owns: where the binaries live, when they are used, the file format, the size bound and
the build counters (``theano_ocl.kernel_cache_info()``).

* Directory: ``$THEANO_OCL_KERNEL_CACHE_DIR`` if set, else
  ``<theano.config.compiledir>/theano_ocl_kernels`` -- next to Theano's own compiled C
  modules and, like Theano's gpuarray kernel cache, inside ``compiledir`` (not
  ``base_compiledir``): ``theano-cache purge`` (which removes ``compiledir``) clears it,
  and ``python -m theano_ocl cache clear`` clears only it.
* ``THEANO_OCL_KERNEL_CACHE=0`` (or ``off``/``false``/``no``) turns it off: every memo
  miss builds from source and nothing is read or written.
* ``THEANO_OCL_KERNEL_CACHE_MB`` (default 256) bounds its size: past it, the least
  recently used files (by modification time; a hit touches its file) are removed.
* Programs build quietly: the kernels are generated, so a compiler's warning is nothing
  a user can act on. With OpenCL's ``-w`` (PoCL's compiler printed its warnings straight
  to the process's standard error: on AVX2 hosts one for each 16-wide vector its builtins
  take, 2 to 23 a program for the four reductions of ``bench --quick``, 2026-12-02), and
  without pyopencl's ``CompilerWarning`` for a build whose log is not empty (NVIDIA's
  driver logs in spite of ``-w``: some thousand of them in the test suite on the H200).
  A failed build's error and log are unaffected (``errors.KernelBuildError``).
  ``THEANO_OCL_KERNEL_WARNINGS=1`` shows them again.
* The variables are read when the first function is linked (``runtime.settings``: a
  value they do not take raises ``SettingError`` naming it there).
* Key: sha256 of the source, the build options, the device's name and version, the
  driver version, the platform's name and version and the pyopencl version -- a driver
  update or another device never loads a stale binary.
* File: a header (magic, key, payload length, sha256 of the payload) and the binary.
  Files are written to a temporary file in the same directory and renamed over the
  final name (atomic), so a reader sees a whole file or none. A file that cannot give
  the program's kernels -- its header does not verify, the driver refuses its binary, or
  the program built from it lacks a kernel the source defines (another program's binary
  under this key) -- is removed with a warning naming it, and the program is built from
  source and stored again.

Why our own cache: pyopencl (2026.1) skips its binary cache on PoCL and NVIDIA, assuming
the driver caches builds from source. Measured 2026-11-25, one program per process:
PoCL 3.1 (``~/.cache/pocl/kcache``) builds from source in ~520-650 ms cold and ~26 ms
warm, and from our binary in ~1-2 ms. NVIDIA H100 (driver 580.159.04) builds a 40-line
kernel from source in ~480 ms cold and ~46 ms once its ComputeCache holds it, and from the
binary (PTX) in ~47 ms: there the driver's cache already does the work, and ours helps
only where that cache is off or evicted (``CUDA_CACHE_DISABLE=1``: ~250-290 ms from
source, ~130 ms from the binary). Drivers without a cache of their own gain the most.
"""
import hashlib
import os
import re
import struct
import tempfile
import threading
import time
import warnings

from . import settings

ENV_SWITCH = 'THEANO_OCL_KERNEL_CACHE'
ENV_DIR = 'THEANO_OCL_KERNEL_CACHE_DIR'
ENV_MB = 'THEANO_OCL_KERNEL_CACHE_MB'
ENV_WARNINGS = 'THEANO_OCL_KERNEL_WARNINGS'
#: the build option that suppresses the compiler's warnings (OpenCL 1.0, 5.6.4.4)
QUIET = '-w'
DEFAULT_MB = 256
SUBDIR = 'theano_ocl_kernels'

MAGIC = b'theano_ocl program binary v1\n'
_HEADER = struct.Struct('<64sQ32s')        # key (hex), payload length, sha256 of payload
SUFFIX = '.clbin'
_TMP_PREFIX = '.tmp-'
#: a temporary file older than this was left by a process that died while writing
_STALE_TMP_S = 3600

#: what ``kernel_cache_info()`` counts (process-wide; also per thread for profiles)
COUNTERS = ('memo_hits', 'source_builds', 'source_seconds', 'disk_hits', 'disk_seconds',
            'disk_writes', 'disk_rejected', 'disk_errors')


class _Counts(object):
    """Counters of program builds, process-wide and per thread (a profiled call reads the
    builds of its own thread: ``thread_counts``)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._tls = threading.local()
        self.total = dict.fromkeys(COUNTERS, 0)

    def thread(self):
        try:
            return self._tls.counts
        except AttributeError:
            self._tls.counts = dict.fromkeys(COUNTERS, 0)
            return self._tls.counts

    def add(self, name, value=1):
        self.thread()[name] += value
        with self._lock:
            self.total[name] += value


counts = _Counts()


def thread_counts():
    """A copy of this thread's build counters (``profiling`` takes differences)."""
    return dict(counts.thread())


def build_seconds():
    """Seconds this thread has spent building programs so far (from source or from the
    disk cache): host work timed around a build takes them out, as compile time."""
    c = counts.thread()
    return c.get('source_seconds', 0) + c.get('disk_seconds', 0)


def _switch(value):
    """The cache's switch: an empty value leaves it on, as an unset one does."""
    return settings.switch(value) if value.strip() else True


def _shown(value):
    """The warnings' switch: an empty value leaves them suppressed, as an unset one does."""
    return settings.switch(value) if value.strip() else False


def _mebibytes(value):
    try:
        mb = float(value)
    except ValueError:
        mb = -1.0
    if not mb >= 0:              # (nan too)
        raise ValueError('a size in MiB, a number >= 0')
    return mb


def temp_in(directory, make, **kw):
    """``make(dir=directory, **kw)`` (``tempfile.mkstemp``, ``mkdtemp``) in a directory of
    Theano's compiledir, created first, and again if it vanished: Theano's
    ``ModuleCache.refresh`` removes empty directories of compiledir (between the makedirs
    and the make)."""
    for attempt in (0, 1):
        os.makedirs(directory, exist_ok=True)
        try:
            return make(dir=directory, **kw)
        except FileNotFoundError:
            if attempt:
                raise


def default_directory():
    d = os.environ.get(ENV_DIR)
    if d:
        return os.path.abspath(os.path.expanduser(d))
    import theano
    return os.path.join(theano.config.compiledir, SUBDIR)


def fingerprint(cl_device):
    """What, besides source and options, decides whether a binary fits: the device, the
    driver, the platform and the pyopencl version."""
    import pyopencl as cl
    p = cl_device.platform
    return '\0'.join(s.strip() for s in (
        cl_device.name, cl_device.vendor, cl_device.version, cl_device.driver_version,
        p.name, p.version, cl.VERSION_TEXT))


class KernelCache(object):
    """One directory of program binaries (see the module doc)."""

    def __init__(self, directory, max_bytes):
        self.directory = directory
        self.max_bytes = int(max_bytes)

    def key(self, fingerprint, source, options):
        h = hashlib.sha256()
        for part in (fingerprint, source, '\0'.join(str(o) for o in options)):
            data = part.encode('utf-8')
            h.update(struct.pack('<Q', len(data)))
            h.update(data)
        return h.hexdigest()

    def path(self, key):
        return os.path.join(self.directory, key + SUFFIX)

    def load(self, key):
        """The binary stored under ``key``, or None (absent, partial or corrupt: a bad file
        is removed, :meth:`reject`). A hit marks the file as recently used."""
        path = self.path(key)
        try:
            with open(path, 'rb') as f:
                data = f.read()
        except OSError:
            return None
        binary = _decode(data, key)
        if binary is None:
            self.reject(key, 'its header, length or hash does not verify')
            return None
        try:
            os.utime(path)
        except OSError:
            pass
        return binary

    def store(self, key, binary):
        """Write ``binary`` under ``key`` atomically; then keep the directory in bounds.
        False when the file could not be written (full disk, read-only directory)."""
        data = _encode(key, binary)
        tmp = None
        try:
            fd, tmp = temp_in(self.directory, tempfile.mkstemp, prefix=_TMP_PREFIX)
            with os.fdopen(fd, 'wb') as f:
                f.write(data)
            os.replace(tmp, self.path(key))
            tmp = None
        except OSError:
            return False
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
        self.trim()
        return True

    def discard(self, key):
        try:
            os.unlink(self.path(key))
        except OSError:
            pass

    def reject(self, key, why):
        """Remove the file of ``key``, which cannot give its program (``why``), with a
        warning naming it: the caller builds the program from source and stores it anew."""
        warnings.warn('theano_ocl kernel cache: removed %s (%s); the program is built from '
                      'source and stored again' % (self.path(key), why), RuntimeWarning,
                      stacklevel=3)
        self.discard(key)

    def entries(self):
        """[(mtime, size, path)] of the stored binaries."""
        out = []
        try:
            it = os.scandir(self.directory)
        except OSError:
            return out
        now = time.time()
        with it:
            for e in it:
                try:
                    st = e.stat()
                except OSError:
                    continue
                if e.name.endswith(SUFFIX):
                    out.append((st.st_mtime, st.st_size, e.path))
                elif e.name.startswith(_TMP_PREFIX) and now - st.st_mtime > _STALE_TMP_S:
                    _unlink(e.path)
        return out

    def trim(self):
        """Remove the least recently used binaries while the directory holds more than
        ``max_bytes`` (down to 80% of it, so that trims stay rare)."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        if total <= self.max_bytes:
            return 0
        removed = 0
        for mtime, size, path in sorted(entries):
            if total <= 0.8 * self.max_bytes:
                break
            if _unlink(path):
                removed += 1
            total -= size
        return removed

    def clear(self):
        """Remove every stored binary; returns how many."""
        return sum(_unlink(path) for _, _, path in self.entries())

    def info(self):
        entries = self.entries()
        return dict(directory=self.directory, files=len(entries),
                    bytes=sum(size for _, size, _ in entries), max_bytes=self.max_bytes)


def _unlink(path):
    try:
        os.unlink(path)
        return True
    except OSError:
        return False


def _encode(key, binary):
    binary = bytes(binary)
    return MAGIC + _HEADER.pack(key.encode('ascii'), len(binary),
                                hashlib.sha256(binary).digest()) + binary


def _decode(data, key):
    """The payload of a stored file, or None unless magic, key, length and hash agree."""
    n = len(MAGIC) + _HEADER.size
    if len(data) < n or not data.startswith(MAGIC):
        return None
    stored_key, length, digest = _HEADER.unpack_from(data, len(MAGIC))
    payload = data[n:]
    if stored_key != key.encode('ascii') or length != len(payload) \
            or hashlib.sha256(payload).digest() != digest:
        return None
    return payload


_cache = None
_cache_lock = threading.Lock()
_quiet = None
# (builds that silence pyopencl's CompilerWarning change the process's warning filters:
# one at a time, so that two never restore each other's)
_build_lock = threading.Lock()


def get_cache():
    """The process's :class:`KernelCache`, or None when ``THEANO_OCL_KERNEL_CACHE=0``.
    The environment is read once (``reset()`` reads it again); a value its variables do
    not take raises ``SettingError`` (the linker asks at link time)."""
    global _cache
    with _cache_lock:
        if _cache is None:
            if not settings.from_environment(ENV_SWITCH, True, _switch):
                _cache = False
            else:
                mb = settings.from_environment(ENV_MB, DEFAULT_MB, _mebibytes)
                _cache = KernelCache(default_directory(), mb * (1 << 20))
        return _cache or None


def reset():
    """Forget the cache settings (tests; after changing the environment variables)."""
    global _cache, _quiet
    with _cache_lock:
        _cache = _quiet = None


def quiet():
    """Whether programs build quietly (:func:`build_options`, :func:`_built`): unless
    ``THEANO_OCL_KERNEL_WARNINGS`` is on; read once, as the cache's variables are."""
    global _quiet
    if _quiet is None:
        _quiet = not settings.from_environment(ENV_WARNINGS, False, _shown)
    return _quiet


def build_options(options):
    """The options a program with ``options`` builds with (those of its cache key):
    :data:`QUIET` added where builds are quiet."""
    options = list(options)
    if quiet() and QUIET not in options:
        options.append(QUIET)
    return options


def _built(cl, program, options):
    """``program.build(options=options)``, without pyopencl's ``CompilerWarning`` for a
    log that is not empty where builds are quiet."""
    if not quiet():
        return program.build(options=options)
    with _build_lock, warnings.catch_warnings():
        warnings.simplefilter('ignore', cl.CompilerWarning)
        return program.build(options=options)


def build(cl, context, device, fingerprint, source, options):
    """A built ``pyopencl.Program``: from the disk cache when it holds a binary the
    driver accepts, else from source (then stored). A failed source build raises the
    driver's error (``cl.RuntimeError``) as ``Program.build`` does. The compiler's
    warnings are suppressed (:func:`quiet`)."""
    options = build_options(options)
    cache = get_cache()
    key = None
    if cache is not None:
        key = cache.key(fingerprint, source, options)
        t0 = time.perf_counter()
        binary = cache.load(key)
        if binary is not None:
            try:
                prg = _built(cl, cl.Program(context, [device], [binary]), options)
            except Exception as e:
                # a binary this driver refuses (a file from another build of the same
                # driver version, a truncated write the header could not tell): rebuild
                msg = str(e).strip()
                why = 'the driver refuses its binary: %s' % (
                    msg.splitlines()[0] if msg else type(e).__name__)
            else:
                # a binary the driver takes, of another program (a copied file): its kernels
                # would fail later, at clCreateKernel (INVALID_KERNEL_NAME)
                missing = kernel_names(source) - program_kernels(cl, prg)
                why = 'its program has no kernel %s: the binary of another program' % (
                    ', '.join(sorted(missing))) if missing else None
            if why:
                counts.add('disk_rejected')
                cache.reject(key, why)
            else:
                counts.add('disk_hits')
                counts.add('disk_seconds', time.perf_counter() - t0)
                return prg
    t0 = time.perf_counter()
    prg = _built(cl, cl.Program(context, source), options)
    counts.add('source_builds')
    counts.add('source_seconds', time.perf_counter() - t0)
    if cache is not None:
        try:
            binary = prg.get_info(cl.program_info.BINARIES)[0]
        except Exception:
            binary = None
        if binary and cache.store(key, binary):
            counts.add('disk_writes')
        else:
            counts.add('disk_errors')
    return prg


#: a kernel's declaration: ``__kernel [__attribute__((...))] void name(``
_KERNEL_DECL = re.compile(
    r'\b(?:__)?kernel\s+(?:__attribute__\s*\(\(.*?\)\)\s*)*void\s+(\w+)\s*\(', re.S)
_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/', re.S)


def kernel_names(source):
    """The names of the kernels ``source`` (OpenCL C) defines."""
    return set(_KERNEL_DECL.findall(_COMMENT.sub(' ', source)))


def program_kernels(cl, prg):
    """The names of the kernels a built program holds."""
    try:
        names = prg.get_info(cl.program_info.KERNEL_NAMES)
    except Exception:                   # before OpenCL 1.2: the kernels themselves
        return {k.function_name for k in prg.all_kernels()}
    return {n.strip() for n in names.split(';') if n.strip()}


def kernel_cache_info():
    """Program builds in this process (memo hits, builds from source and from the disk
    cache with their seconds, files written or rejected) and the cache directory (files,
    bytes, bound); ``enabled`` is False under ``THEANO_OCL_KERNEL_CACHE=0``."""
    info = dict(counts.total)
    cache = get_cache()
    info['enabled'] = cache is not None
    if cache is not None:
        info.update(cache.info())
    else:
        info.update(directory=None, files=0, bytes=0, max_bytes=0)
    return info


def clear():
    """Remove every binary from the cache directory (also when the cache is turned off
    for this process); returns how many files were removed."""
    cache = get_cache() or KernelCache(default_directory(), DEFAULT_MB << 20)
    return cache.clear()
