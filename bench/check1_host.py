"""check1's device-result function, host side only: microseconds per call spent in the
calling thread (Theano's Function.__call__, the VM's call, the enqueue, the result array).

check1.py times 1000 calls and the drain of the queue: on a GPU that is the host's time, on
PoCL the kernels' (exp of 230,400 floats takes ~100 us on 2 cores). Here the queue is
drained outside the timed loops. On a CPU device the kernels still compete with the host
thread for cores: run with ``POCL_MAX_PTHREAD_COUNT=1 POCL_AFFINITY=1`` and ``--pin`` (this
thread on the last core, PoCL's worker on the first) for repeatable numbers.
"""
import os
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

from common import parser, header, table

p = parser(__doc__)
p.add_argument('--calls', type=int, default=2000)
p.add_argument('--size', type=int, default=10 * 30 * 768)
p.add_argument('--pin', action='store_true', help='run this thread on the last core')
args = p.parse_args()

dev = theano_ocl.get_device(args.device)
if args.pin:
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
header('check1, host side: exp of %d float32, %d calls' % (args.size, args.calls), dev)
x = theano.shared(np.asarray(np.random.RandomState(22).rand(args.size), 'float32'))
f = theano.function([], T.exp(x), mode=theano_ocl.OCLMode(device=args.device, outputs='device'))
queue = f.fn.queue


def host_us(fn):
    for _ in range(10):
        fn()
    ts = []
    for _ in range(args.repeat):
        queue.finish()
        t0 = time.perf_counter()
        for _ in range(args.calls):
            r = fn()
        ts.append(time.perf_counter() - t0)
        del r
        queue.finish()
    return float(np.median(ts)) / args.calls * 1e6, min(ts) / args.calls * 1e6


rows = []
for name, fn, own in (('OCL, device result: f()', f, False),
                      ("the same through Theano's Function.__call__", f, True),
                      ('its VM call alone: f.fn()', f.fn, False)):
    if own:
        f._ocl_call = False     # Theano's own call, not theano_ocl/fast_call.py's
    med, best = host_us(fn)
    if own:
        del f._ocl_call
    rows.append(dict(variant=name, **{'us/call': med, 'best': best}))
table(rows, ['variant', 'us/call', 'best'])
