"""Host cost of one kernel launch through theano_ocl, against pyopencl's bare enqueue.

A chain of K dependent elementwise ops (fusion off, so K kernels, none batchable) on a
small float32 vector whose result stays on the device; the per-launch cost is the slope
of the call time over K (so a call's fixed cost drops out). The same chain is timed in
``SimulatorOCL.run_steps`` (the replay loop). The bare line is pyopencl's
``enqueue_nd_range_kernel`` of one such kernel with arguments set once (no wait).

    python bench/vm_launch_cost.py [--device gpu] [--repeat 5]
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def chain(T, x, k):
    y = x
    for j in range(k):
        y = T.tanh(y) if j % 2 else y * np.float32(0.5) + np.float32(0.25)
    return y


def main():
    p = common.parser(__doc__)
    p.add_argument('--calls', type=int, default=400)
    p.add_argument('--launch', nargs='+', default=['pyopencl', 'native'],
                   help="the launch settings to measure (runtime/native.py)")
    args = p.parse_args()
    from theano_ocl.device import get_device
    dev = get_device(args.device)
    common.header('host cost of a launch through theano_ocl', dev)
    n = 256
    xv = np.random.RandomState(0).rand(n).astype('float32')
    for launch in args.launch:
        print('## launch=%s' % launch)
        measure(args, dev, xv, launch)
    bare(args, dev, n)


def measure(args, dev, xv, launch):
    import theano
    import theano.tensor as T
    import theano_ocl
    ks = (1, 17, 65)
    rows = []
    call_t = {}
    launches = {}
    step_t = {}
    for k in ks:
        x = theano.shared(xv, name='x')
        # Theano's own elementwise fusion off as well: K nodes, K kernels
        mode = theano_ocl.OCLMode(device=args.device, outputs='device', fuse=False,
                                  launch=launch).excluding('fusion')
        f = theano.function([], chain(T, x, k), mode=mode)
        dev.queue.finish()

        def call():
            f()
        ts = sorted(common.timed(call, args.calls, args.repeat, dev.queue.finish))
        dev.queue.finish()
        call_t[k] = ts
        launches[k] = f.fn.last_frame.n_launches
        g = theano.function([], [], updates=[(x, chain(T, x, k))], mode=theano.Mode('c').excluding('fusion'))
        os.environ['THEANO_OCL_LAUNCH'] = launch     # read when the simulator re-links g
        sim = theano_ocl.SimulatorOCL(g, device=args.device, batch=False)
        sim.run_steps(2)
        dev.queue.finish()
        ss = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            sim.run_steps(args.calls)
            dev.queue.finish()
            ss.append((time.perf_counter() - t0) / args.calls)
        step_t[k] = sorted(ss)
        rows.append({'K nodes': k, 'launches': launches[k], 'call us (min)': ts[0] * 1e6,
                     'call us (median)': ts[len(ts) // 2] * 1e6,
                     'run_steps us/step (min)': step_t[k][0] * 1e6})
    common.table(rows, list(rows[0]))
    lo, hi = ks[0], ks[-1]
    for name, t in (('call', call_t), ('run_steps', step_t)):
        slopes = sorted((b - a) / (launches[hi] - launches[lo]) * 1e6
                        for a, b in zip(t[lo], t[hi]))
        print('%s: host cost per launch %.2f-%.2f us (min-max over %d repeats)' % (
            name, slopes[0], slopes[-1], len(slopes)))


def bare(args, dev, n):
    """One kernel, arguments set once, enqueued by pyopencl and by theano_ocl's native
    launcher (ctypes through the ICD loader, no event: runtime/native.py)."""
    from theano_ocl.runtime import native
    cl = dev.cl
    prg = cl.Program(dev.context, '__kernel void k(__global float *a, const float s) '
                     '{ size_t i = get_global_id(0); a[i] = a[i] * s; }').build()
    buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, n * 4)
    kern = cl.Kernel(prg, 'k')
    kern.set_args(buf, np.float32(1.0))
    q = dev.queue
    paths = [('pyopencl enqueue_nd_range_kernel',
              lambda: cl.enqueue_nd_range_kernel(q, kern, (n,), None))]
    if native.available():
        paths.append(('native launcher (ctypes clEnqueueNDRangeKernel, no event)',
                      native.launcher(q, kern, 'k', (n,), None)))
    for name, launch in paths:
        us = sorted(t * 1e6 for t in common.timed(launch, args.calls, args.repeat, q.finish))
        print('%s: %.2f-%.2f us per launch' % (name, us[0], us[-1]))


if __name__ == '__main__':
    main()
