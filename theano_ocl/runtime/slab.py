"""A frame's small buffers gathered into one slab buffer (``gather_into_slab``), so that a
batched launch binds each operand position once (``runtime/planner.py``)."""
from ..shared import tally
from .context import bind_site

#: buffers up to this size are gathered into a frame's slab
SLAB_ROOT_MAX = 1 << 20


def gather_into_slab(rc, frame):
    """Move the frame's small buffers (intermediates, constants, resident shared variables)
    into regions of one slab buffer, once per frame.

    The planner can then bind each operand of a batched launch once (the slab) with
    offsets in its table, instead of one buffer argument per merged operation: a launch
    with hundreds of buffer arguments costs ~0.5 us per argument on NVIDIA's driver, and
    PoCL takes at most 1024 bytes of arguments. A region is a Root whose ``buf`` is the
    slab and ``origin`` its place there, not an OpenCL sub-buffer (NVIDIA charges ~50 ns
    per live sub-buffer of a buffer on every launch using it). Contents are copied; the
    kernels of this frame are re-bound here, other frames re-bind on their next call (the
    same path as a re-placed shared variable). Shared variables already in another
    frame's slab stay there.
    """
    if frame.slab is not None:
        return frame.slab
    dev, queue = rc.dev, rc.queue
    cl = dev.cl
    prog = rc.program
    align = dev.base_align
    consts = {id(d.root) for d in rc.const_dvals.values()}
    roots = [(r, None) for r in frame.arena + frame.owned
             + [d.root for d in rc.const_dvals.values()]
             if 0 < r.nbytes <= SLAB_ROOT_MAX and not r.slab]
    for i, root in frame.input_roots.items():
        if prog.input_kinds[i] == 'resident' and 0 < root.nbytes <= SLAB_ROOT_MAX \
                and root.buf is not None and not root.slab:
            roots.append((root, i))
    places, total = [], 0
    for root, i in roots:
        places.append(total)
        total += -(-root.nbytes // align) * align
    if len(roots) < 2 or total > dev.max_alloc:
        frame.slab = False
        return False
    try:
        slab = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, total)
    except cl.Error:
        frame.slab = False
        return False
    olds = []
    for (root, i), origin in zip(roots, places):
        old = root.buf
        cl.enqueue_copy(queue, slab, old, byte_count=root.nbytes, src_offset=root.origin,
                        dst_offset=origin)
        olds.append(old)
        root.move(slab, origin, slab=True)
        for site in frame.root_sites.get(id(root), ()):
            bind_site(site, root)
        if i is not None:
            frame.input_bufs[i] = slab
            for site in frame.rebind_sites.get(i, ()):
                bind_site(site, root)
    queue.finish()
    tally.moves += 1       # (the steady-state guards' tables of residents look again)
    # a constant's old buffer still holds its value and the other frames' kernels may be
    # bound to it: kept; the others go back to the pool once unreferenced
    rc.retired.extend(old for (root, _), old in zip(roots, olds) if id(root) in consts)
    del olds
    frame.slab = slab          # the roots hold it; frames never release it
    frame.batched = None       # the VM's own batched plan bound the old buffers: plan again
    return slab
