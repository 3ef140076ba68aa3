"""Which frame a call needs: its key, the steady-state guards that skip computing it, and
the cache of a function's frames (:class:`FrameCache`).

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
import collections

import numpy as np

from .. import darray as da
from ..shared import ResidentTable
from . import host_views, uploads

#: bytes of buffers a function's cached frames (other than the one in use) may keep
MAX_CACHED_FRAME_BYTES = 256 << 20


def arrays_match(arrays):
    """True when every (cell, shape) pair holds an ndarray of that shape."""
    ndarray = np.ndarray
    for cell, shape in arrays:
        v = cell[0]
        if type(v) is not ndarray or v.shape != shape:
            return False
    return True


def frame_key(rc, key_plan):
    """The key of the frame a call with the current inputs needs: the output placement, each
    keyed device input's shape (a device array's strides and offset too), each shape-deciding
    host value's bytes; None where a host value is too large to key on. ``rc``: the
    function's RunContext; ``key_plan``: its ``FrameCache.key_plan``."""
    parts = [rc.output_mode]
    dev = rc.dev
    for kind, cell, res, _ in key_plan:
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


def make_guard(rc, key_plan, frame):
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
    planned shape. The shared variables are checked as arrays (``shared.ResidentTable``: a
    simulator has thousands), one by one only after a device copy moved or where a value
    does not fit. Whoever drops a frame or
    plans one clears the cache's ``hot_guard`` (``FrameCache.drop``, the function's planning);
    every general call sets it."""
    if frame.key is None or rc.profile:
        return False
    residents, arrays, devarrays = [], [], []
    on_tier = frame.tiny or frame.on_host
    for (kind, cell, res, i), part in zip(key_plan, frame.key[1:]):
        if kind == 'resident':
            residents.append((res, part, i))
        elif kind == 'dev' and type(part) is tuple and \
                all(type(n) is int for n in part):
            arrays.append((cell, part))
        elif kind == 'dev' and type(part) is tuple and len(part) == 4 and part[0] == 'd' \
                and (i in frame.input_bufs or on_tier):
            # a device array (a device Scan's inner function takes its staging arrays
            # every step): the planned layout, in the buffer the kernels are bound to (on
            # the host: in any buffer, read in place)
            devarrays.append((cell, part[1], part[2], part[3], i))
        else:
            return False
    dev, queue = rc.dev, rc.queue
    residents = tuple(residents)
    arrays = tuple(arrays)
    if on_tier:
        if devarrays and (not frame.on_host or host_views.of(dev) is None):
            return False
        return tier_guard(rc, frame, residents, arrays, tuple(devarrays))
    devarrays = tuple(devarrays)
    device_array = da.device_array_class() if devarrays else None
    table = ResidentTable([res for res, _, _ in residents])

    def one_by_one():
        """The residents whose host value is newer and fits its place (to upload), each
        checked (Resident.current, .refillable); None where one breaks the steady state."""
        bufs = frame.input_bufs
        stale = []
        for res, shape, i in residents:
            d = res.current(dev)
            if d is None:
                if not res.refillable(dev, shape, bufs[i]):
                    return None
                stale.append(res)
            elif d.shape != shape or d.root.buf is not bufs[i]:
                return None
        return stale

    def guard():
        # the residents as arrays (shared.ResidentTable), each one looked at only when
        # the table does not hold or a value does not fit; uploads (the changed values,
        # packed) only once the call is known to replay this frame
        stale = None
        found = table.changed()
        if found is None or (found[0] and not table.fits(*found)):
            stale = one_by_one()
            if stale is None:
                return None
        bufs = frame.input_bufs
        for cell, shape, strides, offset, i in devarrays:
            v = cell[0]
            if type(v) is not device_array or v.base_data is not bufs[i] or \
                    v.shape != shape or v.strides != strides or v.offset != offset:
                return None
        if not arrays_match(arrays):
            return None
        if stale is not None:
            if stale:
                uploads.refill(dev, queue, stale)
            table.settle()
        elif found[0]:
            table.refill(dev, queue, *found)
        return frame
    return guard

def tier_guard(rc, frame, residents, arrays, devarrays=()):
    """The steady-state guard of a tiny frame: once the in-thread tier runs its calls,
    the frame when the inputs still have its key's shapes (wherever a shared variable's
    value is current: its device copy or its host cell) and its device-array inputs their
    key's layouts (a frame on the host of a device whose buffers the host reads in place,
    ``runtime/host_views.py``), else None."""
    after = 0 if frame.on_host else rc.host_tier_after
    ndarray = np.ndarray
    if devarrays:
        device_array = da.device_array_class()
        plain = tier_guard(rc, frame, residents, arrays)

        def guard_devarrays():
            for cell, shape, strides, offset, _ in devarrays:
                v = cell[0]
                if type(v) is not device_array or v.shape != shape or \
                        v.strides != strides or v.offset != offset:
                    return None
            return plain()
        return guard_devarrays

    def guard():
        if frame.replays < after or frame.tier_probes:
            return None         # (a probe call takes the general path: OCLFunction._pass)
        for res, shape, _ in residents:
            if res.newer:              # (device_newer without the property: per call)
                if res.darr.shape != shape:
                    return None
            else:
                v = res.cell[0]
                if type(v) is not ndarray or v.shape != shape:
                    return None
        return frame if arrays_match(arrays) else None
    return guard


class FrameCache(object):
    """The frames of one function (``rc``: its RunContext) by key, the last call's frame
    and the steady-state guard of that frame (``hot_guard``).

    Frames are kept besides the one in use (least recently used dropped first) up to
    ``max_frames``, and bounded by the bytes of their buffers (``max_cached_bytes``) and
    by their plans' steps (``max_cached_steps``, host memory): calls cycling over many
    keys (input shapes, sizes given to Alloc or reshape) plan each key once per process,
    not once per call. Index values are not keys (``linker.mark_dynamic``)."""
    max_cached_steps = 1 << 15

    def __init__(self, rc):
        prog = rc.program
        self.rc = rc
        self.dev = rc.dev
        self.frames = collections.OrderedDict()
        self.last_frame = None
        self.hot_guard = None       # the guard of the last call's frame (make_guard)
        settings = rc.settings
        self.max_frames = settings.max_frames
        # frames one key keeps for other IfElse branches than its current one's
        self.max_alternates = settings.max_alternates
        self.max_cached_bytes = min(MAX_CACHED_FRAME_BYTES, rc.dev.memory_limit // 8)
        # what every call reads, looked up once (a call costs a few microseconds of host
        # time: each attribute chain and method call in it shows): per input, its cell
        # and its Resident (a shared variable's) or None
        self.input_slots = [(cell, prog.residents.get(i))
                            for i, cell in enumerate(prog.input_cells)]
        self.key_plan = [(kind,) + self.input_slots[i] + (i,) for i, kind in prog.input_plan]

    def holds(self, frame):
        """Whether the steady-state guard finds that the inputs now in the cells replay
        ``frame``, the last call's (what comparing their key with ``frame.key`` would
        tell, without computing the key; the guard uploads the changed shared variables'
        values when it holds, as a call would)."""
        guard = self.hot_guard
        return guard is not None and frame is self.last_frame and guard() is frame

    def shape_change(self, before, after, what):
        """The message of a ``run_steps`` whose frame key changed from ``before`` to
        ``after`` between its steps: the inputs whose shapes (or shape-deciding values)
        differ."""
        prog = self.rc.program
        parts = []
        for (i, kind), b, a in zip(prog.input_plan, before[1:], after[1:]):
            if b != a:
                parts.append('%s %r: %s before the step, %s after' % (
                    'shared variable' if kind == 'resident' else 'input',
                    prog.fgraph.inputs[i].name or i, _key_part(b), _key_part(a)))
        return ('%s: shapes would change between steps (%s); run_steps needs every step to '
                'have the same shapes (a new device plan per step): call the simulator once per '
                'step instead' % (what, '; '.join(parts) or 'key changed'))

    def key(self):
        """The key of the frame the current inputs need (:func:`frame_key`)."""
        return frame_key(self.rc, self.key_plan)

    def guard_of(self, frame):
        """``frame``'s steady-state guard (:func:`make_guard`)."""
        return make_guard(self.rc, self.key_plan, frame)

    def add(self, key, frame):
        """Keep ``frame`` as the frame of ``key`` (None: not kept), the one in use."""
        if key is not None:
            self.frames[key] = frame
            self.evict(keep=frame)

    def drop(self, key):
        """Release the frame of ``key``; the steady state is left."""
        self.hot_guard = None
        frame = self.frames.pop(key, None)
        if frame is not None:
            frame.release()

    def evict(self, keep):
        """Drop the least recently used frames past ``max_frames``, or past
        ``max_cached_bytes`` of buffers or ``max_cached_steps`` plan steps held by frames
        other than ``keep`` (the one in use), and give the pool's freed buffers back to the
        driver when they are many."""
        frames = self.frames
        dropped = False
        while len(frames) > 1:
            others = [f for f in frames.values() if f is not keep]
            if len(frames) <= self.max_frames and \
                    sum(f.nbytes for f in others) <= self.max_cached_bytes and \
                    sum(len(f.steps) for f in others) <= self.max_cached_steps:
                break
            key, old = next(iter(frames.items()))
            if old is keep:
                frames.move_to_end(key)
                continue
            del frames[key]
            old.release()
            dropped = True
            self.hot_guard = None
        if dropped:
            self.dev.trim()

    def release_cached(self):
        """Drop every frame but the last call's (the caller holds the function's lock)."""
        for key, frame in list(self.frames.items()):
            if frame is not self.last_frame:
                self.drop(key)

    def free(self):
        """Drop every frame (their buffers go back to the device)."""
        for key in list(self.frames):
            self.drop(key)
        self.last_frame = None
        self.dev.trim()

    def cached_bytes(self):
        return sum(f.nbytes for f in self.frames.values())


def _key_part(part):
    """One input's part of a frame key, for a message."""
    if isinstance(part, tuple) and len(part) == 4 and part[0] == 'd':
        return 'shape %s' % (part[1],)
    if isinstance(part, tuple) and len(part) == 3 and isinstance(part[2], bytes):
        return 'value %s' % (np.frombuffer(part[2], dtype=part[1]).reshape(part[0]),)
    return 'shape %s' % (part,)
