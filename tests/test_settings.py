"""Settings (runtime/settings.py) are checked where they are given: an ``OCLMode`` argument
when the mode is made, an environment variable when a function is linked. A bad value
names the argument or variable, the value and what it takes; a bad variable never keeps
mode 'OCL' from registering at import."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import theano_ocl
from theano_ocl.errors import SettingError
from theano_ocl.runtime import settings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: (setting, a value it refuses, what the message says it takes)
BAD = [
    ('fuse', 'banana', '1, 0, true, false, yes, no, on or off'),
    ('epilogues', 'yes', "one of '0', '1', 'always'"),
    ('blas', 'cuda', "one of 'clblast', 'host', 'kernel', 'small' (or '' for the default)"),
    ('conv', 'fft', "one of 'gemm', 'direct' (or '' for the default)"),
    ('cpu_group', 'abc', 'an integer >= 0'),
    ('cpu_group', -4, 'an integer >= 0'),
    ('stats', '/nonexistent/theano_ocl/stats.jsonl',
     'a file in an existing directory (/nonexistent/theano_ocl does not exist)'),
    ('launch', 'fast', "one of 'auto', 'pyopencl', 'native' (or '' for the default)"),
    ('scan_rows', 'banana', '1, 0, true, false, yes, no, on or off'),
    ('scan_bind', 'maybe', '1, 0, true, false, yes, no, on or off'),
    ('host_tier', 'all', "one of 'exact', 'any', 'off'"),
    ('pinned', 'never', "one of 'gpu', 'always', 'off'"),
    ('stage_inputs', 'gpus', "one of 'gpu', 'always', 'off'"),
    ('batch_after', 'soon', "an integer >= 0 or 'never'"),
    ('max_frames', -1, 'an integer >= 0'),
    ('reuse_min_bytes', 'big', 'an integer >= 0'),
]

#: variables other modules read at link time: (variable, a value it refuses, what it takes)
BAD_OTHER = [
    ('THEANO_OCL_KERNEL_CACHE_MB', 'abc', 'a size in MiB, a number >= 0'),
    ('THEANO_OCL_KERNEL_CACHE', 'banana', '1, 0, true, false, yes, no, on or off'),
    ('THEANO_OCL_KERNEL_WARNINGS', 'loud', '1, 0, true, false, yes, no, on or off'),
]


@pytest.mark.parametrize('name,bad,takes', BAD)
def test_bad_argument_is_refused_when_the_mode_is_made(name, bad, takes):
    with pytest.raises(SettingError) as e:
        theano_ocl.OCLMode(**{name: bad})
    assert str(e.value) == 'OCLMode(%s=%r): expected %s' % (name, bad, takes)


def test_arguments_are_taken_in_their_forms():
    s = settings.Settings(fuse='off', epilogues=True, cpu_group='8', scan_rows=1, blas='')
    assert (s.fuse, s.epilogues, s.cpu_group, s.scan_rows, s.blas) == (False, '1', 8, True, None)
    assert settings.Settings(**s.as_dict()) == s        # what a Scan's inner linker gets
    with pytest.raises(TypeError) as e:
        theano_ocl.OCLMode(fusion=False)
    assert 'fusion' in str(e.value) and 'fuse' in str(e.value)


# One interpreter: started with a bad variable (mode 'OCL' must register all the same),
# then each bad variable in turn, re-read when the next function is linked.
SCRIPT = textwrap.dedent('''
    import json, os, sys
    import theano_ocl
    import theano, theano.tensor as T
    from theano_ocl.runtime import kernel_cache
    out = dict(mode=type(theano.compile.mode.get_mode('OCL')).__name__, errors=[])
    x = T.dvector('x')
    for var, bad in json.loads(sys.argv[1]):
        os.environ[var] = bad
        kernel_cache.reset()
        try:
            theano.function([x], x * 2)          # THEANO_FLAGS=mode=OCL
            out['errors'].append(None)
        except Exception as e:
            out['errors'].append([type(e).__name__, str(e)])
        del os.environ[var]
    kernel_cache.reset()
    f = theano.function([x], x * 2)
    out['after'] = [type(f.maker.linker).__name__, f([1.0, 2.0]).tolist()]
    print(json.dumps(out))
''')


def test_bad_variables_keep_mode_ocl_and_are_named_when_a_function_links(tmp_path):
    cases = [(settings.SPECS[n].var, str(bad), takes) for n, bad, takes in BAD] + BAD_OTHER
    env = dict(os.environ)
    env.pop('THEANO_OCL_KERNEL_CACHE', None)
    env.update(THEANO_OCL_EPILOGUE='yes',         # bad from the start: at import
               PYTHONPATH=os.pathsep.join([REPO] + [p for p in env.get('PYTHONPATH', '')
                                                    .split(os.pathsep) if p]),
               THEANO_FLAGS=','.join(f for f in (env.get('THEANO_FLAGS', ''), 'mode=OCL',
                                                 'blas.ldflags=') if f))
    p = subprocess.run([sys.executable, '-c', SCRIPT,
                        json.dumps([(var, bad) for var, bad, _ in cases])],
                       env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out['mode'] == 'OCLMode'
    wrong = []
    for (var, bad, takes), got in zip(cases, out['errors']):
        want = ['SettingError', '%s=%r: expected %s' % (var, bad, takes)]
        if got != want:
            wrong.append(dict(expected=want, got=got))
    assert len(out['errors']) == len(cases) and not wrong, wrong
    assert out['after'] == ['OCLLinker', [2.0, 4.0]]


def test_the_function_knobs_are_settings():
    """What a function's runtime decides by counts (when a frame's calls take its batched
    plan, how many plans it keeps) comes from its settings, observed through stats()."""
    import numpy as np
    import theano
    import theano.tensor as T
    x = T.vector('x')
    outs = [x * np.asarray(k, x.dtype) + 1 for k in range(20)]    # 20 launches of one kind
    v = np.arange(5, dtype=x.dtype)
    facts = {}
    for after in (3, 'never'):
        f = theano.function([x], outs, mode=theano_ocl.OCLMode(batch_after=after))
        for _ in range(6):
            f(v)
        facts[after] = theano_ocl.stats(f)
    assert facts[3]['batched_launches'] < facts[3]['launches'], facts[3]
    assert facts['never']['batched_launches'] == facts['never']['launches'], facts['never']
    g = theano.function([x], x.sum() * 2, mode=theano_ocl.OCLMode(max_frames=2))
    for n in range(1, 7):
        g(np.ones(n, x.dtype))
    assert theano_ocl.stats(g)['frames'] <= 3, theano_ocl.stats(g)
    h = theano.function([x], x.sum() * 2, mode=theano_ocl.OCLMode())
    for n in range(1, 7):
        h(np.ones(n, x.dtype))
    assert theano_ocl.stats(h)['frames'] == 6, theano_ocl.stats(h)
