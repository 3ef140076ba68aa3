"""Public numbers about an OCL function: ``theano_ocl.stats(f)``.

What a call of ``f`` costs in the terms the runtime works in, for users tuning a model and
for tests that check behaviour without reading the function's internals. "Host step" and
"launch" are the definitions of :mod:`theano_ocl.runtime.plans` (``HOST_KINDS``,
``LAUNCH_KINDS``), the same ones ``run_steps`` reports in ``SimulatorOCL.stats``.
"""
from .runtime import plans


def _vm(f):
    """The ``OCLFunction`` behind ``f``: a theano Function compiled with the OCL linker,
    a ``SimulatorOCL`` (its main function) or one of its methods."""
    g = getattr(f, 'function', f)           # SimulatorOCL and its methods
    fn = getattr(g, 'fn', g)
    if getattr(fn, 'program', None) is None or not hasattr(fn, 'frames'):
        raise TypeError('theano_ocl.stats: %r was not compiled with the OCL linker (use '
                        'mode="OCL" or theano_ocl.OCLMode(), or wrap it with '
                        'theano_ocl.SimulatorOCL)' % (f,))
    return fn


def stats(f):
    """A dict of facts about ``f`` (an OCL function, a ``SimulatorOCL`` or a method of one):

    ``frames``            device plans kept (one per input signature and IfElse branch)
    ``replans``           times a call found its plan's assumptions broken and planned again
    ``planned``           whether a call has run (the keys below are None until then)
    ``launches``          kernel launches and device copies a call makes, as recorded
    ``batched_launches``  the same once the planner merged independent launches (what a
                          hot call makes: equal to ``launches`` where no batched plan runs)
    ``host_steps``        plans of a call that return to the host (host nodes, the uploads
                          and downloads around them, guards reading host values)
    ``checks``            device error flags read after the call (bad index, division by 0)
    ``on_host``           whether the call runs on the host (Theano's own VM: a tiny frame
                          or one larger than the device allows)
    ``host_kept_bytes``   bytes Theano's VM on the host keeps between calls (its
                          intermediates' storage: at most 64 MiB, none for a function on
                          the host because the device cannot hold its values)
    ``last_call``         the last call's path and uploads: ``steady`` (it came back to
                          its last frame and skipped the key, the lookup and the re-binding
                          of every input; a shared variable set with a value of the same
                          shape and dtype keeps it there), ``uploads``, ``upload_bytes`` and
                          ``upload_transfers`` (shared variables' values sent to the device:
                          after ``set_value`` only those set, packed into one transfer where
                          they share a buffer); a call Theano's VM ran on the host
                          (``on_host``) uploads nothing; None until a call ran
    ``run_steps``         for a simulator: the facts of its last ``run_steps`` (launches per
                          step batched and not, host steps, steps run as calls)
    ``scans``             one dict per device Scan node, of its last loop: ``node``,
                          ``steps``, ``lowered_steps`` (steps run by the runtime's loop
                          driver rather than as passes of the inner function),
                          ``launches_per_step`` (of those steps: the inner frame's launches
                          and the row copies; None where none was lowered), ``loop_s``
                          (host wall time of the loop, enqueueing included)
    """
    fn = _vm(f)
    frame = fn.last_frame
    out = dict(frames=len(fn.frames), replans=fn.replans, planned=frame is not None,
               launches=None, batched_launches=None, host_steps=None, checks=None,
               on_host=None)
    if frame is not None:
        n = plans.launches(frame.steps)
        batched = frame.batched
        out.update(launches=n, host_steps=plans.host_steps(frame.steps),
                   checks=len(frame.checks),
                   batched_launches=batched.n_launches_after if batched else n,
                   on_host=bool(frame.on_host or (
                       frame.tiny and fn.host_tier_after is not None and not frame.tier_probes
                       and frame.replays > fn.host_tier_after)))
    out['scans'] = [dict(node=str(task.node.op), **task.impl.last_run)
                    for task in fn.program.tasks
                    if task.kind == 'dev' and getattr(task.impl, 'last_run', None)]
    out['host_kept_bytes'] = fn.host_kept_bytes
    last = fn.last_call
    out['last_call'] = None if last is None else dict(
        steady=last[0], uploads=last[1], upload_bytes=last[2], upload_transfers=last[3])
    if hasattr(f, 'run_steps'):
        out['run_steps'] = dict(getattr(f, 'stats', None) or {})
    return out
