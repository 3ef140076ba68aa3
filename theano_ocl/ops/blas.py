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

On GPUs, where CLBlast is chosen, a product takes the tiled kernel instead (unless the
``blas`` setting forces a backend) when it has at most ``KERNEL_MAX_MACS`` multiply-adds
and either the kernel takes its register-blocked shape for it, or any of: at most
``CLBLAST_MIN_MACS``, a sum shorter than ``CLBLAST_MIN_K``, fewer than ``CLBLAST_MIN_OUT``
elements of C, or a transposed A (``takes_clblast``). A CLBlast call costs 20-40 us of
host time on the H100 (its routine objects and padding kernels per call), and its tiles
starve a product with few elements of C (LeNet's 20x25 filter gradient summed over 73,728
positions made a LeNet step 5.6 ms against 4.4). Measured on the H100 (2026-11-26, device
time per product, ``bench/gemm_shapes.py``): the MLP's products (256x1000x784 up to
1000x1000x256) 38-45 us register-blocked against 66-108 us of CLBlast's wall time; 1024^3
131 us against 177; from 2048^3 CLBlast is ahead (2048^3: 0.68 ms against 0.93).

The kernel has two shapes (``kernels/gemm.cl.mako``): one element of C per work-item, or,
on GPUs, register-blocked (``register_blocking``): 4x4 elements per work-item in a 64x64
tile (2x4 or 2x2 where the sum is too short to split and 64x64 tiles leave compute units
idle), offsets within a tile in 32-bit integers where they fit (1024^3: 140 us against 159
in 64-bit). Its work-items read their rows of the local tiles as vectors and load the
next tile into registers while computing one: on the H100 (2026-11-27, device time from
profiling events, as ``bench/gemm_shapes.py`` takes it) the MLP's products took 30-38 us
against 43-45 before, 1024^3 94 us against 131-140, the LSTM's X @ W (3200x1024x256) 83 us
against 108; cuBLAS (torch, TF32 off, CUDA events) took 38-48 us for the MLP's products
and 78 us for 1024^3. It takes that shape where A is transposed (the one-per-item kernel's loads of A
do not coalesce) or the product has more than ``RB_MIN_MACS`` multiply-adds, and C has no
side under ``RB_MIN_SIDE`` (a tile would mostly compute padding: h.T @ d of 1000x256x10
24.3 us against 10.8). Where C has fewer work-groups than the device has compute units
and the sum is long (``split_sum``), either shape runs over chunks of the sum and a second
launch adds the partial products: 256x1000x1000 in 64x64 tiles (64 work-groups) took
43-45 us in 8 or 9 chunks against 111 us whole; LeNet's 20x25 filter gradient summed over
73,728 positions ran on 4 of 132 compute units, and a LeNet step took 4.5 ms against
2.2-2.4 ms in chunks (H200, 2026-11-26, alternating processes).

Whatever the backend, a *small* product (at most ``gemm_small.MAX_MACS`` multiply-adds)
with constant alpha/beta and real dtypes takes ``ops/gemm_small.py``: one work-item per
element of C, one launch whose sizes are arguments, which the planner batches with other
small products.

Where the device has tuned choices (``ops/gemm_tune.py``, found by ``ops/gemm_search.py``
through ``python -m theano_ocl tune`` or at the first large product), a product of a
tuned shape class takes the backend and the kernel's tile measured fastest for its class
in place of the rules above (the ``tune`` setting; a forced ``blas`` keeps its backend and
the kernel still takes the tuned tile). A tuned tile may name the register-blocked
kernel's variant for NVIDIA-like GPUs (``fast_variant``: float4 reads of the local tiles
without bank conflicts, one barrier per step of the sum with two local buffers, no bounds
checks where the product is whole tiles, 4-element loads); the planner takes it only for
products of one real dtype, float32 or float64, and the same tile without it otherwise.

The backends live in ``blas_host.py`` and ``blas_clblast.py`` (with CLBlast's tuned
parameters), the kernel backend here; what they all take (``Scalar``, the batch views,
BLAS layouts) in ``blas_operands.py``.

