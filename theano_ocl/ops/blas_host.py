"""The host backend of ``blas.plan_gemm``: the host BLAS on a CPU device's mapped buffers.

On a CPU device the buffers live in host memory: a map is the buffer itself (PoCL hands
back the same pointer on every map, without copying), so the host BLAS reads and writes
the operands in place. Every operand in a BLAS layout (row- or column-major, any leading
dimension, see ``blas_operands.blas_layout``) goes to ?gemm (scipy's, through ctypes) as a
pointer with its transpose flag and leading dimension; only views no BLAS can take
(negative or element strides) are copied. Where the ctypes interface cannot be had, scipy's
f2py wrappers take the mapped views.

Host steps recorded one right after another in a frame (forward and backward products
of a layer) share one mapping (a ``_HostSession``): no unmap/map round trip between them.
Products up to ``ONE_THREAD_MACS`` multiply-adds run on the calling thread alone.
"""
import ctypes

import time

import numpy as np

from ..darray import span
from ..runtime import host_views, settings, waits
from . import blas_queued
from .blas_operands import fortran_call, gemm_pointer, matrix_layout


class _Mapped(object):
    """Maps, for one or more consecutive host steps, the bytes some DArrays cover.

    Each buffer is mapped once over the union of the spans its roots' views touch (READ,
    plus WRITE where a view is written): two roots on one buffer (rows of one outer buffer
    a scan loop points them at, ``ops/scan_bind.py``) never get two overlapping maps. Every
    map is enqueued before waiting once. Buffers and places are read off the roots at open
    time, so a frame whose roots were re-bound or moved maps the right memory. Mapping waits
    for the in-order queue; unmapping does not."""

    def __init__(self, dev, queue):
        self.dev = dev
        self.queue = queue
        self.maps = {}        # id(root) -> (uint8 array, root's first byte in it, address)
        self.arrays = []      # the mapped arrays, one per buffer
        self.known = _direct(dev)     # (the setting read once: it reads the environment)
        self.direct = {}              # (buffer handle, first, end byte) -> its view, in place
        self.generation = None        # of the addresses the views were made from

    def open(self, regions):
        """Map ``regions``: (root, first byte, end byte, written), one per root.

        A buffer the device's pool made (``host_views.owned``: not a caller's) on a device
        whose queued products know its address (``blas_queued.Addresses``: mapped once, a
        CPU device's map being the buffer itself) is not mapped again: the queue is drained
        (``finish``, which returns at once when nothing is queued) and the buffer read in
        place. A map is a round trip through the queue even when it is idle (45 us on the
        2-core EPYC's PoCL, 2026-11-30; three maps 60 us), more than a small product's
        arithmetic. The ``host_blas`` setting 'mapped' maps every time."""
        cl = self.dev.cl
        by_buf = {}
        for root, lo, hi, write in regions:
            a, b = root.origin + lo, root.origin + hi
            e = by_buf.get(id(root.buf))
            if e is None:
                by_buf[id(root.buf)] = [root.buf, a, b, write, [(root, lo, a)]]
            else:
                e[1], e[2], e[3] = min(e[1], a), max(e[2], b), e[3] or write
                e[4].append((root, lo, a))
        known = self.known
        if known is not None:
            generation = known.current()
            if generation != self.generation or len(self.direct) > _MAX_DIRECT:
                self.direct.clear()
                self.generation = generation
        events = []
        drained = False
        for buf, a, b, write, members in by_buf.values():
            if known is not None and host_views.owned(buf, self.dev):
                if not drained:
                    self.queue.finish()     # (returns at once when nothing is queued)
                    drained = True
                # the view made at an earlier call, while the pool keeps the buffer
                key = (buf.int_ptr, a, b)
                view = self.direct.get(key)
                if view is None:
                    start = known.of(buf) + a
                    view = self.direct[key] = (np.frombuffer(
                        (ctypes.c_uint8 * (b - a)).from_address(start), np.uint8), start)
                arr, start = view
                for root, lo, first in members:
                    self.maps[id(root)] = (arr[first - a:], lo, start + first - a)
                continue
            flags = cl.map_flags.READ | (cl.map_flags.WRITE if write else 0)
            arr, ev = cl.enqueue_map_buffer(self.queue, buf, flags, a, (b - a,), np.uint8,
                                            is_blocking=False)
            self.arrays.append(arr)
            base = arr.ctypes.data
            for root, lo, start in members:
                self.maps[id(root)] = (arr[start - a:], lo, base + start - a)
            events.append(ev)
        if events:
            waits.wait(self.dev, events)

    def view(self, d):
        arr, lo, _ = self.maps[id(d.root)]
        return np.ndarray(d.shape, d.dtype, buffer=arr, offset=d.offset - lo, strides=d.strides)

    def address(self, d):
        _, lo, addr = self.maps[id(d.root)]
        return addr + d.offset - lo

    def release(self):
        arrays, self.arrays, self.maps = self.arrays, [], {}
        for arr in arrays:
            arr.base.release(self.queue)


