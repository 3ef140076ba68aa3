"""Where each node of a compiled function runs: ``report(f)``, ``placements(f)`` and
``fallback_nodes(f)``."""
import sys

#: the default width of ``report(f)``'s lines (longer ones end in ``...``; ``width=None``
#: prints them whole, and ``placements(f)`` keeps every detail whole)
WIDTH = 160
#: where a "device" node's work runs on the host, in its device's mapped buffers
HOST_BLAS = 'host BLAS on the mapped buffers'
#: where it runs on the host as a command of the device's queue (``ops/blas_queued.py``)
HOST_BLAS_QUEUED = 'host BLAS queued on the device'


def _program(f):
    fn = getattr(f, 'fn', f)
    prog = getattr(fn, 'program', None)
    if prog is None:
        raise TypeError('%r was not compiled with the OCL linker (use mode="OCL" or '
                        'theano_ocl.OCLMode(), or wrap it with theano_ocl.SimulatorOCL)' % (f,))
    return prog, fn


def placements(f):
    """One (node, where, implementation) tuple per Apply node, in execution order.

    ``where`` is 'device', 'host-shape' (shape arithmetic on host values, by design)
    or 'host-fallback' (no device implementation: Theano's own code runs with transfers).
    A device node whose products run as host BLAS (a BLAS op or a convolution's products on
    a CPU device, or on a GPU sharing host memory) says so first in its implementation:
    ``HOST_BLAS`` (in the device's mapped buffers) or ``HOST_BLAS_QUEUED`` (a command of
    the device's queue), where its planned frames do (small products run a kernel instead),
    or, before the function has run, where a BLAS op's backend is the host's.
    """
    prog, fn = _program(f)
    mapped = _host_blas_tasks(fn)
    rows = []
    for k, task in enumerate(prog.tasks):
        if task.kind == 'dev':
            desc = task.impl.describe()
            host_backend = getattr(task.impl, 'backend', None) == 'host'   # (BLAS ops)
            if mapped is not None and k in mapped:      # (a convolution's products too)
                desc = '%s: %s' % (mapped[k], desc)
            elif host_backend and task.fused_into is None:
                desc = ('host BLAS where a product is not small: %s' % desc
                        if mapped is None else
                        'a kernel, not host BLAS: %s' % desc)  # (gemm_small's)
            if task.fused_into is not None:
                if task.impl.takes_epilogue:
                    desc = ('%s, planned at %s, whose output its kernel computes (epilogue; '
                            'the small-product and tiled kernels)' % (desc, task.fused_into.node.op))
                else:
                    takers = [t.node.op for t in prog.tasks
                              if any(e is task for e in t.fused.values())]
                    if task.stored:
                        desc = 'computed and stored by the kernel of %s' % takers[0]
                    elif len(takers) < 2:
                        desc = 'fused into %s: computed in its kernel' % takers[0]
                    else:
                        desc = ('fused into %s: computed in each of their kernels'
                                % ', '.join(map(str, takers)))
            elif task.fused:
                desc += ' (with %s fused)' % ', '.join(str(e.node.op) for e in task.fused.values())
            rows.append((task.node, 'device', desc))
        elif task.kind == 'shape':
            rows.append((task.node, 'host-shape', 'read off the array shape'))
        elif task.meta:
            rows.append((task.node, 'host-shape', 'Theano thunk on host scalars'))
        else:
            impl = 'C' if hasattr(task.thunk, 'cthunk') else 'perform'
            rows.append((task.node, 'host-fallback', '%s (%s)' % (impl, task.reason)))
    return rows


def host_fallbacks(prog):
    """The Apply nodes of the linked program ``prog`` that run on the host for want of a
    device implementation (``placements``' 'host-fallback' rows)."""
    return [task.node for task in prog.tasks
            if task.kind not in ('dev', 'shape') and not task.meta]


