"""The ways in: drop-in flags, mode='OCL', OCLMode(device=...), python -m theano_ocl info.

Every test runs a fresh interpreter (``sys.executable``) so start-up behaviour is what is
tested. The drop-in tests need the real mechanism, ``theano_ocl_startup.pth`` active in
``sys.executable``'s site-packages (``make test`` / scripts/bootstrap.sh install it); they
skip with the reason when it is not. ``PYTHONPATH`` points at this checkout so the
subprocesses run its code.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PTH_NAME = 'theano_ocl_startup.pth'
TIMEOUT = 600

# The drop-in script: plain Theano, never imports theano_ocl.
SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import theano
    import theano.tensor as T
    x = T.vector('x')
    W = theano.shared(np.arange(6, dtype=theano.config.floatX).reshape(2, 3), name='W')
    y = T.exp(x) * 2 + 1
    f = theano.function([x], [y, (x * x).sum(), T.dot(W, x)], updates=[(W, W * 2)])
    xv = np.array([0.0, 1.0, -2.0], dtype=theano.config.floatX)
    outs = f(xv)
    f(xv)
    print(json.dumps(dict(
        linker=type(f.maker.linker).__name__,
        config_linker=str(theano.config.linker),
        config_mode=str(theano.config.mode),
        outs=[np.asarray(o).tolist() for o in outs],
        W=W.get_value().tolist(),
        theano_ocl_imported='theano_ocl' in sys.modules,
    )))
''')


def _expected():
    import numpy as np
    xv = np.array([0.0, 1.0, -2.0])
    W = np.arange(6.0).reshape(2, 3)
    return [np.exp(xv) * 2 + 1, (xv * xv).sum(), W.dot(xv)], W * 4


def _flags(**extra):
    """The caller's THEANO_FLAGS minus the keys we set, plus ``extra``."""
    keep = []
    for item in os.environ.get('THEANO_FLAGS', '').split(','):
        key = item.split('=', 1)[0].strip()
        if item.strip() and key not in ('linker', 'mode', 'blas.ldflags', 'blas__ldflags') \
                and key not in extra:
            keep.append(item.strip())
    keep += ['%s=%s' % kv for kv in extra.items()]
    return ','.join(keep)


def _env(flags=None, **extra_env):
    env = dict(os.environ)
    env['THEANO_FLAGS'] = flags if flags is not None else _flags()
    env['PYTHONPATH'] = os.pathsep.join([REPO] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
    env.update(extra_env)
    return env


def _run(args, env, cwd=None, check=True):
    p = subprocess.run([sys.executable] + list(args), env=env, cwd=cwd or REPO,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=TIMEOUT)
    if check and p.returncode != 0:
        raise AssertionError('%s exited %d\n--- stdout ---\n%s\n--- stderr ---\n%s'
                             % (args, p.returncode, p.stdout, p.stderr))
    return p


def _run_script(src, tmp_path, env, check=True):
    script = tmp_path / 'script.py'
    script.write_text(src)
    return _run([str(script)], env, cwd=str(tmp_path), check=check)


def _last_json(stdout):
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith('{'):
            return json.loads(line)
    raise AssertionError('no JSON line in output:\n' + stdout)


def _check_values(res):
    import numpy as np
    outs, W4 = _expected()
    assert len(res['outs']) == 3
    for got, want in zip(res['outs'], outs):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(res['W']), W4, rtol=1e-6)


_pth_state = {}


def _pth_active():
    """Whether the .pth bootstrap finder is on sys.meta_path at start-up of sys.executable."""
    if 'active' not in _pth_state:
        p = _run(['-c', 'import sys; print(any(getattr(f, "_theano_ocl_bootstrap", False) '
                        'for f in sys.meta_path))'], _env(), cwd='/')
        _pth_state['active'] = p.stdout.strip() == 'True'
    return _pth_state['active']


needs_pth = pytest.mark.skipif(
    'not _pth_active()',
    reason='%s is not installed in the site-packages of %s: the drop-in path needs the '
           'real start-up hook (run `make test`, or `pip install .`)' % (PTH_NAME, sys.executable))

