"""Device time of the tiled GEMM kernel's shapes on given product sizes, against CLBlast.

For each product (float32, M x N x K, A and/or B transposed as in the models that make
it) the script renders ``kernels/gemm.cl.mako`` through ``ops/blas.kernel_source`` in every
shape the planner can take: the one-element-per-work-item TS x TS kernel, and each
register-blocked tile of ``blas.RB_TILES`` whole and over 2, 4 or 8 chunks of the sum (with
32-bit offsets within a tile, and the largest tile with 64-bit ones too), and times each
by OpenCL profiling events (both launches where the sum is split): device time, no host
cost. CLBlast (GPUs with pyclblast) is timed by the wall clock around one call up to a
queue finish (its event is its last kernel's only), so its row holds its host time too;
that host part is printed beside it. ``*`` marks the shape ``ops/blas.py`` picks for this
device (``register_blocking``, ``split_sum``), ``=`` the backend it picks where that is not
the kernel. Every result is compared with numpy's (float64) product.

    python bench/gemm_shapes.py [--device gpu] [--repeat 20] [--set mlp|models|cubes|all]

The default shapes are the MLP benchmark's products (784-1000-1000-10, batch 256), the
LSTM's and LeNet's larger ones, and cubes from 1024 to 4096.
"""
import sys
import time

import numpy as np
import pyopencl as cl

import theano_ocl
from theano_ocl.ops import blas
from common import parser, header

SETS = dict(
    mlp=[('MLP x @ W1', 256, 1000, 784, False, False),
         ('MLP h1 @ W2', 256, 1000, 1000, False, False),
         ('MLP d2 @ W2.T', 256, 1000, 1000, False, True),
         ('MLP h1.T @ d2', 1000, 1000, 256, True, False),
         ('MLP x.T @ d1', 784, 1000, 256, True, False)],
    models=[('LSTM h @ W (a step)', 64, 1024, 256, False, False),
            ('LSTM X @ W (all steps)', 3200, 1024, 256, False, False),
            ('LSTM X.T @ dG', 256, 1024, 3200, True, False),
            ('LeNet dense 128x500x800', 128, 500, 800, False, False),
            ('8192x50x500', 8192, 50, 500, False, False)],
    cubes=[('1024^3', 1024, 1024, 1024, False, False),
           ('2048^3', 2048, 2048, 2048, False, False),
           ('4096^3', 4096, 4096, 4096, False, False)])
SETS['all'] = SETS['mlp'] + SETS['models'] + SETS['cubes']

p = parser(__doc__)
p.add_argument('--set', default='all', choices=sorted(SETS))
p.set_defaults(repeat=20)
args = p.parse_args()
dev = theano_ocl.get_device(args.device)
header('GEMM kernel shapes against CLBlast (float32, device time; CLBlast: wall)', dev)
ctx = dev.context
q = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
L = np.int64
rng = np.random.RandomState(0)


class View(object):
    """What register_blocking / split_sum read of an operand: shape, strides, dtype."""

    def __init__(self, shape, strides):
        self.shape, self.dtype, self.itemsize = shape, np.dtype('float32'), 4
        self.strides = tuple(4 * s for s in strides)