def _host_blas_tasks(fn):
    """{task index: HOST_BLAS or HOST_BLAS_QUEUED} for the tasks whose planned frames run
    host BLAS: host steps in mapped device buffers (``HostStep.follows``), or commands of
    the device's queue (a library call whose ``session`` says ``host_blas``); None where no
    frame is planned yet."""
    frames = [g for frame in fn.frames.values() for g in [frame] + list(frame.alternates)]
    if not frames:
        return None
    tasks = {}
    for frame in frames:
        for step in frame.steps:
            if step.kind == 'host' and step.follows:
                tasks[step.task] = HOST_BLAS
            elif getattr(getattr(step, 'session', None), 'host_blas', False):
                tasks.setdefault(step.task, HOST_BLAS_QUEUED)
    return tasks


def fallback_nodes(f):
    """The Apply nodes that run on the host for want of a device implementation."""
    return host_fallbacks(_program(f)[0])


def inner_functions(f):
    """(Apply node, compiled inner function) for each node of ``f`` that runs functions
    inside it on the device (a device Scan's inner function), in execution order."""
    prog, _ = _program(f)
    return [(task.node, inner) for task in prog.tasks if task.kind == 'dev'
            for inner in task.impl.inner_functions]


def report(f, file=None, width=WIDTH):
    """Print, per node, where it runs and with which implementation; under a node that
    runs an inner function (a device Scan), that function's placements, indented. On a CPU
    device, a line per input signature says whether its calls run on the host or on the
    device, and why (the cost model of ``runtime/cost.py``), and where one runs on the host,
    a line says that its calls run every node there.

    A node's line longer than ``width`` characters is cut, ending in ``...`` (a fused
    kernel's detail can list dozens of producers); ``width=None`` prints every line
    whole, as ``placements(f)`` gives every detail."""
    file = file or sys.stdout
    prog, fn = _program(f)
    rows = placements(f)
    print('theano_ocl: %s  |  %s' % (fn.dev, _counts(prog, rows)), file=file)
    choices = [c for c in getattr(fn, 'cost_choices', {}).values() if c is not None]
    for k, choice in enumerate(choices):
        # (runtime/cost.py: a CPU device's choice at each input signature's first call)
        _print(file, width, '  input signature %d %s' % (k, choice.why))
    if any(c.host for c in choices):
        _print(file, width, '  %s' % ON_HOST_NOTE)
    _print_rows(f, rows, file, width, '')


#: ``report``'s line under the signatures where one runs on the host
ON_HOST_NOTE = ("(a signature on the host: Theano's VM runs all of its nodes; the placements "
                "below are where its other signatures' calls run them)")


def _print(file, width, line):
    if width is not None and len(line) > width:
        line = line[:max(width - 3, 0)] + '...'
    print(line, file=file)


def _counts(prog, rows):
    c = prog.counts()
    blas = sum(1 for _, where, impl in rows
               if where == 'device' and impl.startswith((HOST_BLAS + ':', HOST_BLAS_QUEUED + ':')))
    return '%d nodes: %d device%s, %d host shape arithmetic, %d host fallback' % (
        len(rows), c['device'], ' (%d of them host BLAS)' % blas if blas else '', c['meta'],
        c['fallback'])


def _print_rows(f, rows, file, width, indent):
    inner = {}
    for node, g in inner_functions(f):
        inner.setdefault(node, []).append(g)
    for k, (node, where, impl) in enumerate(rows):
        _print(file, width, '%s%4d  %-13s  %-40s  %s' % (indent, k, where, str(node.op)[:40],
                                                         impl))
        for g in inner.get(node, ()):
            sub = placements(g)
            _print(file, width, '%s      inner of %s: %s' % (
                indent, str(node.op)[:40], _counts(_program(g)[0], sub)))
            _print_rows(g, sub, file, width, indent + '      ')


class _ReportModule(type(sys)):
    """This module, callable as :func:`report`: ``import theano_ocl.report`` (or ``from
    theano_ocl.report import ...``) binds ``theano_ocl.report`` to the module, and a
    user's ``theano_ocl.report(f)`` must go on working after it."""

    def __call__(self, f, file=None, width=WIDTH):
        return report(f, file=file, width=width)


sys.modules[__name__].__class__ = _ReportModule