# An interpreter as if the .pth were not installed: drop its finder first thing.
NO_PTH = ('import sys; sys.meta_path[:] = [f for f in sys.meta_path '
          'if not getattr(f, "_theano_ocl_bootstrap", False)]\n')


def _load_startup_by_file():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        '_theano_ocl_startup_under_test', os.path.join(REPO, 'theano_ocl', '_startup.py'))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------------------
# the .pth file itself


def test_pth_file_is_rendered_from_startup():
    """The checked-in .pth is exactly what _startup.render_pth() makes (one import line)."""
    mod = _load_startup_by_file()
    with open(os.path.join(REPO, PTH_NAME)) as f:
        text = f.read()
    assert text == mod.render_pth(), (
        'theano_ocl_startup.pth is stale: regenerate it with `make pth`')
    assert text.count('\n') == 1 and text.startswith('import ')


@needs_pth
def test_installed_pth_is_current():
    p = _run(['-c', 'import site, sys, os; print("\\n".join(site.getsitepackages()))'],
             _env(), cwd='/')
    found = [os.path.join(d, PTH_NAME) for d in p.stdout.split()
             if os.path.isfile(os.path.join(d, PTH_NAME))]
    assert found, 'no %s in %s' % (PTH_NAME, p.stdout)
    with open(found[0]) as f, open(os.path.join(REPO, PTH_NAME)) as g:
        assert f.read() == g.read(), '%s differs from the checkout: rerun scripts/bootstrap.sh' % found[0]


@needs_pth
def test_plain_startup_stays_light():
    """The hook imports nothing at start-up and nothing until theano is imported."""
    p = _run(['-c', 'import sys, json; print(json.dumps(sorted(m for m in sys.modules if '
                    'm.split(".")[0] in ("theano", "theano_ocl", "numpy", "pyopencl"))))'],
             _env(), cwd='/')
    assert json.loads(p.stdout) == []


def test_report_stays_the_function_whatever_is_used_first():
    """theano_ocl.report is the function even after another name loaded the submodule of
    the same name (fallback_nodes first bound theano_ocl.report to the module)."""
    p = _run(['-c', 'import types, theano_ocl; theano_ocl.fallback_nodes; '
                    'print(isinstance(theano_ocl.report, types.FunctionType), '
                    'theano_ocl.report.__module__)'], _env())
    assert p.stdout.split() == ['True', 'theano_ocl.report'], p.stdout


def test_report_is_callable_after_its_module_was_imported():
    """``from theano_ocl.report import placements`` binds theano_ocl.report to the
    module: ``theano_ocl.report(f)`` still prints the report."""
    p = _run(['-c', 'import theano_ocl, theano, theano.tensor as T; '
                    'from theano_ocl.report import placements; import theano_ocl.report; '
                    'x = T.vector(); f = theano.function([x], x * 2, mode="OCL"); '
                    'theano_ocl.report(f); theano_ocl.report(f, width=None)'], _env())
    assert p.stdout.count('theano_ocl: <OCLDevice') == 2, p.stdout + p.stderr

# ---------------------------------------------------------------------------------------
# drop-in: THEANO_FLAGS on a script that never imports theano_ocl


@needs_pth
def test_dropin_linker_flag(tmp_path):
    res = _last_json(_run_script(SCRIPT, tmp_path, _env(_flags(linker='ocl'))).stdout)
    assert res['linker'] == 'OCLLinker'
    assert res['config_linker'] == 'ocl'
    _check_values(res)


@needs_pth
def test_dropin_mode_flag(tmp_path):
    res = _last_json(_run_script(SCRIPT, tmp_path, _env(_flags(mode='OCL'))).stdout)
    assert res['linker'] == 'OCLLinker'
    assert res['config_mode'] == 'OCL'
    _check_values(res)


@needs_pth
def test_dropin_without_flags_is_plain_theano(tmp_path):
    """With the .pth but no flag, Theano keeps its own default linker."""
    res = _last_json(_run_script(SCRIPT, tmp_path, _env()).stdout)
    assert res['linker'] != 'OCLLinker'
    _check_values(res)


