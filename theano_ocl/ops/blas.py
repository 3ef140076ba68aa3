"""BLAS family: Dot, Dot22, Dot22Scalar, Gemm, Gemv, Ger (and their C/scipy subclasses),
BatchedDot.

Every op is reduced to one call of :func:`plan_gemm`,

    C[b] = alpha * A[b] @ B[b] (+ beta * Z[b])      over 3-d strided views,

with vectors seen as one-column (or one-row) matrices and 2-d operands as a batch of one,
so transposed, reversed or stepped operands built in the graph reach the backend as views,
never as copies. ``plan_gemm`` picks one of three backends per device and dtype:

- ``'clblast'``: GPUs with ``pyclblast`` installed, float32/float64: CLBlast's GEMM on the
  buffers, with its leading dimensions and transpose flags absorbing the views it can;
- ``'host'``: CPU devices sharing memory with the host, float32/float64: the host BLAS
  (numpy/scipy, OpenBLAS) on mapped buffers, without copies (a host step of the frame);
- ``'kernel'``: everything else (integer dot, float16, a GPU without CLBlast): the tiled
  kernel of ``kernels/gemm.cl.mako``, any strides and dtypes, float16 accumulated in float.

``FORCE_BACKEND`` (or ``$THEANO_OCL_BLAS``) overrides the choice where the backend can take
the dtypes; tests use it to run every backend on one device.
"""
import os

import numpy as np
from mako.template import Template
from theano.gof.graph import Constant
from theano.tensor import basic as tbasic
from theano.tensor import blas as tblas

from .. import scalar as oscalar
from ..darray import DArray
from ..errors import NoDeviceImplementation
from .base import DeviceImpl
from .registry import ocl_impl

FORCE_BACKEND = None
_BLAS_DTYPES = ('float32', 'float64')
_TEMPLATE = Template(filename=os.path.join(os.path.dirname(__file__), '..', 'kernels',
                                           'gemm.cl.mako'))
_sources = {}


# --------------------------------------------------------------------------- backend choice
def _pyclblast():
    try:
        import pyclblast
    except ImportError:
        return None
    return pyclblast


def choose_backend(dev, dtypes):
    """'clblast', 'host' or 'kernel' for operands of ``dtypes`` on ``dev`` (see module doc)."""
    blas_ok = len(set(dtypes)) == 1 and dtypes[0] in _BLAS_DTYPES
    forced = FORCE_BACKEND or os.environ.get('THEANO_OCL_BLAS') or None
    if forced not in (None, 'clblast', 'host', 'kernel'):
        raise ValueError("THEANO_OCL_BLAS must be 'clblast', 'host' or 'kernel', got %r" % forced)
    if not blas_ok:
        return 'kernel'
    if forced == 'clblast' and _pyclblast() is None:
        raise ValueError("THEANO_OCL_BLAS='clblast' but pyclblast is not installed")
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
def plan_gemm(ctx, backend, A, B, C, alpha=ONE, beta=NONE, Z=None):
    """Record ``C[b] = alpha * A[b] @ B[b] (+ beta * Z[b])`` for 3-d DArray views.

    ``Z`` may be ``C`` itself (in place) or another array of C's shape; ``beta.kind ==
    'none'`` ignores it. A beta of 0 at run time ignores Z too (it may be uninitialised).
    """
    if C.size == 0:
        return
    if beta.kind == 'const' and beta.value == 0:
        beta, Z = NONE, None
    if A.shape[2] == 0 and backend != 'kernel':
        backend = 'kernel'      # an empty sum: C = beta * Z, which the kernel does as is
    if backend == 'host':
        _plan_host(ctx, A, B, C, alpha, beta, Z)
    elif backend == 'clblast':
        _plan_clblast(ctx, A, B, C, alpha, beta, Z)
    else:
        _plan_kernel(ctx, A, B, C, alpha, beta, Z)


# --------------------------------------------------------------------------- kernel backend
def _operand(dtype):
    dtype = np.dtype(dtype)
    t = oscalar.ctype(dtype.name)
    signed = dtype.kind == 'i'
    return dict(t=t, half=dtype == np.float16, signed_int=signed,
                ut=('u' + t) if signed else t)


def _acc_type(out_dtype):
    dtype = np.dtype(out_dtype)
    if dtype.kind == 'f':
        return oscalar.compute_ctype(dtype.name)
    if dtype.kind in 'iu':
        return 'ulong' if dtype.itemsize == 8 else 'uint'
    raise NoDeviceImplementation('no device dot for dtype %s' % dtype)


