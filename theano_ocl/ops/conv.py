"""Convolution family: ``CorrMM``, ``CorrMM_gradWeights``, ``CorrMM_gradInputs``
(theano/tensor/nnet/corr.py), the ops Theano's optimizer leaves for ``conv2d`` and its
gradients on a CPU build. ``conv2d(filter_flip=True)`` reaches them as a correlation with a
flipped kernel: a negative-stride Subtensor view, which the kernels read as it is.

Two algorithms, both from ``kernels/conv.cl.mako``:

- ``'direct'``: one work-item per output element, looping over channels and the kernel
  window (forward), over batch and output positions (weights), or over filters and the taps
  that reach an input position (inputs: gathered, no atomics). Any dtype the device has.
- ``'gemm'``: im2col into a column matrix ``col[(c, kh, kw), (n, oh, ow)]``, then one
  batched GEMM over the groups through the BLAS family's ``plan_gemm`` (CLBlast on GPUs,
  the host BLAS on mapped buffers for CPU devices), with transposing copies between the
  (f, n, p) layout the GEMM gives and takes and the (n, f, p) layout of the tensors, and
  col2im (a gather; on CPU devices a work-item per tile of a row, ``ROWS_TILES``) for the
  input gradient. float32/float64 only.

``choose_algorithm`` picks per device and dtype: 'gemm' wherever ``plan_gemm`` has a BLAS
backend ('host' or 'clblast'), 'direct' elsewhere; measured on PoCL (2-core CPU) with
bench/lenet.py. The ``conv`` setting (``OCLMode(conv=...)``, ``$THEANO_OCL_CONV``)
overrides it; tests run both.
``report(f)`` shows the choice per node.

Shapes, kernel size, padding and the errors follow the C code's ``c_code_helper`` and
``corrMM`` (the same ValueError messages for impossible or inconsistent shapes). The
unshared variant (``unshared=True``) stays on the host.

The legacy ``theano.tensor.nnet.conv.ConvOp`` (``conv.conv2d``; its gradients are ConvOps
too) runs as ``CorrMM`` of its kernel read flipped, with the C code's shape checks; the
zero-inserted "logical" shapes of the strided gradients are built on the device first.
"""

import numpy as np
from theano.tensor.nnet import conv as tconv
from theano.tensor.nnet import corr as tcorr

from .. import scalar as oscalar
from .. import kernels
from ..errors import NoDeviceImplementation
from ..runtime import settings
from ..runtime.plans import launch_geometry, planes_local
from .base import DeviceImpl
from .blas import choose_backend, plan_gemm
from .registry import implemented_by, ocl_impl

ALGORITHMS = ('direct', 'gemm')


def choose_algorithm(dev, dtype):
    """('gemm', BLAS path) or ('direct', None); the ``conv`` setting forces one."""
    forced = settings.current().conv
    blas = choose_backend(dev, [dtype])
    if forced == 'gemm' or (forced is None and blas in ('host', 'clblast')):
        return 'gemm', blas
    return 'direct', None


# --------------------------------------------------------------------------- geometry
def _floordiv(a, b):
    return a // b       # Python's floor division: what the C code's _CONV_FLOORDIV_X gives


def _pads(pad, dil_k):
    """The C code's auto-padding: -1 half, -2 full, else the explicit (left, right)."""
    lo, hi = pad
    if lo == -1 or hi == -1:
        return dil_k // 2, dil_k // 2
    if lo == -2 or hi == -2:
        return dil_k - 1, dil_k - 1
    if lo < -2 or hi < -2:
        raise ValueError('BaseCorrMM: pad must be >= -2')
    return lo, hi


def _shapes_msg(what, b, w, t):
    return ('%s\n  bottom shape: %s\n  weights shape: %s\n  top shape: %s\n'
            % (what, ' x '.join(map(str, b)), ' x '.join(map(str, w)), ' x '.join(map(str, t))))


