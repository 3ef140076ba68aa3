"""The CLBlast backend of ``blas.plan_gemm`` (GPUs with ``pyclblast`` installed): one
CLBlast call per product on the operands' buffers, and the tuned kernel parameters.

CLBlast takes its kernel parameters from a database keyed by device; where
``bench/clblast_tune.py`` measured a faster set on a device (``clblast_tuned.json``: the
H100, which CLBlast 1.5 has no entry for, 29.8 -> 37.7 TFLOP/s for SGEMM 4096), it is
applied once per device before the first CLBlast call (``pyclblast.override_parameters``,
for this process; ``THEANO_OCL_CLBLAST_TUNED=0`` keeps CLBlast's own choice). Parameters
that ``python -m theano_ocl tune`` found on this very device (``ops/gemm_tune.py``) are
applied after those, unless the ``tune`` setting is 'off'.
"""
import json
import os

import numpy as np

from .. import scalar as oscalar
from ..runtime import settings
from . import gemm_tune
from .blas_operands import matrix_layout
from .elemwise import plan_elementwise


def load_pyclblast():
    """pyclblast, or None where it is not installed."""
    try:
        import pyclblast
    except ImportError:
        return None
    return pyclblast


TUNED_FILE = os.path.join(os.path.dirname(__file__), '..', 'clblast_tuned.json')
_tuned = {}     # device pointer -> the entries applied (for tests and bench/gemm.py)
_stored = {}    # (device pointer, precision) -> the tuned parameters applied from gemm_tune


def clblast_tuning(dev):
    """Apply, once per device, the CLBlast parameters ``clblast_tuned.json`` lists for a
    device of this exact name, then those tuned on this device (``gemm_tune``; each set
    once, not under the ``tune`` setting 'off'); returns the entries applied (empty where
    none)."""
    key = dev.device.int_ptr
    if key not in _tuned:
        _tuned[key] = _apply_table(dev)
    applied = _tuned[key]
    pyclblast = load_pyclblast()
    if pyclblast is not None and settings.current().tune != 'off':
        for precision, params in gemm_tune.clblast_params(dev).items():
            if _stored.get((key, precision)) != params:
                override(dev, precision, params)
                applied.append(dict(kernel='Xgemm', precision=precision, params=params,
                                    source=gemm_tune.tuning_file()))
    return applied


def override(dev, precision, params):
    """CLBlast's Xgemm of ``precision`` bits takes ``params`` on ``dev`` for the rest of
    the process (the tuner's candidates, the tuned set)."""
    load_pyclblast().override_parameters(dev.device, 'Xgemm', precision, params)
    _stored[dev.device.int_ptr, precision] = params


def _apply_table(dev):
    applied = []
    pyclblast = load_pyclblast()
    if pyclblast is None or os.environ.get('THEANO_OCL_CLBLAST_TUNED', '1') == '0':
        return applied
    with open(TUNED_FILE) as fh:
        table = json.load(fh)
    for name, entries in sorted(table.items()):
        kernel, precision = name[:-2], int(name[-2:])      # 'Xgemm32' -> Xgemm, 32-bit
        for e in entries:
            if e['device'] == dev.name:
                pyclblast.override_parameters(dev.device, kernel, precision, e['params'])
                applied.append(dict(e, kernel=kernel, precision=precision))
    return applied


def _root_nbytes(root):
    size = getattr(root.buf, 'size', None) or getattr(root.buf, 'int_size', None)
    end = root.origin + root.nbytes
    return int(min(end, size) if size else end)


def plan_clblast(ctx, A, B, C, alpha, beta, Z):
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
    pyclblast = load_pyclblast()
    clblast_tuning(ctx.dev)
    nb = C.shape[0]
    if beta.kind == 'none':
        Z = None
    ops = []
    for d in (A, B):
        lay = matrix_layout(d)
        if lay is None or (nb > 1 and d.strides[0] < 0):
            tmp = ctx.alloc(d.shape, d.dtype)
            ctx.copy(tmp, d)
            d = tmp
            lay = matrix_layout(d)
        ops.append((d, lay))
    (A, (ta, lda)), (B, (tb, ldb)) = ops
    static_alpha = alpha.kind in ('one', 'const')
    static_beta = beta.kind in ('none', 'one', 'const')
    lay_c = matrix_layout(C)
    out = C
    if lay_c is None or (nb > 1 and C.strides[0] < 0) or not static_alpha or not static_beta:
        # C = alpha * out (+ beta * Z) afterwards, reading device scalars on the device
        out = ctx.alloc(C.shape, C.dtype)
        lay_c = matrix_layout(out)
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
