"""Elementwise producers fused into reductions and small products: OCL with fusion, OCL
without (``OCLMode(fuse=False)``) and Theano's C backend, in one process.

    THEANO_FLAGS=blas.ldflags= python bench/fusion.py [--device SPEC] [--sizes 64,512,4096]
                                                      [--reps 20]

Per expression and n (an n x n float32 matrix ``x``, an n-vector ``m``): milliseconds per
call of C, of OCL unfused and fused (inputs and outputs stay on the device), the kernel-only
time of each OCL plan (its launches replayed back to back, one finish), launches per call,
and the fused / unfused ratios. The decision the VM makes per call (``fuse_pays`` in
ops/reduce.py: a fused reduction runs the generic kernel, an unfused one the fast paths)
is what is timed: set ``--force`` to fuse whatever the size.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import theano_ocl  # noqa: E402  first: makes Theano importable on numpy >= 1.22
import theano  # noqa: E402
import theano.tensor as T  # noqa: E402

from reduce import kernel_time, median_time  # noqa: E402  (bench/reduce.py)


def cases():
    x = T.matrix('x', dtype='float32')
    m = T.vector('m', dtype='float32')
    A = T.matrix('A', dtype='float32')
    return [
        ('sum((x-m)^2, 1)', [x, m], T.sum((x - m) ** 2, axis=1)),
        ('sum(exp(x), 0)', [x, m], T.sum(T.exp(x), axis=0)),
        ('max|x-m|', [x, m], T.max(abs(x - m))),
        ('argmax(2x+m, 1)', [x, m], T.argmax(x * 2 + m, axis=1)),
        ('mean(tanh(x))', [x, m], T.mean(T.tanh(x))),
        ('dot(A[:8], tanh(m)*m)', [A, m], T.dot(A[:8], T.tanh(m) * m)),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device', default=None, help="device spec ('P:D', 'gpu', 'cpu', name)")
    ap.add_argument('--sizes', default='64,512,2048')
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--force', action='store_true', help='fuse reductions of any size')
    args = ap.parse_args()
    from theano_ocl.ops import reduce as ocl_reduce
    if args.force:
        ocl_reduce.fuse_pays = lambda *args: True
    import pyopencl.array as cla
    dev = theano_ocl.get_device(args.device)
    queue = dev.queue
    print('device: %s (%s); float32; %s%s' % (dev.name, dev.platform_name,
                                               time.strftime('%Y-%m-%d'),
                                               '; --force' if args.force else ''))
    print('%-22s %6s %9s %9s %9s %8s %9s %9s %8s %6s %6s' % (
        'case', 'n', 'C ms', 'unfused', 'fused', 'gain', 'k unf ms', 'k fus ms', 'k gain',
        'l unf', 'l fus'))
    rng = np.random.RandomState(0)
    for n in [int(s) for s in args.sizes.split(',')]:
        for name, ins, out in cases():
            host = [rng.rand(*([n] * v.ndim)).astype('float32') for v in ins]
            dvals = [cla.to_device(queue, h) for h in host]
            f_c = theano.function(ins, out, mode='FAST_RUN', on_unused_input='ignore')
            want = f_c(*host)
            fs = {}
            for fuse in (False, True):
                f = theano.function(ins, out, on_unused_input='ignore', mode=theano_ocl.OCLMode(
                    device=args.device, outputs='device', fuse=fuse))
                got = f(*dvals)
                got = got.get() if hasattr(got, 'get') else np.asarray(got)
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * max(1, n / 64))
                fs[fuse] = f
            t_c = median_time(lambda: f_c(*host), args.reps)
            t = {k: median_time(lambda: f(*dvals), args.reps, queue.finish)
                 for k, f in fs.items()}
            k = {key: kernel_time(f, queue, max(args.reps, 50), host_steps_ok=True)
                 for key, f in fs.items()}
            print('%-22s %6d %9.3f %9.3f %9.3f %7.2fx %9.4f %9.4f %7.2fx %6d %6d' % (
                name, n, t_c * 1e3, t[False] * 1e3, t[True] * 1e3, t[False] / t[True],
                k[False][0] * 1e3, k[True][0] * 1e3, k[False][0] / k[True][0],
                k[False][1], k[True][1]))


if __name__ == '__main__':
    main()
