"""The "Using the GPU" tutorial program: exp of a shared float32 vector, 1000 calls.

Theano C vs theano_ocl returning a host array vs theano_ocl keeping the result on the
device (``OCLMode(outputs='device')``), measured in the same process.
"""
import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

from common import parser, median_time, header, table

p = parser(__doc__)
p.add_argument('--calls', type=int, default=1000)
args = p.parse_args()

vlen = 10 * 30 * 768
rng = np.random.RandomState(22)
x = theano.shared(np.asarray(rng.rand(vlen), 'float32'))
dev = theano_ocl.get_device(args.device)
header('check1: exp of %d float32, %d calls' % (vlen, args.calls), dev)

fns = [('Theano C', theano.function([], T.exp(x), mode='FAST_RUN')),
       ('OCL, host result', theano.function([], T.exp(x), mode=theano_ocl.OCLMode(device=args.device))),
       ('OCL, device result', theano.function([], T.exp(x), mode=theano_ocl.OCLMode(
           device=args.device, outputs='device')))]
want = fns[0][1]()
rows = []
for name, f in fns:
    r = f()
    r = r.get() if hasattr(r, 'get') else r
    assert np.allclose(r, want, rtol=1e-5), name

    def run(f=f):
        for _ in range(args.calls):
            r = f()
        if hasattr(r, 'get'):
            r.queue.finish()
    rows.append(dict(variant=name, seconds=median_time(run, args.repeat)))
base = rows[0]['seconds']
for r in rows:
    r['x Theano C'] = r['seconds'] / base
    r['us/call'] = r['seconds'] / args.calls * 1e6
table(rows, ['variant', 'seconds', 'us/call', 'x Theano C'])
print('fallback nodes:', sum(len(theano_ocl.fallback_nodes(f)) for _, f in fns[1:]))
