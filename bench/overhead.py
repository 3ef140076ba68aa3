"""Call overhead: a tiny function (scalar in, scalar out), microseconds per call.

'OCL' is what a user gets: hot frames of tiny values run in-thread on the host (vm.py's
host tier); 'OCL, device path' turns that tier off, so every call uploads, launches and
downloads."""
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
    variants = (('Theano C', 'FAST_RUN'), ('OCL', theano_ocl.OCLMode(device=args.device)),
                ('OCL, device path', theano_ocl.OCLMode(device=args.device)))
    for mode_name, mode in variants:
        f = theano.function(ins, out, updates=upd, mode=mode)
        if mode_name == 'OCL, device path':
            f.fn.host_tier_after = None    # never the in-thread host tier: every call launches
        v = np.float64(1.5)
        assert float(f(v)) == 4.0

        def run(f=f):
            for _ in range(args.calls):
                f(v)
        rows.append(dict(case=name, mode=mode_name, us=median_time(run, args.repeat) / args.calls * 1e6))
    for r in rows[-2:]:
        r['x Theano C'] = r['us'] / rows[-3]['us']
table(rows, ['case', 'mode', 'us', 'x Theano C'])
