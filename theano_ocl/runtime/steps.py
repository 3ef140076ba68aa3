"""What the executor records around the op families' plans: the uploads of a call's inputs,
the guards on host values, the fetchers of its outputs and the prepare steps of its commits
(``runtime.build.FrameBuilder`` records them into each frame; ``runtime.commit`` applies the
commits)."""
import numpy as np

from .. import darray as da
from ..darray import DArray, Root
from . import plans
from .context import BranchFlip, Replan, bind_site, family
from .memory import buffer_copier, download, download_later, upload
from .pinned import MIN_BYTES as PINNED_MIN_BYTES, is_pinned


class NodeThunk(object):
    """What Theano's error reporting expects of a thunk, for device-run nodes."""

    def __init__(self, task, storage_map):
        self.task = task
        self.inputs = [storage_map[v] for v in task.node.inputs]
        self.outputs = [storage_map[v] for v in task.node.outputs]

    def __call__(self):  # pragma: no cover - never called; the VM runs device nodes
        raise RuntimeError('device node %s is run by the theano_ocl VM' % (self.task.node,))


def none():
    return None


none.reads = ()


def reading(fn, *darrays):
    """``fn`` declaring the device buffers (Roots) it reads when it runs: the executor
    asks (``fn.reads``) instead of looking into closures."""
    fn.reads = tuple(d.root for d in darrays if d is not None)
    return fn


def same_value(a, b):
    if a is b:
        return True
    try:
        a = np.asarray(a)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    except Exception:
        return False


def guard_host_value(cell, planned, var):
    planned = np.array(planned, copy=True)

    def run():
        if not same_value(cell[0], planned):
            raise Replan(var)
    return run


def branch_taken(cond):
    """IfElse's test: any value but zero takes the ``then`` branch (NaN included)."""
    return bool(np.asarray(cond) != 0)


def branch_guard(cell, branch, var):
    def run():
        if branch_taken(cell[0]) != branch:
            raise BranchFlip(var)
    return run


def upload_input_step(dev, queue, d, cell, pinned=False):
    """Copy the caller's array (``cell[0]``) into DArray ``d``.

    The caller's array: the call waits for the copy before it returns (dev.pending_uploads,
    settled at the end of every call), so the caller may change the array right after --
    a call returning device arrays does not otherwise wait for anything.

    ``pinned`` (the ``pinned`` setting wants page-locked memory on this device) and at
    least ``PINNED_MIN_BYTES``: the array is first copied into a page-locked block this
    step keeps, and the device copies from there while the call goes on; nothing waits
    for it but the next call's copy into the block. From pageable memory NVIDIA's driver
    started the device's copy of the MLP's 256x784 batch 136-155 us after it was enqueued
    (H100, 2026-11-26, profiling events), the call's first kernels waiting behind it."""
    if pinned and d.nbytes >= PINNED_MIN_BYTES:
        block = dev.pinned.empty(d.shape, d.dtype)
        if is_pinned(block):            # (else no room in the pool: the caller's array)
            return _staged_upload(dev, queue, d, cell, block)

    def run():
        ev = upload(dev, queue, d, cell[0])
        if ev is not None:
            dev.pending_upload(ev)
    return run


def _staged_upload(dev, queue, d, cell, block):
    last = [None]                       # the event of the last copy from the block

    def run():
        if last[0] is not None:
            last[0].wait()              # (the last call's copy: long done, as a rule)
        np.copyto(block, cell[0])
        last[0] = upload(dev, queue, d, block)
    return run


def upload_guarded_step(dev, queue, d, cell, var):
    shape = d.shape

    def run():
        v = cell[0]
        if np.shape(v) != shape:
            raise Replan(var)
        # a host node's output: its thunk may write the next value into the same array
        # (Theano's C code reuses output storage) while this copy is still queued, so the
        # copy reads a snapshot
        upload(dev, queue, d, np.array(v, order='C'))
    return run


def sync_host_step(res):
    def run():
        res.sync_to_host()
    return run


def host_copy_of_device_input(queue, cell):
    def run():
        v = cell[0]
        if da.is_device_array(v):
            cell[0] = v.get(queue=queue)
    return run


def write_back_step(dev, queue, d, value_cell, input_cell):
    """Copy an input's destroyed value (device DArray ``d``, or the host value in
    ``value_cell``) into the caller's array, as Theano's in-place ops leave it."""
    def run():
        host = input_cell[0]
        if not isinstance(host, np.ndarray) or not host.flags.writeable:
            return
        if d is not None:
            if host.shape != d.shape or host.dtype != d.dtype:
                return
            if host.flags.c_contiguous:
                download(dev, queue, d, host)
            else:
                host[...] = download(dev, queue, d)
        else:
            value = value_cell[0]
            if value is not None and value is not host and np.shape(value) == host.shape:
                host[...] = value
    return run


def host_value(cell, res):
    def run():
        if res is not None:
            res.sync_to_host()
        return cell[0]
    return reading(run)


def host_output(dev, queue, d, pinned=False):
    """``run()``: the output's host value now; ``run.later(events)``: a host array the
    download fills once the event it appends to ``events`` completes (a call waits once
    for all of its outputs and error flags: ``OCLFunction._pass``). ``pinned``: the host
    arrays come from the device's page-locked blocks (``runtime/pinned.py``)."""
    shape, dtype = d.shape, d.dtype
    empty = dev.pinned.empty if pinned and d.nbytes >= PINNED_MIN_BYTES else np.empty

    def run():
        return download(dev, queue, d, empty(shape, dtype))

    def early():
        host = empty(shape, dtype)
        return host, download_later(dev, queue, d, host)

    def later(events):
        host, ev = early()
        if ev is not None:
            events.append(ev)
        return host
    # (early: queued as soon as d is final, runtime/early.py)
    return plans.Fetch(run, (d.root,), later=later, early=early)


