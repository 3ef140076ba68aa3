"""A naive Theano port of a Nengo network: Theano C in a loop vs SimulatorOCL.run_steps,
with the diagnostics ``python -m theano_ocl bench --only nengo`` leaves out: launches per
step batched and not, the step loop apart from step 0 and planning, where one step's
device time goes (``--detail``: Theano's profile of the simulator's function, per op and
per node, with each device node's kernel time from OpenCL events), a pickle cache of the
compiled function for big networks (``--cache``). The network is
:func:`theano_ocl.benchmarks.nengo.build`.

    python bench/nengo_like.py --ensembles 50 --steps 200 [--device 0:0] [--detail]
                               [--cache nengo50.pkl] [--rounds 3] [--json run.json]
"""
import argparse
import os
import pickle
import sys
import time

import numpy as np
import common  # bench/common.py: the script's own folder is on sys.path
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
from theano_ocl.benchmarks.nengo import build  # noqa: F401  (also bench/cmdbuf.py's)


F = np.float32


def _open(path, mode):
    """The cache file, gzip-compressed when its name ends in .gz (E=500: 129 -> 8 MB)."""
    if path.endswith('.gz'):
        import gzip
        return gzip.open(path, mode, compresslevel=1)
    return open(path, mode)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--ensembles', type=int, default=50)
    p.add_argument('--neurons', type=int, default=100)
    p.add_argument('--steps', type=int, default=200)
    p.add_argument('--device', default=None)
    p.add_argument('--detail', action='store_true',
                   help="profile a step: device time per op and per node (Theano's profile)")
    p.add_argument('--no-c', action='store_true',
                   help='skip timing Theano C (its 500 steps take 30 s at E=500): for A/B runs '
                        'of a setting in separate processes, e.g. THEANO_OCL_EPILOGUE=0')
    p.add_argument('--cache', default=None,
                   help='pickle file of the compiled Theano function: loaded if it exists, else '
                        'written (Theano takes minutes to optimize E=500 graphs)')
    p.add_argument('--rounds', type=int, default=3,
                   help='runs of run_steps(steps) from the state kept, per batch setting')
    p.add_argument('--json', default=None,
                   help='write the run (batched, state kept) to this file (docs/_data/scripts/)')
    a = p.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 100000))   # pickling big graphs
    t0 = time.time()
    if a.cache and os.path.exists(a.cache):
        with _open(a.cache, 'rb') as fh:      # Theano does not re-optimize unpickled functions
            f, D = pickle.load(fh)
    else:
        f, D = build(a.ensembles, a.neurons)
        if a.cache:
            with _open(a.cache, 'wb') as fh:
                pickle.dump((f, D), fh, protocol=pickle.HIGHEST_PROTOCOL)
    t_build = time.time() - t0
    us = np.sin(np.arange(a.steps, dtype=F) * F(0.01))[:, None].astype(F).repeat(D, 1)
    shared = [i.variable for i in f.maker.inputs[1:]]
    init = [s.get_value() for s in shared]

    f(us[0])                                                     # warm
    for s, v in zip(shared, init):                 # (the warm call stepped the state)
        s.set_value(v)
    n_c = 5 if a.no_c else a.steps         # errors are then checked over the first 5 steps
    t0 = time.perf_counter()
    c_out = [f(x)[0] for x in us[:n_c]]
    t_c = (time.perf_counter() - t0) * a.steps / n_c
    c_state = [s.get_value() for s in shared]
    for s, v in zip(shared, init):
        s.set_value(v)

    def timed(sim, batch):
        sim.run_steps(2, inputs={'u': us[:2]})                   # warm: plan, kernels
        for rep in range(2):         # the first run of each plans (batching, kernels)
            for s, v in zip(shared, init):
                s.set_value(v)
            t0 = time.perf_counter()
            got = sim.run_steps(a.steps, inputs={'u': us}, probes=[0], batch=batch)[0]
            t = time.perf_counter() - t0
            st = dict(sim.stats)
        err = float(np.max(np.abs(got[:n_c] - np.array(c_out))))
        if n_c == a.steps:
            err = max(err, max(float(np.max(np.abs(s.get_value() - w)))
                               for s, w in zip(shared, c_state)))
        # the same run again from where the state is (no set_value: nothing to upload),
        # as a user's second run_steps call (and third...: ``--rounds``)
        kept = []
        for _ in range(max(1, a.rounds)):
            t0 = time.perf_counter()
            sim.run_steps(a.steps, inputs={'u': us}, probes=[0], batch=batch)
            kept.append(time.perf_counter() - t0)
        st['kept'] = (float(np.median(kept)), sim.stats['first_step_s'], kept)
        # step 0 on its own: run_steps(1) (setup, step, results: all of a call's cost),
        # after set_value on every shared variable, and with nothing set
        ones = {}
        for reset in (True, False):
            times = []
            for _ in range(5):
                if reset:
                    for s, v in zip(shared, init):
                        s.set_value(v)
                t0 = time.perf_counter()
                sim.run_steps(1, inputs={'u': us[:1]}, probes=[0], batch=batch)
                times.append(time.perf_counter() - t0)
            ones[reset] = float(np.median(times))
        st['one_step'] = ones
        return batch, t, st, err

    sim = theano_ocl.SimulatorOCL(f, device=a.device)
    fb = theano_ocl.fallback_nodes(sim.function)
    rows = [timed(sim, batch) for batch in (False, True)]
    print('nengo_like: E=%d ensembles x %d LIF neurons, %d steps, device %s (graph built in %.1f s)'
          % (a.ensembles, a.neurons, a.steps, sim.device, t_build))
    fb_ops = sorted({type(n.op).__name__ for n in fb})
    print('host fallbacks in the device graph: %d nodes %s' % (len(fb), fb_ops))
    print('%-34s %10s %10s' % ('', 'steps/s', 'vs C'))
    print('%-34s %10.1f %10s%s' % ('Theano C (f in a loop)', a.steps / t_c, '1.00',
                                   '   (from %d steps: --no-c)' % n_c if a.no_c else ''))
    for batch, t, st, err in rows:
        label = 'run_steps batch=%s' % batch
        print('%-34s %10.1f %9.2fx   launches/step %d (unbatched %d), host steps %d, '
              'max |err| vs C %.2g' % (label, a.steps / t, t_c / t, st['launches_per_step'],
                                       st['launches_per_step_unbatched'], st['host_steps'], err))
        looped = st.get('loop_steps', a.steps - 1)
        print('%-34s %10.1f %9.2fx   (%s; before them %.1f ms, planning %.1f ms)'
              % ('  of which the step loop', looped / st['loop_s'],
                 t_c / a.steps * looped / st['loop_s'],
                 'steps 1..n-1: step 0 a call' if looped < a.steps else
                 'steps 0..n-1: step 0 in the loop', st['first_step_s'] * 1e3,
                 st['plan_s'] * 1e3))
        print('%-34s %10.1f %9.2fx   (state kept from the run before: step 0 %.1f ms; '
              'median of %d runs, %.2f..%.2fx)'
              % ('  run again, no set_value', a.steps / st['kept'][0],
                 t_c / st['kept'][0], st['kept'][1] * 1e3, len(st['kept'][2]),
                 t_c / max(st['kept'][2]), t_c / min(st['kept'][2])))
        later = st['loop_s'] / looped
        print('%-34s %10s %10s   run_steps(1) after set_value on all %.2f ms (%.1fx a later '
              'step), with nothing set %.2f ms (%.1fx)'
              % ('  step 0 alone', '', '', st['one_step'][True] * 1e3,
                 st['one_step'][True] / later, st['one_step'][False] * 1e3,
                 st['one_step'][False] / later))
    print('(the runs above reset every shared variable with set_value first: step 0 uploads '
          'them; "step 0 alone" times a whole run_steps(1), setup and results included)')
    print('(max |err|: LIF spiking is a threshold process; a float rounding difference flips a '
          'spike and the trajectories part; the tests check the arithmetic on fixed graphs)')
    if a.json:
        _record(a, sim, t_c, rows, fb)
    if a.detail:
        detail(sim, us[0])