The ``blas`` setting (``OCLMode(blas=...)``, ``$THEANO_OCL_BLAS``) overrides the choice
where the backend can take the dtypes ('small' forces the small kernel for every size); tests use it to run every
backend on one device. A forced backend turns the automatic small path off.
"""
import numpy as np
from theano.tensor import basic as tbasic
from theano.tensor import blas as tblas

from .. import kernels
from .. import scalar as oscalar
from ..errors import NoDeviceImplementation
from ..runtime import settings
from . import gemm_small, gemm_tune
from .base import COMPLEX_DTYPES, DeviceImpl, FLOAT_DTYPES, INT_DTYPES
from .blas_clblast import load_pyclblast, plan_clblast
from .blas_host import ONE_THREAD_MACS, plan_host
from .blas_operands import NONE, ONE, Scalar, as_batch, as_column, as_row, as_scalar_matrix
from .elemwise import Fused, fmap
from .registry import implemented_by, ocl_impl

_BLAS_DTYPES = ('float32', 'float64', 'complex64', 'complex128')

#: on GPUs, products up to this many multiply-adds may take the tiled kernel rather than
#: CLBlast (see the module docstring for the measurements)
KERNEL_MAX_MACS = 1 << 31


# --------------------------------------------------------------------------- backend choice
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
    if forced == 'clblast' and load_pyclblast() is None:
        raise ValueError("the blas setting (THEANO_OCL_BLAS) is 'clblast' but pyclblast is "
                         "not installed")
    if forced is not None:
        return forced
    if dev.is_gpu and load_pyclblast() is not None:
        return 'clblast'
    if dev.is_cpu or dev.unified_memory:
        return 'host'
    return 'kernel'


# --------------------------------------------------------------------------- the one interface
def plan_gemm(ctx, backend, A, B, C, alpha=ONE, beta=NONE, Z=None, epilogue=None):
    """Record ``C[b] = alpha * A[b] @ B[b] (+ beta * Z[b])`` for 3-d DArray views.

    ``Z`` may be ``C`` itself (in place) or another array of C's shape; ``beta.kind ==
    'none'`` ignores it. A beta of 0 at run time ignores Z too (it may be uninitialised).
    ``epilogue``: an ``ops.fusion.Epilogue`` consuming C and the DArray C views; returns
    whether the small or the tiled kernel took it (C is then never stored), else C is
    computed as usual.
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
    tuned = tuned_choice(ctx.dev, backend, A, B, C)
    if tuned is not None and _forced() is None:
        backend = tuned.backend
    if backend == 'host':
        plan_host(ctx, A, B, C, alpha, beta, Z)
    elif backend == 'clblast' and (_forced() is not None or tuned is not None
                                   or takes_clblast(ctx.dev, A, B, C)):
        plan_clblast(ctx, A, B, C, alpha, beta, Z)
    else:
        epi = epilogue[0].views_for(C, epilogue[1]) \
            if epilogue is not None and not cplx and gemm_small.takes_epilogue(C) else None
        plan_kernel(ctx, A, B, C, alpha, beta, Z, epi,
                     tile=tuned.tile if tuned is not None and tuned.backend == 'kernel' else AUTO)
        return epi is not None
    return False


def tuned_choice(dev, backend, A, B, C):
    """The device's tuned :class:`gemm_tune.Choice` for this product where the kernel or
    CLBlast computes it (one real dtype; the host BLAS and forced CLBlast calls keep
    theirs), or None."""
    if backend not in ('clblast', 'kernel') or _forced() not in (None, 'kernel') or \
            not A.dtype == B.dtype == C.dtype:
        return None
    nb, M, N = C.shape
    tuned = gemm_tune.choice(dev, C.dtype.name, M, N, A.shape[2])
    if tuned is not None and tuned.backend == 'clblast' and (
            _forced() is not None or load_pyclblast() is None):
        return None     # stored where pyclblast was installed, or the kernel forced
    return tuned


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
def kernel_source(a_dt, b_dt, c_dt, alpha, al_dt, beta, be_dt, ts, rb=None, split=False,
                  it='long', epi=None, fast=None):
    """Render (memoized) the GEMM kernel; returns (source, kernel name). ``rb``: the
    register-blocked shape (TX, TY, RM, RN, BK, a_kfast, b_nfast), else TS x TS; ``fast``:
    with ``rb``, its variant for NVIDIA-like GPUs (db, full, va, vb: ``fast_variant``);
    ``split``: the kernel over chunks of the sum, and its ``<name>_sum`` kernel; ``it``:
    the register-blocked kernel's type for offsets within a tile ('int' where they fit);
    ``epi``: an elementwise consumer of C computed in its place, (support, body, input
    index of the product, input dtypes, output dtype) as ``gemm_small`` takes it."""
    dts = [a_dt, b_dt, c_dt] + ([al_dt] if alpha == 'ptr' else []) + ([be_dt] if beta == 'ptr' else [])
    dts += list(epi[3]) + [epi[4]] if epi else []
    support = ''
    if 'float64' in dts or 'complex128' in dts:
        support += '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n'
    if epi and epi[0] not in support:
        support += '\n' + epi[0]
    acc = _acc_type(c_dt)
    c = _operand(c_dt)
    return kernels.render(
        'gemm.cl.mako', 'gemm', support=support, ts=ts, acc_t=acc, cc_t=acc,
        cplx=acc[-1] == '2', a=_operand(a_dt), b=_operand(b_dt), c=c,
        al=_operand(al_dt) if al_dt else None, be=_operand(be_dt) if be_dt else None,
        alpha=alpha, beta=beta, rb=rb, split=split, it=it, fast=fast,
        **gemm_small.epilogue_params(epi, c, _operand))


