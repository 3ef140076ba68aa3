"""The package's shape: no import cycle anywhere in theano_ocl/ (imports inside functions
and through importlib included), op families never import the executor, the runtime never
imports nor reads the ``OCLFunction`` (it sees a ``RunContext``), the run path reads no
other module's private attributes, only the package imports the start-up hook, and
importing any one module first still registers mode 'OCL'."""
import ast
import collections
import itertools
import os
import subprocess
import sys

import pytest

import theano_ocl

PKG_DIR = os.path.dirname(theano_ocl.__file__)


def _modules(pkg_dir=PKG_DIR):
    mods = {}
    for root, _, files in os.walk(pkg_dir):
        for f in files:
            if f.endswith('.py'):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, os.path.dirname(pkg_dir))[:-3].replace(os.sep, '.')
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


class _Strings(object):
    """The string values an expression of one module can take, where its source decides
    them: literals, f-strings, ``%``, ``.format`` and ``+`` of such values, ``__name__`` /
    ``__package__``, and names every binding of which is such a value or a ``for`` over a
    tuple or list of them (a parameter, a call's result: undecided). None: undecided."""
    LIMIT = 64      # values per expression

    def __init__(self, module, is_pkg, tree):
        package = module if is_pkg else module.rpartition('.')[0]
        self.known = {'__name__': {module}, '__package__': {package}}
        self.bindings = collections.defaultdict(list)   # name -> [('=' | 'in', expr) or None]
        parents = {c: n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                up = parents.get(node)
                if isinstance(up, ast.Assign) and node in up.targets:
                    self.bindings[node.id].append(('=', up.value))
                elif isinstance(up, (ast.For, ast.comprehension)) and up.target is node:
                    self.bindings[node.id].append(('in', up.iter))
                else:
                    self.bindings[node.id].append(None)
            elif isinstance(node, ast.arg):
                self.bindings[node.arg].append(None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.bindings[node.name].append(None)
            elif isinstance(node, ast.alias):
                self.bindings[node.asname or node.name.split('.')[0]].append(None)
        self._busy = set()

    def value(self, e):
        if isinstance(e, ast.Constant):
            return {e.value} if isinstance(e.value, str) else None
        if isinstance(e, ast.Name):
            return self._name(e.id, self.value)
        if isinstance(e, ast.JoinedStr):
            return self._join([self.value(v.value) if isinstance(v, ast.FormattedValue)
                               else self.value(v) for v in e.values], ''.join)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
            return self._join([self.value(e.left), self.value(e.right)], ''.join)
        if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Mod):
            args = e.right.elts if isinstance(e.right, ast.Tuple) else [e.right]
            return self._join([self.value(e.left)] + [self.value(a) for a in args],
                              lambda parts: parts[0] % tuple(parts[1:]))
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) \
                and e.func.attr == 'format' and not e.keywords:
            return self._join([self.value(e.func.value)] + [self.value(a) for a in e.args],
                              lambda parts: parts[0].format(*parts[1:]))
        return None

    def items(self, e):
        """The values of a ``for`` over ``e``."""
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            return self._join([self.value(x) for x in e.elts], None)
        if isinstance(e, ast.Name):
            return self._name(e.id, self.items)
        return None

    def _name(self, name, how):
        if name in self.known:
            return self.known[name]
        found = self.bindings.get(name)
        if not found or None in found or (name, how) in self._busy:
            return None
        self._busy.add((name, how))
        try:
            out = set()
            for kind, expr in found:
                v = how(expr) if kind == '=' else (self.items(expr) if how == self.value
                                                  else None)
                if v is None:
                    return None
                out |= v
            return out if len(out) <= self.LIMIT else None
        finally:
            self._busy.discard((name, how))

    def _join(self, parts, combine):
        """Every combination of ``parts`` through ``combine`` (None: their union)."""
        if any(p is None for p in parts):
            return None
        if combine is None:
            return set().union(*parts)
        out = set()
        for combo in itertools.product(*[sorted(p) for p in parts]):
            try:
                out.add(combine(list(combo)))
            except (TypeError, ValueError, IndexError, KeyError):
                return None
            if len(out) > self.LIMIT:
                return None
        return out


def _resolve_name(name, package):
    """importlib's resolution of a relative ``name`` against ``package``."""
    if not name.startswith('.'):
        return name
    level = len(name) - len(name.lstrip('.'))
    base = package.rsplit('.', level - 1)[0] if package else ''
    rest = name[level:]
    return '%s.%s' % (base, rest) if rest else base


def _dynamic_imports(tree, strings):
    """Modules named by ``importlib.import_module(...)`` / ``__import__(...)`` calls whose
    name ``strings`` decides (a relative one with its ``package``)."""
    callers = {'import_module', '__import__'}
    for node in ast.walk(tree):      # from importlib import import_module as load
        if isinstance(node, ast.ImportFrom) and node.module == 'importlib':
            callers |= {a.asname for a in node.names if a.name == 'import_module' and a.asname}
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        called = f.attr if isinstance(f, ast.Attribute) else getattr(f, 'id', None)
        if called not in callers:
            continue
        args = list(node.args) + [None, None]
        kw = {k.arg: k.value for k in node.keywords}
        name = kw.get('name', args[0])
        names = strings.value(name) if name is not None else None
        if not names:
            continue
        if called == '__import__':
            packages = {''}
        else:
            package = kw.get('package', args[1])
            packages = strings.value(package) if package is not None else {''}
            if packages is None:
                continue
        found |= {_resolve_name(n, p) for n in names for p in packages}
    return found