def _record(a, sim, t_c, rows, fb):
    """The batched run_steps from the state kept, as ``bench/common.write_record`` keeps the
    training scripts' runs: rounds in seconds per step, ms per step, the ratio."""
    _, t_reset, st, err = [r for r in rows if r[0]][0]
    kept = st['kept'][2]
    rounds = {'Theano C': [(t_c / a.steps,)],
              'theano_ocl': [(t / a.steps,) for t in kept]}
    step = {'Theano C': t_c / a.steps, 'theano_ocl': st['kept'][0] / a.steps}
    common.write_record(a.json, 'nengo', sim.device, rounds, step,
                        step['Theano C'] / step['theano_ocl'], err,
                        ensembles=a.ensembles, neurons=a.neurons, steps=a.steps,
                        c_steps_timed=5 if a.no_c else a.steps,
                        reset_run_ratio=t_c / t_reset,
                        launches_per_step=st['launches_per_step'],
                        fallbacks=len(fb))


def detail(sim, u, reps=20, top=15):
    """Where one step's time goes: the simulator's function copied with a profile
    (Theano's ``Function.copy``: the same linked graph, its storage and shared variables
    shared), called ``reps`` times on the step input ``u``, then Theano's profile summary:
    device nodes' times are their kernels' and copies' from OpenCL events, host nodes'
    their thunks' wall time (docs/profiling.md). Profiled calls launch every node on its
    own (no batching) and keep every event, so the node times tell what each op costs the
    device, not the batched step's wall time measured above."""
    import io
    g = sim.function.copy(share_memory=True, profile=True)
    for _ in range(reps):
        g(u)
    out = io.StringIO()
    g.profile.summary(file=out, n_ops_to_print=top, n_apply_to_print=top)
    text = out.getvalue()
    # the function-level lines, the theano_ocl section and the Class / Ops / Apply
    # tables; not the heading nor Theano's closing tips
    start = text.find('  Time in ')
    end = text.find('Here are tips')
    print('profile of %d unbatched calls (the step without run_steps\' batching):' % reps)
    print(text[max(start, 0):end if end >= 0 else len(text)].rstrip())


if __name__ == '__main__':
    main()
