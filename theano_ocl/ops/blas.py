"""BLAS family: Dot, Dot22, Dot22Scalar, Gemm, Gemv, Ger (and their C/scipy subclasses),
BatchedDot.

Every op is reduced to one call of :func:`plan_gemm`,

    C[b] = alpha * A[b] @ B[b] (+ beta * Z[b])      over 3-d strided views,

with vectors seen as one-column (or one-row) matrices and 2-d operands as a batch of one,
so transposed, reversed or stepped operands built in the graph reach the backend as views,
never as copies. ``plan_gemm`` picks one of three backends per device and dtype:

- ``'clblast'``: GPUs with ``pyclblast`` installed, float32/float64/complex64/complex128:
  CLBlast's GEMM on the buffers, with its leading dimensions and transpose flags absorbing
  the views it can;
- ``'host'``: CPU devices sharing memory with the host, the same dtypes: the host BLAS
  (numpy/scipy, OpenBLAS) on mapped buffers, without copies (a host step of the frame);
- ``'kernel'``: everything else (integer dot, float16, mixed dtypes, a GPU without
  CLBlast, complex products with alpha/beta read on the device): the tiled kernel of
  ``kernels/gemm.cl.mako``, any strides and dtypes, float16 accumulated in float, complex
  values as (re, im) vectors.

Whatever the backend, a *small* product (at most ``gemm_small.MAX_MACS`` multiply-adds)
with constant alpha/beta and real dtypes takes ``ops/gemm_small.py``: one work-item per
element of C, one launch whose sizes are arguments, which the planner batches with other
small products.

CLBlast takes its kernel parameters from a database keyed by device; where
``bench/clblast_tune.py`` measured a faster set on a device (``clblast_tuned.json``: the
H100, which CLBlast 1.5 has no entry for, 29.8 -> 37.7 TFLOP/s for SGEMM 4096), it is
applied once per device before the first CLBlast call (``pyclblast.override_parameters``,
for this process; ``THEANO_OCL_CLBLAST_TUNED=0`` keeps CLBlast's own choice).

The ``blas`` setting (``OCLMode(blas=...)``, ``$THEANO_OCL_BLAS``) overrides the choice
where the backend can take the dtypes ('small' forces the small kernel for every size); tests use it to run every
backend on one device. A forced backend turns the automatic small path off.
"""
import json
import os

import numpy as np
from theano.gof.graph import Constant
from theano.tensor import basic as tbasic
from theano.tensor import blas as tblas

from .. import kernels
from .. import scalar as oscalar
from ..darray import DArray
from ..errors import NoDeviceImplementation
from ..runtime import settings
from . import gemm_small
from .elemwise import Fused, fmap
from .base import COMPLEX_DTYPES, DeviceImpl, FLOAT_DTYPES, INT_DTYPES
from .registry import implemented_by, ocl_impl

_BLAS_DTYPES = ('float32', 'float64', 'complex64', 'complex128')


# --------------------------------------------------------------------------- backend choice
def _pyclblast():
    try:
        import pyclblast
    except ImportError:
        return None
    return pyclblast


_TUNED_FILE = os.path.join(os.path.dirname(__file__), '..', 'clblast_tuned.json')
_tuned = {}     # device pointer -> the entries applied (for tests and bench/gemm.py)


def clblast_tuning(dev):
    """Apply, once per device, the CLBlast parameters ``clblast_tuned.json`` lists for a
    device of this exact name; returns the entries applied (empty where none)."""
    key = dev.device.int_ptr
    if key in _tuned:
        return _tuned[key]
    applied = _tuned[key] = []
    pyclblast = _pyclblast()
    if pyclblast is None or os.environ.get('THEANO_OCL_CLBLAST_TUNED', '1') == '0':
        return applied
    with open(_TUNED_FILE) as fh:
        table = json.load(fh)
    for name, entries in sorted(table.items()):
        kernel, precision = name[:-2], int(name[-2:])      # 'Xgemm32' -> Xgemm, 32-bit
        for e in entries:
            if e['device'] == dev.name:
                pyclblast.override_parameters(dev.device, kernel, precision, e['params'])
                applied.append(dict(e, kernel=kernel, precision=precision))
    return applied


