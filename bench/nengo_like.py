"""A naive Theano port of a Nengo network: Theano C in a loop vs SimulatorOCL.run_steps,
with the diagnostics ``python -m theano_ocl bench --only nengo`` leaves out: launches per
step batched and not, the step loop apart from step 0 and planning, the time of each
launch of the batched plan (``--detail``), a pickle cache of the compiled function for
big networks (``--cache``). The network is :func:`theano_ocl.benchmarks.nengo.build`.

    python bench/nengo_like.py --ensembles 50 --steps 200 [--device 0:0] [--detail]
                               [--cache nengo50.pkl]
"""
import argparse
import os
import pickle
import sys
import time

import numpy as np
import theano_ocl  # first: makes Theano importable on numpy >= 1.22 without the .pth
X


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
    p.add_argument('--detail', action='store_true', help='time each launch of the batched plan')
    p.add_argument('--no-c', action='store_true',
                   help='skip timing Theano C (its 500 steps take 30 s at E=500): for A/B runs '
                        'of a setting in separate processes, e.g. THEANO_OCL_EPILOGUE=0')
    p.add_argument('--cache', default=None,
                   help='pickle file of the compiled Theano function: loaded if it exists, else '
                        'written (Theano takes minutes to optimize E=500 graphs)')
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
        print('%-34s %10.1f %9.2fx   (steps 1..n-1 only; step 0 %.1f ms, planning %.1f ms)'
              % ('  of which the step loop', (a.steps - 1) / st['loop_s'],
                 t_c / a.steps * (a.steps - 1) / st['loop_s'], st['first_step_s'] * 1e3,
                 st['plan_s'] * 1e3))
    print('(step 0 is an ordinary call; here it also uploads every shared variable, since the '
          'bench resets them with set_value before each run)')
    print('(max |err|: LIF spiking is a threshold process; a float rounding difference flips a '
          'spike and the trajectories part; the tests check the arithmetic on fixed graphs)')
    if a.detail:
        detail(sim)


def detail(sim, reps=20):
    """Each launch of the batched step plan alone: enqueue + finish, median microseconds."""
    import statistics
    main = sim._main
    fns, commits, info = main.vm.executor.plans_for(main.vm.last_frame, True)
    q = main.vm.queue
    print('batched plan: %d step launches, %d commit launches' % (len(fns), len(commits)))
    total = 0.0
    for label, group in (('step', fns), ('commit', commits)):
        for k, fn in enumerate(group):
            ts = []
            for _ in range(reps):
                t0 = time.perf_counter()
                fn()
                q.finish()
                ts.append(time.perf_counter() - t0)
            t = statistics.median(ts) * 1e6
            total += t
            name = getattr(getattr(fn, '__closure__', None) and _kernel_of(fn), 'function_name', '')
            print('  %-6s %3d %9.1f us  %s' % (label, k, t, name))
    print('sum of launches (each followed by a finish): %.1f us' % total)


def _kernel_of(fn):
    for c in fn.__closure__ or ():
        v = c.cell_contents
        if type(v).__name__ == 'Kernel':
            return v
    return None


if __name__ == '__main__':
    main()
