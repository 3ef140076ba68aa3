"""What a call's host result costs to download: into a new pageable array, into one reused
array, into page-locked memory; and check1's host-result call through theano_ocl with its
outputs in page-locked blocks (``pinned`` setting: runtime/pinned.py) and without, with
Theano C in the same process.

    python bench/download_cost.py [--device gpu] [--size 230400] [--calls 500]
"""
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

from common import header, parser, table
from theano_ocl.runtime.pinned import PinnedPool

p = parser(__doc__)
p.add_argument('--size', type=int, default=10 * 30 * 768)
p.add_argument('--calls', type=int, default=500)
args = p.parse_args()
dev = theano_ocl.get_device(args.device)
cl, q = dev.cl, dev.queue
header('downloads of %d float32 (%d bytes), %d calls' % (args.size, args.size * 4, args.calls), dev)
n = args.size
buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, n * 4)
cl.enqueue_copy(q, buf, np.random.RandomState(0).rand(n).astype('float32'))
read = cl._cl._enqueue_read_buffer
one = np.empty(n, np.float32)
pool = PinnedPool(cl, dev.context, q)


def into_pinned():
    a = pool.empty((n,), np.float32)
    read(q, buf, a, 0, None, True)


x = theano.shared(np.asarray(np.random.RandomState(22).rand(n), 'float32'))
fns = [('Theano C: f()', theano.function([], T.exp(x), mode='FAST_RUN'))]
for setting in ('always', 'off'):
    fns.append(('theano_ocl, pinned=%s: f()' % setting,
                theano.function([], T.exp(x), mode=theano_ocl.OCLMode(device=args.device,
                                                                      pinned=setting))))
cases = [('read into a new np.empty', lambda: read(q, buf, np.empty(n, np.float32), 0, None, True)),
         ('read into one reused array', lambda: read(q, buf, one, 0, None, True)),
         ('read into a page-locked block (pool)', into_pinned)] + fns
rows = []
for name, fn in cases:
    for _ in range(10):
        fn()
    q.finish()
    ts = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for _ in range(args.calls):
            fn()
        q.finish()
        ts.append((time.perf_counter() - t0) / args.calls * 1e6)
    rows.append({'case': name, 'median us': float(np.median(ts)), 'min us': min(ts),
                 'max us': max(ts)})
table(rows, ['case', 'median us', 'min us', 'max us'])
