"""The package's shape: no import cycle anywhere in theano_ocl/ (imports inside functions
included), op families never import the executor, and importing any one module first
still registers mode 'OCL'."""
import ast
import os
import subprocess
import sys

import pytest

import theano_ocl

PKG_DIR = os.path.dirname(theano_ocl.__file__)


def _modules():
    mods = {}
    for root, _, files in os.walk(PKG_DIR):
        for f in files:
            if f.endswith('.py'):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, os.path.dirname(PKG_DIR))[:-3].replace(os.sep, '.')
                if rel.endswith('.__init__'):
                    rel = rel[:-len('.__init__')]
                mods[rel] = path
    return mods


def _resolve(module, is_pkg, level, name):
    base = module.split('.')
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[:-(level - 1)]
    return '.'.join(base + ([name] if name else []))


def import_graph():
    """module -> set of theano_ocl modules it imports (at any depth of its code)."""
    mods = _modules()
    graph = {}
    for mod, path in mods.items():
        is_pkg = path.endswith('__init__.py')
        tree = ast.parse(open(path).read(), path)
        deps = set()
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node.level, node.module) if node.level else node.module
                targets = [base] + ['%s.%s' % (base, a.name) for a in node.names]
            for t in targets:
                if t in mods and t != mod:
                    deps.add(t)
        # importing a submodule of a package runs the package's __init__ first; a module
        # inside that package is imported by (or with) it, which is no cycle
        graph[mod] = {d for d in deps if not mod.startswith(d + '.')}
    return graph


def _cycles(graph):
    """Every elementary cycle's smallest representation found by DFS (enough to report)."""
    found = []
    state = {}
    stack = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                found.append(stack[stack.index(w):] + [w])
            elif w not in state:
                visit(w)
        stack.pop()
        state[v] = 2
    for v in sorted(graph):
        if v not in state:
            visit(v)
    return found


def test_no_import_cycles():
    graph = import_graph()
    assert 'theano_ocl.vm' in graph and 'theano_ocl.ops.elemwise' in graph
    assert _cycles(graph) == []


def test_cycle_detection_sees_function_level_imports():
    # the checker itself: a lazy import back is a cycle
    g = {'a': {'b'}, 'b': {'a'}}
    assert _cycles(g)
    graph = import_graph()
    # the op families register their batched kernels with the runtime's planner
    assert 'theano_ocl.runtime.planner' in graph['theano_ocl.ops.elemwise']


def _reaches(graph, start):
    seen, todo = set(), [start]
    while todo:
        v = todo.pop()
        for w in graph.get(v, ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def test_op_families_record_into_the_runtime_not_the_executor():
    graph = import_graph()
    executor = {'theano_ocl.vm', 'theano_ocl.linker', 'theano_ocl.simulator',
                'theano_ocl.mode'}
    for mod in graph:
        if mod.startswith('theano_ocl.ops.') or mod.startswith('theano_ocl.runtime.'):
            bad = _reaches(graph, mod) & executor
            assert not bad, (mod, sorted(bad))
    # the runtime imports no op family (families register what it needs)
    for mod in graph:
        if mod.startswith('theano_ocl.runtime.'):
            families = {m for m in _reaches(graph, mod) if m.startswith('theano_ocl.ops')}
            assert not families, (mod, sorted(families))
    # what the families use from the runtime
    assert 'theano_ocl.runtime.plans' in graph['theano_ocl.ops.elemwise']
    assert 'theano_ocl.runtime.context' in graph['theano_ocl.ops.elemwise']


@pytest.mark.parametrize('first', ['theano_ocl.vm', 'theano_ocl.linker', 'theano_ocl.mode',
                                   'theano_ocl.simulator', 'theano_ocl.ops',
                                   'theano_ocl.runtime.host_tier'])
def test_any_module_imported_first_registers_the_mode(first):
    code = ("import warnings; warnings.simplefilter('error', RuntimeWarning)\n"
            "import %s\nimport theano\n"
            "assert 'OCL' in theano.compile.mode.predefined_modes\n"
            "assert 'ocl' in theano.compile.mode.predefined_linkers\n" % first)
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