#: views in place a session keeps (a frame's buffers, outputs handed over and replaced:
#: a few per product); past it they are made again
_MAX_DIRECT = 64


def _direct(dev):
    """The device's ``blas_queued.Addresses`` where its pool buffers may be read in place
    (a CPU device that runs queued products, the ``host_blas`` setting 'queued'), else
    None."""
    if settings.current().host_blas != 'queued' or not blas_queued.available(dev):
        return None
    return blas_queued.addresses(dev)


class _HostSession(object):
    """Consecutive host BLAS steps of one frame: the first maps what all of them touch, the
    last unmaps. A step that runs alone (while planning) maps its own operands."""

    def __init__(self, dev, queue):
        self.queue = queue
        self.mapped = _Mapped(dev, queue)
        self.members = []     # per step: [(DArray, written)]
        self._regions = {}    # (first member, members) -> regions to map

    def regions(self, i):
        key = (i, len(self.members))
        r = self._regions.get(key)
        if r is None:
            need = {}
            for acc in self.members[i:]:
                for d, write in acc:
                    if d is None or d.size == 0:
                        continue
                    lo, hi = span(d)
                    e = need.get(id(d.root))
                    if e is None:
                        need[id(d.root)] = [d.root, lo, hi, write]
                    else:
                        e[1], e[2], e[3] = min(e[1], lo), max(e[2], hi), e[3] or write
            r = self._regions[key] = [tuple(e) for e in need.values()]
        return r

    def enter(self, i):
        if i == 0 or not self.mapped.maps:
            self.mapped.release()      # left open by an interrupted replay
            self.mapped.open(self.regions(i))
        return self.mapped

    def leave(self, i, ok):
        if not ok or i == len(self.members) - 1:
            self.mapped.release()


def _session_for(ctx):
    """The session of the host BLAS step recorded just before this one, or a new one."""
    prev = ctx.previous_plan()
    s = getattr(prev, 'session', None)
    if isinstance(s, _HostSession) and s.queue is ctx.queue:
        return s
    return _HostSession(ctx.dev, ctx.queue)


def _scalar_value(m, s):
    if s.kind == 'dev':
        return m.view(s.darr)[()].item()
    return s.value


#: products of at most this many multiply-adds run on one BLAS thread (the calling one):
#: on a CPU device PoCL's threads share the cores, and OpenBLAS's workers spin for a while
#: after a call, taking a core from the kernels that follow (see _one_thread). On the
#: 2-core EPYC with PoCL 3.1 (2026-11-26, alternating processes) the quick MLP step
#: (784-128-10, batch 64, products of 6.4M multiply-adds) took 1.2-2.1 ms against 11.6-12.2
#: with OpenBLAS's threads; with every product on one thread the full MLP (products of
#: 200M-256M) took 30 ms against 19-21, so larger products keep OpenBLAS's threads.
ONE_THREAD_MACS = 1 << 23
_LOCAL = []


