"""pyopencl's kernel argument handlers, generated once per process instead of once per kernel.

Each ``pyopencl.Kernel`` made (theano_ocl makes one per recorded launch, so a frame of
5,000 launches makes 5,000) gets its ``set_args``/call handlers from
``pyopencl.invoker.generate_enqueue_and_set_args``, which pyopencl 2026.1 caches only on
disk (a ``WriteOncePersistentDict`` with no in-memory cache): every kernel pays a SQLite
look-up and the un-pickling of the generated module. Measured on the 2-core CPU with PoCL
(2026-11-25): 95-100 us a ``Kernel``; with the handlers memoized here, 3.6-3.8 us.

:func:`install` wraps that function with a memo keyed on all of its arguments (the kernel's
name, argument counts and types, the work-arounds and the devices), so the handlers are the
very ones pyopencl would have built. Where pyopencl lacks the function, or it raises
through the memo, pyopencl's own path runs unchanged.

:func:`set_long` sets one ``long`` argument of a kernel whose other arguments stay bound
(an offset re-set per call or per step: a moved root, an index read every call, a Scan's
row). pyopencl 2026.1's ``Kernel.set_arg`` of a numpy integer costs 6.2-6.8 us on the 2-core
CPU (2026-11-26); handing the 8 bytes to its buffer path (``_set_arg_buf``, what its
generated ``set_args`` handlers call) costs 0.11 us.
"""
import struct
import threading

import numpy as np

#: entries kept (one per distinct kernel name and argument signature); past it the memo
#: starts again
MAX_ENTRIES = 8192

_lock = threading.Lock()
_installed = False


def install():
    """Memoize pyopencl's invoker generation in this process (idempotent)."""
    global _installed
    if _installed:
        return
    with _lock:
        if _installed:
            return
        _installed = True
        try:
            from pyopencl import invoker
            original = invoker.generate_enqueue_and_set_args
        except (ImportError, AttributeError):   # pragma: no cover - other pyopencl
            return
        memo = {}

        def generate_enqueue_and_set_args(function_name, num_passed_args, num_cl_args,
                                          arg_types, work_around_arg_count_bug,
                                          warn_about_arg_count_bug, devs):
            try:
                types = None if arg_types is None else tuple(arg_types)   # None: unset
                key = (function_name, num_passed_args, num_cl_args, types,
                       work_around_arg_count_bug, warn_about_arg_count_bug, tuple(devs))
                hit = memo.get(key)
            except TypeError:                   # pragma: no cover - unhashable argument
                key = hit = None
            if hit is None:
                hit = original(function_name, num_passed_args, num_cl_args, arg_types,
                               work_around_arg_count_bug=work_around_arg_count_bug,
                               warn_about_arg_count_bug=warn_about_arg_count_bug, devs=devs)
                if key is not None:
                    if len(memo) >= MAX_ENTRIES:
                        memo.clear()
                    memo[key] = hit
            return hit
        generate_enqueue_and_set_args.original = original
        invoker.generate_enqueue_and_set_args = generate_enqueue_and_set_args


_pack_long = struct.Struct('=q').pack


def _set_long_fast(kernel, index, value):
    kernel._set_arg_buf(index, _pack_long(value))


def _set_long_slow(kernel, index, value):      # pragma: no cover - other pyopencl
    kernel.set_arg(index, np.int64(value))


def _has_buffer_path():
    try:
        import pyopencl
    except ImportError:                        # pragma: no cover
        return False
    return hasattr(pyopencl.Kernel, '_set_arg_buf')


#: ``set_long(kernel, index, value)``: ``kernel.set_arg(index, np.int64(value))``, through
#: pyopencl's buffer path where it has one
set_long = _set_long_fast if _has_buffer_path() else _set_long_slow
