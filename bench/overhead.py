"""Call overhead: a tiny function (scalar in, scalar out), microseconds per call."""
import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

from common import parser, median_time, header, table

p = parser(__doc__)
p.add_argument('--calls', type=int, default=20000)
args = p.parse_args()
dev = theano_ocl.get_device(args.device)
header('call overhead: f(x) = x * 2 + 1 on a float64 scalar, %d calls' % args.calls, dev)
x = T.dscalar('x')
s = theano.shared(np.float64(0), 's')
cases = [('scalar in, scalar out', [x], x * 2 + 1, None),
         ('+ shared update', [x], x * 2 + 1, {s: s + x})]
rows = []
for name, ins, out, upd in cases:
    for mode_name, mode in (('Theano C', 'FAST_RUN'), ('OCL', theano_ocl.OCLMode(device=args.device))):
        f = theano.function(ins, out, updates=upd, mode=mode)
        v = np.float64(1.5)
        assert float(f(v)) == 4.0

        def run(f=f):
            for _ in range(args.calls):
                f(v)
        rows.append(dict(case=name, mode=mode_name, us=median_time(run, args.repeat) / args.calls * 1e6))
    rows[-1]['x Theano C'] = rows[-1]['us'] / rows[-2]['us']
table(rows, ['case', 'mode', 'us', 'x Theano C'])