def _forced():
    """The BLAS path the active settings force (``runtime.settings``: ``blas``), or None."""
    return settings.current().blas


def choose_backend(dev, dtypes):
    """'clblast', 'host' or 'kernel' for operands of ``dtypes`` on ``dev`` (see module doc)."""
    blas_ok = len(set(dtypes)) == 1 and dtypes[0] in _BLAS_DTYPES
    forced = _forced()
    if forced == 'small':
        return 'small'
    if not blas_ok:
        return 'kernel'
    if forced == 'clblast' and _pyclblast() is None:
        raise ValueError("the blas setting (THEANO_OCL_BLAS) is 'clblast' but pyclblast is "
                         "not installed")
    if forced is not None:
        return forced
    if dev.is_gpu and _pyclblast() is not None:
        return 'clblast'
    if dev.is_cpu or dev.unified_memory:
        return 'host'
    return 'kernel'


# --------------------------------------------------------------------------- scalars
class Scalar(object):
    """alpha or beta: absent (1 for alpha, no Z for beta), a link-time constant, or a
    0-d device array read at run time (never a host value: no re-plan when it changes)."""
    __slots__ = ('kind', 'value', 'darr')

    def __init__(self, kind, value=None, darr=None):
        self.kind = kind        # 'one', 'none' (beta only), 'const', 'dev'
        self.value = value
        self.darr = darr

    @classmethod
    def of(cls, var, darr):
        if isinstance(var, Constant):
            v = np.asarray(var.data).item()
            return cls('const', value=v, darr=darr)
        return cls('dev', darr=darr)


ONE = Scalar('one', 1)
NONE = Scalar('none', 0)


# --------------------------------------------------------------------------- views
def as_column(d):
    """A vector (n,) as an (n, 1) matrix view; strides chosen so BLAS sees a plain layout."""
    return d.view((d.shape[0], 1), (d.strides[0], d.itemsize))


def as_row(d):
    return d.view((1, d.shape[0]), (d.itemsize, d.strides[0]))


def as_batch(d):
    """A matrix as a batch of one."""
    return d.view((1,) + d.shape, (0,) + d.strides)


def as_scalar_matrix(d):
    return d.view((1, 1), (d.itemsize, d.itemsize))


# --------------------------------------------------------------------------- the one interface
def plan_gemm(ctx, backend, A, B, C, alpha=ONE, beta=NONE, Z=None, epilogue=None):
    """Record ``C[b] = alpha * A[b] @ B[b] (+ beta * Z[b])`` for 3-d DArray views.

    ``Z`` may be ``C`` itself (in place) or another array of C's shape; ``beta.kind ==
    'none'`` ignores it. A beta of 0 at run time ignores Z too (it may be uninitialised).
    ``epilogue``: an ``ops.elemwise.Epilogue`` consuming C and the DArray C views; returns
    whether the small kernel took it (C is then never stored), else C is computed as usual.
    """
    if C.size == 0:
        return False
    if beta.kind == 'const' and beta.value == 0:
        beta, Z = NONE, None
    cplx = C.dtype.kind == 'c'
    small_ok = gemm_small.takes(alpha, beta) and not cplx
    if backend == 'small' and not small_ok:
        backend = 'kernel'
    small = backend == 'small' or (small_ok and _forced() is None
                                   and gemm_small.is_small(A, B, C))
    if isinstance(B, Fused) and not (small and gemm_small.takes_fused(A, B)):
        # only the small kernel computes a fused operand (for short sums): else the
        # producer's own launch
        B = B.materialize(ctx)
    if small:
        epi = epilogue[0].views_for(C, epilogue[1]) \
            if epilogue is not None and gemm_small.takes_epilogue(C) else None
        gemm_small.plan_small(ctx, A, B, C, alpha, beta, Z, epi)
        return epi is not None
    if A.shape[2] == 0 and backend != 'kernel':
        backend = 'kernel'      # an empty sum: C = beta * Z, which the kernel does as is
    if cplx and backend == 'clblast' and 'dev' in (alpha.kind, beta.kind):
        backend = 'kernel'      # the combining launch after CLBlast knows real arithmetic only
    if backend == 'host':
        _plan_host(ctx, A, B, C, alpha, beta, Z)
    elif backend == 'clblast':
        _plan_clblast(ctx, A, B, C, alpha, beta, Z)
    else:
        _plan_kernel(ctx, A, B, C, alpha, beta, Z)
    return False