#: on GPUs, products of more multiply-adds than this, with a sum at least CLBLAST_MIN_K long
#: and at least CLBLAST_MIN_OUT elements, take CLBlast even at most KERNEL_MAX_MACS, unless
#: A is transposed or the kernel is register-blocked for them (see takes_clblast and the
#: module doc)
CLBLAST_MIN_MACS = 1 << 24
CLBLAST_MIN_K = 256
CLBLAST_MIN_OUT = 1 << 17


def takes_clblast(dev, A, B, C):
    """Whether a product that CLBlast could compute takes it rather than the tiled kernel
    (``KERNEL_MAX_MACS``, ``register_blocking`` and the ``CLBLAST_MIN_*`` bounds; module
    doc)."""
    nb, M, N = C.shape
    K = A.shape[2]
    macs = nb * M * N * K
    if macs > KERNEL_MAX_MACS:
        return True
    if register_blocking(dev, A, B, C) is not None:
        return False
    return (macs > CLBLAST_MIN_MACS and K >= CLBLAST_MIN_K and M * N >= CLBLAST_MIN_OUT
            and not _k_major(A))


def _k_major(A):
    """Whether A's rows are its shorter stride (a transposed matrix: x.T in x.T @ d)."""
    a_sm, a_sk = _elem_strides(A)[1:]
    return abs(a_sm) < abs(a_sk)


#: register-blocked tiles (TX, TY, RM, RN), largest first: the kernel takes the first, split
#: where C has too few of its work-groups (split_sum); a smaller one only where the sum is
#: too short to split and a smaller tile gives every compute unit a work-group
RB_TILES = ((16, 16, 4, 4), (16, 16, 2, 4), (16, 16, 2, 2))
#: products of more multiply-adds than this take the register-blocked kernel whatever
#: their layout (fewer: only where A is transposed, see register_blocking). On the H100
#: (2026-11-26) LeNet's 128x500x800 dense product took 22 us register-blocked in 8 chunks
#: against 33 us in the TS x TS kernel; the LSTM's 64x1024x256 step product 14.7 us in the
#: TS x TS kernel against 16.9 us at best register-blocked
RB_MIN_MACS = 1 << 25
#: nor a C with a side shorter than this: a tile (64 x 64 elements) then mostly
#: computes padding. On the H100 (2026-11-26, wall per product) h.T @ d of 1000x256x10
#: took 24.3 us register-blocked against 10.8 in the TS x TS kernel, and x.T @ d of
#: 32x3200x1024 425 us against 66.5 with split sums
RB_MIN_SIDE = 64
RB_DEPTH = 16
#: CPU devices take the TS x TS kernel, whole: on PoCL (2-core EPYC) a 70x50x90 product
#: took 839 us register-blocked 64 x 64 against 299 us (2026-11-26); tests set this to run
#: the GPU shapes (register-blocked, split sums) there
GPU_SHAPES_ON_CPU = False
#: the TS x TS kernel splits a sum of at least SPLIT_MIN_K into chunks of at least
#: SPLIT_MIN_CHUNK when C has fewer work-groups than the device has compute units
#: (split_sum). On the H100 (2026-11-26) the MLP's 256x1000x10 output product took 17.5 us
#: split, 27.6 whole; splitting from 256 gave the same
SPLIT_MIN_K = 512
SPLIT_MIN_CHUNK = 128
#: the register-blocked kernel splits a sum of at least 2 * RB_SPLIT_CHUNK into chunks of at
#: least RB_SPLIT_CHUNK, aiming at RB_SPLIT_GROUPS work-groups per compute unit. On the H100
#: (2026-11-27, the kernel with register prefetch) 256x1000x784 took 33.6 us in 4 chunks
#: and 38-42 in 7-8, 256x1000x1000 37.6 in 4 and 41.7 in 8, 256x1024x3200 74 in 8 and 82
#: in 4; the MLP step (three alternating processes) 0.63-0.70 ms with chunks of at least
#: 192 against 0.64-0.68 with 96 (whose 7-9 chunks the earlier kernel needed: 103 us in 8
#: chunks, 142 in 4 for 256x1024x3200, 2026-11-26)
RB_SPLIT_CHUNK = 192
RB_SPLIT_GROUPS = 4


