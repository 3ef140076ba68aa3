"""Reductions of a 4096x4096 float32 matrix and full sums of float32 vectors (1e6 and 1e7
elements by default): GB/s against the device's copy bandwidth and time against Theano's C
backend, measured in the same process.

    THEANO_FLAGS=blas.ldflags= python bench/reduce.py [--device SPEC] [--n 4096] [--reps 20]
                                                      [--vectors 1000000,10000000]
                                                      [--cross-group auto|launch|atomics|ptx]
                                                      [--generic] [--set KNOB=INT ...]
                                                      [--no-c]

Inputs stay on the device (a pyopencl array) and outputs too (output_mode='device'), so the
OCL time is the kernels' plus the Python call (~40-50 us on a GPU); the copy bandwidth counts
read + write of a same-size buffer. The kernel-only columns replay the function's planned
launches (its frame's steps) ``--reps`` times back to back and finish once: no Python call,
no output hand-over, just the reduction kernels (a second pass included) and their enqueues.
The event columns time the same launches by OpenCL profiling events (a ``profile=True``
compile of the function, its frame replayed): the device's execution time of the kernels,
without the gaps between launches (~2-3 us each on the H100's OpenCL driver); the copy is
timed the same way for them. pyopencl's own ``pyopencl.array.sum`` (a generic
ReductionKernel, two launches) is timed back to back as a reference.
On NVIDIA's driver an event reads ~3 us more than the kernel's CUPTI record (the measure of
CUDA tools and torch's kernels): ``bench/reduce_cupti.py`` times these same kernels that way.
``--generic`` turns the fast paths off (every reduction takes the generic kernel): the
numbers before them, on the same machine. ``--set GPU_UNROLL=8`` (repeatable) sets one of
the geometry knobs of ``theano_ocl/ops/reduce_geometry.py`` (``CPU_*``, ``GPU_*``) for a
sweep. ``--cross-group`` sets ``reduce.CROSS_GROUP``: how a GPU's reduction split in parts
combines them (``auto``: the device's own handshake, else a second launch; ``launch``:
always a second launch), so ``auto`` against ``launch`` measures what one launch saves.
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


def kernel_time(f, queue, reps, host_steps_ok=False):
    """Seconds per replay of ``f``'s last frame (its launches, enqueued back to back) and
    the number of launches; ``host_steps_ok``: leave the frame's host steps (shape
    arithmetic) out instead of refusing such a frame."""
    frame = f.fn.last_frame
    steps = [st.fn for st in frame.steps if st.kind in ('launch', 'copy')]
    assert host_steps_ok or len(steps) == len(frame.steps), [st.kind for st in frame.steps]

    def run():
        for _ in range(reps):
            for fn in steps:
                fn()
    run()
    queue.finish()
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        run()
        queue.finish()
        times.append((time.perf_counter() - t0) / reps)
    return statistics.median(times), len(steps)


def event_time(f, reps):
    """Median over ``reps`` replays of ``f``'s last frame (``f`` compiled with
    ``profile=True``: its launches return profiling events) of the summed kernel execution
    times (event end - start), in seconds."""
    frame = f.fn.last_frame
    steps = [st.fn for st in frame.steps if st.kind in ('launch', 'copy')]
    runs = [[fn() for fn in steps] for _ in range(reps)]
    for evs in runs:
        for e in evs:
            if e is not None:
                e.wait()
    return statistics.median(sum(e.profile.end - e.profile.start for e in evs if e is not None)
                             for evs in runs) * 1e-9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device', default=None, help="device spec ('P:D', 'gpu', 'cpu', name)")
    ap.add_argument('--n', type=int, default=4096)
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--generic', action='store_true', help='generic reduction kernel only')
    ap.add_argument('--set', action='append', default=[], metavar='KNOB=INT',
                    help='a fast-path geometry knob of theano_ocl/ops/reduce_geometry.py')
    ap.add_argument('--vectors', default='1000000,10000000',
                    help='sizes of the float32 vectors summed whole (comma-separated; '
                         "'' for none)")
    ap.add_argument('--cross-group', default='auto',
                    choices=['auto', 'launch', 'atomics', 'ptx'],
                    help='reduce.CROSS_GROUP: how a GPU reduction split in parts combines them')
    ap.add_argument('--no-c', action='store_true',
                    help='check against numpy, skip timing Theano C (for knob sweeps)')
    args = ap.parse_args()
    from theano_ocl.ops import reduce as ocl_reduce, reduce_geometry
    if args.generic:
        ocl_reduce.FAST_PATHS = False
    ocl_reduce.CROSS_GROUP = args.cross_group
    knobs = []
    for item in args.set:
        name, value = item.split('=')
        if not (name.startswith('CPU_') or name.startswith('GPU_')) \
                or not hasattr(reduce_geometry, name):
            ap.error('no knob %s in theano_ocl/ops/reduce_geometry.py' % name)
        setattr(reduce_geometry, name, int(value))
        knobs.append('%s=%s' % (name, int(value)))

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
    pq = dev.profiling_queue
    dsrc = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, nbytes)
    cl.enqueue_copy(pq, dsrc, dx.base_data, byte_count=nbytes).wait()
    evs = [cl.enqueue_copy(pq, dst, dsrc, byte_count=nbytes) for _ in range(max(args.reps, 50))]
    pq.finish()
    t_copy_ev = statistics.median((e.profile.end - e.profile.start) * 1e-9 for e in evs)
    copy_ev_gbs = 2 * nbytes / t_copy_ev / 1e9
    t_pyopencl = median_time(lambda: cla.sum(dx, queue=queue), args.reps, queue.finish)

    x = T.matrix('x', dtype='float32')
    # (name, input variable, output, host value, device value)
    cases = [(name, x, out, host, dx) for name, out in
             [('sum all', T.sum(x)), ('sum axis 0', T.sum(x, 0)), ('sum axis 1', T.sum(x, 1)),
              ('argmax axis 1', T.argmax(x, 1))]]
    v = T.vector('v', dtype='float32')
    for size in [int(float(s)) for s in args.vectors.split(',') if s]:
        hv = np.random.RandomState(size % 1000).rand(size).astype('float32')
        cases.append(('sum %.0e' % size, v, T.sum(v), hv, cla.to_device(queue, hv)))
    print('device: %s (%s); %dx%d float32; copy %.1f GB/s (read+write; by events %.1f); %s%s%s; '
          'cross-group %s (%s here)'
          % (dev.name, dev.platform_name, n, n, copy_gbs, copy_ev_gbs, time.strftime('%Y-%m-%d'),
             '; generic kernel only' if args.generic else '',
             '; ' + ' '.join(knobs) if knobs else '', args.cross_group,
             'CPU geometries: a second launch' if dev.is_cpu
             else ocl_reduce._cross_group(dev) or 'a second launch'))
    print('pyopencl.array.sum (reference): %.3f ms, %.1f GB/s'
          % (t_pyopencl * 1e3, nbytes / t_pyopencl / 1e9))
    print('%-14s %9s %9s %8s %9s %8s %9s %9s %8s %8s %9s %8s %8s'
          % ('case', 'ocl ms', 'ocl GB/s', 'vs copy', 'C ms', 'C / ocl', 'kernel ms',
             'kern GB/s', 'vs copy', 'event ms', 'ev GB/s', 'vs copy', 'launches'))
    for name, x, out, host, dx in cases:
        nbytes = host.nbytes
        if args.no_c:
            f_c = theano.function([x], out, mode=theano.Mode(linker='py',
                                                             optimizer='fast_run'))
        else:
            f_c = theano.function([x], out, mode='FAST_RUN')
        f_o = theano.function([x], out, mode=theano_ocl.OCLMode(device=args.device,
                                                                outputs='device'))
        want = f_c(host)
        got = f_o(dx)
        got = got.get() if hasattr(got, 'get') else got
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-2)
        t_o = median_time(lambda: f_o(dx), args.reps, queue.finish)
        t_c = float('nan') if args.no_c else median_time(lambda: f_c(host), args.reps)
        t_k, n_launch = kernel_time(f_o, queue, max(args.reps, 50))
        f_p = theano.function([x], out, mode=theano_ocl.OCLMode(device=args.device,
                                                                outputs='device'), profile=True)
        f_p(dx)
        t_e = event_time(f_p, max(args.reps, 50))
        gbs = nbytes / t_o / 1e9
        kgbs = nbytes / t_k / 1e9
        egbs = nbytes / t_e / 1e9
        print('%-14s %9.3f %9.1f %7.0f%% %9.3f %7.2fx %9.3f %9.1f %7.0f%% %8.3f %9.1f %7.0f%% %8d'
              % (name, t_o * 1e3, gbs, 100 * gbs / copy_gbs, t_c * 1e3, t_c / t_o,
                 t_k * 1e3, kgbs, 100 * kgbs / copy_gbs, t_e * 1e3, egbs,
                 100 * egbs / copy_ev_gbs, n_launch))


if __name__ == '__main__':
    main()
