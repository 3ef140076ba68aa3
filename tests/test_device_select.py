"""Which device a function runs on, and who says so: ``OCLMode(device=...)`` >
``THEANO_OCL_DEVICE`` > Theano's ``device=openclP:D`` / ``contexts=`` flags >
``PYOPENCL_CTX`` > the default.

Every case runs a fresh interpreter: the Theano flags are read once, while Theano imports.
A machine may have a single device, so precedence is shown by giving the lower-ranked
variables values that name no device: the run succeeds only if they were not read, and
an error must name the variable that was. The probe compiles a plain ``theano.function``
(the default mode) so the device flags' effect on the default linker is tested too.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

# many fresh interpreters (3-7 min on 2 cores): `make test-full` runs it, not CI's `make test`
pytestmark = pytest.mark.full

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 600
SELECTION_VARS = ('THEANO_OCL_DEVICE', 'PYOPENCL_CTX', 'THEANO_FLAGS')

PROBE = textwrap.dedent('''
    import json, sys
    if sys.argv[1] == 'import-first':
        import theano_ocl                  # the hook without the .pth
    import numpy as np
    import theano, theano.tensor as T
    x = T.vector('x')
    out = dict(config_device=theano.config.device, config_contexts=theano.config.contexts)
    try:
        mode = sys.argv[2]
        if mode.startswith('device='):
            import theano_ocl
            mode = theano_ocl.OCLMode(device=mode[len('device='):])
        elif mode == 'default':
            mode = None
        f = theano.function([x], T.exp(x) * 2, mode=mode)
        out['value'] = f(np.array([0.0, 1.0], dtype=x.dtype)).tolist()
        out['linker'] = type(f.maker.linker).__name__
        out['device'] = None
        if out['linker'] == 'OCLLinker':
            import theano_ocl              # (loaded already: its linker compiled f)
            out['device'] = theano_ocl.stats(f)['device'].spec
    except Exception as e:
        out['error'] = '%s: %s' % (type(e).__name__, e)
    print(json.dumps(out))
''')


def _run(args, **env_vars):
    env = {k: v for k, v in os.environ.items() if k not in SELECTION_VARS}
    env['PYTHONPATH'] = os.pathsep.join(
        [REPO] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
    env.update(env_vars)
    return subprocess.run([sys.executable] + list(args), env=env, cwd=REPO,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=TIMEOUT)


def probe(mode='default', import_first=True, **env_vars):
    """Run PROBE under ``env_vars``; returns (result dict, stderr)."""
    p = _run(['-c', PROBE, 'import-first' if import_first else 'plain', mode], **env_vars)
    lines = [l for l in p.stdout.splitlines() if l.startswith('{')]
    if p.returncode != 0 or not lines:
        raise AssertionError('probe exited %d\n--- stdout ---\n%s\n--- stderr ---\n%s'
                             % (p.returncode, p.stdout, p.stderr))
    return json.loads(lines[-1]), p.stderr


@pytest.fixture(scope='module')
def devices():
    """(the last device's 'P:D', a platform index that does not exist, platform 0's
    device count, platform 0's name)."""
    from theano_ocl import device
    try:
        rows = device.device_info()
    except device.NoOpenCLPlatform as e:
        pytest.skip('no OpenCL device: %s' % str(e).splitlines()[0])
    plats = sorted({int(r['spec'].split(':')[0]) for r in rows})
    n0 = sum(1 for r in rows if r['spec'].startswith('0:'))
    p0 = [r['platform'] for r in rows if r['spec'].startswith('0:')][0]
    return rows[-1]['spec'], plats[-1] + 1, n0, p0


def _assert_ran_on(res, spec):
    assert 'error' not in res, res['error']
    assert res['linker'] == 'OCLLinker', res
    assert res['device'] == spec, 'expected device %s, got %s' % (spec, res['device'])
    assert res['value'] == [2.0, pytest.approx(2 * 2.718281828459045)]


def _spec_env(name, spec):
    """(the environment asking for device ``spec`` through ``name``, how errors name it)."""
    p, d = spec.split(':')
    var, value = {
        'THEANO_OCL_DEVICE': ('THEANO_OCL_DEVICE', spec),
        'device': ('THEANO_FLAGS', 'device=opencl%s:%s' % (p, d)),
        'contexts': ('THEANO_FLAGS', 'contexts=dev0->opencl%s:%s' % (p, d)),
        'PYOPENCL_CTX': ('PYOPENCL_CTX', spec),
    }[name]
    if var == 'THEANO_FLAGS':
        label = 'Theano flag %s=%r' % tuple(value.split('=', 1))
    else:
        label = '%s=%r' % (var, value)
    return {var: value}, label


@pytest.mark.parametrize('name', ['THEANO_OCL_DEVICE', 'device', 'contexts', 'PYOPENCL_CTX'])
def test_each_convention_selects_by_index(devices, name):
    spec = devices[0]
    mode = 'default' if name in ('device', 'contexts') else 'OCL'
    res, err = probe(mode, **_spec_env(name, spec)[0])
    _assert_ran_on(res, spec)
    assert 'pygpu' not in err, err
    if name in ('device', 'contexts'):
        # Theano's own gpuarray back-end stays off: it would import pygpu
        assert (res['config_device'], res['config_contexts']) == ('cpu', '')


def test_pyopencl_platform_only_takes_its_first_device(devices):
    spec = devices[0]
    res, _ = probe('OCL', PYOPENCL_CTX=spec.split(':')[0])
    _assert_ran_on(res, spec.split(':')[0] + ':0')


def test_device_flag_works_without_importing_theano_ocl(devices):
    """The drop-in case: the script only imports theano (needs the .pth hook)."""
    import site
    pth = [d for d in site.getsitepackages() + [site.getusersitepackages()]
           if os.path.isfile(os.path.join(d, 'theano_ocl_startup.pth'))]
    if not pth:
        pytest.skip('theano_ocl_startup.pth is not installed in %s' % sys.executable)
    p, d = devices[0].split(':')
    res, err = probe('default', import_first=False, THEANO_FLAGS='device=opencl%s:%s' % (p, d))
    _assert_ran_on(res, devices[0])
    assert 'pygpu' not in err, err


def test_a_linker_flag_beats_the_device_flags_default(devices):
    p, d = devices[0].split(':')
    res, err = probe('default', THEANO_FLAGS='device=opencl%s:%s,linker=py' % (p, d))
    assert 'error' not in res, res['error']
    assert res['linker'] != 'OCLLinker' and res['config_device'] == 'cpu', res
    assert 'pygpu' not in err, err


@pytest.mark.parametrize('name', ['THEANO_OCL_DEVICE', 'device', 'contexts', 'PYOPENCL_CTX'])
def test_missing_platform_names_the_variable(devices, name):
    _, missing, _, p0 = devices
    env, label = _spec_env(name, '%d:0' % missing)
    res, err = probe('default' if name in ('device', 'contexts') else 'OCL', **env)
    assert res.get('error', '').startswith(
        'DeviceSelectionError: %s: platform %d does not exist; platforms: 0 %s ('
        % (label, missing, p0)), res
    assert 'pygpu' not in err, err


def test_missing_device_lists_the_platforms_devices(devices):
    _, _, n0, _ = devices
    res, _ = probe('OCL', THEANO_OCL_DEVICE='0:%d' % n0)
    assert res.get('error', '').startswith(
        "DeviceSelectionError: THEANO_OCL_DEVICE='0:%d': platform 0 has no device %d; "
        "its devices: 0 " % (n0, n0)), res


def test_ocl_mode_device_is_named_in_its_error(devices):
    _, missing, _, _ = devices
    res, _ = probe('device=%d:0' % missing)
    assert res.get('error', '').startswith(
        "DeviceSelectionError: device='%d:0': platform %d does not exist" % (missing, missing)), res


def test_precedence(devices):
    spec, missing, _, _ = devices
    bad = '%d:0' % missing
    p, d = spec.split(':')
    # each level beats every level below it, whose values name no device
    res, _ = probe('device=' + spec, THEANO_OCL_DEVICE=bad,
                   THEANO_FLAGS='device=opencl%d:0' % missing, PYOPENCL_CTX=bad)
    _assert_ran_on(res, spec)
    res, _ = probe('OCL', THEANO_OCL_DEVICE=spec,
                   THEANO_FLAGS='device=opencl%d:0' % missing, PYOPENCL_CTX=bad)
    _assert_ran_on(res, spec)
    res, _ = probe('default', THEANO_FLAGS='device=opencl%s:%s' % (p, d), PYOPENCL_CTX=bad)
    _assert_ran_on(res, spec)


def test_contexts_naming_two_devices_asks_for_one(devices):
    _, missing, _, _ = devices
    flag = 'a->opencl0:0;b->opencl%d:0' % missing
    res, _ = probe('default', THEANO_FLAGS='contexts=' + flag)
    assert res.get('error', '').startswith(
        "DeviceSelectionError: Theano flag contexts=%r names 2 OpenCL devices; theano_ocl "
        "runs a function on one device" % flag), res


def test_bad_theano_device_name_says_the_syntax():
    res, _ = probe('default', THEANO_FLAGS='device=opencl0')
    assert res.get('error', '').startswith(
        "DeviceSelectionError: Theano flag device='opencl0': 'opencl0' is not an OpenCL "
        "device name: expected openclP:D"), res


def test_cuda_flag_says_how_to_pick_an_nvidia_device():
    res, err = probe('default', THEANO_FLAGS='device=cuda0')
    assert 'error' not in res, res['error']
    assert res['config_device'] == 'cpu' and res['linker'] != 'OCLLinker', res
    assert 'pygpu was configured' not in err, err
    assert "Theano flag device='cuda0' names Theano's CUDA back-end (pygpu)" in err, err
    assert 'device=openclP:D' in err and 'python -m theano_ocl info' in err, err


def test_info_says_which_variable_chose(devices):
    spec = devices[0]
    p = _run(['-m', 'theano_ocl', 'info'], PYOPENCL_CTX=spec)
    assert p.returncode == 0, p.stderr
    assert "default device: %s" % spec in p.stdout
    assert "from PYOPENCL_CTX=%r" % spec in p.stdout, p.stdout