def import_graph(pkg_dir=PKG_DIR):
    """module -> set of the package's modules it imports (at any depth of its code, and
    through importlib where the module name can be decided from the source)."""
    mods = _modules(pkg_dir)
    graph = {}
    for mod, path in mods.items():
        is_pkg = path.endswith('__init__.py')
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        targets = _dynamic_imports(tree, _Strings(mod, is_pkg, tree))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node.level, node.module) if node.level else node.module
                targets.update([base] + ['%s.%s' % (base, a.name) for a in node.names])
        deps = {t for t in targets if t in mods and t != mod}
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


def test_only_the_package_imports_the_startup_hook():
    # one registration place (_startup, through importlib): no module registers itself
    graph = import_graph()
    assert 'theano_ocl.mode' in graph['theano_ocl._startup']
    assert {m for m, deps in graph.items() if 'theano_ocl._startup' in deps} == {'theano_ocl'}


#: ways of naming pkg.b from pkg.a through importlib, each closing the cycle b -> a
IMPORTLIB_FORMS = {
    'literal': "importlib.import_module('pkg.b')",
    'relative': "importlib.import_module('.b', __package__)",
    'relative_keyword': "importlib.import_module(name='.b', package=__package__)",
    'fstring': "importlib.import_module(f'{__package__}.b')",
    'percent': "importlib.import_module('%s.%s' % (__package__, 'b'))",
    'format': "importlib.import_module('{}.{}'.format(PREFIX, 'b'))",
    'concat_loop': "[importlib.import_module(PREFIX + '.' + n) for n in NAMES]",
    'alias': "load('pkg.b')",
    'dunder_import': "__import__('pkg.b')",
    'lazy_from_import': "from . import b",
}


def _package(tmp_path, call, back=True):
    pkg = tmp_path / 'pkg'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('')
    (pkg / 'a.py').write_text(
        "import importlib\nfrom importlib import import_module as load\n"
        "PREFIX = 'pkg'\nNAMES = ('c', 'b')\n\n\ndef later():\n    %s\n" % call)
    (pkg / 'b.py').write_text('from . import a\n' if back else 'import os\n')
    (pkg / 'c.py').write_text('')
    return str(pkg)


@pytest.mark.parametrize('form', sorted(IMPORTLIB_FORMS))
def test_cycle_through_importlib_is_caught(tmp_path, form):
    """The checker on a package of three modules: a imports b through importlib (or
    inside a function), b imports a back."""
    graph = import_graph(_package(tmp_path, IMPORTLIB_FORMS[form]))
    assert 'pkg.b' in graph['pkg.a']
    assert ['pkg.a', 'pkg.b', 'pkg.a'] in _cycles(graph)


def test_importlib_without_a_way_back_is_no_cycle(tmp_path):
    graph = import_graph(_package(tmp_path, IMPORTLIB_FORMS['fstring'], back=False))
    assert graph['pkg.a'] == {'pkg.b'} and _cycles(graph) == []


def test_undecided_module_names_add_no_edge(tmp_path):
    # a name from a parameter, or rebound to something else, is not guessed
    call = ("importlib.import_module(name)\n\n\ndef other(name):\n"
            "    PREFIX = name\n    importlib.import_module(PREFIX + '.b')")
    graph = import_graph(_package(tmp_path, call))
    assert graph['pkg.a'] == set()


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


def runtime_imports_of_the_function(pkg_dir=PKG_DIR):
    """(runtime module, module) pairs where a module under ``runtime/`` imports
    ``theano_ocl.vm`` (at its top, inside a function or through importlib)."""
    graph = import_graph(pkg_dir)
    top = os.path.basename(pkg_dir)
    return sorted((mod, '%s.vm' % top) for mod, deps in graph.items()
                  if mod.startswith(top + '.runtime') and '%s.vm' % top in deps)


def test_the_runtime_never_imports_the_function():
    assert runtime_imports_of_the_function() == []


def _tree(path):
    with open(path) as f:
        return ast.parse(f.read(), path)


def _defined(tree):
    """The names a module defines as attributes of something: its functions, classes and
    methods, the names it binds, the attributes it assigns (``x.name = ...``) and the
    strings of its ``__slots__``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == '__slots__' for t in node.targets):
            names.update(e.value for e in ast.walk(node.value)
                         if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return names


def _class_names(tree, name):
    """What class ``name`` of a module defines: its methods and class attributes, and
    what its methods assign on ``self``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _defined(node)
    raise LookupError(name)


