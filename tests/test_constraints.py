"""constraints.txt pins every package that setup.py and scripts/bootstrap.sh ask for, at a
version their own specifiers accept, so ``pip install -c constraints.txt .`` and the
bootstrap install the tested stack."""
import ast
import os
import re

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: optional and hardware-specific: its build follows the GPU's CLBlast
NOT_PINNED = {'pyclblast'}


def _read(name):
    with open(os.path.join(REPO, name)) as f:
        return f.read()


def pins():
    """canonical name -> pinned version; every line must be ``name==version``."""
    out = {}
    for n, line in enumerate(_read('constraints.txt').splitlines(), 1):
        line = line.split('#', 1)[0].strip()
        if not line:
            continue
        m = re.match(r'^([A-Za-z0-9_.\-]+)==([A-Za-z0-9_.+!\-]+)$', line)
        assert m, 'constraints.txt line %d: expected name==version, got %r' % (n, line)
        name = canonicalize_name(m.group(1))
        assert name not in out, 'constraints.txt line %d: %s pinned twice' % (n, name)
        out[name] = m.group(2)
    return out


def setup_requirements():
    """The strings of install_requires and every extra, read from setup.py's setup() call."""
    tree = ast.parse(_read('setup.py'))
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, 'id', None) == 'setup')
    kw = {k.arg: ast.literal_eval(k.value) for k in call.keywords
          if k.arg in ('install_requires', 'extras_require')}
    reqs = list(kw['install_requires'])
    for extra in kw['extras_require'].values():
        reqs += extra
    return reqs


def bootstrap_requirements():
    m = re.search(r'^REQS=\(([^)]*)\)', _read('scripts/bootstrap.sh'), re.M)
    assert m, 'scripts/bootstrap.sh: no REQS=(...) array'
    return m.group(1).split()


@pytest.mark.parametrize('source', ['setup.py', 'scripts/bootstrap.sh'])
def test_every_requirement_is_pinned_at_a_version_it_accepts(source):
    reqs = setup_requirements() if source == 'setup.py' else bootstrap_requirements()
    assert reqs, '%s: no requirements found' % source
    pinned = pins()
    for text in reqs:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name in NOT_PINNED:
            continue
        assert name in pinned, '%s asks for %r: constraints.txt does not pin %s' % (
            source, text, name)
        assert req.specifier.contains(pinned[name], prereleases=True), (
            '%s asks for %r: constraints.txt pins %s==%s' % (source, text, name, pinned[name]))


def test_bootstrap_installs_with_the_constraints_and_restamps_on_change():
    script = _read('scripts/bootstrap.sh')
    assert re.search(r'pip install [^\n]*-c "\$CONSTRAINTS"', script), \
        'scripts/bootstrap.sh: pip install without -c "$CONSTRAINTS"'
    key = script[script.index('key=$('):script.index('hexdigest()')]
    assert '"$CONSTRAINTS"' in key, \
        "scripts/bootstrap.sh: the stamp key does not hash constraints.txt"