class Geometry(object):
    """Sizes of one correlation: bottom (N, C, H, W), weights (F, C / G, KH, KW),
    top (N, F, OH, OW), padding (PT, PB, PL, PR); checked as ``corrMM`` checks them."""

    def __init__(self, op, bottom, weights, top, kind):
        self.N, self.C, self.H, self.W = bottom
        self.F, cg, self.KH, self.KW = weights
        dH, dW = op.subsample
        dilH, dilW = op.filter_dilation
        self.PT, self.PB = _pads(op.pad[0], (self.KH - 1) * dilH + 1)
        self.PL, self.PR = _pads(op.pad[1], (self.KW - 1) * dilW + 1)
        G = op.num_groups
        if self.C != cg * G:
            raise ValueError('CorrMM images and kernel must have the same stack size\n')
        if self.F % G:
            raise ValueError('CorrMM the number of filters must be divisible by the number '
                             'of groups\n')
        oh = _floordiv(self.H + self.PT + self.PB - ((self.KH - 1) * dilH + 1), dH) + 1
        ow = _floordiv(self.W + self.PL + self.PR - ((self.KW - 1) * dilW + 1), dW) + 1
        if top is not None and tuple(top) != (self.N, self.F, oh, ow):
            raise ValueError('CorrMM shape inconsistency:\n  bottom shape: %d %d %d %d\n'
                             '  weight shape: %d %d %d %d\n  top shape: %d %d %d %d '
                             '(expected %d %d %d %d)\n'
                             % (tuple(bottom) + tuple(weights) + tuple(top)
                                + (self.N, self.F, oh, ow)))
        self.OH, self.OW = oh, ow
        self.kind = kind

    def params(self, op):
        dH, dW = op.subsample
        dilH, dilW = op.filter_dilation
        return dict(G=op.num_groups, kH=self.KH, kW=self.KW, dH=dH, dW=dW, dilH=dilH,
                    dilW=dilW, padT=self.PT, padL=self.PL)

    def sizes(self):
        return [np.int64(v) for v in (self.N, self.C, self.H, self.W, self.F, self.OH, self.OW)]


def forward_geometry(op, bottom, weights):
    dH, dW = op.subsample
    dilH, dilW = op.filter_dilation
    F, _, KH, KW = weights
    pt, pb = _pads(op.pad[0], (KH - 1) * dilH + 1)
    pl, pr = _pads(op.pad[1], (KW - 1) * dilW + 1)
    oh = _floordiv(bottom[2] + pt + pb - ((KH - 1) * dilH + 1), dH) + 1
    ow = _floordiv(bottom[3] + pl + pr - ((KW - 1) * dilW + 1), dW) + 1
    top = (bottom[0], F, oh, ow)
    if oh <= 0 or ow <= 0:
        raise ValueError(_shapes_msg('CorrMM: impossible output shape', bottom, weights, top))
    return Geometry(op, bottom, weights, None, 'forward')


