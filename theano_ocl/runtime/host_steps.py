"""``Executor.run`` for a signature whose calls run on the host (``frame.on_host``: the cost
model's choice, ``runtime/cost.py``, or a value the device cannot hold): every step is a
call, its updates committed after it, with the probes and carries that the device loop
keeps.

Where the last call's frame ran on the host, ``run`` comes here before anything reaches
the device (:func:`host_run`): the per-step inputs stay host arrays (a device feed is
downloaded once). Staged on the device, every step's row came back by a download: three
queue round trips a run, ~45 us each on PoCL (bench nengo --quick, E=5 x 50, 2-core EPYC,
2026-11-30: 73.8 -> 51-52 us a step). Should a call of the run plan another frame, its
steps are still calls: the same results, only slower.
"""
import time

import numpy as np


def carry_error(prog, i, feeds, what, error):
    """The error for a carry into input ``i`` that is not a device input of the function
    or is also fed per step, else None."""
    if prog.input_kinds[i] != 'dev' or i in feeds:
        return error('%s: carry into input %d: not a device input of this function, or fed '
                     'per step' % (what, i))
    return None


def host_run(rc, call, n, feeds, carry, probe_idx, k, stats, probes_on, what, error):
    """``run``'s ``n`` steps as calls from pass 0 on (``rc``: the function's RunContext;
    the other arguments are ``run``'s); the probes as host arrays, or device arrays with
    ``probes_on='device'``."""
    prog = rc.program
    cells = prog.input_cells
    host = {i: host_value(a, rc.queue) for i, a in feeds.items()}
    for i, (j, init) in carry.items():
        e = carry_error(prog, i, feeds, what, error)
        if e is not None:
            raise e
        cells[i][0] = init if hasattr(init, 'base_data') else \
            np.array(init, dtype=prog.fgraph.inputs[i].type.dtype)
    for i, arr in host.items():
        # a 0-d array, never a numpy scalar: Theano's C code takes ndarrays
        cells[i][0] = arr[0, ...]
    t_start = time.perf_counter()
    outs0 = call()
    out = calls(rc, call, outs0, n, host, carry, probe_idx, k, stats,
                time.perf_counter() - t_start)
    return on(rc.queue, out, probes_on)


def on(queue, probes, probes_on):
    """The probes where ``run`` was asked to leave them."""
    if probes_on == 'host':
        return probes
    import pyopencl.array as cla
    return [cla.to_device(queue, a) for a in probes]


def calls(rc, call, outs0, n, feeds, carry, probe_idx, k, stats, first_s):
    """``run``'s steps 1..n-1 as calls (pass 0 returned ``outs0``): every step is exactly
    a call, its updates committed after it; the probes and carries as the device loop
    keeps them."""
    cells = rc.program.input_cells
    host = {i: np.asarray(host_value(a, rc.queue)) for i, a in feeds.items()}
    probed = {j: [] for j in probe_idx}
    stats.update(host_steps=0, feed='call', steps=n, first_step_s=first_s, plan_s=0.0,
                 steps_done=1, call_steps=n - 1, launches_per_step=0,
                 launches_per_step_unbatched=0, batched=False)
    t_loop = time.perf_counter()
    outs = outs0
    for step in range(n):
        if step:
            for i, arr in host.items():
                cells[i][0] = arr[step, ...]
            for i, (j, _) in carry.items():
                cells[i][0] = host_value(outs[j], rc.queue)
            outs = call()
            stats['steps_done'] = step + 1
        if (step + 1) % k == 0:
            for j in probe_idx:
                probed[j].append(np.array(host_value(outs[j], rc.queue), copy=True))
    stats['loop_s'] = time.perf_counter() - t_loop
    return [np.array(probed[j]).reshape((n // k,) + np.shape(probed[j][0]) if probed[j]
                                        else (0,)) for j in probe_idx]


def host_value(value, queue):
    """A host array of ``value`` (a device array: its copy)."""
    return value.get(queue=queue) if hasattr(value, 'base_data') else value