def kernel_source(a_dt, b_dt, c_dt, alpha, al_dt, beta, be_dt, ts):
    """Render (memoized) the GEMM kernel; returns (source, kernel name)."""
    key = (a_dt, b_dt, c_dt, alpha, al_dt, beta, be_dt, ts)
    hit = _sources.get(key)
    if hit is not None:
        return hit
    dts = [a_dt, b_dt, c_dt] + ([al_dt] if alpha == 'ptr' else []) + ([be_dt] if beta == 'ptr' else [])
    support = ''
    if 'float64' in dts:
        support += '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n'
    acc = _acc_type(c_dt)
    name = 'gemm_%d' % (len(_sources) + 1)
    src = _TEMPLATE.render(
        name=name, support=support, ts=ts, acc_t=acc, cc_t=acc,
        a=_operand(a_dt), b=_operand(b_dt), c=_operand(c_dt),
        al=_operand(al_dt) if al_dt else None, be=_operand(be_dt) if be_dt else None,
        alpha=alpha, beta=beta)
    _sources[key] = (src, name)
    return src, name


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
class _Mapped(object):
    """Maps the buffers of some DArrays for one host step and gives numpy views of them.

    Roots are read at run time, so a frame whose input buffers were re-bound still maps
    the right memory. Mapping waits for the in-order queue (it is blocking)."""

    def __init__(self, dev, queue, darrs):
        self.dev = dev
        self.queue = queue
        self.maps = {}
        cl = dev.cl
        flags = cl.map_flags.READ | cl.map_flags.WRITE
        for d in darrs:
            if d is None or id(d.root) in self.maps:
                continue
            nbytes = _root_nbytes(d.root)
            arr, _ = cl.enqueue_map_buffer(queue, d.root.buf, flags, 0, (nbytes,), np.uint8,
                                           is_blocking=True)
            self.maps[id(d.root)] = arr

    def view(self, d):
        mem = self.maps[id(d.root)]
        return np.ndarray(d.shape, d.dtype, buffer=mem, offset=d.offset, strides=d.strides)

    def release(self):
        for arr in self.maps.values():
            arr.base.release(self.queue)
        self.maps = {}


def _root_nbytes(root):
    size = getattr(root.buf, 'size', None) or getattr(root.buf, 'int_size', None)
    return int(min(root.nbytes, size) if size else root.nbytes)


def _scalar_value(m, s):
    if s.kind == 'dev':
        return m.view(s.darr)[()].item()
    return s.value


