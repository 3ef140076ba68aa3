"""Small products on the device: one work-item per element of C (``kernels/gemm_small.cl.mako``).

A step of a Nengo-style model holds hundreds of tiny matrix-vector products (a 100x1
encoder times a 1-vector, a 1x100 decoder times 100 spikes). For those a host BLAS step
(a queue finish and a map), a CLBlast call or the tiled kernel's work-groups cost many
times the arithmetic, and none of them can join a batch. :func:`plan_small` records such a
product as one launch of a kernel whose sizes, strides and alpha/beta are plain arguments,
so :mod:`theano_ocl.planner` can merge independent ones into one launch over a table
(:func:`batch_key`, :func:`batched_kernel`, :func:`coef_table`): nengo-ocl's many-gemv plan.

``plan_gemm`` (ops/blas.py) sends a product here when :func:`is_small` says so, whatever
the backend chosen for the op; alpha and beta must be link-time constants (a 0-d device
alpha/beta takes the general path).

Fusion on both sides (``ops.fusion.fuse_producers``, ``ops.fusion.fuse_epilogues``): an elementwise
producer of B is evaluated per element read (``Fused``); an elementwise consumer of C (an
*epilogue*, ``ops/elemwise.py Epilogue``: the LIF update reading an encoder's product) is
evaluated per element of C, which is then never stored: the kernel writes the consumer's
output in C's place, reading the consumer's other inputs at C's indices.
"""
import numpy as np

from .. import kernels
from .. import scalar as oscalar
from ..runtime import planner
from ..runtime.plans import Batch, launch_geometry
from .elemwise import Fused

#: products up to this many multiply-adds (and this long a sum) take the small kernel
MAX_MACS = 1 << 16
MAX_K = 4096


def takes(alpha, beta):
    """Whether the small kernel can do a product with these alpha/beta (constants only)."""
    return alpha.kind in ('one', 'const') and beta.kind in ('none', 'one', 'const')


#: a fused right operand (an elementwise producer, ops/elemwise.py Fused) is computed in
#: the small kernel when each output's sum is at most this long: one work-item per output
#: evaluates the producer K times (PoCL, 8 x K gemv of tanh(m)*m, kernel time fused /
#: unfused: K=64 0.89, 256 0.76, 1024 1.9; bench/fusion.py)
FUSED_MAX_K = 256


def takes_fused(A, B):
    return A.shape[2] <= FUSED_MAX_K


def is_small(A, B, C):
    """Whether ``C[b] = alpha A[b] @ B[b] + beta Z[b]`` is small enough for the small kernel."""
    nb, M, K = A.shape
    return small_shape(nb, M, B.shape[2], K)


def small_shape(nb, M, N, K):
    """Whether a product of ``nb`` M x K by K x N matrices is small enough for it."""
    return K <= MAX_K and nb * M * N * max(K, 1) <= MAX_MACS


def operand_traits(dtype):
    """Template facts of an operand dtype (C type, compute type, half storage, signed
    integer)."""
    dtype = np.dtype(dtype)
    t = oscalar.ctype(dtype.name)
    signed = dtype.kind == 'i'
    return dict(t=t, ct=oscalar.compute_ctype(dtype.name), half=dtype == np.float16,
                signed_int=signed, ut=('u' + t) if signed else t)


def acc_dtype(c_dtype):
    """numpy dtype of the accumulator (and of alpha/beta) for output dtype ``c_dtype``."""
    c = np.dtype(c_dtype)
    if c.kind == 'f':
        return np.dtype('float64') if c == np.float64 else np.dtype('float32')
    return np.dtype('uint64') if c.itemsize == 8 else np.dtype('uint32')


@kernels.memoize
def _source(key, K=None, slab=False, chunk=1, group=0, whole=False):
    """(source, kernel name) of the product kernel of ``key`` (``plan_small``), batched
    over K products when K is given."""
    a_dt, b_dt, c_dt, has_z, pre, epi = key
    acc = acc_dtype(c_dt)
    pre_ins = list(pre[2]) if pre else []
    epi_dts = list(epi[3]) + [epi[4]] if epi else []
    support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' \
        if 'float64' in [a_dt, b_dt, c_dt] + pre_ins + epi_dts else ''
    if pre:
        support += pre[0]
    if epi and epi[0] not in support:
        support += '\n' + epi[0]
    fused = [operand_traits(d) for d in pre_ins]
    bops = [('B%d' % q, 'b%d' % q, f) for q, f in enumerate(fused)] or \
        [('B', 'b', operand_traits(b_dt))]
    c = operand_traits(c_dt)
    return kernels.render('gemm_small.cl.mako', 'gemm_small', support=support,
                          acc_t=oscalar.ctype(acc.name),
                          a=operand_traits(a_dt), b=operand_traits(b_dt), c=c,
                          has_z=has_z, batched=K is not None, K=K or 1,
                          rec=record_len(key), slab=slab, chunk=chunk, group=group, whole=whole,
                          fused=fused, bops=bops, pre_body=pre[1] if pre else '',
                          **epilogue_params(epi, c, operand_traits))


