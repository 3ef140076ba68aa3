"""Scan compiles on Python 3.11 under every mode once theano_ocl is installed.

Theano 1.0.5's Cython loop (``scan_perform``) no longer builds there and Theano took the
failed compile as fatal; the start-up hook makes that import an ``ImportError`` so Scan runs
its Python loop (``Scan.execute``), warning once per process. Each test runs a fresh
interpreter (the hook acts at start-up), compiles a cumulative sum and an RNN-like scan
with its gradient, and compares with numpy.
"""
import glob
import os
import shutil
import textwrap

import numpy as np
import pytest

from test_entrypoints import NO_PTH, _env, _flags, _last_json, _pth_active, _run

# Every test starts fresh interpreters on an empty compiledir (6 min on 2 cores): `make
# test-full` runs them, `make test` (CI) does not.
pytestmark = pytest.mark.full

WARNING = 'scan module (scan_perform) cannot be built'

# modes from argv (''/'None' = the flags' default); prints one JSON line
SCRIPT = textwrap.dedent('''
    import json, sys
    import numpy as np
    import theano, theano.tensor as T

    def run(mode):
        x = T.dvector('x')
        csum, _ = theano.scan(lambda a, acc: acc + a, sequences=x,
                              outputs_info=np.float64(0.0))
        f_csum = theano.function([x], csum, mode=mode)

        X = T.dtensor3('X')             # (time, batch, n_in)
        h0 = T.dmatrix('h0')
        W = T.dmatrix('W')
        U = T.dmatrix('U')
        hs, _ = theano.scan(lambda x_t, h, W, U: T.tanh(T.dot(x_t, W) + T.dot(h, U)),
                            sequences=X, outputs_info=h0, non_sequences=[W, U])
        loss = hs.sum()
        f_rnn = theano.function([X, h0, W, U], [hs] + T.grad(loss, [W, U]), mode=mode)

        rng = np.random.RandomState(0)
        xv = rng.uniform(-1, 1, 7)
        args = [rng.uniform(-1, 1, s) for s in [(6, 3, 4), (3, 5), (4, 5), (5, 5)]]
        return dict(linker=type(f_rnn.maker.linker).__name__,
                    csum=[f_csum(xv).tolist(), f_csum(xv[:3]).tolist()],
                    rnn=[o.tolist() for o in f_rnn(*args)],
                    rnn_again=[o.tolist() for o in f_rnn(*args)])

    modes = [None if m in ('', 'None') else m for m in sys.argv[1:]]
    res = [run(m) for m in modes]
    compat = sys.modules.get('theano_ocl._theano_compat')
    print(json.dumps(dict(
        runs=res, compiledir=theano.config.compiledir, sys_path=sys.path,
        unbuildable=compat is not None and compat.scan_cython_unbuildable() is not None)))
''')

# the compile is tried and fails (the case a cheaper check does not foresee)
FORCE_COMPILE = ('import theano_ocl._theano_compat as c; '
                 'c.scan_cython_unbuildable = lambda: None\n')


def _numpy_runs():
    rng = np.random.RandomState(0)
    xv = rng.uniform(-1, 1, 7)
    X, h0, W, U = [rng.uniform(-1, 1, s) for s in [(6, 3, 4), (3, 5), (4, 5), (5, 5)]]
    hs, h = [], h0
    for x_t in X:
        h = np.tanh(x_t.dot(W) + h.dot(U))
        hs.append(h)
    hs = np.array(hs)
    # backpropagation through time of loss = hs.sum()
    dW, dU, dh_next = np.zeros_like(W), np.zeros_like(U), np.zeros_like(h0)
    for t in reversed(range(len(X))):
        da = (1.0 + dh_next) * (1.0 - hs[t] ** 2)
        dW += X[t].T.dot(da)
        dU += (hs[t - 1] if t else h0).T.dot(da)
        dh_next = da.dot(U.T)
    return [np.cumsum(xv), np.cumsum(xv[:3])], [hs, dW, dU]


def _check(stdout, stderr, n_runs, linker=None, warnings=1):
    """``warnings``: how many times the process warns that Scan runs its Python loop (0 where
    every Scan runs on the device: Theano's loop is never built)."""
    res = _last_json(stdout)
    assert stderr.count(WARNING) == warnings, \
        'expected %d warning(s) in the process:\n%s' % (warnings, stderr)
    csum, rnn = _numpy_runs()
    assert len(res['runs']) == n_runs
    for run in res['runs']:
        if linker is not None:
            assert run['linker'] == linker
        for got, want in zip(run['csum'], csum):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
        for key in ('rnn', 'rnn_again'):
            assert len(run[key]) == 3
            for got, want in zip(run[key], rnn):
                np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # Theano's module leaves its compiledir on sys.path when its import fails: not ours
    assert res['compiledir'] not in res['sys_path']
    return res


