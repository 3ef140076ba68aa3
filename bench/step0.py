"""Step 0 after ``set_value``: ``run_steps(1)`` of the Nengo-like step of
``python -m theano_ocl bench --only nengo_ocl`` (E ensembles of N LIF neurons; its
parameters drawn at random here, so nengo is not needed) after ``set_value`` on every
state variable and with nothing set, against a later step (a run of ``--steps`` steps
over their number). Rounds alternate the three in one process; the ratios' range is
what the issue's target reads (step 0 after set_value <= 5x a later step).

    python bench/step0.py [--ensembles 500] [--neurons 100] [--steps 200] [--rounds 3]
                          [--device gpu] [--json FILE]
"""
import json
import sys
import time

import numpy as np
import common  # bench/common.py: the script's own folder is on sys.path
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
from theano_ocl.benchmarks import nengo_compare

F = np.float32


def parameters(E, N, seed=0):
    """The step's arrays (one input dimension), as ``nengo_compare.parameters`` gives them
    for a built network, drawn at random."""
    rng = np.random.RandomState(seed)
    return dict(dt=0.001, tau_rc=0.02, tau_ref=0.002, amplitude=1.0,
                a=float(np.exp(-0.2)), b=float(1 - np.exp(-0.2)), u=np.array([0.5], F),
                enc=rng.randn(E, N, 1).astype(F) * 3, bias=rng.randn(E, N).astype(F) * 2,
                dec=rng.randn(E - 1, 1, N).astype(F) * 0.01,
                dec_probe=rng.randn(1, N).astype(F) * 0.01,
                v0=rng.rand(E, N).astype(F), w0=np.zeros((E, N), F))


def main(argv=None):
    p = common.parser(__doc__.split('\n')[0])
    p.add_argument('--ensembles', type=int, default=500)
    p.add_argument('--neurons', type=int, default=100)
    p.add_argument('--steps', type=int, default=200)
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--samples', type=int, default=7, help='run_steps(1) calls per round')
    p.add_argument('--json', default=None)
    a = p.parse_args(argv)
    sim = theano_ocl.SimulatorOCL(
        nengo_compare.step_function(parameters(a.ensembles, a.neurons)), device=a.device)
    common.header('step 0 after set_value, E=%d x %d LIF neurons' % (a.ensembles, a.neurons),
                  sim.device)
    state = [i.variable for i in sim.function.maker.inputs if i.update is not None]
    init = [s.get_value() for s in state]
    sim.run_steps(a.steps, probes=[0])

    def later():
        t0 = time.perf_counter()
        sim.run_steps(a.steps, probes=[0])
        return (time.perf_counter() - t0) / a.steps

    def one(reset):
        if reset:
            for s, v in zip(state, init):
                s.set_value(v)
        t0 = time.perf_counter()
        sim.run_steps(1, probes=[0])
        return time.perf_counter() - t0
    rounds = []
    for r in range(a.rounds):
        step = float(np.median([later() for _ in range(3)]))
        after = float(np.median([one(True) for _ in range(a.samples)]))
        kept = sim.stats.get('loop_kept')
        still = float(np.median([one(False) for _ in range(a.samples)]))
        rounds.append(dict(later_step_s=step, after_set_value_s=after, nothing_set_s=still,
                           loop_kept=kept))
        print('round %d: a later step %.1f us | run_steps(1) after set_value %.1f us (%.2fx) '
              '| with nothing set %.1f us (%.2fx)' % (r, step * 1e6, after * 1e6, after / step,
                                                      still * 1e6, still / step))
    ratios = [x['after_set_value_s'] / x['later_step_s'] for x in rounds]
    print('step 0 after set_value: %.2f..%.2fx a later step over %d rounds (one process)'
          % (min(ratios), max(ratios), len(ratios)))
    if a.json:
        from theano_ocl.benchmarks.timing import cpu_name
        with open(a.json, 'w') as fh:
            json.dump(dict(bench='step0', date=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
                           commit=common.commit(), device=sim.device.name,
                           platform=sim.device.platform_name, host=cpu_name(),
                           ensembles=a.ensembles, neurons=a.neurons, steps=a.steps,
                           rounds=rounds), fh, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