def timed(launch):
    for _ in range(3):
        launch()
    q.finish()
    ts = []
    for _ in range(args.repeat):
        evs = launch()
        q.finish()
        ts.append(sum(e.profile.end - e.profile.start for e in evs) * 1e-9)
    return sorted(ts)[len(ts) // 2]


def kernel_launch(rb, S, it, M, N, K, st, bufs):
    a_sm, a_sk, b_sk, b_sn = st
    if rb is not None:
        rb = tuple(rb) + (blas.RB_DEPTH, abs(a_sk) < abs(a_sm), abs(b_sn) <= abs(b_sk))
    src, name = blas.kernel_source('float32', 'float32', 'float32', 'one', None, 'none', None,
                                   16, rb, S > 1, it)
    prg = cl.Program(ctx, src).build()
    ab, bb, cb = bufs
    kargs = [L(M), L(N), L(K), ab, L(0), L(0), L(a_sm), L(a_sk), bb, L(0), L(0), L(b_sk),
             L(b_sn), cb, L(0), L(0), L(N), L(1)]
    keep = [prg]
    if S > 1:
        KC = -(-K // S)
        KC = -(-KC // 16) * 16
        S = -(-K // KC)
        P = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, S * M * N * 4)
        keep.append(P)
        kargs += [L(S), L(KC), P, L(0)]
    kern = getattr(prg, name)
    kern.set_args(*kargs)
    if rb:
        tx, ty, rm, rn = rb[:4]
        gs, ls = (-(-N // (tx * rn)) * tx, -(-M // (ty * rm)) * ty, S), (tx, ty, 1)
    else:
        gs, ls = (-(-N // 16) * 16, -(-M // 16) * 16, S), (16, 16, 1)
    launches = [(kern, gs, ls)]
    if S > 1:
        ks = getattr(prg, name + '_sum')
        ks.set_args(*kargs)
        launches.append((ks, (-(-N // 16) * 16, -(-M // 16) * 16, 1), (16, 16, 1)))

    def launch(keep=keep):
        return [cl.enqueue_nd_range_kernel(q, k, g, l) for k, g, l in launches]
    return launch, S


def clblast_call(M, N, K, at, bt, bufs, shapes):
    import pyopencl.array as cla
    import pyclblast
    ab, bb, cb = bufs
    A = cla.Array(q, shapes[0], 'float32', data=ab)
    B = cla.Array(q, shapes[1], 'float32', data=bb)
    C = cla.Array(q, (M, N), 'float32', data=cb)

    def call():
        pyclblast.gemm(q, M, N, K, A, B, C, a_ld=M if at else K, b_ld=K if bt else N, c_ld=N,
                       a_transp=at, b_transp=bt)
    for _ in range(3):
        call()
    q.finish()
    wall, host = [], []
    for _ in range(args.repeat):
        q.finish()
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        q.finish()
        wall.append(time.perf_counter() - t0)
        host.append(t1 - t0)
    return sorted(wall)[len(wall) // 2], sorted(host)[len(host) // 2]


try:
    from theano_ocl.ops.blas_clblast import load_pyclblast
    have_clblast = dev.is_gpu and load_pyclblast() is not None
except ImportError:
    have_clblast = False

for title, M, N, K, at, bt in SETS[args.set]:
    a = rng.rand(K, M).astype('float32') if at else rng.rand(M, K).astype('float32')
    b = rng.rand(N, K).astype('float32') if bt else rng.rand(K, N).astype('float32')
    ref = (a.T if at else a).astype('f8') @ (b.T if bt else b).astype('f8')
    mf = cl.mem_flags
    bufs = (cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a),
            cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b),
            cl.Buffer(ctx, mf.READ_WRITE, M * N * 4))
    st = ((1, M) if at else (K, 1)) + ((1, K) if bt else (N, 1))
    # what the planner picks on this device
    Av, Bv, Cv = (View((1, M, K), (0,) + st[:2]), View((1, K, N), (0,) + st[2:]),
                  View((1, M, N), (0, N, 1)))
    rb = blas.register_blocking(dev, Av, Bv, Cv)
    split = blas.split_sum(dev, Cv, K, 16, rb)
    pick = (rb[:4] if rb else None, split[0] if split else 1)
    backend = 'clblast' if have_clblast and blas.takes_clblast(dev, Av, Bv, Cv) else 'kernel'
    combos = [(None, 1, 'long')]
    if pick[0] is None and pick[1] > 1:
        combos.append((None, pick[1], 'long'))
    for tile in blas.RB_TILES:
        for S in sorted({1, 2, 4, 8} | ({pick[1]} if tile == pick[0] else set())):
            if S == 1 or K >= 2 * blas.RB_SPLIT_CHUNK:
                combos.append((tile, S, 'int'))
    combos.append((blas.RB_TILES[0], 1, 'long'))
    rows = []
    for tile, S, it in combos:
        launch, S_used = kernel_launch(tile, S, it, M, N, K, st, bufs)
        t = timed(launch)
        out = np.empty((M, N), 'float32')
        cl.enqueue_copy(q, out, bufs[2])
        ok = np.allclose(out, ref, rtol=1e-4, atol=1e-5 * K)
        chosen = backend == 'kernel' and (tile, S) == pick and (tile is None or it == 'int')
        rows.append((t, '%s%s %-12s S=%d %s' % ('*' if chosen else ' ', '' if ok else ' WRONG',
                     'TS 16x16' if tile is None else '%dx%d/item' % tile[2:], S_used, it)))
    if have_clblast:
        wall, host = clblast_call(M, N, K, at, bt, bufs, (a.shape, b.shape))
        C_out = np.empty((M, N), 'float32')
        cl.enqueue_copy(q, C_out, bufs[2])
        ok = np.allclose(C_out, ref, rtol=1e-4, atol=1e-5 * K)
        rows.append((wall, '%s%s CLBlast (wall; host part %.1f us)' % (
            '=' if backend == 'clblast' else ' ', '' if ok else ' WRONG', host * 1e6)))
    print('\n%s: %d x %d x %d%s%s' % (title, M, N, K, ', A transposed' if at else '',
                                      ', B transposed' if bt else ''))
    flops = 2.0 * M * N * K
    for t, label in sorted(rows):
        print('  %9.1f us  %6.2f TFLOP/s  %s' % (t * 1e6, flops / t * 1e-12, label))
    if any('WRONG' in r[1] for r in rows):
        sys.exit('a result differs from numpy\'s')