def _one_thread():
    """scipy's OpenBLAS ``openblas_set_num_threads_local`` (the calling thread's BLAS
    thread count; returns the previous one), or None where it cannot be found."""
    if _LOCAL:
        return _LOCAL[0]
    fn = None
    try:
        import ctypes
        import glob
        import os
        import scipy
        libs = os.path.join(os.path.dirname(os.path.dirname(scipy.__file__)), 'scipy.libs')
        for path in sorted(glob.glob(os.path.join(libs, '*openblas*.so*'))):
            lib = ctypes.CDLL(path)
            if hasattr(lib, 'openblas_set_num_threads_local'):
                fn = lib.openblas_set_num_threads_local
                fn.argtypes = [ctypes.c_int]
                fn.restype = ctypes.c_int
                break
    except (ImportError, OSError):
        fn = None
    _LOCAL.append(fn)
    return fn


_TIMED = {}


def one_thread_seconds(dtype, nb, m, n, k):
    """Seconds of ``nb`` products (m x k) @ (k x n) of ``dtype`` by the host's ?gemm on the
    calling thread alone, as the device runs a product of at most ``ONE_THREAD_MACS``
    (the least of three runs, kept per shape); None where that ?gemm cannot be had. The
    CPU device's cost model (``runtime/cost.py``) counts this, not Theano's VM's time for
    the node, which runs on OpenBLAS's threads: on the 2-core EPYC those take 2-4x the
    one-thread time for such products (20 x 784 x 500 float64, 2026-11-30: 1.8 ms on two
    threads, 0.44 ms on one)."""
    key = (np.dtype(dtype).name, nb, m, n, k)
    if key in _TIMED:
        return _TIMED[key]
    fn, one = _blas_gemm(dtype), _one_thread()
    seconds = None
    if fn is not None and one is not None and m * n * k > 0:
        rng = np.random.RandomState(0)
        a = rng.rand(m, k).astype(dtype)
        b = rng.rand(k, n).astype(dtype)
        c = np.zeros((m, n), dtype)
        g = _HostGemm(fn, dtype, (m, n, k), (False, k), (False, n), (False, n))
        pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
        before = one(1)
        try:
            seconds = float('inf')
            for _ in range(3):
                t = time.perf_counter()
                for _ in range(nb):
                    g.call(pa, pb, pc, 1.0, 0.0)
                seconds = min(seconds, time.perf_counter() - t)
        finally:
            one(before)
    _TIMED[key] = seconds
    return seconds


_GEMM = {}


def _blas_gemm(dtype):
    """scipy's ?gemm (the Fortran interface scipy.linalg.cython_blas exports) as a ctypes
    function taking pointers, or None where it cannot be had (then f2py is used)."""
    name = np.dtype(dtype).name
    if name in _GEMM:
        return _GEMM[name]
    fn = None
    try:
        import ctypes
        ptr = gemm_pointer(name)
        fn = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))(ptr)   # releases the GIL
        # check it once against numpy: leading dimensions, both transposes, alpha, beta
        a = np.arange(6, dtype=name).reshape(2, 3) - 2          # row-major, lda 3
        at = (np.arange(6, dtype=name).reshape(3, 2) + 1).T      # column-major, ld 2
        b = (np.arange(12, dtype=name).reshape(4, 3) + 1)[:3, :2]  # row-major, ldb 3
        for x, lx in ((a, (False, 3)), (at, (True, 2))):
            for lc in ((False, 2), (True, 2)):
                c = np.ones((2, 2), name, order='F' if lc[0] else 'C')
                g = _HostGemm(fn, name, (2, 2, 3), lx, (False, 3), lc)
                al = 2.0 + (0.5j if c.dtype.kind == 'c' else 0)
                g.call(x.ctypes.data, b.ctypes.data, c.ctypes.data, al, 0.5)
                if not np.allclose(c, al * x.dot(b) + 0.5):
                    raise ValueError('?gemm through ctypes disagrees with numpy')
    except Exception:
        fn = None
    _GEMM[name] = fn
    return fn