@needs_pth
def test_import_theano_without_blas_ldflags(tmp_path):
    src = ('import theano, json, sys\n'
           'print(json.dumps(dict(ldflags=theano.config.blas.ldflags, '
           'hooks=[repr(f) for f in sys.meta_path if getattr(f, "_theano_ocl_hook", False) '
           'or getattr(f, "_theano_ocl_bootstrap", False)])))\n')
    p = _run_script(src, tmp_path, _env())
    res = _last_json(p.stdout)
    assert res['hooks'] == [], 'the start-up hook must remove itself once theano is imported'
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        import numpy.distutils.__config__ as npconf
    if not hasattr(npconf, 'blas_opt_info'):
        assert res['ldflags'] == ''
        assert 'Using NumPy C-API' not in p.stderr


@needs_pth
def test_user_blas_ldflags_is_kept(tmp_path):
    src = 'import theano; print(repr(theano.config.blas.ldflags))\n'
    p = _run_script(src, tmp_path, _env(_flags(**{'blas.ldflags': '-lblas'})))
    assert p.stdout.strip().splitlines()[-1] == "'-lblas'"


@needs_pth
def test_invalid_linker_still_rejected(tmp_path):
    p = _run_script('import theano\n', tmp_path, _env(_flags(linker='nosuchlinker')), check=False)
    assert p.returncode != 0
    assert 'nosuchlinker' in p.stderr and "'ocl'" in p.stderr


@needs_pth
def test_registration_failure_does_not_break_theano(tmp_path):
    """A theano_ocl whose mode module fails: import theano still works, with a warning."""
    pkg = tmp_path / 'fake' / 'theano_ocl'
    pkg.mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'mode.py').write_text('raise RuntimeError("broken on purpose")\n')
    for name in ('_startup.py', '_theano_compat.py'):     # the start-up hook's files
        with open(os.path.join(REPO, 'theano_ocl', name)) as f:
            (pkg / name).write_text(f.read())
    env = _env()
    env['PYTHONPATH'] = str(tmp_path / 'fake')
    p = _run(['-c', 'import theano; print("ok", "ocl" in theano.compile.mode.predefined_linkers)'],
             env, cwd=str(tmp_path))
    assert p.stdout.strip().splitlines()[-1] == 'ok False'
    assert 'broken on purpose' in p.stderr and 'could not register' in p.stderr


# ---------------------------------------------------------------------------------------
# import orders, with and without the .pth


@pytest.mark.parametrize('pth', ['with_pth', 'without_pth'])
def test_import_theano_ocl_then_theano(tmp_path, pth):
    if pth == 'with_pth' and not _pth_active():
        pytest.skip('%s not installed for %s' % (PTH_NAME, sys.executable))
    prefix = NO_PTH if pth == 'without_pth' else ''
    src = prefix + textwrap.dedent('''
        import theano_ocl
        import json, sys
        import numpy as np
        import theano, theano.tensor as T
        x = T.dvector('x')
        f = theano.function([x], T.exp(x) + 1, mode='OCL')
        v = f(np.array([0.0, 1.0]))
        theano.config.linker = 'ocl'      # the live flags accept the new names too
        theano.config.mode = 'OCL'
        print(json.dumps(dict(linker=type(f.maker.linker).__name__, v=v.tolist(),
                              hooks=[repr(h) for h in sys.meta_path
                                     if getattr(h, '_theano_ocl_hook', False)
                                     or getattr(h, '_theano_ocl_bootstrap', False)])))
    ''')
    res = _last_json(_run_script(src, tmp_path, _env()).stdout)
    assert res['linker'] == 'OCLLinker'
    assert res['hooks'] == []
    assert abs(res['v'][1] - (2.718281828459045 + 1)) < 1e-9


