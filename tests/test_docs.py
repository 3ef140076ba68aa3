"""The documentation site builds with no warnings (``make docs`` does the same build).

Sphinx and myst-parser are part of the pinned stack (scripts/bootstrap.sh, ``pip install
.[docs]``); where they are missing the test fails and says how to install them rather than
skipping, so CI cannot pass without having built the site.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, 'docs')


def _require_sphinx():
    try:
        import sphinx  # noqa: F401
        import myst_parser  # noqa: F401
    except ImportError as e:
        pytest.fail('building the docs needs Sphinx and myst-parser (%s): run '
                    'scripts/bootstrap.sh, or pip install ".[docs]"' % e, pytrace=False)


def test_docs_build_without_warnings(tmp_path):
    _require_sphinx()
    out = tmp_path / 'html'
    proc = subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b', 'html',
         '-d', str(tmp_path / 'doctrees'), DOCS, str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
        timeout=300)
    assert proc.returncode == 0, 'sphinx-build -W failed:\n' + proc.stdout
    # every page of the toctree was written, the generated ones included
    for page in ('index', 'install', 'quickstart', 'entry-points', 'devices', 'simulator',
                 'profiling', 'benchmarks', 'ops', 'troubleshooting', 'conformance',
                 'architecture', 'changelog'):
        assert (out / (page + '.html')).is_file(), page
    # the performance page embeds the rendered plot of the recorded runs
    assert any(p.name == 'ratios.png' for p in (out / '_images').iterdir())


def test_docs_name_no_path_of_one_machine():
    """Reference pages say ``python``, ``.venv``, ``~/.theano``; never a path that only
    exists on one machine (a home directory, a worktree, a scratch directory)."""
    bad = ('/work/', '/home/', '/tmp/', '/root/', '/Users/')
    pages = [os.path.join(DOCS, p) for p in os.listdir(DOCS) if p.endswith('.md')]
    pages += [os.path.join(ROOT, 'README.md'), os.path.join(ROOT, 'CHANGELOG.md')]
    found = []
    for page in pages:
        with open(page) as f:
            for n, line in enumerate(f, 1):
                found += ['%s:%d: %s' % (os.path.relpath(page, ROOT), n, b)
                          for b in bad if b in line]
    assert not found, found


def test_ops_page_is_what_the_registry_generates():
    """docs/ops.md is ``python -m theano_ocl ops-table``'s output: regenerate it with
    ``python -m theano_ocl ops-table --out docs/ops.md`` after changing a family."""
    from theano_ocl.ops import catalog
    with open(os.path.join(DOCS, 'ops.md')) as f:
        committed = f.read()
    assert committed == catalog.markdown(), (
        'docs/ops.md is stale: run python -m theano_ocl ops-table --out docs/ops.md')


def test_every_registered_op_is_on_the_ops_page():
    """Each registered factory declares the DeviceImpl classes it returns, and each op type
    of the registry has its row, with the declared class names and dtypes."""
    from theano_ocl.ops import catalog, ocl_impl
    from theano_ocl.ops.base import DeviceImpl
    rows = catalog.rows()
    assert {r[1] for r in rows} == set(ocl_impl.registry) - {object}
    page = catalog.markdown()
    for family, op_type, factory in rows:
        assert all(issubclass(i, DeviceImpl) for i in factory.impls), factory
        line = [ln for ln in page.splitlines() if ln.startswith('| `%s` |' % catalog.op_name(op_type))]
        assert len(line) == 1, op_type
        for impl in factory.impls:
            assert '`%s`' % catalog.impl_name(impl) in line[0]


def test_ops_page_dtypes_are_what_the_linker_enforces(monkeypatch):
    """A dtype missing from an implementation's ``dtypes`` (a row's dtypes column) sends
    the node to the host with the reason report(f) gives; a listed one runs on the device."""
    import numpy as np
    import theano
    import theano.tensor as T
    import theano_ocl
    from theano_ocl.ops import catalog
    from theano_ocl.ops.extra_ops import ContiguousImpl
    x = T.vector('x', dtype='int8')
    y = T.extra_ops.cpu_contiguous(x[::2])
    xv = np.arange(7, dtype='int8')

    def placement():
        f = theano.function([x], y, mode=theano_ocl.OCLMode())
        np.testing.assert_array_equal(f(xv), xv[::2])
        return [(w, d) for n, w, d in theano_ocl.placements(f)
                if type(n.op).__name__ == 'CpuContiguous']

    assert 'int8' in catalog.impl_dtypes(ContiguousImpl)
    assert placement() == [('device', 'ContiguousImpl')]
    monkeypatch.setattr(ContiguousImpl, 'dtypes', ('float32', 'float64'))
    assert 'int8' not in catalog.fmt_dtypes(catalog.impl_dtypes(ContiguousImpl))
    (where, desc), = placement()
    assert where == 'host-fallback' and 'dtype int8' in desc, desc
