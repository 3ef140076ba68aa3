"""Public numbers about an OCL function: ``theano_ocl.stats(f)``.

What a call of ``f`` costs in the terms the runtime works in, for users tuning a model and
for tests that check behaviour without reading the function's internals. "Host step" and
"launch" are the definitions of :mod:`theano_ocl.runtime.plans` (``HOST_KINDS``,
``LAUNCH_KINDS``), the same ones ``run_steps`` reports in ``SimulatorOCL.stats``.
"""
from .runtime import planner, plans


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

    ``device``            the ``OCLDevice`` it runs on (as ``theano_ocl.get_device`` gives)
    ``frames``            device plans kept, one per input signature
    ``alternates``        device plans kept besides those, for the other IfElse branch
                          outcomes of their input signatures
    ``frame_bytes``       bytes of the device buffers those plans own (their copies of
                          inputs, intermediates, outputs: ``memory_info()['frame_bytes']``
                          is the sum over functions)
    ``replans``           times a call found its plan's assumptions broken and planned again
    ``host_tier``         when Theano's VM may run a tiny hot frame's calls in this thread
                          (``runtime/host_tier.py``): ``after`` (calls of the frame first
                          run on the device) and ``probes`` (calls then run both ways that
                          must agree to the bit; 0 where the results cannot depend on
                          where they run, or under ``host_tier='any'``); None: never
                          (``host_tier='off'``, a collective, an input destroyed in place)
    ``host_math``         where Theano's VM runs calls on the host (the cost model's choice,
                          the host tier), its elementwise nodes that vector functions
                          (NumPy's or glibc's libmvec) compute over 1,024 elements or more (``host_math``
                          setting, ``runtime/host_math.py``; Scans' inner functions
                          included): ``nodes``, ``runs`` of them so far, and the
                          ``backend`` ('numpy' or 'libmvec'); None before the host's VM is
                          linked or where Theano C's code computes them
    ``host_thunks``       where Theano's VM runs calls on the host, its nodes given a
                          faster thunk by an op family, per op name: ``Gemm``, ``Dot22``,
                          ``Dot22Scalar`` calling NumPy's BLAS in Theano's C code
                          (``ops/host_blas.py``; not under ``host_math='c'``); None
                          before the host's VM is linked
    ``host_scan``         where Theano's VM runs calls on the host, its Scan nodes
                          (inner functions' included) given theano_ocl's loop
                          (``runtime/host_scan.py``): ``scans``, the loops it ``runs``,
                          the ``plain_runs`` left to Theano's ``Scan.execute`` (a
                          ``while`` condition, updated shared variables ...); None
                          before the host's VM is linked
    ``host_in_place``     where Theano's VM runs calls on the host and nodes overwrite
                          shared variables in place (``runtime/host_tail.py``): the calls
                          that wrote them ``in_place``, those that ``copied`` them first
                          (new shapes for the writing nodes), and ``why_not`` (None, or why
                          every call copies: a node that can fail for its values, one that
                          runs Python code ...); None where nothing is overwritten or
                          before the host's VM is linked
    ``host_inputs``       {Apply node: input positions it reads as host values (sizes,
                          indices, shape checks)} for the device nodes that read any
    ``fused``             one ``(node, into, stored)`` per device node with no launch of
                          its own: its value is computed in the kernel of each node of
                          ``into`` (the first: where it is planned); ``stored``: that
                          kernel also stores the value (it is kept: an output, an update,
                          read later)
    ``planned``           whether a call has run (the keys from here to ``on_host`` are
                          None until then)
    ``launches``          kernel launches and device copies a call makes, as recorded
    ``batched_launches``  the same once the planner merged independent launches (what a
                          hot call makes: equal to ``launches`` where no batched plan runs)
    ``kernels``           one ``(node, name, global size)`` per kernel a call launches, in
                          order, as recorded (``node``: the Apply node it computes, the first
                          of them for a launch merging several nodes' elementwise launches;
                          library calls and device copies are launches without a kernel)
    ``batched_kernels``   the same once the planner merged launches (a merged launch's
                          name starts with ``batched_``, its node is None)
    ``update_launches``   device copies a call's updates make into the shared variables'
                          device copies, as recorded
    ``batched_update_launches``  the launches those copies take once the call is hot and
                          the planner merged them (equal to ``update_launches`` where not)
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
    prog = fn.program
    frame = fn.last_frame
    out = dict(device=fn.dev, frames=len(fn.frames),
               alternates=sum(len(fr.alternates) for fr in fn.frames.values()),
               frame_bytes=fn.cached_bytes(), replans=fn.replans, planned=frame is not None,
               launches=None, batched_launches=None, kernels=None, batched_kernels=None,
               update_launches=None, batched_update_launches=None, host_steps=None,
               checks=None, on_host=None)
    if frame is not None:
        n = plans.launches(frame.steps)
        batched = frame.batched
        kernels = _kernels(prog, frame.steps)
        out.update(launches=n, host_steps=plans.host_steps(frame.steps),
                   checks=len(frame.checks),
                   batched_launches=batched.n_launches_after if batched else n,
                   kernels=kernels,
                   batched_kernels=_kernels(prog, batched.plans) if batched else kernels,
                   on_host=bool(frame.on_host or (
                       frame.tiny and fn.host_tier_after is not None and not frame.tier_probes
                       and frame.replays > fn.host_tier_after)))
        out.update(_update_launches(fn.run_context, frame))
    out['host_tier'] = None if fn.host_tier_after is None else dict(
        after=fn.host_tier_after, probes=fn.tier_probes)
    out['host_inputs'] = {task.node: tuple(sorted(task.host_inputs)) for task in prog.tasks
                          if task.kind == 'dev' and task.host_inputs}
    out['fused'] = _fused(prog.tasks)
    out['scans'] = [dict(node=str(task.node.op), **task.impl.last_run)
                    for task in prog.tasks
                    if task.kind == 'dev' and getattr(task.impl, 'last_run', None)]
    out['host_kept_bytes'] = fn.host_kept_bytes
    out['host_math'] = fn.host_math
    out['host_scan'] = fn.host_scan
    out['host_thunks'] = fn.host_thunks
    out['host_in_place'] = fn.host_in_place
    last = fn.last_call
    out['last_call'] = None if last is None else dict(
        steady=last[0], uploads=last[1], upload_bytes=last[2], upload_transfers=last[3])
    if hasattr(f, 'run_steps'):
        out['run_steps'] = dict(getattr(f, 'stats', None) or {})
    return out


def _kernels(prog, steps):
    """(node, kernel name, global size) of each kernel launch among ``steps``."""
    return [(prog.tasks[s.task].node if s.task >= 0 else None, s.name, s.gsize)
            for s in steps if isinstance(s, plans.Launch)]


def _update_launches(rc, frame):
    """``update_launches`` and ``batched_update_launches`` of ``frame``: its commits that
    are device copies into resident shared variables (``planner.commit_copy_step``, what
    the commit plan batches), and the launches its commit plan makes of them."""
    copies = [planner.commit_copy_step(rc, prepare) for prepare in frame.commits]
    n = plans.launches([c for c in copies if c is not None])
    plan = frame.commit_plan
    return dict(update_launches=n,
                batched_update_launches=plan.plan.n_launches_after if plan else n)


def _fused(tasks):
    """``fused``: (node, the nodes whose kernels compute it, stored) per folded task."""
    takers = {}
    for t in tasks:
        for e in t.fused.values():
            takers.setdefault(id(e), []).append(t)
    return [(t.node, tuple([t.fused_into.node] + [u.node for u in takers.get(id(t), ())
                                                  if u is not t.fused_into]), t.stored)
            for t in tasks if t.fused_into is not None]
