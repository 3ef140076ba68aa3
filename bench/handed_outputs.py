"""A CPU device's large host outputs handed over without a copy, against copied, in one
process, rounds interleaved, beside Theano C.

The functions of ``bench``'s check1 (``exp`` of a shared float32 vector, host result) and
of a 3-output variant (``exp``, ``tanh`` and ``x * 2`` of it): with the cost model off
(each runs on the device), outputs handed over (the default: from a frame's second call,
``runtime/steps.py``'s ``handed_host_output``) and copied (``HANDED_MIN_BYTES`` set above
every output before the function's first call). On a GPU both are copies.

    python bench/handed_outputs.py [--device cpu] [--sizes 65536 230400 1048576]
                                   [--rounds 7] [--calls 100] [--json FILE]
"""
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main():
    p = common.parser(__doc__)
    p.add_argument('--sizes', type=int, nargs='+', default=[65536, 230400, 1048576])
    p.add_argument('--rounds', type=int, default=7)
    p.add_argument('--calls', type=int, default=100)
    p.add_argument('--json', default=None)
    a = p.parse_args()
    import theano_ocl
    import theano
    import theano.tensor as T
    from theano_ocl.runtime import steps
    dev = theano_ocl.get_device(a.device)
    common.header('host outputs handed over against copied (cost model off)', dev)
    rows, record = [], []
    for n in a.sizes:
        x = theano.shared(np.random.RandomState(22).rand(n).astype('float32'), 'x')
        for label, outs in (('exp', lambda: T.exp(x)),
                            ('exp, tanh, x*2', lambda: [T.exp(x), T.tanh(x), x * 2])):
            fns = {'Theano C': theano.function([], outs(), mode='FAST_RUN')}
            keep = steps.HANDED_MIN_BYTES
            for name, least in (('handed', keep), ('copied', 1 << 62)):
                steps.HANDED_MIN_BYTES = least
                try:
                    f = theano.function([], outs(), mode=theano_ocl.OCLMode(
                        device=a.device, cost_model='off'))
                    f()                     # (plans the frame: the threshold is read here)
                finally:
                    steps.HANDED_MIN_BYTES = keep
                fns[name] = f
            want = fns['Theano C']()
            for name in ('handed', 'copied'):
                got = [fns[name]() for _ in range(3)]
                for g in got:
                    for u, w in zip(g if isinstance(g, list) else [g],
                                    want if isinstance(want, list) else [want]):
                        np.testing.assert_allclose(u, w, rtol=1e-5, atol=1e-6)
            times = {k: [] for k in fns}
            for _ in range(a.rounds):
                for k, f in fns.items():
                    for _ in range(3):
                        f()
                    t = time.perf_counter()
                    for _ in range(a.calls):
                        f()
                    times[k].append((time.perf_counter() - t) / a.calls * 1e6)
            med = {k: float(np.median(v)) for k, v in times.items()}
            rows.append({'n': n, 'outputs': label,
                         'Theano C us': med['Theano C'], 'copied us': med['copied'],
                         'handed us': med['handed'],
                         'copied/handed': med['copied'] / med['handed'],
                         'C/handed': med['Theano C'] / med['handed'],
                         'handed range': '%.0f..%.0f' % (min(times['handed']),
                                                         max(times['handed']))})
            record.append(dict(n=n, outputs=label, us=times))
    common.table(rows, ['n', 'outputs', 'Theano C us', 'copied us', 'handed us',
                        'copied/handed', 'C/handed', 'handed range'])
    if a.json:
        with open(a.json, 'w') as fh:
            json.dump(dict(device=dev.name, commit=common.commit(), rounds=record), fh,
                      indent=1)


if __name__ == '__main__':
    main()
