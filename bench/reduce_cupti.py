"""Reductions of a 4096x4096 float32 matrix on an NVIDIA GPU, timed the way CUDA tools time
kernels: theano_ocl's own kernels (the PTX that NVIDIA's OpenCL compiler built for them, with
the same grid, arguments and buffer contents) replayed through the CUDA driver and timed by
CUPTI's kernel records, next to OpenCL profiling events of the same launches and to torch's
reductions timed by CUPTI in the same run.

    THEANO_FLAGS=blas.ldflags= python bench/reduce_cupti.py [--cuda-python python3]
                                                             [--n 4096] [--reps 50]

Why: on NVIDIA's OpenCL driver a profiling event reads about 3 us more than the kernel's
CUPTI record (an empty kernel reads ~6 us by events), so a 26 us kernel's GB/s by events and
torch's GB/s by CUPTI are not comparable. This script measures both sides the same way.

Two processes. This one (the project's Python, Theano and theano_ocl) compiles the four cases
(sum all, sum axis 0, sum axis 1, argmax axis 1) with ``outputs='device'``, checks that the
reduction is the function's one device node (``theano_ocl.placements``) and its result,
plans that node again through the op registry into a frame of its own (``ops.ocl_impl``,
``runtime.context``: the recording API the families use; its ``Launch`` plans carry the
kernel, grid and arguments), checks those launches' result, saves the PTX and every buffer
the launches read into a temporary folder, times the launches by OpenCL events and back to
back, then runs ``--cuda-python`` (a Python with cupy and torch, on the
H100 machine its ``python3``) on this file with ``--replay DIR``. That half loads each PTX
with cupy (NVIDIA's OpenCL PTX reads the group and global offsets and the grid size from
``%envreg`` registers, which a CUDA launch does not set: they are replaced by 0 and
``%nctaid``), launches it with the same grid and arguments, checks the result against numpy
(exact for argmax), and times it by CUPTI (torch.profiler) and back to back (CUDA events);
then torch's own reductions the same two ways. Exit status 1 if a replayed result is wrong.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np

from common import run_other_python

CASES = ('sum all', 'sum axis 0', 'sum axis 1', 'argmax axis 1')
# NVIDIA's OpenCL PTX: %envreg0-2 group offsets, 3-5 global offsets, 6-8 the grid in groups
ENVREG = {0: '0', 1: '0', 2: '0', 3: '0', 4: '0', 5: '0',
          6: '%nctaid.x', 7: '%nctaid.y', 8: '%nctaid.z'}
EMPTY = '__kernel void empty(__global int *r) { if (get_global_id(0) == 1u << 30) r[0] = 1; }'


def numpy_result(name, host):
    return {'sum all': lambda: np.sum(host), 'sum axis 0': lambda: host.sum(0),
            'sum axis 1': lambda: host.sum(1), 'argmax axis 1': lambda: host.argmax(1)}[name]()


def capture(args, d):
    """Plan the cases with theano_ocl, save their launches into ``d``, time them by OpenCL
    events and back to back; returns {case: {...}}."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import types
    import theano_ocl  # first: makes Theano importable on numpy >= 1.22
    import theano
    import theano.tensor as T
    import pyopencl as cl
    import pyopencl.array as cla
    from theano_ocl.darray import DArray
    from theano_ocl.ops import ocl_impl
    from theano_ocl.runtime.context import Frame, PlanContext
    from theano_ocl.runtime.memory import download, upload

    dev = theano_ocl.get_device(args.device)
    if 'NVIDIA' not in dev.platform_name and not args.any_device:
        raise SystemExit('reduce_cupti.py needs an NVIDIA OpenCL device (got %s on %s)'
                         % (dev.name, dev.platform_name))
    q = dev.queue
    pq = dev.profiling_queue
    host = np.random.RandomState(0).rand(args.n, args.n).astype('float32')
    dx = cla.to_device(q, host)
    x = T.matrix('x', dtype='float32')
    exprs = dict(zip(CASES, (T.sum(x), T.sum(x, 0), T.sum(x, 1), T.argmax(x, 1))))
    saved = {}                 # buffer pointer -> file (each buffer saved once)
    out = {'device': '%s (%s, %s)' % (dev.name, dev.platform_name, dev.device.driver_version),
           'cases': {}}

    def save_buffer(root):
        key = root.buf.int_ptr
        if key not in saved:
            h = np.empty(root.buf.size, np.uint8)
            cl.enqueue_copy(q, h, root.buf)
            q.finish()
            saved[key] = 'buf%d.npy' % len(saved)
            np.save(os.path.join(d, saved[key]), h)
        return saved[key]

    def ptx_file(prg, tag):
        path = os.path.join(d, tag + '.ptx')
        with open(path, 'wb') as fh:
            fh.write(prg.get_info(cl.program_info.BINARIES)[0])
        return path

    for ci, name in enumerate(CASES):
        f = theano.function([x], exprs[name], mode=theano_ocl.OCLMode(
            device=args.device, outputs='device'))
        want = numpy_result(name, host)
        np.testing.assert_allclose(f(dx).get(), want, rtol=1e-4, atol=1e-2)
        np.save(os.path.join(d, 'want%d.npy' % ci), want)
        on_dev = [node for node, where, _ in theano_ocl.placements(f) if where == 'device']
        if len(on_dev) != 1:
            raise SystemExit('%s: expected one device node, got %s' % (name, on_dev))
        node = on_dev[0]
        # the node planned as the linker plans it, into a frame of its own, on the
        # profiling queue (its launches return events)
        impl = ocl_impl(node.op, node, dev)
        ctx = PlanContext(types.SimpleNamespace(dev=dev), Frame(None), 0, pq)
        xin = ctx.alloc(host.shape, host.dtype)
        upload(dev, pq, xin, host, blocking=True)
        res = impl.plan(ctx, [xin] + [v.data for v in node.inputs[1:]])[-1]
        steps = ctx.new_steps
        launches = []
        for si, st in enumerate(steps):
            if st.kind != 'launch':
                raise SystemExit('%s: plan %d is a %s, not a kernel launch' % (name, si, st.kind))
            prg = st.kernel.get_info(cl.kernel_info.PROGRAM)
            flat = []
            for a in st.args:
                if isinstance(a, DArray):
                    flat.append(['buf', save_buffer(a.root), a.boff // a.itemsize])
                else:
                    a = np.asarray(a)
                    flat.append(['scalar', a.dtype.str, a.item()])
            launches.append(dict(ptx=ptx_file(prg, 'k%d_%d' % (ci, si)), name=st.name,
                                 gsize=list(st.gsize), lsize=list(st.lsize or [1]), args=flat))
        q.finish()
        runs = [[st.fn() for st in steps] for _ in range(args.reps)]
        for evs in runs:
            cl.wait_for_events(evs)
        np.testing.assert_allclose(download(dev, pq, res), want, rtol=1e-4, atol=1e-2)
        t_ev = statistics.median(sum(e.profile.end - e.profile.start for e in evs)
                                 for evs in runs) * 1e-9
        t_b2b = []
        for _ in range(3):
            t0 = time.perf_counter()
            for _ in range(args.reps):
                for st in steps:
                    st.fn()
            pq.finish()
            t_b2b.append((time.perf_counter() - t0) / args.reps)
        out['cases'][name] = dict(launches=launches, event_s=t_ev,
                                  b2b_s=statistics.median(t_b2b), want='want%d.npy' % ci)
    # the events' own cost: an empty kernel, by events here and by CUPTI in the replay
    k = cl.Kernel(dev.build(EMPTY), 'empty')
    r = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 64)
    k.set_args(r)
    evs = [cl.enqueue_nd_range_kernel(pq, k, (256,), (256,)) for _ in range(args.reps)]
    pq.finish()
    out['empty_event_s'] = statistics.median((e.profile.end - e.profile.start) * 1e-9
                                             for e in evs)
    out['empty_ptx'] = ptx_file(dev.build(EMPTY), 'empty')
    out['nbytes'] = host.nbytes
    with open(os.path.join(d, 'meta.json'), 'w') as fh:
        json.dump(out, fh)
    return out


def replay(d, reps):
    """The CUDA half: run the captured PTX and torch's reductions, print JSON."""
    import cupy as cp
    import torch
    from torch.profiler import profile, ProfilerActivity

    meta = json.load(open(os.path.join(d, 'meta.json')))
    bufs = {}

    def buffer(name):
        if name not in bufs:
            bufs[name] = cp.asarray(np.load(os.path.join(d, name)))
        return bufs[name]

    def module(path):
        ptx = open(path, 'rb').read().decode('latin-1').rstrip('\x00')
        regs = set(int(m) for m in re.findall(r'%envreg(\d+)', ptx))
        if regs - set(ENVREG):
            raise SystemExit('%s reads %%envreg%s' % (path, sorted(regs - set(ENVREG))))
        ptx = re.sub(r'%envreg(\d+)', lambda m: ENVREG[int(m.group(1))], ptx)
        with open(path + '.cuda', 'w') as fh:
            fh.write(ptx)
        return cp.RawModule(path=path + '.cuda')

    def cupti(fn):
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(reps):
                fn()
            torch.cuda.synchronize()
        per = {}
        for e in prof.events():
            if e.device_type.name == 'CUDA' and 'Memset' not in e.name:
                per.setdefault(e.name, []).append(e.device_time_total * 1e-6)
        # kernels of one call, each the median of its records
        return sum(statistics.median(v) for v in per.values() if len(v) >= reps // 2)

    def back_to_back(fn):
        fn()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e-3 / reps

    res = {'cuda': '%s, torch %s, cupy %s' % (torch.cuda.get_device_name(), torch.__version__,
                                              cp.__version__), 'cases': {}}
    for ci, name in enumerate(CASES):
        c = meta['cases'][name]
        calls = []
        for launch in c['launches']:
            fn = module(launch['ptx']).get_function(launch['name'])
            a = []
            for arg in launch['args']:
                if arg[0] == 'buf':
                    a += [buffer(arg[1]), np.int64(arg[2])]
                else:
                    a.append(np.dtype(arg[1]).type(arg[2]))
            ls = launch['lsize'][0]
            calls.append((fn, (launch['gsize'][0] // ls,), (ls,), tuple(a)))

        def run():
            for fn, g, b, a in calls:
                fn(g, b, a)
        run()
        cp.cuda.Device().synchronize()
        want = np.load(os.path.join(d, c['want'])).ravel()
        # the output is one of the buffers the launches write: find it by value
        hits = []
        for bname, buf in bufs.items():
            if buf.nbytes >= want.nbytes:
                v = cp.asnumpy(buf[:want.nbytes]).view(want.dtype)
                if (np.array_equal(v, want) if want.dtype.kind == 'i' else
                        np.allclose(v, want, rtol=1e-4, atol=1e-2)):
                    hits.append(bname)
        res['cases'][name] = dict(cupti_s=cupti(run), b2b_s=back_to_back(run), ok=bool(hits))
    x = torch.from_numpy(np.random.RandomState(0).rand(4096, 4096).astype('float32')).cuda()
    ops = dict(zip(CASES, (lambda: x.sum(), lambda: x.sum(0), lambda: x.sum(1),
                           lambda: x.argmax(1))))
    for name in CASES:
        res['cases'][name].update(torch_cupti_s=cupti(ops[name]),
                                  torch_b2b_s=back_to_back(ops[name]))
    empty = module(meta['empty_ptx']).get_function('empty')
    r = cp.zeros(16, cp.int32)
    res['empty_cupti_s'] = cupti(lambda: empty((1,), (256,), (r,)))
    print('JSON' + json.dumps(res))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device', default='nvidia')
    ap.add_argument('--n', type=int, default=4096)
    ap.add_argument('--reps', type=int, default=50)
    ap.add_argument('--cuda-python', default='python3',
                    help='a Python with cupy and torch (its own environment is used)')
    ap.add_argument('--replay', metavar='DIR', help=argparse.SUPPRESS)
    ap.add_argument('--any-device', action='store_true', help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replay:
        return replay(args.replay, args.reps)
    d = tempfile.mkdtemp(prefix='reduce_cupti_')
    try:
        cap = capture(args, d)
        p = run_other_python(args.cuda_python, [os.path.abspath(__file__), '--replay', d,
                                                '--reps', str(args.reps)])
        lines = [l for l in p.stdout.splitlines() if l.startswith('JSON')]
        if p.returncode or not lines:
            raise SystemExit('the CUDA half failed (%s):\n%s\n%s'
                             % (args.cuda_python, p.stdout[-3000:], p.stderr[-3000:]))
        rep = json.loads(lines[-1][4:])
    finally:
        shutil.rmtree(d, ignore_errors=True)
    nb = cap['nbytes']

    def gbs(t):
        return nb / t / 1e9

    print('device: %s; %s; %dx%d float32, %d reps; %s' % (cap['device'], rep['cuda'], args.n,
          args.n, args.reps, time.strftime('%Y-%m-%d')))
    print('empty kernel: %.2f us by OpenCL events, %.2f us by CUPTI (same PTX)'
          % (cap['empty_event_s'] * 1e6, rep['empty_cupti_s'] * 1e6))
    print('GB/s (us per call); theano_ocl: OpenCL events | back to back in OpenCL | its PTX '
          'under CUDA by CUPTI | back to back under CUDA; torch: CUPTI | back to back')
    bad = False
    for name in CASES:
        c, r = cap['cases'][name], rep['cases'][name]
        bad |= not r['ok']
        print('%-14s ' % name + ' | '.join('%6.0f (%5.2f)' % (gbs(t), t * 1e6) for t in (
            c['event_s'], c['b2b_s'], r['cupti_s'], r['b2b_s'], r['torch_cupti_s'],
            r['torch_b2b_s'])) + ('  CUPTI / torch %.2fx' % (r['torch_cupti_s'] / r['cupti_s']))
              + ('' if r['ok'] else '  REPLAYED RESULT WRONG'))
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main())
