"""scripts/g++-cache, the module cache that scripts/device_suite.sh gives Theano's g++ (each
pytest-xdist worker compiles into a compiledir of its own): a module another worker linked
is copied, not compiled; another source, or other arguments, are compiled; anything that is
not a module's compile (Theano's version and flag queries) runs the compiler as it is. A clone
of the checkout at another path (CI clones anew each run) finds the modules an earlier clone
linked: Theano's -I into the checkout's .venv is written as one name (G_CACHE_ROOT)."""
import os
import shutil
import subprocess

import pytest

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      'scripts', 'g++-cache')

pytestmark = pytest.mark.skipif(shutil.which('g++') is None, reason='needs g++')

SOURCE = 'extern "C" int answer(void) { return %d; }\n'


def _compile(tmp_path, worker, value, cxx='g++', extra=(), root=None):
    """Compile SOURCE % value as the worker ``worker`` would: its own compiledir, a
    library path inside it, and (``root``: a checkout's path) an include directory inside
    that checkout, as Theano's -I for .venv's numpy; returns (returncode, the shared
    object's path)."""
    d = tmp_path / 'workers' / worker / 'mod'
    d.mkdir(parents=True, exist_ok=True)
    src = d / 'mod.cpp'
    src.write_text(SOURCE % value)
    out = d / 'mod.so'
    env = dict(os.environ, G_CACHE_DIR=str(tmp_path / 'cache'), G_CACHE_CXX=cxx,
               G_CACHE_STRIP='%s/[^/]+' % (tmp_path / 'workers'))
    if root is not None:
        env['G_CACHE_ROOT'] = str(root)
        extra = ['-I%s/.venv/include' % root] + list(extra)
    args = [SCRIPT, '-shared', '-fPIC', '-O1', '-L%s' % d] + list(extra) + \
        ['-o', str(out), str(src)]
    return subprocess.run(args, env=env, capture_output=True).returncode, out


def test_a_module_another_worker_linked_is_copied_not_compiled(tmp_path):
    rc, first = _compile(tmp_path, 'gw0', 42)
    assert rc == 0 and first.exists()
    # the compiler replaced by one that always fails: only a cache hit can succeed
    rc, second = _compile(tmp_path, 'gw1', 42, cxx='false')
    assert rc == 0, 'the same module in another worker was compiled again'
    assert second.read_bytes() == first.read_bytes()
    # another source, or other arguments: compiled (and the failing compiler fails)
    assert _compile(tmp_path, 'gw2', 43, cxx='false')[0] != 0
    assert _compile(tmp_path, 'gw3', 42, cxx='false', extra=['-DX=1'])[0] != 0
    assert len(os.listdir(tmp_path / 'cache')) == 1


def test_a_clone_at_another_path_finds_the_modules_of_an_earlier_clone(tmp_path):
    rc, first = _compile(tmp_path, 'gw0', 7, root=tmp_path / 'clone-a')
    assert rc == 0
    rc, second = _compile(tmp_path, 'gw0', 7, cxx='false', root=tmp_path / 'clone-b')
    assert rc == 0, "a new clone's module was compiled again"
    assert second.read_bytes() == first.read_bytes()
    # without G_CACHE_ROOT the two paths are two keys (the failing compiler fails)
    assert _compile(tmp_path, 'gw1', 7, cxx='false',
                    extra=['-I%s/.venv/include' % (tmp_path / 'clone-c')])[0] != 0


def test_anything_but_a_module_compile_runs_the_compiler_as_is(tmp_path):
    env = dict(os.environ, G_CACHE_DIR=str(tmp_path / 'cache'))
    p = subprocess.run([SCRIPT, '-dumpversion'], env=env, capture_output=True, text=True)
    q = subprocess.run(['g++', '-dumpversion'], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == q.stdout
    assert not (tmp_path / 'cache').exists()
    # a failing compile fails, and stores nothing
    bad = tmp_path / 'bad.cpp'
    bad.write_text('this is not C++\n')
    p = subprocess.run([SCRIPT, '-shared', '-o', str(tmp_path / 'bad.so'), str(bad)],
                       env=env, capture_output=True)
    assert p.returncode != 0
    assert not (tmp_path / 'cache').exists() or not os.listdir(tmp_path / 'cache')
