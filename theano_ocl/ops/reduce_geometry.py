"""The launch geometry of the reduction kernels: how many work-items, work-groups and parts
of the reduced range a reduction takes, chosen per input signature from the device's
traits (:class:`Traits`, :func:`device_traits`). :func:`geometry` shapes the generic kernel;
:func:`fast_geometry` the fast paths, whose sizes are the ``CPU_*`` / ``GPU_*`` knobs below
(module attributes, so ``bench/reduce.py --set`` can sweep them):

- rows -- the reduced elements of each output are contiguous (one collapsed reduced dim of
  stride 1: ``sum(x, -1)``, a full reduction of a contiguous array, any kept layout). Loads
  are V-element vectors at V-aligned addresses (a scalar head and tail per row). GPUs: T lanes
  of a 256-wide work-group per row (256/T rows per group when rows are short), U = 8 vectors
  in flight per lane (4 -> 8 on the H100: sum(x, 0) 1857 -> 1973 GB/s, argmax rows 2077 ->
  2305, the others unchanged), a local-memory tree over the lanes. CPUs (PoCL): one
  work-item walks a row (or a chunk) with 64-byte vectors in one accumulator vector;
  work-groups of up to 64 such items.
- cols -- the outputs are contiguous (one collapsed kept dim of stride 1: ``sum(x, 0)``,
  any reduced dims and strides). GPUs: each work-item owns a V-vector of columns, CX of them
  side by side read a row's 16*CX bytes (coalesced) and RY row-lanes split the rows, combined
  in local memory. CPUs: a work-item owns a band of whole rows' columns (accumulators in
  32 KiB, L1) and walks its rows: long contiguous reads.
- few outputs over a long range (a full reduction, few long rows or few row blocks): the
  range is split in parts that write partials in the accumulator dtype. Where the device's
  memory model lets one work-group read what the others wrote (:func:`cross_group_sync`),
  the same launch reduces them: every work-group counts itself done on a device counter
  with a device-scope release-acquire increment, and the last one reduces the partials and
  resets the counter (rows: one counter, the last group of the launch; cols: one per column
  tile). A second launch costs ~5 us on the H100, 15% of a 64 MB full sum. Elsewhere
  (OpenCL 1.2 devices, whose memory model orders nothing across work-groups but atomics on
  the same location) a second launch (a rows or cols fast path over the partials) reduces
  them; ``reduce.CROSS_GROUP`` forces either.
"""
import re

import numpy as np


def prod(xs):
    n = 1
    for s in xs:
        n *= s
    return n


def _pow2_at_most(n, cap):
    L = 1
    while L * 2 <= min(n, cap):
        L *= 2
    return L