# --------------------------------------------------------------------------- kernel backend
def _operand(dtype):
    """Template facts of an operand dtype: ``gemm_small.operand_traits``'s, plus complex
    values (``cplx``), stored and computed as (re, im) vectors."""
    dtype = np.dtype(dtype)
    if dtype.kind != 'c':
        return dict(gemm_small.operand_traits(dtype), cplx=False)
    t = oscalar.ctype(dtype.name, complex_ok=True)
    return dict(t=t, ct=t, half=False, signed_int=False, ut=t, cplx=True)


def _acc_type(out_dtype):
    dtype = np.dtype(out_dtype)
    if dtype.kind in 'fc':
        return oscalar.compute_ctype(dtype.name, complex_ok=True)
    if dtype.kind in 'iu':
        return 'ulong' if dtype.itemsize == 8 else 'uint'
    raise NoDeviceImplementation('no device dot for dtype %s' % dtype)


@kernels.memoize
def kernel_source(a_dt, b_dt, c_dt, alpha, al_dt, beta, be_dt, ts):
    """Render (memoized) the GEMM kernel; returns (source, kernel name)."""
    dts = [a_dt, b_dt, c_dt] + ([al_dt] if alpha == 'ptr' else []) + ([be_dt] if beta == 'ptr' else [])
    support = ''
    if 'float64' in dts or 'complex128' in dts:
        support += '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n'
    acc = _acc_type(c_dt)
    return kernels.render(
        'gemm.cl.mako', 'gemm', support=support, ts=ts, acc_t=acc, cc_t=acc,
        cplx=acc[-1] == '2', a=_operand(a_dt), b=_operand(b_dt), c=_operand(c_dt),
        al=_operand(al_dt) if al_dt else None, be=_operand(be_dt) if be_dt else None,
        alpha=alpha, beta=beta)


