"""Sweep CLBlast's Xgemm kernel parameters on this device (pyclblast.override_parameters).

CLBlast picks GEMM tile sizes from a database keyed by device name and architecture;
a device it has no entry for (the H100, "SM9.0", in CLBlast 1.5.x) gets the vendor's
default parameters. This script times ``pyclblast.gemm`` on n x n x n operands for the
database's choice and for a set of valid parameter sets (a grid over tile sizes, thread
layouts, vector widths and local-memory use, sampled with a fixed seed), and prints the
best. ``--write FILE`` stores the winner with the device name, driver and CLBlast version
for ``ops/blas_clblast.py`` (``clblast_tuned.json``): theano_ocl applies it only on a device of
that exact name and driver, and only where it measured faster than the default.

Each candidate: override, one untimed call (builds the kernel), then the median of
``--repeat`` rounds of ``--calls`` calls timed by the wall clock up to a queue finish.
(Not by the event pyclblast returns: that is CLBlast's *last* kernel, on the indirect
path a small post-processing kernel, not the product.)
"""
import json
import time

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

import theano_ocl
from theano_ocl.ops.gemm_search import CLBLAST_NAMES as NAMES, clblast_candidates
from common import parser, header


def main():
    p = parser(__doc__)
    p.add_argument('--n', type=int, default=4096)
    p.add_argument('--calls', type=int, default=5)
    p.add_argument('--samples', type=int, default=80, help='parameter sets tried')
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--write', default=None, help='store the winner in this JSON file')
    args = p.parse_args()
    import pyclblast

    dev = theano_ocl.get_device(args.device)
    header('CLBlast Xgemm sweep, SGEMM %d^3' % args.n, dev)
    n = args.n
    q = dev.profiling_queue
    rng = np.random.RandomState(0)
    a, b = rng.rand(n, n).astype('float32'), rng.rand(n, n).astype('float32')
    da, db = cla.to_device(q, a), cla.to_device(q, b)
    dc = cla.empty(q, (n, n), np.float32)
    want = a[:32].dot(b)
    flops = 2.0 * n ** 3
    device = dev.device

    def measure():
        pyclblast.gemm(q, n, n, n, da, db, dc, n, n, n).wait()     # builds the kernel
        if not np.allclose(dc.get()[:32], want, rtol=1e-3):
            return None
        ts = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                pyclblast.gemm(q, n, n, n, da, db, dc, n, n, n)
            q.finish()
            ts.append((time.perf_counter() - t0) / args.calls)
        return float(np.median(ts))

    base = measure()
    print('database default: %.3f ms, %.1f TFLOP/s' % (base * 1e3, flops / base / 1e12))
    results = []
    for k, params in enumerate(clblast_candidates(dev, 'float32', args.seed)[:args.samples]):
        try:
            pyclblast.override_parameters(device, 'Xgemm', 32, params)
            t = measure()
        except Exception as e:        # a set CLBlast rejects or that fails to build
            print('%3d  rejected: %s' % (k, str(e).splitlines()[0][:80]))
            continue
        if t is None:
            print('%3d  wrong result, skipped: %s' % (k, params))
            continue
        results.append((t, params))
        print('%3d  %.3f ms  %.1f TFLOP/s  %s' % (k, t * 1e3, flops / t / 1e12,
                                                 ' '.join('%s=%d' % (x, params[x]) for x in NAMES)))
    results.sort(key=lambda r: r[0])
    # re-measure the best five against the default, alternating, to rule out noise
    final = []
    for t, params in results[:5]:
        pyclblast.override_parameters(device, 'Xgemm', 32, params)
        t2 = measure()
        final.append((min(t, t2), params))
    final.sort(key=lambda r: r[0])
    if not final:
        print('no candidate ran')
        return
    best_t, best = final[0]
    print('best: %.3f ms, %.1f TFLOP/s (default %.1f): %s' % (
        best_t * 1e3, flops / best_t / 1e12, flops / base / 1e12, json.dumps(best)))
    if args.write:
        entry = dict(device=dev.name, driver=device.driver_version, n=n,
                     tflops=flops / best_t / 1e12, default_tflops=flops / base / 1e12,
                     params=best)
        with open(args.write, 'w') as fh:
            json.dump({'Xgemm32': [entry]}, fh, indent=1)
        print('written to', args.write)


if __name__ == '__main__':
    main()