class _HostGemm(object):
    """One ?gemm call of fixed shapes and layouts: ``call(pa, pb, pc, alpha, beta)`` with
    the addresses of the row-major-indexed operands. ``la``/``lb``/``lc`` are the
    (transposed, leading dimension) pairs of ``blas_layout``."""

    def __init__(self, fn, dtype, mnk, la, lb, lc):
        import ctypes
        dtype = np.dtype(dtype)
        real = ctypes.c_float if dtype in (np.float32, np.complex64) else ctypes.c_double
        if dtype.kind == 'c':
            real = real * 2         # ?gemm takes complex alpha/beta by address: (re, im)
        self.cplx = dtype.kind == 'c'
        self.fn = fn
        self.alpha, self.beta = real(), real()
        ref = ctypes.byref
        flag = {False: ctypes.c_char(b'N'), True: ctypes.c_char(b'T')}
        (ops, dims, lds, ldc), self.first_is_a = fortran_call(mnk, la, lb, lc)
        keep = [flag[ops[0]], flag[ops[1]]] + [ctypes.c_int(int(v)) for v in dims + lds + (ldc,)]
        self._keep = keep
        self.args = [ref(keep[0]), ref(keep[1]), ref(keep[2]), ref(keep[3]), ref(keep[4]),
                     ref(self.alpha), None, ref(keep[5]), None, ref(keep[6]),
                     ref(self.beta), None, ref(keep[7])]

    def call(self, pa, pb, pc, alpha, beta):
        args = self.args
        if self.cplx:
            self.alpha[0], self.alpha[1] = alpha.real, alpha.imag
            self.beta[0], self.beta[1] = beta.real, beta.imag
        else:
            self.alpha.value = alpha
            self.beta.value = beta
        if self.first_is_a:
            args[6], args[8] = pa, pb
        else:
            args[6], args[8] = pb, pa
        args[11] = pc
        self.fn(*args)


def _host_gemm2(a, b, c, alpha, beta, z, blas):
    """c = alpha * a @ b (+ beta * z) on 2-d numpy views through scipy's f2py ?gemm (used
    where the ctypes interface is missing): transposes through the trans flags."""
    if beta is None or beta == 0:
        beta = 0.0
    elif z is not c:
        np.copyto(c, z)
    gemm = blas.get_blas_funcs('gemm', (c,))
    # C-ordered c is Fortran-ordered c.T = b.T @ a.T: pass operands so that f2py sees
    # Fortran-ordered arrays and no copy is made; transposes go through the trans flags.
    bt, tb = (b.T, 0) if b.flags.c_contiguous else (b, 1)
    at, ta = (a.T, 0) if a.flags.c_contiguous else (a, 1)
    out = gemm(alpha, bt, at, beta, c.T, trans_a=tb, trans_b=ta, overwrite_c=1)
    if not np.shares_memory(out, c):
        c[...] = out.T