def split_sum(dev, C, K, ts, rb=None):
    """(S, KC): the chunks the kernel cuts the sum into (S chunks of KC), or None.

    A product with few elements of C and a long sum (LeNet's 20x25 filter gradient summed
    over 73,728 positions: 4 work-groups on a GPU of 132 compute units; the MLP's 256x1000
    products in 64x64 tiles: 64) is one long loop on a few compute units; in chunks, every
    unit takes some, and a second launch adds the partial products (float sums only: the
    partials are stored in the accumulator type). ``rb``: the register-blocked shape
    (chunks a multiple of its depth), else the TS x TS kernel's (of ``ts``).
    """
    nb, M, N = C.shape
    if not _gpu_shapes(dev) or C.dtype.kind == 'c' or \
            _acc_type(C.dtype) not in ('float', 'double'):
        return None
    if rb is None:
        if K < SPLIT_MIN_K:
            return None
        groups = nb * -(-M // ts) * -(-N // ts)
        want, chunk, step = 2 * dev.compute_units, SPLIT_MIN_CHUNK, ts
    else:
        tx, ty, rm, rn, bk = rb[:5]
        if K < 2 * RB_SPLIT_CHUNK:
            return None
        groups = nb * -(-M // (ty * rm)) * -(-N // (tx * rn))
        want, chunk, step = RB_SPLIT_GROUPS * dev.compute_units, RB_SPLIT_CHUNK, bk
    if groups >= dev.compute_units:
        return None
    S = min(-(-want // groups), K // chunk)
    if S < 2:
        return None
    KC = -(-K // S)
    KC = -(-KC // step) * step
    return -(-K // KC), KC


def blocking(tile, A, B):
    """The kernel's register-blocked shape for ``tile`` (TX, TY, RM, RN, BK, and
    optionally the ``fast_variant`` code) and these operands' layouts (loads with the
    shorter stride fastest), or None where ``tile`` is None (the TS x TS kernel)."""
    if tile is None:
        return None
    b_sk, b_sn = _elem_strides(B)[1:]
    return tuple(tile[:5]) + (not _k_major(A), abs(b_sn) <= abs(b_sk))


#: the 6th element of a tile (TX, TY, RM, RN, BK, V): V = FAST_SINGLE or FAST_DOUBLE takes
#: the kernel's variant for NVIDIA-like GPUs (``fast_variant``) with one or two local
#: buffers; a 5-element tile (or V = 0) the register-blocked kernel as before
FAST_SINGLE, FAST_DOUBLE = 1, 2
#: the variant's specializations, on where they apply (``bench/gemm_variants.py`` turns
#: them off to measure what each gives): no bounds checks where the product is whole
#: tiles; loads of 4 elements where an operand's layout allows
FAST_FULL = True
FAST_VECTOR = True


def fast_variant(tile, A, B, C):
    """(db, full, va, vb): the template's ``fast`` variant of the register-blocked kernel
    for ``tile`` (its 6th element ``FAST_SINGLE``/``FAST_DOUBLE``, ``db``: two local
    buffers) on these operands, or None where it does not apply: only products of one
    real dtype, float32 or float64 (no half storage, integers, complex values or mixed
    dtypes), and RM, RN multiples of 4 (work-items read the local tiles in float4s).
    ``full``: M, N, K multiples of the tile (so are the chunks of a split sum) and K > 0,
    so no load or store checks its bounds; ``va`` (``vb``): A's (B's) fast stride is 1,
    its other stride and its size along the fast axis multiples of 4, and the tile's
    loads divide into groups of 4 among the work-items: loads of 4 elements (aligned
    float4 loads where the tile's corner is aligned, which the kernel checks, offsets
    moving at run time)."""
    if tile is None or len(tile) < 6 or tile[5] not in (FAST_SINGLE, FAST_DOUBLE):
        return None
    tx, ty, rm, rn, bk = tile[:5]
    if not A.dtype == B.dtype == C.dtype or C.dtype.name not in ('float32', 'float64') or \
            rm % 4 or rn % 4 or bk % 4:
        return None
    nb, M, N = C.shape
    K = A.shape[2]
    bm, bn, wg = ty * rm, tx * rn, tx * ty
    full = FAST_FULL and K > 0 and not (M % bm or N % bn or K % bk)
    a_kfast, b_nfast = blocking(tile, A, B)[5:]
    a_sm, a_sk = _elem_strides(A)[1:]
    b_sk, b_sn = _elem_strides(B)[1:]
    # (fast stride, the other one, the size along the fast axis)
    fa = (a_sk, a_sm, K) if a_kfast else (a_sm, a_sk, M)
    fb = (b_sn, b_sk, N) if b_nfast else (b_sk, b_sn, K)
    va = FAST_VECTOR and fa[0] == 1 and fa[1] % 4 == 0 and fa[2] % 4 == 0 and \
        (bm * bk) % (4 * wg) == 0
    vb = FAST_VECTOR and fb[0] == 1 and fb[1] % 4 == 0 and fb[2] % 4 == 0 and \
        (bn * bk) % (4 * wg) == 0
    return tile[5] == FAST_DOUBLE, full, va, vb


def register_blocking(dev, A, B, C):
    """The register-blocked shape for this product (see kernel_source), or None for the
    TS x TS kernel (complex values, small products, small work-groups)."""
    nb, M, N = C.shape
    K = A.shape[2]
    if C.dtype.kind == 'c' or dev.max_work_group_size < 256 or min(M, N) < RB_MIN_SIDE or \
            not _gpu_shapes(dev):
        return None
    if nb * M * N * K <= RB_MIN_MACS and not _k_major(A):
        return None
    tile = RB_TILES[0]
    if K < 2 * RB_SPLIT_CHUNK:
        # no split: the largest tile that still gives every compute unit a work-group
        for tile in RB_TILES:
            tx, ty, rm, rn = tile
            if nb * -(-M // (ty * rm)) * -(-N // (tx * rn)) >= dev.compute_units:
                break
    return blocking(tuple(tile) + (RB_DEPTH,), A, B)


def _gpu_shapes(dev):
    """Whether the kernel takes its GPU shapes (register-blocked, split sums) here."""
    return dev.is_gpu or GPU_SHAPES_ON_CPU


def _elem_strides(d):
    return [s // d.itemsize for s in d.strides]


def _index_type(A, B, C):
    """'int' where every offset within a register-blocked tile (``mm * a_sm + k * a_sk``,
    ``k * b_sk + nn * b_sn``) and the sizes fit 32 bits, else 'long'."""
    nb, M, N = C.shape
    K = A.shape[2]
    a_sm, a_sk = _elem_strides(A)[1:]
    b_sk, b_sn = _elem_strides(B)[1:]
    reach = max(abs(a_sm) * M + abs(a_sk) * K, abs(b_sk) * K + abs(b_sn) * N, M, N, K)
    return 'int' if reach < 1 << 31 else 'long'


#: ``plan_kernel``'s tile when the product takes the built-in one (``register_blocking``)
AUTO = 'auto'


def plan_kernel(ctx, A, B, C, alpha, beta, Z, epilogue=None, tile=AUTO):
    """Record the tiled kernel's launch(es). ``epilogue``: the consumer's (impl, input
    index, inputs and output as 3-d views of C's geometry), computed in the store of C
    (``Epilogue.views_for``): C is then never stored. ``tile``: (TX, TY, RM, RN, BK),
    with a 6th element the variant of ``fast_variant`` where it applies, or None (the TS x
    TS kernel) in place of the built-in choice (tuned, or a candidate the tuner measures)."""
    ts = 16 if ctx.dev.max_work_group_size >= 256 else 8
    rb = register_blocking(ctx.dev, A, B, C) if tile is AUTO else blocking(tile, A, B)
    split = split_sum(ctx.dev, C, A.shape[2], ts, rb)
    fast = None if tile is AUTO else fast_variant(tile, A, B, C)
    akind = 'one' if alpha.kind == 'one' or (alpha.kind == 'const' and alpha.value == 1) else 'ptr'
    bkind = beta.kind if beta.kind in ('one', 'none') else (
        'one' if beta.kind == 'const' and beta.value == 1 else 'ptr')
    epi = eviews = None
    if epilogue is not None:
        epi, eviews, e_out = gemm_small.epilogue_key(epilogue)
    src, name = kernel_source(A.dtype.name, B.dtype.name, C.dtype.name,
                              akind, alpha.darr.dtype.name if akind == 'ptr' else None,
                              bkind, beta.darr.dtype.name if bkind == 'ptr' else None, ts, rb,
                              split is not None, _index_type(A, B, C) if rb else 'long', epi,
                              fast)
    acc = _acc_type(C.dtype)
    if epilogue is not None:
        C = e_out           # C's place holds the consumer's output (C's geometry)
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
    for d in eviews or ():
        args.append(d)
        args.extend(np.int64(s) for s in _elem_strides(d))
    # what the launches touch: Z (and the epilogue's inputs) are read at the element of C
    # the work-item stores
    scalars = [x.darr for x, kind in ((alpha, akind), (beta, bkind)) if kind == 'ptr']
    zs = ([Z] if bkind != 'none' else []) + list(eviews or ())
    if rb is not None:
        tx, ty, rm, rn = rb[:4]
        grid, local = (-(-N // (tx * rn)) * tx, -(-M // (ty * rm)) * ty), (tx, ty, 1)
    else:
        grid, local = (-(-N // ts) * ts, -(-M // ts) * ts), (ts, ts, 1)
    reads = [A, B] + zs + scalars
    if split is not None:
        # the chunks' partial products (accumulator type), then the launch adding them
        S, KC = split
        P = ctx.alloc((nb * S, M, N), 'float32' if acc == 'float' else 'float64')
        args += [np.int64(S), np.int64(KC), P]
        ctx.launch(prg, name, grid + (nb * S,), local, args, reads=[A, B], writes=[P])
        name += '_sum'
        reads = [P] + zs + scalars
        grid, local = (-(-N // ts) * ts, -(-M // ts) * ts), (ts, ts, 1)
    ctx.launch(prg, name, grid + (nb,), local, args, reads=reads, writes=[C], pointwise=zs)


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
        backend = self.backend
        if backend == 'clblast' and _forced() is None:
            backend = 'clblast; the tiled kernel up to %dM multiply-adds' % (
                KERNEL_MAX_MACS // 10 ** 6)
        return '%s (%s)' % (type(self.node.op).__name__, backend)

    def scalar(self, j, darr):
        return Scalar.of(self.node.inputs[j], darr)

    def host_work(self, values):
        """Whether, for its input ``values`` (host arrays, in the node's order), the device
        runs this node's product by the host's BLAS (the 'host' backend, too large for the
        small kernel; ``runtime/cost.py``: ``host_work``). Not counted: the larger products
        a device of one compute unit queues on PoCL's thread."""
        if self.backend != 'host' or _forced() is not None:
            return False
        try:
            nb, m, n, k = self.product_shape([np.shape(v) for v in values])
        except (TypeError, IndexError, ValueError):
            return False
        if gemm_small.small_shape(nb, m, n, k):
            return False
        return nb * m * n * k <= ONE_THREAD_MACS or self.dev.compute_units > 1

    def host_work_seconds(self, values):
        """The seconds the device's product takes on the host (:meth:`host_work`): up to
        ``ONE_THREAD_MACS``, timed on one thread as it runs there; None above it, where it
        runs on OpenBLAS's threads as Theano's VM did (the host run's time counts)."""
        nb, m, n, k = self.product_shape([np.shape(v) for v in values])
        if nb * m * n * k > ONE_THREAD_MACS:
            return None
        from .blas_host import one_thread_seconds
        return one_thread_seconds(self.node.outputs[0].type.dtype, nb, m, n, k)

    def product_shape(self, shapes):
        """(batch, M, N, K) of the product, from the inputs' shapes."""
        x, y = shapes[0], shapes[1]
        return 1, (x[0] if len(x) == 2 else 1), (y[1] if len(y) == 2 else 1), x[-1]

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
    takes_epilogue = True       # an elementwise consumer (the small and the tiled kernel compute it)

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

    def product_shape(self, shapes):
        return BlasImpl.product_shape(self, shapes[2:4])

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

    def product_shape(self, shapes):
        return 1, shapes[2][0], 1, shapes[2][1]

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

    def product_shape(self, shapes):
        return 1, shapes[2][0], shapes[3][0], 1

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

    def product_shape(self, shapes):
        x, y = shapes[0], shapes[1]
        return x[0], (x[1] if len(x) == 3 else 1), (y[2] if len(y) == 3 else 1), x[-1]

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
