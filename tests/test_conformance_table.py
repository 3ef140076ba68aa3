"""The conformance runner's module table (tests/conformance/run.py) names what exists.

A quick selector that names no test makes nose report an error in *both* modes, which the
runner does not count as a regression: a typo would silently drop tests from CI. So every
selector of the table is resolved here against the installed Theano's test modules.
"""
import importlib
import importlib.util
import os
import re

import pytest

_spec = importlib.util.spec_from_file_location(
    'conformance_run', os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    'conformance', 'run.py'))
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def test_rows_are_group_module_quick_seconds():
    for row in run.MODULES:
        group, module, quick, c_s = row
        assert group in run.GROUPS, row
        assert module.startswith('theano.') and '.tests.' in module, row
        assert quick is True or quick is False or isinstance(quick, (list, dict)), row
        assert isinstance(c_s, int) and c_s > 0, row
    modules = [m for _, m, _, _ in run.MODULES]
    assert len(modules) == len(set(modules))
    assert {g for g, _, _, _ in run.MODULES} == set(run.GROUPS)     # no empty group


def test_group_option_takes_groups_by_name():
    assert run.group_arg('scan') == 'scan'
    assert run.group_arg('cnn,scan') == 'scan+cnn' == run.group_arg('scan+cnn')
    assert run.group_arg('all') == 'all' == run.group_arg(','.join(run.GROUPS))
    assert run.groups_of('scan+cnn') == ['scan', 'cnn']
    assert run.groups_of('all') == list(run.GROUPS)
    for bad in ('issue3', 'scan,issue17', ''):
        with pytest.raises(SystemExit):
            run.main(['--group', bad, '--from-json', os.devnull])


def test_recorded_sections_are_keyed_by_groups():
    """docs/conformance.md's sections are written and replaced by their key (``--write-docs``):
    each key starts with the label the runner gives its groups, so a run of the same
    groups and selection replaces its section."""
    with open(run.DOCS_FILE) as f:
        text = f.read()
    keys = re.findall(r'<!-- results:(\S+?):begin -->', text)
    assert keys
    for key in keys:
        label, kind = re.match(r'(.+?)-(full|quick)-', key).groups()
        assert run.group_arg(label) == label, key
        assert '### %s\n' % key in text and '<!-- results:%s:end -->' % key in text, key


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
