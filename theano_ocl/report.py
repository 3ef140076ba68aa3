"""Where each node of a compiled function runs: ``report(f)`` and ``fallback_nodes(f)``."""
import sys


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
    """
    prog, fn = _program(f)
    rows = []
    for task in prog.tasks:
        if task.kind == 'dev':
            desc = task.impl.describe()
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


def fallback_nodes(f):
    """The Apply nodes that run on the host for want of a device implementation."""
    return [node for node, where, _ in placements(f) if where == 'host-fallback']


def inner_functions(f):
    """(Apply node, compiled inner function) for each node of ``f`` that runs functions
    inside it on the device (a device Scan's inner function), in execution order."""
    prog, _ = _program(f)
    return [(task.node, inner) for task in prog.tasks if task.kind == 'dev'
            for inner in task.impl.inner_functions]


def report(f, file=None):
    """Print, per node, where it runs and with which implementation; under a node that
    runs an inner function (a device Scan), that function's placements, indented."""
    file = file or sys.stdout
    prog, fn = _program(f)
    rows = placements(f)
    print('theano_ocl: %s  |  %s' % (fn.dev, _counts(prog, rows)), file=file)
    _print_rows(f, rows, file, '')


def _counts(prog, rows):
    c = prog.counts()
    return '%d nodes: %d device, %d host shape arithmetic, %d host fallback' % (
        len(rows), c['device'], c['meta'], c['fallback'])


def _print_rows(f, rows, file, indent):
    inner = {}
    for node, g in inner_functions(f):
        inner.setdefault(node, []).append(g)
    for k, (node, where, impl) in enumerate(rows):
        print('%s%4d  %-13s  %-40s  %s' % (indent, k, where, str(node.op)[:40], impl),
              file=file)
        for g in inner.get(node, ()):
            sub = placements(g)
            print('%s      inner of %s: %s' % (indent, str(node.op)[:40],
                                               _counts(_program(g)[0], sub)), file=file)
            _print_rows(g, sub, file, indent + '      ')
