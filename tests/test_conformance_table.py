"""The conformance runner's module table (tests/conformance/run.py) names what exists.

A quick selector that names no test makes nose report an error in *both* modes, which the
runner does not count as a regression: a typo would silently drop tests from CI. So every
selector of the table is resolved here against the installed Theano's test modules.
"""
import importlib
import importlib.util
import os

import pytest

_spec = importlib.util.spec_from_file_location(
    'conformance_run', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    'conformance', 'run.py'))
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def test_rows_are_group_module_quick_seconds():
    for row in run.MODULES:
        group, module, quick, c_s = row
        assert group in run.GROUPS and group != 'all', row
        assert module.startswith('theano.') and '.tests.' in module, row
        assert quick is True or quick is False or isinstance(quick, (list, dict)), row
        assert isinstance(c_s, int) and c_s > 0, row
    modules = [m for _, m, _, _ in run.MODULES]
    assert len(modules) == len(set(modules))


@pytest.mark.parametrize('module,quick', [(m, q) for _, m, q, _ in run.MODULES
                                          if isinstance(q, (list, dict))])
def test_quick_selectors_name_tests_of_the_module(module, quick):
    # Theano's test modules import these test-only tools (installed by scripts/bootstrap.sh)
    pytest.importorskip('nose', reason="Theano's test modules need nose (pip install pynose)")
    pytest.importorskip('parameterized', reason="Theano's test modules need parameterized")
    mod = importlib.import_module(module)
    names = quick['exclude'] if isinstance(quick, dict) else quick
    missing = []
    for sel in names:
        if isinstance(quick, dict):
            # an excluded name: a method of some class or a function of the module
            found = hasattr(mod, sel) or any(hasattr(c, sel) for c in vars(mod).values()
                                             if isinstance(c, type))
        else:
            obj = mod
            for part in sel.split('.'):
                obj = getattr(obj, part, None)
            found = obj is not None
        if not found:
            missing.append(sel)
    assert not missing, '%s: no such test: %s' % (module, missing)


def test_targets_for_merges_excludes():
    assert run.targets_for('theano.a.tests.t', True, True) == ['theano.a.tests.t']
    assert run.targets_for('theano.a.tests.t', ['C.m', 'f'], True, ['test_all']) == [
        '--exclude=^(test_all)$', 'theano.a.tests.t:C.m', 'theano.a.tests.t:f']
    assert run.targets_for('theano.a.tests.t', {'exclude': ['x']}, True, ['y']) == [
        '--exclude=^(y|x)$', 'theano.a.tests.t']
    # a full run ignores the quick spec, not the --exclude option
    assert run.targets_for('theano.a.tests.t', ['C.m'], False, ['test_all']) == [
        '--exclude=^(test_all)$', 'theano.a.tests.t']