def epilogue_key(epilogue):
    """(key, the consumer's other inputs, its output) of ``epilogue`` (the consumer's impl,
    the product's input index, its inputs and output as views of C's geometry): the key,
    (support, body, product input index, input dtypes, output dtype), is what a product
    kernel's source depends on."""
    impl, j, e_views, e_out = epilogue
    return ((impl.support, impl.body, j, tuple(impl.in_dtypes), e_out.dtype.name),
            [d for q, d in enumerate(e_views) if q != j], e_out)


def epilogue_params(epi, c, traits):
    """The template parameters of an epilogue (``epilogue_key``'s key, or None) in a
    product kernel (``kernels/epilogue.mako``); ``c``: C's traits, ``traits``: a dtype's."""
    if epi is None:
        return dict(epi=False, cs=c, eops=[], epi_j=0, epi_body='', epi_cts=[])
    # the epilogue's inputs but the product's value, (pointer name, stem, traits, index)
    return dict(epi=True, cs=traits(epi[4]), epi_j=epi[2], epi_body=epi[1],
                epi_cts=[oscalar.compute_ctype(d) for d in epi[3]],
                eops=[('E%d' % q, 'e%d' % q, traits(d), q) for q, d in enumerate(epi[3])
                      if q != epi[2]])


def _n_b(key):
    return len(key[4][2]) if key[4] else 1


def n_operands(key):
    """Operand pointers of one product: A, B (or the fused producer's inputs), C[, Z], then
    the epilogue's other inputs."""
    return 2 + _n_b(key) + (1 if key[3] else 0) + (len(key[5][3]) - 1 if key[5] else 0)


def record_len(key):
    """Longs per product in the batched table: start, nb, M, N, K, 4 per operand."""
    return 5 + 4 * n_operands(key)


def _coef(s, default, acc):
    v = 1 if s.kind == 'one' else default if s.kind == 'none' else s.value
    if acc.kind == 'u':
        return acc.type(int(v) % (1 << (8 * acc.itemsize)))
    return acc.type(v)


def _elem(d):
    return [s // d.itemsize for s in d.strides]


def takes_epilogue(C):
    """Whether the product's value can feed an epilogue (stored types only: no half)."""
    return C.dtype != np.float16


def plan_small(ctx, A, B, C, alpha, beta, Z, epilogue=None):
    """Record the product as one small-kernel launch (see module doc). ``epilogue``:
    (the consumer's impl, its input index j, its other inputs and its output as 3-d views
    of C's geometry): the launch writes the consumer's output, C is never stored."""
    has_z = beta.kind != 'none' and Z is not None
    epi = e_others = None
    if epilogue is not None:
        epi, e_others, e_out = epilogue_key(epilogue)
    key = (A.dtype.name, B.dtype.name, C.dtype.name, has_z,
           B.spec() if isinstance(B, Fused) else None, epi)
    src, name = _source(key)
    prg = ctx.dev.build(src)
    acc = acc_dtype(C.dtype)
    nb, M, N = C.shape
    K = A.shape[2]
    total = nb * M * N
    coef = (_coef(alpha, 1, acc), _coef(beta, 0, acc))
    operands = [A] + list(B.views if isinstance(B, Fused) else [B])
    if epi is not None:
        C = e_out          # C's place holds the consumer's output (same geometry)
    c_at = len(operands)
    operands.append(C)
    if has_z:
        operands.append(Z)
    if epi is not None:
        operands.extend(e_others)
    args = [np.int64(total), np.int64(M), np.int64(N), np.int64(K)] + list(coef)
    tails = []
    for d in operands:
        e = _elem(d)
        tails.append(e)
        args += [d, np.int64(e[0]), np.int64(e[1]), np.int64(e[2])]
    # products of one source merge into one batched launch (planner.py)
    # Z and the epilogue's operands are read at the element of C the work-item writes
    batch = Batch('gemm_small', key, total, [nb if M * N else 0, M, N, K], operands, tails,
                  [c_at], coef=coef, pointwise=range(c_at + 1, len(operands)))
    gsize, lsize = launch_geometry(ctx.dev, total)
    ctx.launch(prg, name, gsize, lsize, args, batch=batch)


# --------------------------------------------------------------------------- batching
def max_batch(dev, key, cap=256):
    try:
        limit = int(dev.device.max_parameter_size)
    except Exception:
        limit = 1024
    return max(1, min(cap, (limit - 64) // (8 * n_operands(key))))


def batched_kernel(dev, key, K, slab, chunk, group=0, whole=False):
    """(program, kernel name, record length incl. start) of the K-product batched kernel
    (``whole``: every product's outputs are whole work-groups of ``group``)."""
    src, name = _source(key, K, slab, chunk, group, whole)
    return dev.build(src), name, record_len(key)


def coef_table(key, coefs):
    """alpha, beta of each product, in the accumulator type (the kernel's second table)."""
    return np.array([c for pair in coefs for c in pair], dtype=acc_dtype(key[2]))


# how this family's launches merge (runtime.planner)
planner.register_family('gemm_small', planner.Family(batched_kernel, max_batch, coef_table))
