"""Fused elementwise throughput: a*b + c*exp(-d) on 2^24 float32, in GB/s.

Compared with the device's plain copy bandwidth (read + write) and with Theano C,
measured in the same process. Results stay on the device (``outputs='device'``) so the
number is the kernel's, not PCIe's.
"""
import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
import theano
import theano.tensor as T

from common import parser, median_time, header, table, copy_bandwidth

p = parser(__doc__)
p.add_argument('--log2n', type=int, default=24)
p.add_argument('--calls', type=int, default=20)
args = p.parse_args()
n = 2 ** args.log2n
dev = theano_ocl.get_device(args.device)
header('fused elementwise a*b + c*exp(-d), n = 2^%d float32' % args.log2n, dev)
rng = np.random.RandomState(0)
sh = [theano.shared(rng.rand(n).astype('float32'), name) for name in 'abcd']
a, b, c, d = sh
expr = a * b + c * T.exp(-d)
moved = 5 * n * 4       # 4 inputs read, 1 output written

f_c = theano.function([], expr, mode='FAST_RUN')
f_o = theano.function([], expr, mode=theano_ocl.OCLMode(device=args.device, outputs='device'))
assert not theano_ocl.fallback_nodes(f_o)
assert np.allclose(f_o().get(), f_c(), rtol=1e-5, atol=1e-6)
assert f_o.fn.last_frame.n_launches == 1


def run_ocl():
    for _ in range(args.calls):
        r = f_o()
    r.queue.finish()


def run_c():
    for _ in range(max(args.calls // 10, 1)):
        f_c()


t_o = median_time(run_ocl, args.repeat) / args.calls
t_c = median_time(run_c, args.repeat) / max(args.calls // 10, 1)
bw = copy_bandwidth(dev, n * 4, args.repeat)
rows = [dict(variant='copy (enqueue_copy)', GBps=bw / 1e9, ms=2 * n * 4 / bw * 1e3),
        dict(variant='Theano C', GBps=moved / t_c / 1e9, ms=t_c * 1e3),
        dict(variant='theano_ocl (1 fused kernel)', GBps=moved / t_o / 1e9, ms=t_o * 1e3)]
for r in rows:
    r['% of copy'] = 100 * r['GBps'] * 1e9 / bw
table(rows, ['variant', 'ms', 'GBps', '% of copy'])
print('theano_ocl vs Theano C: %.1fx faster' % (t_c / t_o))
