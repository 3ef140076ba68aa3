"""What the benchmarks share: host copies of results, launch counts, the CPU share of
other processes, device copy bandwidth and the description of the machine a run used."""
import datetime
import os
import platform
import subprocess
import sys
import time

import numpy as np

from .paths import checkout_root


def host(value):
    """A host numpy array of a function's result (device arrays are downloaded)."""
    return value.get() if hasattr(value, 'get') else np.asarray(value)


def check_close(got, want, rtol=1e-5, atol=1e-6, what='result'):
    """Raise AssertionError naming ``what`` when theano_ocl's result differs from C's."""
    np.testing.assert_allclose(host(got), host(want), rtol=rtol, atol=atol,
                               err_msg='theano_ocl %s differs from Theano C' % what)


def launches(f):
    """Kernel launches of ``f``'s last call (the one place that reads the VM for it)."""
    frame = getattr(getattr(f, 'fn', f), 'last_frame', None)
    return getattr(frame, 'n_launches', None)


def fallbacks(f):
    """Names of the ops ``f`` runs on the host for want of a device implementation."""
    import theano_ocl
    return sorted({type(n.op).__name__ for n in theano_ocl.fallback_nodes(f)})


def copy_bandwidth(dev, nbytes, repeat=5, copies=10):
    """Bytes moved per second (read + write) by a device-to-device buffer copy."""
    cl = dev.cl
    a = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes)
    b = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(dev.queue, a, np.uint8(1), 0, nbytes)
    dev.queue.finish()
    ts = []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        for _ in range(copies):
            cl.enqueue_copy(dev.queue, b, a, byte_count=nbytes)
        dev.queue.finish()
        ts.append((time.perf_counter() - t0) / copies)
    return 2 * nbytes / float(np.median(ts[1:]))


class OtherLoad(object):
    """The share of all CPUs that other processes used between ``start()`` and ``stop()``
    (Linux /proc; None elsewhere): timings taken while it is high say little."""

    @staticmethod
    def _read():
        try:
            with open('/proc/stat') as f:
                t = [int(v) for v in f.readline().split()[1:]]
            with open('/proc/self/stat') as f:
                s = f.read().rsplit(')', 1)[1].split()
            return sum(t) - t[3] - t[4], sum(t), int(s[11]) + int(s[12])
        except (OSError, ValueError, IndexError):
            return None

    def start(self):
        self.t0 = self._read()

    def stop(self):
        t1 = self._read()
        if self.t0 is None or t1 is None:
            return None
        busy, total, mine = (b - a for a, b in zip(self.t0, t1))
        return max(0.0, (busy - mine) / float(max(total, 1)))


def cpu_name():
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git():
    """{commit, dirty} of the checkout theano_ocl runs from (None for an installed copy:
    the environment may sit inside another repository). ``THEANO_OCL_BENCH_COMMIT`` (a commit, ``+dirty``
    appended when the tree had changes) overrides what git says: a copy of the working
    tree on another machine may carry a stale ``.git`` (the GPU machine's copies read an
    older HEAD, with local changes, than the tree they held)."""
    given = os.environ.get('THEANO_OCL_BENCH_COMMIT')
    if given:
        commit, _, flag = given.partition('+')
        return dict(commit=commit, dirty=flag == 'dirty', given=True)
    root = checkout_root()
    if root is None:
        return None
    try:
        commit = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=root, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=no'],
                               cwd=root, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return dict(commit=commit, dirty=bool(dirty.strip())) if commit else None


def _version(module):
    try:
        mod = __import__(module)
    except Exception:               # an optional package absent or broken: not recorded
        return None
    return getattr(mod, '__version__', getattr(mod, 'VERSION_TEXT', None))


def environment(dev):
    """The machine, device and software of a run, for its record."""
    d = dev.device
    return dict(
        date=datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
        git=_git(),
        device=dict(spec=dev.spec, name=dev.name, platform=dev.platform_name,
                    platform_version=dev.platform.version.strip(),
                    driver_version=d.driver_version.strip(), version=d.version.strip(),
                    type='GPU' if dev.is_gpu else ('CPU' if dev.is_cpu else 'other'),
                    compute_units=dev.compute_units, global_mem=dev.global_mem_size),
        host=dict(cpu=cpu_name(), cpus=os.cpu_count(), os=platform.platform(),
                  python=sys.version.split()[0]),
        versions={m: _version(m) for m in ('theano_ocl', 'theano', 'numpy', 'pyopencl',
                                           'scipy', 'pyclblast')},
    )