def runtime_reads_of_the_function(pkg_dir=PKG_DIR):
    """(module:line, name) where code under ``runtime/`` reads or sets an attribute that
    only ``OCLFunction`` defines (no other module of the package defines that name): the
    runtime working on the function itself rather than on what it is handed."""
    mods = _modules(pkg_dir)
    top = os.path.basename(pkg_dir)
    trees = {mod: _tree(path) for mod, path in mods.items()}
    elsewhere = set().union(*(_defined(t) for m, t in trees.items() if m != top + '.vm'))
    own = {n for n in _class_names(trees[top + '.vm'], 'OCLFunction')
           if not n.startswith('__')} - elsewhere
    found = []
    for mod, tree in sorted(trees.items()):
        if mod.startswith(top + '.runtime'):
            found += [('%s:%d' % (mod, node.lineno), node.attr) for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr in own]
    return found


def test_the_runtime_never_reads_the_function():
    """It receives a RunContext and the frame cache; what only the function has (its
    frame planners once, its frame cache, its call) it never reaches back for."""
    assert runtime_reads_of_the_function() == []


#: private attributes of other libraries' objects the run path uses on purpose
FOREIGN_PRIVATE = {
    '_set_arg_buf',     # pyopencl.Kernel's argument setter without checks (runtime/invokers.py)
}

#: where the rule below holds (the rest of the package: not yet)
#: every module of the package (``private_reads``' scope: '' matches all)
EVERY_MODULE = ('',)


def private_reads(pkg_dir=PKG_DIR, scope=EVERY_MODULE):
    """(module:line, expression) where a module of ``scope`` reads ``x._name`` of an
    object ``x`` other than ``self`` / ``cls`` while ``_name`` is not defined in that
    module: another module's private attribute."""
    top = os.path.basename(pkg_dir)
    found = []
    for mod, path in sorted(_modules(pkg_dir).items()):
        if not any(mod == top + s or mod.startswith(top + s + '.') for s in scope):
            continue
        tree = _tree(path)
        own = _defined(tree) | FOREIGN_PRIVATE
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith('_') \
                    and not node.attr.startswith('__') and node.attr not in own \
                    and not (isinstance(node.value, ast.Name) and
                             node.value.id in ('self', 'cls')):
                found.append(('%s:%d' % (mod, node.lineno), ast.unparse(node)))
    return found


def test_no_module_reads_another_modules_private_attributes():
    assert private_reads() == []


def _run_path_package(tmp_path, runtime_code):
    pkg = tmp_path / 'pkg'
    (pkg / 'runtime').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'runtime' / '__init__.py').write_text('')
    (pkg / 'runtime' / 'executor.py').write_text(runtime_code)
    (pkg / 'vm.py').write_text(
        "class OCLFunction(object):\n    def __init__(self):\n        self.input_slots = []\n"
        "        self.dev = None\n\n    def drop_frame(self, key):\n        pass\n")
    (pkg / 'shared.py').write_text(
        "class Resident(object):\n    def _uploaded(self):\n        pass\n")
    (pkg / 'device.py').write_text("class Device(object):\n    dev = None\n")
    return str(pkg)


@pytest.mark.parametrize('code, imports, reads, private', [
    ("def later():\n    from .. import vm\n", 1, 0, 0),
    ("import importlib\n\n\ndef later():\n    importlib.import_module('pkg.vm')\n", 1, 0, 0),
    ("def replay(vm, frame):\n    return vm.input_slots[0]\n", 0, 1, 0),
    ("def run(vm, key):\n    vm.drop_frame(key)\n", 0, 1, 0),
    ("def alloc(vm):\n    return vm.dev\n", 0, 0, 0),        # a name others define too
    ("def refill(res):\n    res._uploaded()\n", 0, 0, 1),
    ("class A(object):\n    def _own(self):\n        pass\n\n\n"
     "def f(a):\n    a._own()\n", 0, 0, 0),                   # its own module's
    ("def f(kernel):\n    kernel._set_arg_buf(0, None)\n", 0, 0, 0),
])
def test_the_run_path_checks_can_fail(tmp_path, code, imports, reads, private):
    pkg = _run_path_package(tmp_path, code)
    assert len(runtime_imports_of_the_function(pkg)) == imports
    assert len(runtime_reads_of_the_function(pkg)) == reads
    assert len(private_reads(pkg)) == private


@pytest.mark.parametrize('first', ['theano_ocl.vm', 'theano_ocl.linker', 'theano_ocl.mode',
                                   'theano_ocl.simulator', 'theano_ocl.ops',
                                   'theano_ocl.ops.elemwise', 'theano_ocl.ops.fusion',
                                   'theano_ocl.runtime.host_tier'])
def test_any_module_imported_first_registers_the_mode(first):
    # registered by the time that import is done, and the start-up hook gone
    code = ("import sys, warnings; warnings.simplefilter('error', RuntimeWarning)\n"
            "import %s\nimport theano\n"
            "assert 'OCL' in theano.compile.mode.predefined_modes\n"
            "assert 'ocl' in theano.compile.mode.predefined_linkers\n"
            "assert not [f for f in sys.meta_path if getattr(f, '_theano_ocl_hook', False)]\n"
            % first)
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