def weights_geometry(op, bottom, top, height, width):
    dH, dW = op.subsample
    dilH, dilW = op.filter_dilation
    (ptl, ptr), (pll, plr) = op.pad
    if height is not None:
        kH = int(height)
    elif ptl == -2 or ptr == -2:
        kH = int((2 - bottom[2] + (top[2] - 1) * dH - 1) / dilH) + 1
    else:
        kH = int((bottom[2] + ptl + ptr - (top[2] - 1) * dH - 1) / dilH) + 1
    if width is not None:
        kW = int(width)
    elif pll == -2 or plr == -2:
        kW = int((2 - bottom[3] + (top[3] - 1) * dW - 1) / dilW) + 1
    else:
        kW = int((bottom[3] + pll + plr - (top[3] - 1) * dW - 1) / dilW) + 1
    weights = (top[1], bottom[1] // op.num_groups, kH, kW)
    if weights[2] <= 0 or weights[3] <= 0:
        raise ValueError(_shapes_msg('CorrMM backprop wrt. weights: impossible output shape',
                                     bottom, weights, top))
    return Geometry(op, bottom, weights, top, 'weights')


def inputs_geometry(op, weights, top, height, width):
    dH, dW = op.subsample
    dilH, dilW = op.filter_dilation
    pt, pb = _pads(op.pad[0], (weights[2] - 1) * dilH + 1)
    pl, pr = _pads(op.pad[1], (weights[3] - 1) * dilW + 1)
    h = int(height) if height is not None else \
        (top[2] - 1) * dH + (weights[2] - 1) * dilH + 1 - pt - pb
    w = int(width) if width is not None else \
        (top[3] - 1) * dW + (weights[3] - 1) * dilW + 1 - pl - pr
    bottom = (top[0], weights[1] * op.num_groups, h, w)
    if h <= 0 or w <= 0:
        raise ValueError(_shapes_msg('CorrMM backprop wrt. inputs: impossible output shape',
                                     bottom, weights, top))
    return Geometry(op, bottom, weights, top, 'inputs')


# --------------------------------------------------------------------------- launches
def _strided(d):
    return [d] + [np.int64(s // d.itemsize) for s in d.strides]


#: on CPU devices col2im runs as 'col2im_rows': a work-item sums the taps of a tile of
#: consecutive elements of a row (the first of these widths that holds the row, else 32),
#: reading each tap's run of col elements in order; the work-groups hold at most
#: ``ROWS_GROUP`` work-items. The input gradient of LeNet's second convolution (col
#: 500 x N*64 float32 into N x 20 x 12 x 12) on the 2-core EPYC's PoCL 3.1 (2026-12-02,
#: its kernel's event in a profiled call): 2.06 -> 0.77 ms at N = 20, 10.4 -> 4.8-6.3 ms
#: at N = 128 (one work-item per element gathers its 25 taps from 25 rows of col). The
#: same sums in the same order. (A row-per-work-item im2col was slower: 2.5 -> 4.0 ms.)
ROWS_TILES = (8, 16, 32)
ROWS_GROUP = 64


def _support(dtype):
    return '#pragma OPENCL EXTENSION cl_khr_fp64 : enable' if dtype == np.float64 else ''


def plan_conv(ctx, kind, geo, op, operands, out):
    """Record one launch of ``kind`` (see the template) writing C-contiguous ``out``;
    ``operands``: the strided inputs of ``kind`` in template order (``col`` for col2im:
    C-contiguous)."""
    if out.size == 0:
        return
    dtype = out.dtype
    extra = {}
    if kind == 'col2im' and ctx.dev.is_cpu:
        kind = 'col2im_rows'
        extra['WT'] = next((t for t in ROWS_TILES if t >= geo.W), ROWS_TILES[-1])
    src, name = kernels.render('conv.cl.mako', 'conv_' + kind, support=_support(dtype), kind=kind,
                               t=oscalar.ctype(dtype), **dict(geo.params(op), **extra))
    args = [np.int64(out.size)] + geo.sizes()
    for d in operands:
        args += [d] if kind.startswith('col2im') else _strided(d)
    args.append(out)
    if kind == 'im2col':       # (ow, oh, n + N * tap): col[(c, kh, kw), (n, oh, ow)]
        gsize = (geo.OW, geo.OH, out.size // (geo.OW * geo.OH))
        lsize = planes_local(ctx.dev, gsize)
    elif kind == 'col2im':     # (w, h, c + C * n)
        gsize = (geo.W, geo.H, out.size // (geo.W * geo.H))
        lsize = planes_local(ctx.dev, gsize)
    elif kind == 'col2im_rows':     # (a tile of WT columns, h, c + C * n)
        gsize = (-(-geo.W // extra['WT']), geo.H, out.size // (geo.W * geo.H))
        lsize = planes_local(ctx.dev, gsize, most=ROWS_GROUP)
    else:
        gsize, lsize = launch_geometry(ctx.dev, out.size)
    ctx.launch(ctx.dev.build(src), name, gsize, lsize, args)


def _copy_rows(ctx, dst, src):
    """``dst[...] = src`` for (A, B, P) views of one dtype. On a CPU device, where runs of
    P elements are contiguous in both, a work-item per run (``kernels/copy_rows.cl.mako``):
    the elementwise copy computes every element's place from its index, 3-7x slower there
    (LeNet's (128, 20, 576) float32 into (20, 128, 576): 2.1 ms against 0.45, the 2-core
    EPYC's PoCL 3.1, 2026-12-02). Elsewhere ``ctx.copy``."""
    isz = dst.itemsize
    if not ctx.dev.is_cpu or dst.dtype != src.dtype or dst.size == 0 or \
            dst.strides[2] != isz or src.strides[2] != isz:
        ctx.copy(dst, src)
        return
    A, B, P = dst.shape
    code, name = kernels.render('copy_rows.cl.mako', 'copy_rows', support=_support(dst.dtype),
                                t=oscalar.ctype(dst.dtype))
    args = [np.int64(A), np.int64(B), np.int64(P)]
    for d in (src, dst):
        args += [d, np.int64(d.strides[0] // isz), np.int64(d.strides[1] // isz)]
    ctx.launch(ctx.dev.build(code), name, (B, A), planes_local(ctx.dev, (B, A), ROWS_GROUP),
               args)


def _fnp(d, geo):
    """A (N, F, OH, OW) C-contiguous array seen as (F, N, OH * OW)."""
    isz = d.itemsize
    return d.view((geo.F, geo.N, geo.OH * geo.OW),
                  (geo.OH * geo.OW * isz, geo.F * geo.OH * geo.OW * isz, isz))


def _grouped(d, G, rows, cols, transposed=False):
    """A C-contiguous (G * rows, cols) matrix as G matrices (rows, cols), or their
    transposes (cols, rows)."""
    isz = d.itemsize
    if transposed:
        return d.view((G, cols, rows), (rows * cols * isz, isz, cols * isz))
    return d.view((G, rows, cols), (rows * cols * isz, cols * isz, isz))


def _im2col(ctx, geo, op, bottom):
    col = ctx.alloc((geo.C * geo.KH * geo.KW, geo.N * geo.OH * geo.OW), bottom.dtype)
    plan_conv(ctx, 'im2col', geo, op, [bottom], col)
    return col


def _top_fnp(ctx, geo, top):
    """The top (gradient) as a C-contiguous (F, N * OH * OW) matrix (a transposing copy)."""
    t = ctx.alloc((geo.F, geo.N, geo.OH, geo.OW), top.dtype)
    s = top.strides
    src = top.view(t.shape, (s[1], s[0], s[2], s[3]))
    P = geo.OH * geo.OW
    if s[3] == top.itemsize and (s[2] == geo.OW * top.itemsize or geo.OH == 1):
        _copy_rows(ctx, t.view((geo.F, geo.N, P), (geo.N * P * t.itemsize, P * t.itemsize,
                                                   t.itemsize)),
                   src.view((geo.F, geo.N, P), (s[1], s[0], s[3])))
    else:
        ctx.copy(t, src)
    return t


# --------------------------------------------------------------------------- the ops
class CorrImpl(DeviceImpl):
    dtypes = ('float32', 'float64')   # as Theano C
    host_when = 'unshared=True (a filter per output position); image and filters of different dtypes'

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.algorithm, self.blas = choose_algorithm(dev, node.outputs[0].type.dtype)
        self.host_inputs = tuple(range(2, len(node.inputs)))    # height, width

    def describe(self):
        if self.algorithm == 'gemm':
            return '%s (im2col + GEMM, %s BLAS)' % (type(self.node.op).__name__, self.blas)
        return '%s (direct kernel)' % type(self.node.op).__name__

    def hw(self, ins):
        if len(ins) > 2:
            return int(np.asarray(ins[2])), int(np.asarray(ins[3]))
        return None, None

    def alloc(self, ctx, shape):
        return ctx.alloc(shape, self.node.outputs[0].type.dtype)

    def forward(self, ctx, op, bottom, weights):
        """``top`` of the correlation ``op`` (its geometry parameters) of two strided inputs."""
        geo = forward_geometry(op, bottom.shape, weights.shape)
        top = self.alloc(ctx, (geo.N, geo.F, geo.OH, geo.OW))
        if top.size == 0 or geo.C == 0:
            return [_zeros(ctx, top)]
        if self.algorithm == 'direct':
            plan_conv(ctx, 'fwd', geo, op, [bottom, weights], top)
            return [top]
        G = op.num_groups
        K = geo.C // G * geo.KH * geo.KW
        col = _im2col(ctx, geo, op, bottom)
        tmp = self.alloc(ctx, (geo.F, geo.N * geo.OH * geo.OW))
        w = ctx.contiguous(weights)
        NP = geo.N * geo.OH * geo.OW
        plan_gemm(ctx, self.blas, _grouped(w, G, geo.F // G, K), _grouped(col, G, K, NP),
                  _grouped(tmp, G, geo.F // G, NP))
        _copy_rows(ctx, _fnp(top, geo), tmp.view((geo.F, geo.N, geo.OH * geo.OW),
                                                 (NP * tmp.itemsize,
                                                  geo.OH * geo.OW * tmp.itemsize,
                                                  tmp.itemsize)))
        return [top]

    def grad_inputs(self, ctx, op, weights, top, height=None, width=None):
        """``bottom`` of the input gradient of the correlation ``op`` (its geometry
        parameters): the full convolution of ``top`` with ``weights``, transposed."""
        geo = inputs_geometry(op, weights.shape, top.shape, height, width)
        out = self.alloc(ctx, (geo.N, geo.C, geo.H, geo.W))
        if out.size == 0 or top.size == 0 or geo.F == 0:
            return [_zeros(ctx, out)]
        if self.algorithm == 'direct':
            plan_conv(ctx, 'gradI', geo, op, [weights, top], out)
            return [out]
        G = op.num_groups
        K = geo.C // G * geo.KH * geo.KW
        NP = geo.N * geo.OH * geo.OW
        t = _top_fnp(ctx, geo, top)
        w = ctx.contiguous(weights)
        col = self.alloc(ctx, (geo.C * geo.KH * geo.KW, NP))
        # col[g] = W[g]^T (K x F/G) @ top[g] (F/G x NP)
        plan_gemm(ctx, self.blas, _grouped(w, G, geo.F // G, K, transposed=True),
                  _grouped(t, G, geo.F // G, NP), _grouped(col, G, K, NP))
        plan_conv(ctx, 'col2im', geo, op, [col], out)
        return [out]


class CorrMMImpl(CorrImpl):
    def plan(self, ctx, ins):
        return self.forward(ctx, self.node.op, *ins)


class CorrGradWeightsImpl(CorrImpl):
    def plan(self, ctx, ins):
        op = self.node.op
        bottom, top = ins[:2]
        geo = weights_geometry(op, bottom.shape, top.shape, *self.hw(ins))
        G = op.num_groups
        out = self.alloc(ctx, (geo.F, geo.C // G, geo.KH, geo.KW))
        if out.size == 0 or top.size == 0:
            return [_zeros(ctx, out)]
        if self.algorithm == 'direct':
            plan_conv(ctx, 'gradW', geo, op, [bottom, top], out)
            return [out]
        K = geo.C // G * geo.KH * geo.KW
        NP = geo.N * geo.OH * geo.OW
        col = _im2col(ctx, geo, op, bottom)
        t = _top_fnp(ctx, geo, top)
        # dW[g] = top[g] (F/G x NP) @ col[g]^T (NP x K)
        plan_gemm(ctx, self.blas, _grouped(t, G, geo.F // G, NP),
                  _grouped(col, G, K, NP, transposed=True), _grouped(out, G, geo.F // G, K))
        return [out]


class CorrGradInputsImpl(CorrImpl):
    def plan(self, ctx, ins):
        return self.grad_inputs(ctx, self.node.op, ins[0], ins[1], *self.hw(ins))


# --------------------------------------------------------------------------- ConvOp
class _ConvOpCorr(object):
    """The correlation parameters (those ``Geometry`` reads) a ``ConvOp`` maps to: its
    subsampling, no dilation, one group, no padding ('valid') or K - 1 each side ('full')."""
    filter_dilation = (1, 1)
    num_groups = 1
    unshared = False

    def __init__(self, convop, pad=True):
        self.subsample = (convop.dx, convop.dy)
        full = (-2, -2)     # _pads: (KH - 1, KH - 1)
        self.pad = (full, full) if convop.out_mode == 'full' and pad else ((0, 0), (0, 0))


#: the C code's checks of the shapes given to ConvOp at build time (ConvOp.c_code)
_HARDCODED = (
    ('number of rows in the filter', 1, 2, lambda op: op.kshp[0]),
    ('number of columns in the filter', 1, 3, lambda op: op.kshp[1]),
    ('image stack size', 0, 1, lambda op: op.imshp[0]),
    ('kernel stack size', 1, 1, lambda op: op.imshp[0]),
    ('number of rows in the image', 0, 2, lambda op: op.imshp[1]),
    ('number of columns in the image', 0, 3, lambda op: op.imshp[2]),
    ('batch size', 0, 0, lambda op: op.bsize),
    ('number of kernels in the filter', 1, 0, lambda op: op.nkern),
)


def check_convop_shapes(op, img_shape, kern_shape):
    """The ValueErrors of ConvOp's C code for run-time shapes that differ from the ones
    the op was built with, or stack sizes that differ."""
    shapes = (img_shape, kern_shape)
    for what, i, axis, value in _HARDCODED:
        v = value(op)
        if v is not None and v != shapes[i][axis]:
            raise ValueError("The hardcoded shape for the %s (%d) isn't the run time shape "
                             "(%d)." % (what, v, shapes[i][axis]))
    if kern_shape[1] != img_shape[1]:
        raise ValueError('the filter stack size (%d) and image stack size (%d) differ'
                         % (kern_shape[1], img_shape[1]))


def _spread(ctx, d, logical, offsets=(0, 0)):
    """``d`` (A, B, h, w) spread over zeros of shape (A, B) + ``logical`` every
    ceil(logical / (h, w)) positions from ``offsets``: ConvOp's logical (zero-inserted)
    image or kernel, as its ``perform`` builds it."""
    A, B, h, w = d.shape
    LH, LW = logical
    rs, cs = -(-LH // h), -(-LW // w)
    ro, co = offsets
    if ro + (h - 1) * rs >= LH or co + (w - 1) * cs >= LW:
        raise ValueError('ConvOp: %s does not fit the logical shape %s' % (d.shape, logical))
    buf = _zeros(ctx, ctx.alloc((A, B, LH, LW), d.dtype))
    s = buf.strides
    ctx.copy(buf.view(d.shape, (s[0], s[1], s[2] * rs, s[3] * cs),
                      offset=buf.offset + ro * s[2] + co * s[3]), d)
    return buf


def _flipped(d):
    """The view of ``d`` (F, C, KH, KW) with both kernel axes reversed (no copy)."""
    s = d.strides
    return d.view(d.shape, (s[0], s[1], -s[2], -s[3]),
                  offset=d.offset + (d.shape[2] - 1) * s[2] + (d.shape[3] - 1) * s[3])


def full_as_grad_inputs(op, img_shape, kern_shape):
    """Whether ConvOp ``op`` runs as ``CorrMM_gradInputs`` rather than a padded ``CorrMM``.

    A 'full' convolution without subsampling is the input gradient of a valid correlation
    whose 'top' is the image and whose weights are the kernel seen as (C, F, KH, KW): its
    columns have F * KH * KW rows over the image positions, against C * KH * KW over the
    (larger) output for the padded forward correlation. The one with fewer is taken (the
    input gradient of a LeNet's first layer, C=20 -> F=1: 12x less on the 2-core CPU).
    """
    N, C, H, W = img_shape
    F, _, KH, KW = kern_shape
    return (op.out_mode == 'full' and (op.dx, op.dy) == (1, 1)
            and F * H * W < C * (H + KH - 1) * (W + KW - 1))


class ConvOpImpl(CorrImpl):
    """``theano.tensor.nnet.conv.ConvOp``: a convolution, i.e. ``CorrMM`` with the kernel
    read flipped (a negative-stride view), 'valid' or 'full' (padding K - 1), subsampled by
    (dx, dy), through the same im2col + GEMM or direct kernels. The logical (zero-inserted)
    image and kernel shapes of the ops ``ConvOp.grad`` builds for strided convolutions are
    materialized on the device first."""
    host_when = ('integer or complex images (Theano C has no ConvOp code for them either); '
                 'logical image or kernel shapes without every shape given at build time')

    def describe(self):
        op = self.node.op
        how = '%s CorrMM of the flipped kernel' % op.out_mode
        if op.out_mode == 'full' and (op.dx, op.dy) == (1, 1):
            how += ', or CorrMM_gradInputs of the kernel where its columns are fewer'
        return '%s: %s' % (CorrImpl.describe(self), how)

    def plan(self, ctx, ins):
        op = self.node.op
        img, kern = ins
        check_convop_shapes(op, img.shape, kern.shape)
        # as ConvOp.perform: a logical size not given is the run-time one
        im_logical = tuple(L if L is not None else n
                           for L, n in zip(op.imshp_logical[1:], img.shape[2:]))
        if im_logical != tuple(img.shape[2:]):
            img = _spread(ctx, img, im_logical)
        kshp = tuple(kern.shape[2:])
        k_logical = tuple(L if L is not None else n for L, n in zip(op.kshp_logical, kshp))
        if k_logical != kshp:
            offsets = (0, 0)
            if not op.kshp_logical_top_aligned:
                offsets = tuple((L - k * r - 1 + r) % r for L, k, r in
                                [(L, k, -(-L // k)) for L, k in zip(k_logical, kshp)])
            kern = _spread(ctx, kern, k_logical, offsets)
        sign = 1 if op.out_mode == 'full' else -1
        dims = [int(np.ceil((n + sign * (k - 1)) / float(d)))
                for n, k, d in zip(im_logical, k_logical, (op.dx, op.dy))]
        if min(dims) <= 0:
            raise ValueError('Output dimensions are not valid %dx%d' % tuple(dims))
        if full_as_grad_inputs(op, img.shape, kern.shape):
            F, C, KH, KW = kern.shape
            s = kern.strides
            weights = kern.view((C, F, KH, KW), (s[1], s[0], s[2], s[3]))
            return self.grad_inputs(ctx, _ConvOpCorr(op, pad=False), weights, img)
        return self.forward(ctx, _ConvOpCorr(op), img, _flipped(kern))


@implemented_by(ConvOpImpl)
def _convop_factory(op, node, dev):
    dtype = node.outputs[0].type.dtype
    if dtype not in ConvOpImpl.dtypes:
        raise NoDeviceImplementation('ConvOp of %s (the device path takes float32/float64)'
                                     % dtype)
    logical = (tuple(op.imshp_logical) != tuple(op.imshp)
               or tuple(op.kshp_logical) != tuple(op.kshp))
    if logical and not op.has_all_shape(op.imshp, op.kshp, op.nkern, op.bsize):
        raise NoDeviceImplementation('ConvOp with logical shapes but not every shape given')
    return ConvOpImpl(node, dev)


ocl_impl.register(tconv.ConvOp)(_convop_factory)


def _zeros(ctx, out):
    """``out`` filled with zeros (empty sums), as the C code's PyArray_FILLWBYTE."""
    from .elemwise import plan_elementwise
    if out.size:
        plan_elementwise(ctx, '', 'o0 = 0;', [out], [], out.shape)
    return out


def _factory(cls):
    @implemented_by(cls)
    def factory(op, node, dev):
        if op.unshared:
            raise NoDeviceImplementation('%s with unshared=True' % type(op).__name__)
        dtype = node.outputs[0].type.dtype
        if dtype not in cls.dtypes or \
                any(v.type.dtype != dtype for v in node.inputs[:2]):
            raise NoDeviceImplementation('%s of %s (Theano C takes float32/float64 only)'
                                         % (type(op).__name__, dtype))
        return cls(node, dev)
    return factory


ocl_impl.register(tcorr.CorrMM)(_factory(CorrMMImpl))
ocl_impl.register(tcorr.CorrMM_gradWeights)(_factory(CorrGradWeightsImpl))
ocl_impl.register(tcorr.CorrMM_gradInputs)(_factory(CorrGradInputsImpl))
