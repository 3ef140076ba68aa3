"""How long a call waits for its results: blocked (``clWaitForEvents``) against polled
(``theano_ocl.runtime.waits``), in one process, rounds interleaved.

Part 1, pyopencl alone: a 4096-float kernel and the download of its result, waited for by
``clWaitForEvents``, by polling the event's status (yielding the core between asks), and
by the runtime's wait (polled up to ``waits.POLL_S``, then blocked); a longer kernel
(``--heavy`` elements of a chain of 2 ``sin``) shows what polling costs a long wait.
Part 2, Theano functions with the cost model off (each runs on the device), blocked
(``POLL_S = 0``) against the default, beside Theano C: ``sum(exp(x))`` of 4096 floats,
an SGEMM 128, and the 784-128-10 MLP training step of ``bench`` (batch 64).

    python bench/wait_latency.py [--device cpu] [--rounds 7] [--json FILE]
"""
import json
import os
import socket
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def median_us(fn, n):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return float(np.median(ts) * 1e6)


def summary(xs):
    return '%7.1f us (%.1f..%.1f)' % (np.median(xs), min(xs), max(xs))


def part_pyopencl(dev, rounds, heavy):
    import pyopencl as cl
    from theano_ocl.runtime import waits
    ctx, q = dev.context, dev.queue
    prg = cl.Program(ctx, """
__kernel void twice(__global float *a) { a[get_global_id(0)] *= 2.0f; }
__kernel void heavy(__global float *a) {
    float x = a[get_global_id(0)];
    for (int i = 0; i < 2; i++) x = sin(x) + 1.0f;
    a[get_global_id(0)] = x; }""").build()
    done = cl.command_execution_status.COMPLETE
    out = {}
    for name, kern, n, calls in (('4096 floats x 2', prg.twice, 4096, 200),
                                 ('%d floats, 2 sin' % heavy, prg.heavy, heavy, 10)):
        host = np.ones(n, np.float32)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)

        def blocked():
            kern(q, (n,), None, buf)
            cl.wait_for_events([cl.enqueue_copy(q, host, buf, is_blocking=False)])

        def polled():
            kern(q, (n,), None, buf)
            ev = cl.enqueue_copy(q, host, buf, is_blocking=False)
            q.flush()
            while ev.command_execution_status != done:
                os.sched_yield()

        def runtime():
            kern(q, (n,), None, buf)
            waits.wait(dev, [cl.enqueue_copy(q, host, buf, is_blocking=False)])

        variants = (('clWaitForEvents', blocked), ('polled', polled),
                    ('waits.wait', runtime))
        res = {k: [] for k, _ in variants}
        for fn in dict(variants).values():
            for _ in range(5):
                fn()
        for _ in range(rounds):
            for k, fn in variants:
                res[k].append(median_us(fn, calls))
        out[name] = res
        print('%-22s %s' % (name, ' | '.join('%s %s' % (k, summary(v)) for k, v in res.items())),
              flush=True)
    return out


def part_functions(dev, rounds):
    import theano
    import theano.tensor as T
    import theano_ocl
    from theano_ocl.benchmarks.mlp import build, make_data
    from theano_ocl.runtime import waits
    mode = theano_ocl.OCLMode(device=dev.spec, cost_model='off')
    rng = np.random.RandomState(0)
    cases = []
    x = T.fvector('x')
    xv = np.linspace(-1, 1, 4096).astype('float32')
    cases.append(('sum(exp(x)), 4096', [theano.function([x], T.exp(x).sum(), mode=m)
                                        for m in ('FAST_RUN', mode)], lambda f: f(xv)))
    a, b = T.fmatrix('a'), T.fmatrix('b')
    av, bv = rng.rand(128, 128).astype('float32'), rng.rand(128, 128).astype('float32')
    cases.append(('sgemm 128', [theano.function([a, b], T.dot(a, b), mode=m)
                                for m in ('FAST_RUN', mode)], lambda f: f(av, bv)))
    xs, ys = make_data(64 * 8, 784, 10, np.random.RandomState(1234))
    steps = [build(m, [784, 128, 10], 64, 0.01, 0.9, seed=0)[0] for m in ('FAST_RUN', mode)]
    cases.append(('MLP 784-128-10 step', steps, lambda f: f(xs[:64], ys[:64])))
    out = {}
    keep = waits.POLL_S
    try:
        for name, (f_c, f_o), call in cases:
            for f in (f_c, f_o):
                for _ in range(5):
                    call(f)
            res = {'Theano C': [], 'blocked': [], 'polled': []}
            for _ in range(rounds):
                res['Theano C'].append(median_us(lambda: call(f_c), 40))
                for k, poll in (('blocked', 0.0), ('polled', keep)):
                    waits.POLL_S = poll
                    res[k].append(median_us(lambda: call(f_o), 40))
            out[name] = res
            c = np.median(res['Theano C'])
            print('%-22s C %s | blocked %s (C/OCL %.2fx) | polled %s (C/OCL %.2fx)'
                  % (name, summary(res['Theano C']), summary(res['blocked']),
                     c / np.median(res['blocked']), summary(res['polled']),
                     c / np.median(res['polled'])), flush=True)
    finally:
        waits.POLL_S = keep
    return out


def main():
    ap = common.parser(__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=7)
    ap.add_argument('--heavy', type=int, default=1 << 18)
    ap.add_argument('--json', default=None)
    args = ap.parse_args()
    import theano_ocl
    from theano_ocl.runtime import waits
    dev = theano_ocl.get_device(args.device)
    common.header('wait latency, blocked against polled (waits.POLL_S %g)' % waits.POLL_S,
                  dev)
    record = dict(device=dev.name, platform=dev.platform_name, poll_s=waits.POLL_S,
                  date=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                  commit=common.commit(), host=socket.gethostname(),
                  pyopencl=part_pyopencl(dev, args.rounds, args.heavy),
                  functions=part_functions(dev, args.rounds))
    if args.json:
        with open(args.json, 'w') as fh:
            json.dump(record, fh, indent=1)


if __name__ == '__main__':
    main()