def _elem_strides(d):
    return [s // d.itemsize for s in d.strides]


def _plan_kernel(ctx, A, B, C, alpha, beta, Z):
    ts = 16 if ctx.dev.max_work_group_size >= 256 else 8
    akind = 'one' if alpha.kind == 'one' or (alpha.kind == 'const' and alpha.value == 1) else 'ptr'
    bkind = beta.kind if beta.kind in ('one', 'none') else (
        'one' if beta.kind == 'const' and beta.value == 1 else 'ptr')
    src, name = kernel_source(A.dtype.name, B.dtype.name, C.dtype.name,
                              akind, alpha.darr.dtype.name if akind == 'ptr' else None,
                              bkind, beta.darr.dtype.name if bkind == 'ptr' else None, ts)
    prg = ctx.dev.build(src)
    nb, M, N = C.shape
    K = A.shape[2]
    args = [np.int64(M), np.int64(N), np.int64(K)]
    for d in (A, B, C):
        args.append(d)
        args.extend(np.int64(s) for s in _elem_strides(d))
    if akind == 'ptr':
        args.append(alpha.darr)
    if bkind != 'none':
        args.append(Z)
        args.extend(np.int64(s) for s in _elem_strides(Z))
    if bkind == 'ptr':
        args.append(beta.darr)
    gsize = (-(-N // ts) * ts, -(-M // ts) * ts, nb)
    ctx.launch(prg, name, gsize, (ts, ts, 1), args)


# --------------------------------------------------------------------------- host backend
# On a CPU device the buffers live in host memory: a map is the buffer itself (PoCL hands
# back the same pointer on every map, without copying), so the host BLAS reads and writes
# the operands in place. Every operand in a BLAS layout (row- or column-major, any leading
# dimension, see blas_layout) goes to ?gemm as a pointer with its transpose flag and leading
# dimension; only views no BLAS can take (negative or element strides) are copied.
# Host steps recorded one right after another in a frame (forward and backward products
# of a layer) share one mapping: no unmap/map round trip between them.
class _Mapped(object):
    """Maps, for one or more consecutive host steps, the bytes some DArrays cover.

    Each root is mapped once over the union of the spans its views touch (READ, plus
    WRITE where a view is written); every map is enqueued before waiting once. Buffers are
    read off the roots at open time, so a frame whose input buffers were re-bound maps the
    right memory. Mapping waits for the in-order queue; unmapping does not."""

    def __init__(self, dev, queue):
        self.dev = dev
        self.queue = queue
        self.maps = {}        # id(root) -> (uint8 array, first byte mapped, its address)

    def open(self, regions):
        """Map ``regions``: (root, first byte, end byte, written), one per root."""
        cl = self.dev.cl
        events = []
        for root, lo, hi, write in regions:
            flags = cl.map_flags.READ | (cl.map_flags.WRITE if write else 0)
            arr, ev = cl.enqueue_map_buffer(self.queue, root.buf, flags, root.origin + lo,
                                            (hi - lo,),
                                            np.uint8, is_blocking=False)
            self.maps[id(root)] = (arr, lo, arr.ctypes.data)
            events.append(ev)
        if events:
            cl.wait_for_events(events)

    def view(self, d):
        arr, lo, _ = self.maps[id(d.root)]
        return np.ndarray(d.shape, d.dtype, buffer=arr, offset=d.offset - lo, strides=d.strides)

    def address(self, d):
        _, lo, addr = self.maps[id(d.root)]
        return addr + d.offset - lo

    def release(self):
        maps, self.maps = self.maps, {}
        for arr, _, _ in maps.values():
            arr.base.release(self.queue)


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
            from ..darray import span
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


def _root_nbytes(root):
    size = getattr(root.buf, 'size', None) or getattr(root.buf, 'int_size', None)
    end = root.origin + root.nbytes
    return int(min(end, size) if size else end)


def _scalar_value(m, s):
    if s.kind == 'dev':
        return m.view(s.darr)[()].item()
    return s.value


_GEMM = {}
_GEMM_NAMES = {'float32': 'sgemm', 'float64': 'dgemm', 'complex64': 'cgemm', 'complex128': 'zgemm'}


def _blas_gemm(dtype):
    """scipy's ?gemm (the Fortran interface scipy.linalg.cython_blas exports) as a ctypes
    function taking pointers, or None where it cannot be had (then f2py is used)."""
    name = np.dtype(dtype).name
    if name in _GEMM:
        return _GEMM[name]
    fn = None
    try:
        import ctypes
        from scipy.linalg import cython_blas
        cap = cython_blas.__pyx_capi__[_GEMM_NAMES[name]]
        api = ctypes.PyDLL(None)        # own function objects: argtypes set here stay here
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        ptr = api.PyCapsule_GetPointer(cap, api.PyCapsule_GetName(cap))
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
        M, N, K = mnk
        dtype = np.dtype(dtype)
        real = ctypes.c_float if dtype in (np.float32, np.complex64) else ctypes.c_double
        if dtype.kind == 'c':
            real = real * 2         # ?gemm takes complex alpha/beta by address: (re, im)
        self.cplx = dtype.kind == 'c'
        self.fn = fn
        self.alpha, self.beta = real(), real()
        ref = ctypes.byref
        flag = {False: ctypes.c_char(b'N'), True: ctypes.c_char(b'T')}
        if not lc[0]:
            # row-major C is column-major C^T = B^T A^T: B first; a row-major operand is
            # its own transpose in column-major terms ('N'), a column-major one needs 'T'
            ops, dims, lds = (lb[0], la[0]), (N, M, K), (lb[1], la[1])
            self.first_is_a = False
        else:
            # column-major C = A B: a column-major operand is 'N', a row-major one 'T'
            ops, dims, lds = (not la[0], not lb[0]), (M, N, K), (la[1], lb[1])
            self.first_is_a = True
        keep = [flag[ops[0]], flag[ops[1]]] + [ctypes.c_int(int(v)) for v in dims + lds + (lc[1],)]
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


def _mat(d, i=0):
    """Matrix ``i`` of a 3-d view, as a 2-d DArray."""
    return d.view(d.shape[1:], d.strides[1:], d.offset + i * d.strides[0])


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


def _plan_host(ctx, A, B, C, alpha, beta, Z):
    if beta.kind == 'none':
        Z = None
    nb, M, N = C.shape
    K = A.shape[2]
    dtype = C.dtype
    fn = _blas_gemm(dtype)
    accesses = [(A, False), (B, False), (C, True)]
    if Z is not None and Z is not C:
        accesses.append((Z, False))
    accesses += [(s.darr, False) for s in (alpha, beta) if s.kind == 'dev']
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
        la, lb, lc = (blas_layout(_mat(d)) for d in (A, B, C))
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
        try:
            m = session.enter(idx)
            al = _scalar_value(m, alpha)
            be = 0.0 if beta.kind == 'none' else _scalar_value(m, beta)
            compute(m, al, be)
            ok = True
        finally:
            session.leave(idx, ok)
    ctx.host_step(run, session=session)


# --------------------------------------------------------------------------- CLBlast backend
def blas_layout(d):
    """(transposed, leading dimension) if the 2-d view ``d`` is a BLAS row-major matrix or
    its transpose, else None. Strides of size-1 dimensions are free."""
    (r, c), (sr, sc) = d.shape, [s // d.itemsize for s in d.strides]
    if c == 1:
        sc = 1
        if r == 1:
            sr = 1
    if r == 1 and sr != 1:
        sr = max(c, 1) if sc == 1 else 1
    if sc == 1 and sr >= max(c, 1):
        return False, sr
    if sr == 1 and sc >= max(r, 1):
        return True, sc
    return None


def _plan_clblast(ctx, A, B, C, alpha, beta, Z):
    """One CLBlast call (``gemm``, or ``gemmStridedBatched`` for a batch) on the buffers.

    A plain product of BLAS-layout operands (row- or column-major, any leading dimension,
    transposes as flags) with constant alpha/beta is that call and nothing else: CLBlast
    reads C only where beta != 0 (its kernels test beta; checked with NaN-filled C on
    direct, indirect and batched paths), so no fill precedes it. Extra work only where
    CLBlast cannot take the operands: an operand without a BLAS layout is copied; a Z
    apart from C is copied into C first (then beta applies in place); a device alpha or
    beta computes into a temporary combined with one elementwise launch.
    """
    import pyopencl.array as cla
    pyclblast = _pyclblast()
    clblast_tuning(ctx.dev)
    nb = C.shape[0]
    if beta.kind == 'none':
        Z = None
    ops = []
    for d in (A, B):
        lay = blas_layout(_mat(d))
        if lay is None or (nb > 1 and d.strides[0] < 0):
            tmp = ctx.alloc(d.shape, d.dtype)
            ctx.copy(tmp, d)
            d = tmp
            lay = blas_layout(_mat(d))
        ops.append((d, lay))
    (A, (ta, lda)), (B, (tb, ldb)) = ops
    static_alpha = alpha.kind in ('one', 'const')
    static_beta = beta.kind in ('none', 'one', 'const')
    lay_c = blas_layout(_mat(C))
    out = C
    if lay_c is None or (nb > 1 and C.strides[0] < 0) or not static_alpha or not static_beta:
        # C = alpha * out (+ beta * Z) afterwards, reading device scalars on the device
        out = ctx.alloc(C.shape, C.dtype)
        lay_c = blas_layout(_mat(out))
    elif Z is not None and Z is not C:
        ctx.copy(C, Z)          # C = Z, then C = alpha * A @ B + beta * C
    num = complex if C.dtype.kind == 'c' else float
    al = num(alpha.value) if static_alpha else 1.0
    be = num(beta.value) if out is C and Z is not None else 0.0
    nb, M, N = C.shape
    K = A.shape[2]
    A_, B_ = (A, B)
    if lay_c[0]:
        # column-major C: CLBlast (row-major) computes C^T = B^T @ A^T into it
        A_, B_, (ta, lda), (tb, ldb), M, N = B, A, (not tb, ldb), (not ta, lda), N, M
    ldc = lay_c[1]
    queue = ctx.queue
    dtype = C.dtype
    roots = (A_.root, B_.root, out.root)
    isz = dtype.itemsize
    offs = [d.offset for d in (A_, B_, out)]      # bytes, relative to the roots
    bstr = [d.strides[0] // d.itemsize for d in (A_, B_, out)]
    # pyclblast takes pyopencl arrays and uses only their buffer (base_data): one wrapper
    # per operand, rebuilt when a root's buffer changed (re-bound input, donated output,
    # a root moved into a slab); element offsets count from the buffer (root origin added)
    wraps = [None, None, None]
    eoffs = [0, 0, 0]

    def refresh():
        for k, r in enumerate(roots):
            if wraps[k] is None or wraps[k].base_data is not r.buf:
                wraps[k] = cla.Array(queue, (1, max(_root_nbytes(r) // isz, 1)), dtype,
                                     data=r.buf)
            eoffs[k] = (r.origin + offs[k]) // isz
    refresh()

    if nb == 1:
        def run():
            refresh()
            return pyclblast.gemm(queue, M, N, K, wraps[0], wraps[1], wraps[2], lda, ldb, ldc,
                                  alpha=al, beta=be, a_transp=ta, b_transp=tb,
                                  a_offset=eoffs[0], b_offset=eoffs[1], c_offset=eoffs[2])
    else:
        def run():
            refresh()
            return pyclblast.gemmStridedBatched(
                queue, M, N, K, nb, wraps[0], wraps[1], wraps[2], lda, ldb, ldc,
                bstr[0], bstr[1], bstr[2], alpha=al, beta=be, a_transp=ta, b_transp=tb,
                a_offset=eoffs[0], b_offset=eoffs[1], c_offset=eoffs[2])
    ctx.enqueue(run)
    if out is not C:
        _plan_combine(ctx, C, out, None if static_alpha else alpha,
                      beta if Z is not None else None, Z)


def _plan_combine(ctx, C, T, alpha, beta, Z):
    """C = [alpha *] T [+ beta * Z] elementwise; a beta of 0 at run time ignores Z."""
    from .elemwise import plan_elementwise
    ins = [T]
    expr = 'i0'
    if alpha is not None:
        ins.append(alpha.darr.view(C.shape, (0,) * C.ndim))
        expr = 'i%d * %s' % (len(ins) - 1, expr)
    if beta is not None and beta.kind != 'none':
        if beta.kind in ('one', 'const'):
            bexpr = '(%s)%r' % (oscalar.compute_ctype(C.dtype.name), float(beta.value))
        else:
            ins.append(beta.darr.view(C.shape, (0,) * C.ndim))
            bexpr = 'i%d' % (len(ins) - 1)
        ins.append(Z)
        expr = '(%s == 0) ? (%s) : (%s + %s * i%d)' % (bexpr, expr, expr, bexpr, len(ins) - 1)
    support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' if C.dtype == np.float64 else ''
    plan_elementwise(ctx, support, 'o0 = %s;' % expr, [C], ins, C.shape)


# --------------------------------------------------------------------------- the ops
class BlasImpl(DeviceImpl):
    """Shared by the BLAS ops: the backend is chosen once, at link time."""
    dtypes = INT_DTYPES + FLOAT_DTYPES + COMPLEX_DTYPES
    complex_ok = True

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        dtypes = [v.type.dtype for v in node.inputs if v.ndim > 0] + [node.outputs[0].type.dtype]
        self.backend = choose_backend(dev, dtypes)
        _acc_type(node.outputs[0].type.dtype)    # raises for dtypes no backend takes

    def describe(self):
        return '%s (%s)' % (type(self.node.op).__name__, self.backend)

    def scalar(self, j, darr):
        return Scalar.of(self.node.inputs[j], darr)

    def output_for(self, ctx, j, z, shape, dtype):
        """The input ``z`` (index j) itself when the op may destroy it, else a fresh array."""
        op = self.node.op
        inplace = getattr(op, 'inplace', False) or getattr(op, 'destructive', False) \
            or bool(getattr(op, 'destroy_map', None))
        if inplace and ctx.destroyable[j] and z.shape == tuple(shape) and z.dtype == np.dtype(dtype):
            return z
        return ctx.alloc(shape, dtype)


class DotImpl(BlasImpl):
    """Dot / Dot22 / Dot22Scalar: vectors and matrices, any dtype."""

    fusable_inputs = (1,)       # the right operand (small products compute a producer)
    takes_epilogue = True       # an elementwise consumer (small products compute it)

    def plan(self, ctx, ins, epilogue=None):
        x, y = ins[0], ins[1]
        alpha = self.scalar(2, ins[2]) if len(ins) > 2 else ONE
        if x.shape[-1] != y.shape[0]:
            raise ValueError('shapes %s and %s not aligned: %d (dim %d) != %d (dim 0) in %s'
                             % (x.shape, y.shape, x.shape[-1], x.ndim - 1, y.shape[0], self.node.op))
        shape = x.shape[:-1] + y.shape[1:]
        out = ctx.alloc(shape, self.node.outputs[0].type.dtype)
        A = x if x.ndim == 2 else as_row(x)
        B = y if y.ndim == 2 else fmap(as_column, y)
        if out.ndim == 2:
            C = out
        elif out.ndim == 0:
            C = as_scalar_matrix(out)
        else:
            C = as_column(out) if x.ndim == 2 else as_row(out)
        done = plan_gemm(ctx, self.backend, as_batch(A), fmap(as_batch, B), as_batch(C),
                         alpha=alpha, epilogue=(epilogue, out) if epilogue else None)
        return [epilogue.out if done else out]


class GemmImpl(BlasImpl):
    """Gemm(z, a, x, y, b) = b * z + a * dot(x, y)."""

    def plan(self, ctx, ins):
        z, a, x, y, b = ins
        if x.shape[1] != y.shape[0] or z.shape != (x.shape[0], y.shape[1]):
            raise ValueError('Incompatible shapes for gemm (b * z + a * dot(x, y)). '
                             'z: %s, x: %s, y: %s' % (z.shape, x.shape, y.shape))
        A, B, Z = as_batch(x), as_batch(y), as_batch(z)
        out = self.output_for(ctx, 0, z, z.shape, z.dtype)
        C = as_batch(out)
        plan_gemm(ctx, self.backend, A, B, C, self.scalar(1, a), self.scalar(4, b),
                  C if out is z else Z)
        return [out]


class GemvImpl(BlasImpl):
    """Gemv(y, alpha, A, x, beta) = beta * y + alpha * dot(A, x)."""

    fusable_inputs = (3,)       # x
    takes_epilogue = True

    def plan(self, ctx, ins, epilogue=None):
        y, alpha, A, x, beta = ins
        if A.shape[0] != y.shape[0] or A.shape[1] != x.shape[0]:
            raise ValueError('Incompatible shapes for gemv (beta * y + alpha * dot(A, x)). '
                             'y: %s, A: %s, x: %s' % (y.shape, A.shape, x.shape))
        out = self.output_for(ctx, 0, y, y.shape, y.dtype)
        C = as_batch(as_column(out))
        Z = C if out is y else as_batch(as_column(y))
        done = plan_gemm(ctx, self.backend, as_batch(A), fmap(lambda v: as_batch(as_column(v)), x),
                         C, self.scalar(1, alpha), self.scalar(4, beta), Z,
                         epilogue=(epilogue, out) if epilogue else None)
        return [epilogue.out if done else out]


class GerImpl(BlasImpl):
    """Ger(A, alpha, x, y) = A + alpha * outer(x, y)."""

    def plan(self, ctx, ins):
        A, alpha, x, y = ins
        if A.shape != (x.shape[0], y.shape[0]):
            raise ValueError('Incompatible shapes for ger (A + alpha * outer(x, y)). '
                             'A: %s, x: %s, y: %s' % (A.shape, x.shape, y.shape))
        out = self.output_for(ctx, 0, A, A.shape, A.dtype)
        C = as_batch(out)
        plan_gemm(ctx, self.backend, as_batch(as_column(x)), as_batch(as_row(y)), C,
                  self.scalar(1, alpha), ONE, C if out is A else as_batch(A))
        return [out]


class BatchedDotImpl(BlasImpl):
    """BatchedDot(x, y): x (b, m, k) or (b, k); y (b, k, n) or (b, k)."""

    def plan(self, ctx, ins):
        x, y = ins
        if x.shape[0] != y.shape[0] or x.shape[-1] != y.shape[1]:
            raise ValueError('theano.tensor.blas.BatchedDot: shapes %s and %s do not align '
                             '(same size in axis 0, x.shape[-1] == y.shape[1])' % (x.shape, y.shape))
        shape = x.shape[:-1] + y.shape[2:]
        out = ctx.alloc(shape, self.node.outputs[0].type.dtype)
        A = x if x.ndim == 3 else x.view((x.shape[0], 1, x.shape[1]), (x.strides[0], x.itemsize, x.strides[1]))
        B = y if y.ndim == 3 else y.view((y.shape[0], y.shape[1], 1), (y.strides[0], y.strides[1], y.itemsize))
        bs = out.strides[0] if out.ndim else out.itemsize
        C = out.view((A.shape[0], A.shape[1], B.shape[2]),
                     (bs, out.strides[1] if x.ndim == 3 else out.itemsize,
                      out.strides[-1] if y.ndim == 3 else out.itemsize))
        plan_gemm(ctx, self.backend, A, B, C)
        return [out]


def _impl(cls):
    @implemented_by(cls)
    def factory(op, node, dev):
        for v in node.inputs + node.outputs:
            if v.type.dtype not in cls.dtypes:
                raise NoDeviceImplementation('no device %s for dtype %s' % (type(op).__name__, v.type.dtype))
        return cls(node, dev)
    return factory


ocl_impl.register(tbasic.Dot)(_impl(DotImpl))
ocl_impl.register(tblas.Dot22)(_impl(DotImpl))
ocl_impl.register(tblas.Dot22Scalar)(_impl(DotImpl))
ocl_impl.register(tblas.Gemm)(_impl(GemmImpl))
ocl_impl.register(tblas.Gemv)(_impl(GemvImpl))
ocl_impl.register(tblas.Ger)(_impl(GerImpl))
ocl_impl.register(tblas.BatchedDot)(_impl(BatchedDotImpl))
try:
    from theano.tensor import blas_c, blas_scipy
    ocl_impl.register(blas_c.CGemv)(_impl(GemvImpl))
    ocl_impl.register(blas_c.CGer)(_impl(GerImpl))
    ocl_impl.register(blas_scipy.ScipyGer)(_impl(GerImpl))
except ImportError:  # pragma: no cover - scipy missing: ScipyGer does not exist
    pass