def plan_host(ctx, A, B, C, alpha, beta, Z):
    """Record ``C[b] = alpha * A[b] @ B[b] (+ beta * Z[b])`` as one host step (see
    ``blas.plan_gemm`` for the arguments)."""
    if beta.kind == 'none':
        Z = None
    nb, M, N = C.shape
    K = A.shape[2]
    dtype = C.dtype
    fn = _blas_gemm(dtype)
    small = nb * M * N * K <= ONE_THREAD_MACS
    one = _one_thread() if small else None
    # queued where the queue's round trip outweighs the product; a larger product keeps
    # OpenBLAS's threads on this thread (in a PoCL thread they fight PoCL's own for the
    # cores: LeNet's step, 2 cores, 2026-11-29: 23.4 ms queued against 18.9 mapped),
    # unless the device has one compute unit (a rank of one core: no threads to keep;
    # mapped, the MLP 784-1000-1000-10's two-rank step at batch 128 lost 10-25 ms to its
    # exchange, queued 1-3 ms, 2026-11-29)
    queue_any = small or ctx.dev.compute_units == 1
    if fn is not None and queue_any and _queued(ctx, A, B, C, alpha, beta, Z, one):
        return
    accesses = [(A, False), (B, False), (C, True)]
    if Z is not None and Z is not C:
        accesses.append((Z, False))
    accesses += [(s.darr, False) for s in (alpha, beta) if s.kind == 'dev']
    reads = [d for d, written in accesses if not written]
    if Z is C:
        reads.append(C)
    session = _session_for(ctx)
    idx = len(session.members)
    session.members.append(accesses)

    if fn is None:
        from scipy.linalg import blas as sblas

        def compute(m, al, be):
            a, b, c = m.view(A), m.view(B), m.view(C)
            z = None if Z is None else (c if Z is C else m.view(Z))
            for i in range(nb):
                c_i = c[i]
                _host_gemm2(a[i], b[i], c_i, al, be,
                            None if z is None else (c_i if Z is C else z[i]), sblas)
    else:
        # layouts are decided here, once; operands without one are copied per call
        la, lb, lc = (matrix_layout(d) for d in (A, B, C))
        copy_a, copy_b, tmp_c = la is None, lb is None, lc is None
        g = _HostGemm(fn, dtype, (M, N, K), la or (False, max(K, 1)), lb or (False, max(N, 1)),
                      lc or (False, max(N, 1)))
        sa, sb, sc = A.strides[0], B.strides[0], C.strides[0]
        matmul = nb > 1 and alpha.kind == 'one' and Z is None

        def compute(m, al, be):
            if matmul:
                np.matmul(m.view(A), m.view(B), out=m.view(C))
                return
            if be == 0:
                be = 0.0          # BLAS does not read C for beta = 0 (NaN-safe)
            z_copy = Z is not None and Z is not C and be != 0
            pa, pb, pc = m.address(A), m.address(B), m.address(C)
            for i in range(nb):
                a_i = b_i = c_i = None
                if copy_a:
                    a_i = np.ascontiguousarray(m.view(A)[i])
                if copy_b:
                    b_i = np.ascontiguousarray(m.view(B)[i])
                if tmp_c:
                    c_i = (np.array(m.view(Z if Z is not None else C)[i], order='C')
                           if be != 0 else np.empty((M, N), dtype))
                elif z_copy:
                    np.copyto(m.view(C)[i], m.view(Z)[i])
                g.call(a_i.ctypes.data if copy_a else pa + i * sa,
                       b_i.ctypes.data if copy_b else pb + i * sb,
                       c_i.ctypes.data if tmp_c else pc + i * sc, al, be)
                if tmp_c:
                    m.view(C)[i][...] = c_i


    def run():
        ok = False
        prev = None if one is None else one(1)
        try:
            m = session.enter(idx)
            al = _scalar_value(m, alpha)
            be = 0.0 if beta.kind == 'none' else _scalar_value(m, beta)
            compute(m, al, be)
            ok = True
        finally:
            if prev is not None:
                one(prev)
            session.leave(idx, ok)
    # it says what it touches, and maps it where the roots are when it runs: a scan's
    # inner frame may point them at the loop's rows (ops/scan_bind.py). Z is read only
    # where C is written (copied into C, or C itself, before ?gemm reads it as C)
    ctx.host_step(run, reads=reads, writes=[C], session=session, follows=True,
                  pointwise=() if Z is None or Z is C else [Z])


def _queued(ctx, A, B, C, alpha, beta, Z, one):
    """Record the product as a command of the device's queue (``blas_queued``) where the
    ``host_blas`` setting, the device and the operands let it; whether it was."""
    if settings.current().host_blas != 'queued' or 'dev' in (alpha.kind, beta.kind):
        return False
    la, lb, lc = (matrix_layout(d) for d in (A, B, C))
    if la is None or lb is None or lc is None or not blas_queued.available(ctx.dev):
        return False
    nb, M, N = C.shape
    call, first_is_a = fortran_call((M, N, A.shape[2]), la, lb, lc)
    be = 0.0 if beta.kind == 'none' else beta.value
    try:
        one = None if one is None else ctypes.cast(one, ctypes.c_void_p).value
    except ctypes.ArgumentError:
        one = None                      # not a C function (replaced in a test)
    return blas_queued.plan_queued(ctx, A, B, C, Z if be else None, gemm_pointer(C.dtype),
                                   call, first_is_a, alpha.value, be, one)
