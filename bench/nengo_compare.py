"""Nengo against nengo-ocl: one Nengo network run by ``nengo_ocl.Simulator``, by
``SimulatorOCL.run_steps`` of the Theano graph of its step and by Theano C calling that
graph, in one process on one OpenCL device (theano_ocl's; nengo-ocl gets its context).
The network and the graph: :mod:`theano_ocl.benchmarks.nengo_compare` (the suite's
``nengo_ocl`` case). Needs ``pip install 'theano_ocl[nengo]'``.

    python bench/nengo_compare.py --ensembles 10 --neurons 100 --steps 1000 [--repeat 5]
                                  [--device 0:0] [--json run.json]

Each backend first runs ``--check`` steps from the initial state (the outputs must agree:
theano_ocl with Theano C, and with nengo-ocl), then ``--steps`` steps from there for the
agreement report, then ``--repeat`` timed runs of ``--steps`` steps each, the backends
taking turns, each from the state its last run left (no reset: nothing to upload).
"""
import sys
import time

import numpy as np
import common  # bench/common.py: the script's own folder is on sys.path
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
from theano_ocl.benchmarks import nengo_compare as nc


def main(argv=None):
    p = common.parser(__doc__.split('\n')[0])
    p.add_argument('--ensembles', type=int, default=10)
    p.add_argument('--neurons', type=int, default=100)
    p.add_argument('--steps', type=int, default=1000)
    p.add_argument('--check', type=int, default=20,
                   help='steps from the initial state whose outputs must agree (default 20)')
    p.add_argument('--no-c', action='store_true', help='leave Theano C out of the timings')
    p.add_argument('--json', default=None, help='write the run to this file')
    a = p.parse_args(argv)
    why = nc.missing()
    if why:
        print(why, file=sys.stderr)
        return 2
    t0 = time.time()
    cmp = nc.Comparison(a.ensembles, a.neurons, device=a.device, steps_hint=a.steps)
    t_build = time.time() - t0
    common.header('Nengo: nengo-ocl vs theano_ocl vs Theano C, E=%d x %d LIF neurons, %d steps'
                  % (a.ensembles, a.neurons, a.steps), cmp.dev)
    print('# built in %.1f s (nengo model, nengo-ocl planning, two Theano functions); '
          'nengo %s, nengo-ocl %s' % (t_build, *_versions()))
    cmp.check(a.check)
    cmp.reset()
    got = {nc.BASELINE: cmp.theano_c(a.steps), nc.OCL: cmp.theano_ocl(a.steps),
           nc.NENGO_OCL: cmp.nengo_ocl(a.steps)}
    agree = {'theano_ocl vs Theano C': nc.agreement(got[nc.OCL], got[nc.BASELINE]),
             'theano_ocl vs nengo-ocl': nc.agreement(got[nc.OCL], got[nc.NENGO_OCL]),
             'Theano C vs nengo-ocl': nc.agreement(got[nc.BASELINE], got[nc.NENGO_OCL])}
    runners = [(nc.NENGO_OCL, cmp.nengo_ocl), (nc.OCL, cmp.theano_ocl)]
    if not a.no_c:
        runners.append((nc.BASELINE, cmp.theano_c))
    samples = {name: [] for name, _ in runners}
    for _ in range(max(1, a.repeat)):
        for name, run in runners:            # taking turns: load spread over all alike
            t0 = time.perf_counter()
            run(a.steps)
            samples[name].append((time.perf_counter() - t0) / a.steps)
    med = {k: float(np.median(v)) for k, v in samples.items()}
    rows = []
    for name, _ in runners:
        s = samples[name]
        rows.append({'backend': name, 'ms/step (median)': med[name] * 1e3,
                     'range': '%.3g..%.3g' % (min(s) * 1e3, max(s) * 1e3),
                     'steps/s': 1 / med[name],
                     'vs nengo-ocl': med[nc.NENGO_OCL] / med[name],
                     'vs Theano C': med[nc.BASELINE] / med[name] if nc.BASELINE in med else None})
    common.table(rows, ['backend', 'ms/step (median)', 'range', 'steps/s', 'vs nengo-ocl',
                        'vs Theano C'])
    print('(%d timed runs of %d steps each; "vs X": X\'s time / this one\'s, > 1 is faster)'
          % (a.repeat, a.steps))
    st = cmp.sim.stats
    print('theano_ocl run_steps: launches/step %s (unbatched %s), host steps %s'
          % (st.get('launches_per_step'), st.get('launches_per_step_unbatched'),
             st.get('host_steps')))
    for k, v in agree.items():
        print('%-24s equal for %d of %d steps (max |diff| %.2g there); 10 ms-filtered output '
              'RMS diff %.2g of its RMS' % (k, v['steps_equal'], v['steps'], v['max_diff_equal'],
                                             v['filtered_rel_rms']))
    if a.json:
        common.write_record(a.json, 'nengo_compare', cmp.dev,
                            {k: [(t,) for t in v] for k, v in samples.items()}, med,
                            med.get(nc.BASELINE, float('nan')) / med[nc.OCL], None,
                            ensembles=a.ensembles, neurons=a.neurons, steps=a.steps,
                            versions=dict(zip(('nengo', 'nengo_ocl'), _versions())),
                            vs_nengo_ocl=med[nc.NENGO_OCL] / med[nc.OCL], agreement=agree,
                            launches_per_step=st.get('launches_per_step'))
    cmp.close()
    return 0


def _versions():
    import nengo
    import nengo_ocl
    return nengo.__version__, nengo_ocl.__version__


if __name__ == '__main__':
    sys.exit(main())
