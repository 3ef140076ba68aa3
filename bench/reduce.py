"""Reductions of a 4096x4096 float32 matrix: GB/s against the device's copy bandwidth and
time against Theano's C backend, measured in the same process.

    THEANO_FLAGS=blas.ldflags= python bench/reduce.py [--device SPEC] [--n 4096] [--reps 20]

Inputs stay on the device (a pyopencl array) and outputs too (output_mode='device'), so the
OCL time is the kernels'; the copy bandwidth counts read + write of a same-size buffer.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano  # noqa: E402
import theano.tensor as T  # noqa: E402



def median_time(fn, reps, sync=None):
    fn()
    if sync:
        sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device', default=None, help="device spec ('P:D', 'gpu', 'cpu', name)")
    ap.add_argument('--n', type=int, default=4096)
    ap.add_argument('--reps', type=int, default=20)
    args = ap.parse_args()

    import pyopencl as cl
    import pyopencl.array as cla
    dev = theano_ocl.get_device(args.device)
    queue = dev.queue
    n = args.n
    host = np.random.RandomState(0).rand(n, n).astype('float32')
    dx = cla.to_device(queue, host)
    nbytes = host.nbytes

    dst = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes)
    t_copy = median_time(lambda: cl.enqueue_copy(queue, dst, dx.base_data, byte_count=nbytes),
                         args.reps, queue.finish)
    copy_gbs = 2 * nbytes / t_copy / 1e9

    x = T.matrix('x', dtype='float32')
    cases = [('sum all', T.sum(x)), ('sum axis 0', T.sum(x, 0)), ('sum axis 1', T.sum(x, 1)),
             ('argmax axis 1', T.argmax(x, 1))]
    print('device: %s (%s); %dx%d float32; copy %.1f GB/s (read+write); %s'
          % (dev.name, dev.platform_name, n, n, copy_gbs, time.strftime('%Y-%m-%d')))
    print('%-14s %10s %10s %9s %10s %9s' % ('case', 'ocl ms', 'ocl GB/s', 'vs copy', 'C ms',
                                           'C / ocl'))
    for name, out in cases:
        f_c = theano.function([x], out, mode='FAST_RUN')
        f_o = theano.function([x], out, mode=theano_ocl.OCLMode(device=args.device,
                                                                outputs='device'))
        want = f_c(host)
        got = f_o(dx)
        got = got.get() if hasattr(got, 'get') else got
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-2)
        t_o = median_time(lambda: f_o(dx), args.reps, queue.finish)
        t_c = median_time(lambda: f_c(host), args.reps)
        gbs = nbytes / t_o / 1e9
        print('%-14s %10.3f %10.1f %8.0f%% %10.3f %8.2fx'
              % (name, t_o * 1e3, gbs, 100 * gbs / copy_gbs, t_c * 1e3, t_c / t_o))


if __name__ == '__main__':
    main()
