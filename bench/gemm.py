"""SGEMM n x n x n: theano_ocl vs the reference library called directly vs Theano C.

theano_ocl computes ``T.dot(A, B)`` of two float32 shared variables resident on the
device, with the result kept on the device (``OCLMode(outputs='device')``): what is
timed is the BLAS backend ``ops/blas.py`` picks (CLBlast on GPUs, host BLAS on mapped
buffers on CPU devices, else the tiled kernel). The reference is CLBlast through pyclblast
on the same buffers (GPU), or ``numpy.dot`` into a preallocated array (CPU). Theano C runs
in the same process. ``--backend`` forces the theano_ocl backend (host, kernel, clblast).
"""
import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

from theano_ocl.ops import blas
from common import parser, median_time, header, table

p = parser(__doc__)
p.add_argument('--n', type=int, default=4096)
p.add_argument('--calls', type=int, default=3, help='calls per timed repeat')
p.add_argument('--backend', default=None, choices=['host', 'kernel', 'clblast'])
args = p.parse_args()

n = args.n
dev = theano_ocl.get_device(args.device)
blas.FORCE_BACKEND = args.backend
backend = blas.choose_backend(dev, ['float32', 'float32'])
header('SGEMM %d^3, theano_ocl backend %r' % (n, backend), dev)
rng = np.random.RandomState(0)
a = rng.rand(n, n).astype('float32')
b = rng.rand(n, n).astype('float32')
flops = 2.0 * n ** 3


def timed(fn, finish=None):
    def run():
        for _ in range(args.calls):
            fn()
        if finish is not None:
            finish()
    return median_time(run, args.repeat) / args.calls


rows = []
A, B = theano.shared(a, 'A'), theano.shared(b, 'B')
f_ocl = theano.function([], T.dot(A, B), mode=theano_ocl.OCLMode(device=args.device, outputs='device'))
assert not theano_ocl.fallback_nodes(f_ocl)
out = f_ocl()
want = a[:64].dot(b)
np.testing.assert_allclose(out.get()[:64], want, rtol=1e-3)
rows.append(dict(variant='theano_ocl (%s)' % backend, seconds=timed(f_ocl, dev.queue.finish)))

if dev.is_gpu and blas._pyclblast() is not None:
    import pyclblast
    import pyopencl.array as cla
    da, db = cla.to_device(dev.queue, a), cla.to_device(dev.queue, b)
    dc = cla.empty(dev.queue, (n, n), np.float32)

    def ref():
        pyclblast.gemm(dev.queue, n, n, n, da, db, dc, n, n, n)
    rows.append(dict(variant='CLBlast (pyclblast)', seconds=timed(ref, dev.queue.finish)))
else:
    c = np.empty((n, n), np.float32)
    rows.append(dict(variant='numpy.dot (host BLAS)', seconds=timed(lambda: np.dot(a, b, out=c))))

f_c = theano.function([], T.dot(A, B), mode='FAST_RUN')
rows.append(dict(variant='Theano C', seconds=timed(f_c)))

ref_s, c_s = rows[1]['seconds'], rows[2]['seconds']
for r in rows:
    r['GFLOP/s'] = flops / r['seconds'] / 1e9
    r['x reference'] = ref_s / r['seconds']
    r['x Theano C'] = c_s / r['seconds']
table(rows, ['variant', 'seconds', 'GFLOP/s', 'x reference', 'x Theano C'])