def geometry(dev, n_out, n_red, rows):
    """(local size L, parts, interleaved) for ``n_out`` reductions of ``n_red`` elements.

    ``rows``: the reduced elements are contiguous (one collapsed dim of stride 1).
    """
    if n_red <= 1 or n_out == 0:
        return 1, 1, False
    if dev.is_cpu:
        # PoCL (measured on 4096x4096): one work-item per (output, chunk) beats local-memory
        # trees; columns go faster split in row chunks (better locality per work-group).
        target = max(dev.compute_units, 1) * 32
        if rows:
            parts = 1 if n_out >= target else max(1, min(-(-target // n_out), n_red // 4096))
        else:
            parts = max(1, min(max(8, -(-target // n_out)), n_red // 256))
        return 1, parts, False
    target = max(dev.compute_units, 1) * 2048
    if rows and n_red >= 32:
        L = _pow2_at_most(n_red, min(256, dev.max_work_group_size))
        parts = 1 if n_out * L >= target else max(1, min(-(-target // (n_out * L)), n_red // (4 * L)))
        return L, parts, parts > 1
    parts = 1 if n_out >= target else max(1, min(-(-target // n_out), n_red // 32))
    return 1, parts, False


class Traits(object):
    """The device facts the fast-path geometry depends on (tests substitute a GPU's)."""

    def __init__(self, is_cpu, compute_units, max_work_group_size, local_mem_size,
                 base_align=128):
        self.is_cpu = is_cpu
        self.compute_units = max(int(compute_units), 1)
        self.max_work_group_size = int(max_work_group_size)
        self.local_mem_size = int(local_mem_size)
        self.base_align = int(base_align)        # bytes every buffer starts aligned to


def device_traits(dev):
    align = 128
    try:
        align = max(dev.device.mem_base_addr_align // 8, 1)
    except Exception:
        pass
    return Traits(dev.is_cpu, dev.compute_units, dev.max_work_group_size, dev.local_mem_size,
                  align)


# Fast-path knobs (fast_geometry). CPU: work-items (rows, chunks, column bands) per core;
# bytes of accumulators per cols work-item (a band of whole rows).
CPU_ITEMS_PER_CORE = 8
CPU_BAND_BYTES = 32768
# rows: independent vector accumulators of a work-item where the combine gives the same
# result in any order (argmax, max, min, and, or, integer sums), for inputs of at most
# CPU_ROWS_ACCUMULATE_BYTES (cache-resident: there one accumulator makes each vector wait for
# the last one's compare-and-select). The 2-core Xeon's PoCL, float32, kernel time by events
# (2026-12-01, one process, medians of 7 rounds of 20 calls, one accumulator / two):
# argmax(x, 1) 512x512 38.8 / 26.6 us, max(x) 26.1 / 18.7 us; but from 2048x2048 (16 MB,
# memory-bound) two lose: argmax 329 / 388 us, 100x100000 720 / 830 us (1024x1024: noisy).
CPU_ROWS_ACCUMULATORS = 2
# the fewest elements a part of a split reduction covers (its partials then cost a second
# launch): sum(x, 0) of a 32x64 float64 gradient, a scan RNN's bias in its backward loop,
# took two launches per step where one work-item reduces it in a few microseconds
CPU_MIN_PART = 16384
CPU_ROWS_ACCUMULATE_BYTES = 2 << 20
# GPU: work-group size; vectors in flight per lane (unroll); threads per compute unit the
# grid aims at before it splits outputs in parts (rows, cols); unrolled sweeps a lane makes
# at the least (> 1: fewer lanes per row, more rows per group); column tile width in vectors
# (largest, smallest). Threads per CU, H100 4096x4096 float32, kernel GB/s by events, two
# runs each (2048 / 1024 / 512): sum all 2206-2212 / 2285-2300 / 2268-2273, sum(x, 0)
# 2151-2162 / 2191-2197 / 2251-2267; rows without parts (sum(x, 1), argmax) unchanged.
GPU_LOCAL = 256
GPU_UNROLL = 8
GPU_THREADS_PER_CU = 1024
GPU_COLS_THREADS_PER_CU = 512
GPU_MIN_SWEEPS = 2
GPU_COLS_CX = 32
GPU_COLS_MIN_CX = 8
# argmax vector lanes hold int offsets below this span, else long
IDX32_LIMIT = 2 ** 31 - 1


class FastGeometry(object):
    """What one fast-path launch needs: the compile-time shape of the kernel and its grid."""

    def __init__(self, mode, V, U=1, T=1, L=1, NB=1, CX=1, RY=1, parts=1, chunk=1, n_cg=1,
                 aligned=False, gsize=1, lsize=None, K=1):
        # argmax lanes keep int offsets when a lane's span fits
        self.idx32 = chunk + T * V < IDX32_LIMIT
        self.mode = mode
        self.V, self.U, self.T, self.L, self.NB, self.CX, self.RY = V, U, T, L, NB, CX, RY
        self.K = K
        self.parts, self.chunk, self.n_cg = parts, chunk, n_cg
        self.aligned = aligned
        self.gsize, self.lsize = gsize, lsize

    def __repr__(self):
        return '<%s V=%d U=%d T=%d L=%d NB=%d CX=%d RY=%d K=%d parts=%d chunk=%d>' % (
            self.mode, self.V, self.U, self.T, self.L, self.NB, self.CX, self.RY, self.K,
            self.parts, self.chunk)


def _cdiv(a, b):
    return -(-a // b)


def pow2_at_least(n):
    L = 1
    while L < n:
        L *= 2
    return L


def vector_width(tr, comb):
    """Lanes per vector load: 64 bytes of input on CPUs (one AVX-512 register), 16 bytes
    on GPUs (one 128-bit load per work-item), fewer where the accumulator (and argmax's
    int index) lanes would take too many registers; 1 where the op has no vector code."""
    if comb.vector_kind() is None:
        return 1
    in_size = np.dtype(comb.in_dtype).itemsize
    acc_size = 4 if comb.acc_dtype == 'float16' else np.dtype(comb.acc_dtype).itemsize
    if tr.is_cpu:
        V, cap = min(16, 64 // in_size), 128
    else:
        V, cap = min(16, 16 // in_size), 32
    while V > 1 and (V * acc_size > cap or (comb.argmax and V * 4 > cap)):
        V //= 2
    return V


def _chunked(n_red, parts, unit):
    """(parts, chunk): chunk a multiple of ``unit`` covering n_red in at most ``parts``."""
    parts = max(1, min(parts, n_red))
    chunk = _cdiv(_cdiv(n_red, parts), unit) * unit
    return _cdiv(n_red, chunk), chunk


def _cpu_local(n_items, tr):
    """Work-items per group on PoCL: about 16 groups per core, whole groups of items (a
    group's work-items run one after another on one core; a group costs ~1 us to start)."""
    L = max(1, n_items // (16 * tr.compute_units))
    return min(L, 64)


def fast_geometry(tr, comb, kshape, kstrides, rshape, rstrides, x_off, parts=None):
    """The fast path for this layout (a :class:`FastGeometry`), or None (generic kernel).

    rows: the reduced elements of each output are contiguous; cols: the outputs are
    contiguous (and there are at least V of them). ``parts``: force the split of the
    reduced range (1 for second passes). The knobs (``CPU_*``, ``GPU_*``) are module
    attributes so a benchmark can sweep them (``bench/reduce.py --set``).
    """
    n_out = prod(kshape)
    n_red = prod(rshape)
    V = vector_width(tr, comb)
    itemsize = np.dtype(comb.in_dtype).itemsize
    if rstrides == [1]:
        if n_red < 2 * V:
            V = 1
        aligned = V * itemsize <= tr.base_align
        if tr.is_cpu:
            target = CPU_ITEMS_PER_CORE * tr.compute_units
            if parts is None:
                parts = 1 if n_out >= target else \
                    max(1, min(_cdiv(target, n_out), n_red // CPU_MIN_PART))
            parts, chunk = _chunked(n_red, parts, 64)
            n_items = n_out * parts
            L = _cpu_local(n_items, tr)
            K = CPU_ROWS_ACCUMULATORS if V > 1 and comb.any_order() and \
                n_out * n_red * itemsize <= CPU_ROWS_ACCUMULATE_BYTES else 1
            return FastGeometry('rows', V, 1, 1, L, parts=parts, chunk=chunk, aligned=aligned,
                                gsize=_cdiv(n_items, L) * L, lsize=L, K=K)
        L = _pow2_at_most(tr.max_work_group_size, GPU_LOCAL)
        U = GPU_UNROLL
        sweep = V * U * GPU_MIN_SWEEPS        # elements one lane reads at the least
        target = tr.compute_units * GPU_THREADS_PER_CU
        if parts is None:
            lanes = min(L, pow2_at_least(_cdiv(n_red, sweep)))
            parts = 1 if n_out * lanes >= target else \
                max(1, min(_cdiv(target, n_out * L), n_red // (sweep * L)))
        # parts of whole unrolled sweeps of a work-group (no remainder loop) when long enough
        unit = sweep * L if _cdiv(n_red, parts) >= sweep * L else V * U
        parts, chunk = _chunked(n_red, parts, unit)
        T = _pow2_at_most(max(1, _cdiv(chunk, sweep)), L)
        n_items = n_out * parts
        groups = _cdiv(n_items, L // T)
        return FastGeometry('rows', V, U, T, L, parts=parts, chunk=chunk, aligned=aligned,
                            gsize=groups * L, lsize=L)
    if kstrides == [1] and len(kshape) == 1:
        while V > 1 and n_out < V:
            V //= 2
        aligned = (V * itemsize <= tr.base_align and x_off % V == 0
                   and all(s % V == 0 for s in rstrides))
        ncv = _cdiv(n_out, V)
        acc_size = 4 if comb.acc_dtype == 'float16' else np.dtype(comb.acc_dtype).itemsize
        if tr.is_cpu:
            # a band of whole rows where the accumulators fit in 32 KiB (L1): each work-item
            # then reads long contiguous runs (measured: 16 KiB bands 2-3x faster than 4 KiB)
            per = V * (acc_size + (4 if comb.argmax else 0))
            most = _pow2_at_most(max(1, CPU_BAND_BYTES // per), 1 << 20)
            NB = min(most, pow2_at_least(_cdiv(ncv, _cdiv(ncv, most))))
            n_cg = _cdiv(ncv, NB)
            target = CPU_ITEMS_PER_CORE * tr.compute_units
            if parts is None:
                # parts of at least CPU_MIN_PART elements, as rows mode's (a second launch
                # for less costs more than the split saves)
                parts = 1 if n_cg >= target else max(1, min(_cdiv(target, n_cg), n_red // 16,
                                                            n_red * n_out // CPU_MIN_PART))
            parts, chunk = _chunked(n_red, parts, 1)
            return FastGeometry('cols', V, 1, 1, 1, NB, 1, 1, parts, chunk, n_cg, aligned,
                                gsize=n_cg * parts, lsize=1)
        L = _pow2_at_most(tr.max_work_group_size, GPU_LOCAL)
        U = GPU_UNROLL
        CX = min(GPU_COLS_CX, pow2_at_least(ncv))
        RY = max(1, L // CX)
        if parts == 1:
            # a second pass over few rows: no more row-lanes than rows to give them (smaller
            # groups, more of them)
            while RY > 1 and CX * RY > 64 and (RY // 2) * U >= n_red:
                RY //= 2
        L = CX * RY
        while RY > 1 and L * V * (acc_size + (8 if comb.argmax else 0)) > tr.local_mem_size // 2:
            L //= 2
            RY //= 2
        n_cg = _cdiv(ncv, CX)
        target = tr.compute_units * GPU_COLS_THREADS_PER_CU
        # more column tiles (down to 8 vectors = 128 bytes of a row per tile: still whole
        # cache lines) and more row-lanes before splitting rows across groups
        while CX > GPU_COLS_MIN_CX and n_cg * L < target and RY * 2 * U <= n_red:
            CX //= 2
            RY *= 2
            n_cg = _cdiv(ncv, CX)
        if parts is None:
            parts = 1 if n_cg * L >= target else \
                max(1, min(_cdiv(target, n_cg * L), _cdiv(n_red, RY * U * GPU_MIN_SWEEPS)))
        parts, chunk = _chunked(n_red, parts, RY * U if _cdiv(n_red, parts) >= RY * U else 1)
        return FastGeometry('cols', V, U, 1, L, 1, CX, RY, parts, chunk, n_cg, aligned,
                            gsize=n_cg * parts * L, lsize=L)
    return None


# what cross_group_sync needs of an OpenCL 3.0 device (CL_DEVICE_ATOMIC_MEMORY_CAPABILITIES
# bits, and the OpenCL C features that make those orders and scopes compile)
ATOMIC_ORDER_ACQ_REL = 1 << 1
ATOMIC_SCOPE_DEVICE = 1 << 5
ACQ_REL_FEATURES = ('__opencl_c_atomic_order_acq_rel', '__opencl_c_atomic_scope_device')


def cross_group_sync(dev):
    """How the last work-group of a launch may read the partials the other work-groups
    wrote, by the memory model ``dev`` offers: 'ptx' (NVIDIA from Volta on: one PTX
    ``atom.acq_rel.gpu`` increment), 'atomics' (OpenCL C device-scope acquire-release
    atomics: :func:`atomics_std`), or None: a second launch (OpenCL 1.2 orders nothing
    across work-groups but atomics on one location, so partials written with plain stores
    are not visible to another group before the kernel ends)."""
    if ptx_acq_rel(dev):
        return 'ptx'
    if atomics_std(dev) is not None:
        return 'atomics'
    return None


def sync_options(dev, sync):
    """The build options of a kernel with the cross-group handshake ``sync``; ValueError,
    naming the device and what it lacks, where ``dev`` cannot run it."""
    if sync == 'ptx' and ptx_acq_rel(dev):
        return ()
    std = atomics_std(dev)
    if sync == 'atomics' and std is not None:
        return ('-cl-std=' + std,)
    raise ValueError('reduce: the %r cross-group handshake cannot run on %s / %s (%s)' % (
        sync, dev.platform_name, getattr(dev, 'name', '?'),
        'needs an NVIDIA GPU of compute capability 7 or more' if sync == 'ptx' else
        'needs OpenCL C 2.x, or OpenCL 3.0 with device-scope acq_rel atomics'))


def ptx_acq_rel(dev):
    """NVIDIA's platform on a GPU of compute capability 7 or more. There the handshake is
    PTX's, not OpenCL C's: the PTX memory model (sm_70 on) makes ``atom.acq_rel.gpu`` a
    release and an acquire at GPU scope and ``bar.sync`` orders a CTA's accesses around it,
    so the plain partial stores of every group are visible to the last one's loads.
    NVIDIA's OpenCL 3.0 driver has no device-scope acq_rel in OpenCL C, and its
    mem_fence(CLK_GLOBAL_MEM_FENCE) is a work-group-scope membar.cta."""
    if 'NVIDIA' not in dev.platform_name:
        return False
    try:
        major = dev.device.compute_capability_major_nv
    except Exception:
        major = 0
    return major >= 7


def _c_version(text):
    """(major, minor) of 'OpenCL C 2.0 ...' or 'OpenCL 3.0 ...'; (0, 0) if there is none."""
    m = re.search(r'(\d+)\.(\d+)', text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def atomics_std(dev):
    """The ``-cl-std`` ('CL3.0', 'CL2.0') under which OpenCL C on ``dev`` has
    ``atomic_fetch_add_explicit`` with memory_order_acq_rel at memory_scope_device, or None.
    OpenCL 3.0 devices declare both in CL_DEVICE_ATOMIC_MEMORY_CAPABILITIES and their OpenCL
    C features (PoCL 3.1's CPU device does; NVIDIA's driver offers relaxed, work-group scope
    only); OpenCL C 2.x has them by definition."""
    d = dev.device
    if _c_version(d.version) >= (3, 0):
        try:
            caps = d.atomic_memory_capabilities
            features = {f.name for f in d.opencl_c_features}
            c_versions = [(v.version >> 22, (v.version >> 12) & 0x3ff)
                          for v in d.opencl_c_all_versions]
        except Exception:       # a pyopencl or ICD loader older than 3.0
            caps, features, c_versions = 0, set(), []
        need = ATOMIC_ORDER_ACQ_REL | ATOMIC_SCOPE_DEVICE
        if caps & need == need and set(ACQ_REL_FEATURES) <= features \
                and any(v >= (3, 0) for v in c_versions):
            return 'CL3.0'
        if any((2, 0) <= v < (3, 0) for v in c_versions):
            return 'CL2.0'
        return None
    return 'CL2.0' if (2, 0) <= _c_version(d.opencl_c_version) < (3, 0) else None
