"""The launch path without pyopencl's Python objects: ``clEnqueueNDRangeKernel`` through the
OpenCL ICD loader by ctypes, with no event.

pyopencl's ``enqueue_nd_range_kernel`` makes an :class:`pyopencl.Event` per launch and
converts its size tuples on every call. Here a launch's sizes are converted once, when
the frame records it, and each replay is one foreign call with its arguments already in
C form (the kernel's arguments were bound once by ``set_args``). ctypes comes with Python:
nothing to compile at the user's site, and the library is the ICD loader pyopencl itself
uses (``libOpenCL.so.1``), so the handles (``int_ptr``) are the same objects.

Which path a function takes is its ``launch`` setting (``runtime.settings``): 'native',
'pyopencl', or 'auto' (the default): native on GPUs, pyopencl on CPU devices. Measured with
``bench/vm_launch_cost.py`` (2026-11-25): on NVIDIA's H100 driver the bare ctypes call
costs 7.6-7.8 us against pyopencl's 8.6-9.5 us, but through the VM a launch cost 10.8-12.9
us native against 10.2-14.1 us with pyopencl; on PoCL pyopencl's call is the cheaper one
(1-3 us against 3-5 us). On the H200 (2026-11-30, two device calls, the LSTM training step
of ``bench/lstm.py``, 343 launches a step, variants alternating in one process) native
launches took 4-9% less time a step in all 16 rounds (4.50 against 4.69 ms, 4.56 against
5.01). Profiled functions always use pyopencl (their kernels are timed by events).
"""
import ctypes
import ctypes.util

_lib = None
_enqueue = None


def opencl_library():
    """The OpenCL ICD loader, opened once by ctypes (for every native call of the package)."""
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL(ctypes.util.find_library('OpenCL') or 'libOpenCL.so.1')
    return _lib


_wait = None


def wait_for_event(ev):
    """Wait for the pyopencl event ``ev`` by ``clWaitForEvents`` through ctypes, which lets
    go of Python's lock meanwhile (another thread goes on queueing kernels); pyopencl's
    own wait where the loader cannot be called."""
    global _wait
    if _wait is None:
        try:
            fn = opencl_library().clWaitForEvents
        except (OSError, AttributeError):       # pragma: no cover - no ICD loader by ctypes
            _wait = False
        else:
            fn.restype = ctypes.c_int32
            fn.argtypes = [ctypes.c_uint32, ctypes.POINTER(ctypes.c_void_p)]
            _wait = fn
    if _wait is False:                          # pragma: no cover
        ev.wait()
        return
    err = _wait(1, ctypes.byref(ctypes.c_void_p(ev.int_ptr)))
    if err:
        raise RuntimeError('clWaitForEvents failed with OpenCL error %d' % err)


def _load():
    global _enqueue
    if _enqueue is None:
        fn = opencl_library().clEnqueueNDRangeKernel
        fn.restype = ctypes.c_int32
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                       ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint32, ctypes.c_void_p,
                       ctypes.c_void_p]
        _enqueue = fn
    return _enqueue


def available():
    """Whether the ICD loader can be called (False: pyopencl's path is used)."""
    try:
        _load()
        return True
    except (OSError, AttributeError):
        return False


def use_native(setting, profiling, gpu=False):
    """Whether launches of a function with ``launch`` = ``setting`` go native ('auto':
    on a GPU, ``gpu``)."""
    return (setting == 'native' or setting == 'auto' and gpu) and not profiling and \
        available()


class LaunchError(RuntimeError):
    """clEnqueueNDRangeKernel returned an error code."""


def launcher(queue, kernel, name, gsize, lsize):
    """A callable enqueuing ``kernel`` (arguments already set) on ``queue`` with these sizes,
    no event; raises LaunchError naming the kernel and the OpenCL error code."""
    enqueue = _load()
    dim = len(gsize)
    gs = (ctypes.c_size_t * dim)(*gsize)
    ls = None if lsize is None else (ctypes.c_size_t * dim)(*lsize)
    qp = queue.int_ptr
    kp = kernel.int_ptr
    keep = (queue, kernel)          # the handles stay valid while the launch is recorded

    def run():
        rc = enqueue(qp, kp, dim, None, gs, ls, 0, None, None)
        if rc:
            raise LaunchError('clEnqueueNDRangeKernel(%s, global %s, local %s) failed: OpenCL '
                              'error %d' % (name, tuple(gsize), lsize, rc))
    run.native = keep
    return run