def _run_modes(tmp_path, flags, modes, prefix=''):
    script = tmp_path / 'scan_script.py'
    script.write_text(prefix + SCRIPT)
    return _run([str(script)] + list(modes), _env(flags), cwd=str(tmp_path))


@pytest.fixture(scope='module')
def compiledir(tmp_path_factory):
    # One for the module, empty when the first test starts: no waiting on other processes'
    # compile lock, and the C modules the first test builds (most of this file's time)
    # serve the others. Only the failed-compile tests write scan_perform/ in it, and they
    # remove it again.
    return str(tmp_path_factory.mktemp('compiledir'))


def test_empty_compiledir_theano_then_theano_ocl(tmp_path, compiledir):
    """Theano C and mode='OCL' in one process, one warning; no .pth: `import theano`
    first, then theano_ocl installs the scan hook late. First in the file: its compiledir
    is empty."""
    prefix = NO_PTH + 'import theano\nimport theano_ocl\n'
    p = _run_modes(tmp_path, _flags(base_compiledir=compiledir, **{'blas.ldflags': ''}),
                   ['FAST_RUN', 'OCL'], prefix=prefix)
    res = _check(p.stdout, p.stderr, 2)
    assert [r['linker'] for r in res['runs']] == ['VM_Linker', 'OCLLinker']
    if res['unbuildable']:
        # known beforehand: no compile tried, nothing left behind in the compiledir
        assert not os.path.exists(os.path.join(res['compiledir'], 'scan_perform'))


@pytest.mark.skipif('not _pth_active()', reason='needs theano_ocl_startup.pth installed')
def test_linker_flag_without_importing_theano_ocl(tmp_path, compiledir):
    """An unchanged script under THEANO_FLAGS=linker=ocl: the .pth hook alone suffices."""
    p = _run_modes(tmp_path, _flags(base_compiledir=compiledir, linker='ocl'), [''])
    res = _check(p.stdout, p.stderr, 1, warnings=0)     # (Scan on the device: ops/scan.py)
    # the default mode linked the scan function with theano_ocl's linker: the flag worked
    assert [run['linker'] for run in res['runs']] == ['OCLLinker'], res['runs']


needs_gxx = pytest.mark.skipif(
    shutil.which('g++') is None,
    reason="no C++ compiler: Theano never tries the compile (its own fallback)")


def _failed_compile(tmp_path, compiledir):
    """Run a process whose compile of scan_perform is tried and fails (theano_ocl imported
    first); returns (process, its checked JSON result)."""
    p = _run_modes(tmp_path, _flags(base_compiledir=compiledir), ['FAST_RUN'],
                   prefix=FORCE_COMPILE)
    return p, _check(p.stdout, p.stderr, 1, linker='VM_Linker')


def _remove_leftovers(compiledir):
    for d in glob.glob(os.path.join(compiledir, '*', 'scan_perform')):
        shutil.rmtree(d, ignore_errors=True)


@needs_gxx
def test_failed_compile_falls_back(tmp_path, compiledir):
    """The compile is tried and fails: ImportError for Scan, one warning, clean sys.path,
    Scan's Python loop computing what numpy does (``_check``)."""
    try:
        p, res = _failed_compile(tmp_path, compiledir)
        assert 'its compilation failed' in p.stderr, p.stderr
        assert p.stderr.count(WARNING) == 1
        assert [run['linker'] for run in res['runs']] == ['VM_Linker']
        # Theano keeps the failed mod.cpp there
        assert os.path.isdir(os.path.join(res['compiledir'], 'scan_perform'))
    finally:
        _remove_leftovers(compiledir)


@needs_gxx
@pytest.mark.skipif('not _pth_active()', reason='needs theano_ocl_startup.pth installed '
                    '(the process imports theano first)')
def test_failed_compile_leftovers_met_by_the_next_process(tmp_path, compiledir):
    """A plain script run after a failed compile meets its leftovers in the compiledir:
    the start-up hook alone gives Scan its Python loop there too."""
    try:
        _, first = _failed_compile(tmp_path, compiledir)
        assert os.path.isdir(os.path.join(first['compiledir'], 'scan_perform'))
        p = _run_modes(tmp_path, _flags(base_compiledir=compiledir), ['FAST_RUN'])
        res = _check(p.stdout, p.stderr, 1, linker='VM_Linker')
        assert p.stderr.count(WARNING) == 1, p.stderr
        assert [run['linker'] for run in res['runs']] == ['VM_Linker']
        assert res['compiledir'] == first['compiledir']     # the leftovers were met
    finally:
        _remove_leftovers(compiledir)