@pytest.mark.parametrize('pth', ['with_pth', 'without_pth'])
def test_import_theano_then_theano_ocl(tmp_path, pth):
    if pth == 'with_pth' and not _pth_active():
        pytest.skip('%s not installed for %s' % (PTH_NAME, sys.executable))
    prefix = NO_PTH if pth == 'without_pth' else ''
    # without the hook, plain Theano on numpy >= 1.22 needs blas.ldflags set by the user.
    # A compiledir of its own: Theano caches the default Mode the first time anything
    # asks for it, and loading a shared compiledir's keys can import a Theano test module
    # that does (test_opt's class body), after which setting config.linker has no effect
    # -- plain Theano's behaviour, not the drop-in's
    extra = {'base_compiledir': str(tmp_path / 'compiledir')}
    if pth == 'without_pth':
        extra['blas.ldflags'] = ''
    flags = _flags(**extra)
    src = prefix + textwrap.dedent('''
        import json
        import numpy as np
        import theano, theano.tensor as T
        before = 'OCL' in theano.compile.mode.predefined_modes
        import theano_ocl
        x = T.dvector('x')
        f = theano.function([x], x * 3, mode='OCL')
        theano.config.linker = 'ocl'
        g = theano.function([x], x + 3)
        print(json.dumps(dict(before=before, f=type(f.maker.linker).__name__,
                              g=type(g.maker.linker).__name__,
                              v=f(np.array([1.0, 2.0])).tolist())))
    ''')
    res = _last_json(_run_script(src, tmp_path, _env(flags)).stdout)
    assert res['before'] == (pth == 'with_pth')   # the .pth registers at `import theano`
    assert res['f'] == 'OCLLinker' and res['g'] == 'OCLLinker'
    assert res['v'] == [3.0, 6.0]


# ---------------------------------------------------------------------------------------
# explicit entry points


def _default_spec():
    p = _run(['-m', 'theano_ocl', 'info', '--json'], _env(), check=False)
    if p.returncode != 0:
        pytest.skip('no OpenCL device: ' + p.stderr.strip().splitlines()[0] if p.stderr.strip()
                    else 'no OpenCL device')
    rows = json.loads(p.stdout)
    return rows, [r for r in rows if r['default']][0]


def test_ocl_mode_with_device(tmp_path):
    rows, default = _default_spec()
    spec = rows[-1]['spec']
    src = textwrap.dedent('''
        import json
        import numpy as np
        import theano, theano.tensor as T
        import theano_ocl
        x = T.dvector('x')
        f = theano.function([x], T.tanh(x) * 2, mode=theano_ocl.OCLMode(device=%r))
        print(json.dumps(dict(linker=type(f.maker.linker).__name__,
                              v=f(np.array([0.0, 0.5])).tolist())))
    ''' % spec)
    res = _last_json(_run_script(src, tmp_path, _env(_flags(**{'blas.ldflags': ''}))).stdout)
    assert res['linker'] == 'OCLLinker'
    assert res['v'][0] == 0.0 and abs(res['v'][1] - 2 * 0.46211715726000974) < 1e-9


def test_info_command():
    rows, default = _default_spec()
    p = _run(['-m', 'theano_ocl', 'info'], _env())
    assert p.returncode == 0
    for r in rows:
        assert r['spec'] in p.stdout and r['device'] in p.stdout
    assert 'default device: %s' % default['spec'] in p.stdout
    assert 'THEANO_OCL_DEVICE' in p.stdout and 'OCLMode(device=' in p.stdout


def test_info_command_honours_env_var():
    rows, default = _default_spec()
    spec = rows[-1]['spec']
    p = _run(['-m', 'theano_ocl', 'info'], _env(THEANO_OCL_DEVICE=spec))
    assert 'default device: %s' % spec in p.stdout


def test_info_without_platform(tmp_path):
    """No ICD visible: the install hint and exit status 1."""
    vendors = tmp_path / 'vendors'
    vendors.mkdir()
    env = _env(OCL_ICD_VENDORS=str(vendors), OPENCL_VENDOR_PATH=str(vendors))
    env.pop('OCL_ICD_FILENAMES', None)
    p = _run(['-m', 'theano_ocl', 'info'], env, check=False)
    if p.returncode == 0:
        pytest.skip('the OpenCL ICD loader here ignores OCL_ICD_VENDORS')
    assert p.returncode == 1
    assert 'pocl-opencl-icd' in p.stderr