def _host_gemm2(a, b, c, alpha, beta, z, blas):
    """c = alpha * a @ b (+ beta * z), 2-d numpy views, writing into c."""
    if beta is None or beta == 0:
        if alpha == 1 and c.flags.c_contiguous:
            np.dot(a, b, out=c)
            return
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
    from scipy.linalg import blas
    dev, queue = ctx.dev, ctx.queue
    scal = [s.darr for s in (alpha, beta) if s.kind == 'dev']
    darrs = [A, B, C, Z] + scal
    nb = C.shape[0]

    def run():
        m = _Mapped(dev, queue, darrs)
        try:
            a, b, c = m.view(A), m.view(B), m.view(C)
            al = _scalar_value(m, alpha)
            be = None if beta.kind == 'none' else _scalar_value(m, beta)
            z = None if Z is None else (c if Z is C else m.view(Z))
            if nb > 1 and al == 1 and be is None:
                np.matmul(a, b, out=c)
                return
            for i in range(nb):
                _host_gemm2(a[i], b[i], c[i], al, be, None if z is None else (c[i] if z is c else z[i]),
                            blas)
        finally:
            m.release()
    ctx.host_step(run)


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
    import pyopencl.array as cla
    pyclblast = _pyclblast()
    nb = C.shape[0]
    ops = []
    for d in (A, B):
        lay = blas_layout(d.view(d.shape[1:], d.strides[1:]))
        if lay is None or (nb > 1 and d.strides[0] < 0):
            tmp = ctx.alloc(d.shape, d.dtype)
            ctx.copy(tmp, d)
            d = tmp
            lay = blas_layout(d.view(d.shape[1:], d.strides[1:]))
        ops.append((d, lay))
    (A, (ta, lda)), (B, (tb, ldb)) = ops
    # CLBlast writes a row-major, untransposed C: compute into a fresh buffer when C is not
    # one, and combine with beta * Z elementwise when beta is a device value.
    out = C
    lay_c = blas_layout(C.view(C.shape[1:], C.strides[1:]))
    static_beta = beta.kind in ('none', 'one', 'const')
    static_alpha = alpha.kind in ('one', 'const')
    if lay_c is None or lay_c[0] or (nb > 1 and C.strides[0] < 0) or not static_beta \
            or not static_alpha or (Z is not None and Z is not C):
        out = ctx.alloc(C.shape, C.dtype)
        lay_c = blas_layout(out.view(out.shape[1:], out.strides[1:]))
    ldc = lay_c[1]
    al = float(alpha.value) if static_alpha else 1.0
    be = 0.0
    if out is C and beta.kind != 'none':
        be = float(beta.value)
    nb, M, N = C.shape
    K = A.shape[2]
    queue = ctx.queue
    dtype = C.dtype
    roots = (A.root, B.root, out.root)
    offs = [d.offset // d.itemsize for d in (A, B, out)]
    bstr = [d.strides[0] // d.itemsize for d in (A, B, out)]
    cache = {}

    def arrays():
        # pyclblast takes pyopencl arrays; re-wrap only when a root's buffer changed
        bufs = tuple(r.buf for r in roots)
        if cache.get('bufs') != bufs:
            cache['bufs'] = bufs
            cache['arrs'] = [cla.Array(queue, (1, _root_nbytes(r) // dtype.itemsize), dtype, data=r.buf)
                             for r in roots]
        return cache['arrs']

    if be == 0.0:
        # CLBlast may read C even for beta = 0: a reused buffer must not bring NaNs in
        _plan_fill_zero(ctx, out)

    def run():
        a, b, c = arrays()
        if nb == 1:
            return pyclblast.gemm(queue, M, N, K, a, b, c, lda, ldb, ldc, alpha=al, beta=be,
                                  a_transp=ta, b_transp=tb, a_offset=offs[0], b_offset=offs[1],
                                  c_offset=offs[2])
        return pyclblast.gemmStridedBatched(
            queue, M, N, K, nb, a, b, c, lda, ldb, ldc, bstr[0], bstr[1], bstr[2], alpha=al,
            beta=be, a_transp=ta, b_transp=tb, a_offset=offs[0], b_offset=offs[1],
            c_offset=offs[2])
    ctx.enqueue(run)
    if out is not C or not static_alpha:
        # C = alpha * out (+ beta * Z): one elementwise launch reading the scalars on device
        _plan_combine(ctx, C, out, None if static_alpha else alpha,
                      None if out is C else beta, None if out is C else Z)


def _plan_fill_zero(ctx, d):
    from .elemwise import plan_elementwise
    plan_elementwise(ctx, '', 'o0 = 0;', [d], [], d.shape)


def _plan_combine(ctx, C, T, alpha, beta, Z):
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

    def plan(self, ctx, ins):
        x, y = ins[0], ins[1]
        alpha = self.scalar(2, ins[2]) if len(ins) > 2 else ONE
        if x.shape[-1] != y.shape[0]:
            raise ValueError('shapes %s and %s not aligned: %d (dim %d) != %d (dim 0) in %s'
                             % (x.shape, y.shape, x.shape[-1], x.ndim - 1, y.shape[0], self.node.op))
        shape = x.shape[:-1] + y.shape[1:]
        out = ctx.alloc(shape, self.node.outputs[0].type.dtype)
        A = x if x.ndim == 2 else as_row(x)
        B = y if y.ndim == 2 else as_column(y)
        if out.ndim == 2:
            C = out
        elif out.ndim == 0:
            C = as_scalar_matrix(out)
        else:
            C = as_column(out) if x.ndim == 2 else as_row(out)
        plan_gemm(ctx, self.backend, as_batch(A), as_batch(B), as_batch(C), alpha=alpha)
        return [out]


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

    def plan(self, ctx, ins):
        y, alpha, A, x, beta = ins
        if A.shape[0] != y.shape[0] or A.shape[1] != x.shape[0]:
            raise ValueError('Incompatible shapes for gemv (beta * y + alpha * dot(A, x)). '
                             'y: %s, A: %s, x: %s' % (y.shape, A.shape, x.shape))
        out = self.output_for(ctx, 0, y, y.shape, y.dtype)
        C = as_batch(as_column(out))
        Z = C if out is y else as_batch(as_column(y))
        plan_gemm(ctx, self.backend, as_batch(A), as_batch(as_column(x)), C,
                  self.scalar(1, alpha), self.scalar(4, beta), Z)
        return [out]


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
    def factory(op, node, dev):
        for v in node.inputs + node.outputs:
            if v.type.dtype == 'bool' or v.type.dtype.startswith('complex'):
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
