"""Which frame a call needs: its key, and the steady-state guards that skip computing it.

A function caches one frame per *key*: the output placement, the shapes of the inputs
consumed on the device (a device array's strides and offset too) and the bytes of the small
host values that decide shapes (:func:`frame_key`). A call that comes back to the last
call's frame with its inputs as planned (the steady state) need not compute the key nor
look it up: the frame's *guard* (:func:`make_guard`) tests, in a fraction of that time,
what the key and the executor's re-binding (``runtime.executor.Executor.replay``) would
read. A shared variable set on the host since the last call with a value that fits its
device copy's place does not break the steady state: the guard uploads the changed values
alone, packed (``runtime.uploads.refill``). Frames whose calls run in the in-thread host
tier get :func:`tier_guard`.
"""
import numpy as np

from .. import darray as da
from . import uploads


def arrays_match(arrays):
    """True when every (cell, shape) pair holds an ndarray of that shape."""
    ndarray = np.ndarray
    for cell, shape in arrays:
        v = cell[0]
        if type(v) is not ndarray or v.shape != shape:
            return False
    return True


def frame_key(vm):
    """The key of the frame a call with the current inputs needs: the output placement, each
    keyed device input's shape (a device array's strides and offset too), each shape-deciding
    host value's bytes; None where a host value is too large to key on."""
    parts = [vm.output_mode]
    dev = vm.dev
    for kind, cell, res, _ in vm.key_plan:
        if kind == 'resident':
            parts.append(res.device_shape(dev))
            continue
        v = cell[0]
        if kind == 'dev':
            if isinstance(v, np.ndarray):
                parts.append(v.shape)
            elif v is None:
                parts.append(None)
            elif da.is_device_array(v):
                parts.append(('d', v.shape, v.strides, v.offset))
            else:
                parts.append(np.shape(v))
        else:  # 'meta': small host values that decide shapes
            a = np.asarray(v)
            if a.size > 64:
                return None
            parts.append((a.shape, a.dtype.str, a.tobytes()))
    return tuple(parts)


def make_guard(vm, frame):
    """A closure for calls that come back to ``frame`` (the steady state): it returns the
    frame when this call's inputs give ``frame.key`` and sit in the buffers its kernels
    are bound to (so that the key, the lookup and the executor's re-binding would find just
    that), else None: the call then takes the general path. False where it cannot
    tell cheaply (inputs that are device arrays or keyed host values; profiling;
    frames of the in-thread tier).

    It tests what the key and the re-binding read, for each keyed input: a shared variable's
    device copy current (Resident.ensure_device's tests), of the planned shape, in the
    planned buffer, or its host value newer and fitting that place (uploaded once the guard
    holds: the only side effect, and only when it returns the frame); an input array of the
    planned shape. Whoever drops a frame or
    plans one clears the function's ``hot_guard`` (drop_frame, _plan); every general call sets it."""
    if frame.key is None or vm.profile:
        return False
    residents, arrays, devarrays = [], [], []
    for (kind, cell, res, i), part in zip(vm.key_plan, frame.key[1:]):
        if kind == 'resident':
            residents.append((res, part, i))
        elif kind == 'dev' and type(part) is tuple and \
                all(type(n) is int for n in part):
            arrays.append((cell, part))
        elif kind == 'dev' and type(part) is tuple and len(part) == 4 and part[0] == 'd' \
                and i in frame.input_bufs:
            # a device array (a device Scan's inner function takes its staging arrays
            # every step): the planned layout, in the buffer the kernels are bound to
            devarrays.append((cell, part[1], part[2], part[3], i))
        else:
            return False
    dev = vm.dev
    residents = tuple(residents)
    arrays = tuple(arrays)
    if frame.tiny or frame.on_host:
        if devarrays:
            return False
        return tier_guard(vm, frame, residents, arrays)
    devarrays = tuple(devarrays)
    device_array = da.device_array_class() if devarrays else None

    def guard():
        bufs = frame.input_bufs
        stale = None
        for res, shape, i in residents:
            d = res.current(dev)
            if d is None:
                # set on the host since (same shape, dtype and place): uploaded below,
                # once the call is known to replay this frame
                if not res.refillable(dev, shape, bufs[i]):
                    return None
                if stale is None:
                    stale = []
                stale.append(res)
            elif d.shape != shape or d.root.buf is not bufs[i]:
                return None
        for cell, shape, strides, offset, i in devarrays:
            v = cell[0]
            if type(v) is not device_array or v.base_data is not bufs[i] or \
                    v.shape != shape or v.strides != strides or v.offset != offset:
                return None
        if not arrays_match(arrays):
            return None
        if stale is not None:
            uploads.refill(dev, vm.queue, stale)
        return frame
    return guard

def tier_guard(vm, frame, residents, arrays):
    """The steady-state guard of a tiny frame: once the in-thread tier runs its calls,
    the frame when the inputs still have its key's shapes (wherever a shared variable's
    value is current: its device copy or its host cell), else None."""
    after = 0 if frame.on_host else vm.host_tier_after
    ndarray = np.ndarray

    def guard():
        if frame.replays < after or frame.tier_probes:
            return None         # (a probe call takes the general path: OCLFunction._pass)
        for res, shape, _ in residents:
            if res.device_newer:
                if res.darr.shape != shape:
                    return None
            else:
                v = res.cell[0]
                if type(v) is not ndarray or v.shape != shape:
                    return None
        return frame if arrays_match(arrays) else None
    return guard