#: host outputs of at least this many bytes are handed over without a copy on CPU devices
#: (:func:`handed_host_output`); below it a copy costs less than a buffer and a map
HANDED_MIN_BYTES = 64 << 10


def handed_host_output(dev, queue, frame, d):
    """A host output on a CPU device, handed to the caller without a copy: after the first
    call the frame keeps the output in an OpenCL buffer over a NumPy array of its own
    (``CL_MEM_USE_HOST_PTR``: on a device that shares the host's memory, the array is the
    buffer's memory), a call maps and unmaps it (the driver's guarantee that the host
    sees the kernels' writes, once the map completed: the event the call waits for),
    hands that array over and binds a fresh one. ``run()`` and a pass that hands nothing
    over read a copy, as :func:`host_output` does (``bench/handed_outputs.py``, exp of
    230,400 floats, 2026-12-01: 366-376 us a call copied, 346-348 us handed over on the
    2-core Xeon's PoCL; 352 against 291 us on a 16-core Xeon's)."""
    root = d.root
    shape, dtype, nbytes = d.shape, d.dtype, d.nbytes
    sites = frame.root_sites[id(root)]
    cl = dev.cl
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.USE_HOST_PTR
    align = dev.base_align
    copied = host_output(dev, queue, d)
    held = [None, None]          # the array under the root's buffer, and that buffer

    def let_go():
        # (host BLAS products queued on the device know buffers by their handles,
        # ops/blas_queued.py: the one let go here may come back as a later buffer's)
        known = getattr(dev, 'queued_addresses', None)
        if known is not None:
            known.let_go(held[1])
        return known

    def bind_fresh():
        raw = np.empty(root.nbytes + align, np.uint8)
        skip = -raw.ctypes.data % align
        host = raw[skip:skip + root.nbytes]
        buf = cl.Buffer(dev.context, flags, hostbuf=host)
        known = let_go()
        if known is not None:
            known.learn(buf, host.ctypes.data)
        root.move(buf)
        for site in sites:
            bind_site(site, root)
        held[0], held[1] = host, buf

    def later(events):
        host, buf = held
        if buf is None or root.buf is not buf or root.origin:
            # the first call (the arena's buffer), or the root placed elsewhere since
            out = copied.later(events)
        else:
            mapped, ev = cl.enqueue_map_buffer(queue, buf, cl.map_flags.READ, 0, (nbytes,),
                                               np.uint8, is_blocking=False)
            events.append(mapped.base.release(queue, wait_for=[ev]))
            del mapped
            out = host[:nbytes].view(dtype).reshape(shape)
        bind_fresh()
        return out
    frame.releasers.append(let_go)      # (the frame's release lets the last one go)
    return plans.Fetch(copied.run, (root,), later=later)


def donate_output(dev, queue, frame, d):
    """Hand the frame's output buffer to the caller and give the frame a fresh one.

    Cheaper than a copy: one pooled allocation and a re-bind of the kernel arguments
    that referred to the buffer.
    """
    root = d.root
    make = da.array_factory(queue, d.shape, d.dtype)
    sites = frame.root_sites[id(root)]
    allocate, handles = dev.pool.allocate, dev.pool_handles

    def run():
        out = make(root.buf, root.origin)
        moved = root.origin
        nbytes = root.nbytes
        try:
            # the pool directly: this size was allocated (and checked) when planning
            buf = allocate(nbytes)
            handles.add(buf.int_ptr)
        except Exception:
            buf = dev.alloc(nbytes)     # frees held blocks and retries; else MemoryError
        root.move(buf)
        if moved:
            for site in sites:
                bind_site(site, root)
        else:
            # same origin (0): only the buffer argument changes (a set_arg costs ~4 us on PoCL)
            buf = root.buf
            for site in sites:
                site[0].set_arg(site[1], buf)
        return out
    return reading(run, d)


def device_output(dev, queue, ctx, d):
    """Outputs kept on the device get a fresh buffer per call: the frame's buffers are reused."""
    shape, dtype, nbytes = d.shape, d.dtype, d.nbytes
    contiguous = d.is_c_contiguous()
    make = da.array_factory(queue, shape, dtype)
    # a strided value: its copy kernel built at the first call, then pointed at each call's
    # fresh buffer (building it per call looked the program up every time: ~0.3 ms)
    dst_root = Root(None, nbytes)
    strided = []
    copy = buffer_copier(dev.cl)

    def run():
        buf = dev.alloc(nbytes)
        out = make(buf)
        if nbytes:
            if contiguous:
                copy(queue, buf, d.root.buf, nbytes, d.boff, 0)
            else:
                if not strided:
                    strided.append(family('strided_copy_later')(
                        dev, queue, DArray(dst_root, shape, dtype), d))
                dst_root.buf = buf
                strided[0]()
        return out
    return reading(run, d)


def commit_host(cell, value_cell):
    def prepare():
        value = value_cell[0]

        def apply():
            cell[0] = value
        return apply
    return plans.Commit(prepare)


def commit_host_from_device(dev, queue, d, cell):
    def prepare():
        value = download(dev, queue, d)

        def apply():
            cell[0] = value
        return apply
    return plans.Commit(prepare, (d.root,))


def commit_resident(res, dev, queue, d):
    def prepare():
        return res.prepare_device_commit(dev, queue, d)
    return plans.Commit(prepare, (d.root,), resident=(res, d))


def commit_resident_from_host(res, dev, queue, value_cell):
    def prepare():
        return res.prepare_host_commit(value_cell[0])
    return plans.Commit(prepare)
