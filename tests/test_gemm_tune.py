"""GEMM tuning (ops/gemm_search.py, ops/gemm_tune.py): the tuner's choices compute
numpy's products through the real path (odd shapes, transposes, float32 and float64),
the tuning file round-trips and a corrupt one is rebuilt, the search resumes, an untuned
device warns once, first-use tuning runs once, the settings are checked, and
``python -m theano_ocl tune`` runs."""
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.errors import SettingError
from theano_ocl.ops import blas, gemm_search, gemm_tune
from theano_ocl.runtime import context, settings
from helpers import setting

#: tiny sizes: the search measures 2-3 tiles in its budget on PoCL
SIZES = (32, 64)


@pytest.fixture
def tuning_file(tmp_path, monkeypatch):
    path = tmp_path / 'tuning.json'
    monkeypatch.setenv(gemm_tune.ENV_FILE, str(path))
    gemm_tune.forget()
    yield path
    gemm_tune.forget()


@pytest.fixture
def dev():
    return theano_ocl.get_device()


def _products(dtype, shape):
    """T.dot in the four layouts, for M x K and K x N operands of ``shape`` (M, N, K)."""
    M, N, K = shape
    rng = np.random.RandomState(1)
    a = rng.uniform(-1, 1, (M, K)).astype(dtype)
    b = rng.uniform(-1, 1, (K, N)).astype(dtype)
    x, y = T.matrix('x', dtype), T.matrix('y', dtype)
    outs = [T.dot(x, y), T.dot(y.T, x.T)]
    xt, yt = T.matrix('xt', dtype), T.matrix('yt', dtype)
    outs += [T.dot(xt.T, y), T.dot(x, yt.T), T.dot(xt.T, yt.T)]
    vals = [a, b, np.ascontiguousarray(a.T), np.ascontiguousarray(b.T)]
    want = a.astype('f8') @ b.astype('f8')
    return [x, y, xt, yt], outs, vals, [want, want.T, want, want, want]


def _tiles_used(monkeypatch):
    used = []
    plan = blas.plan_kernel

    def spy(*args, **kwargs):
        used.append(kwargs.get('tile', blas.AUTO))
        return plan(*args, **kwargs)
    monkeypatch.setattr(blas, 'plan_kernel', spy)
    return used


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_tuned_choice_computes_numpys_product(dtype, dev, tuning_file, monkeypatch):
    """A short search stores a choice per size; products of odd shapes (no multiple of any
    tile) in every layout then run with the stored tile and give numpy's result."""
    if not dev.supports_dtype(dtype):
        pytest.skip('no %s on %s' % (dtype, dev.name))
    rows = gemm_search.tune(dev, [dtype], budget=0.3, sizes=SIZES)
    assert [r['n'] for r in rows] == list(SIZES)
    stored = json.loads(tuning_file.read_text())['devices'][gemm_tune.device_key(dev)][dtype]
    assert set(stored['classes']) == {'32', '64'} and stored['tried']['kernel']
    # every tile is checked: force one per class to a tile with two-wide columns
    stored['classes']['64'] = dict(backend='kernel', tile=[32, 8, 8, 2, 16])
    gemm_tune.store_entry(dev, {dtype: stored})
    setting(monkeypatch, 'blas', 'kernel')
    setting(monkeypatch, 'tune', 'cached')
    used = _tiles_used(monkeypatch)
    for shape in [(70, 50, 93), (33, 29, 37)]:      # classes 64 and 32
        ins, outs, vals, wants = _products(dtype, shape)
        f = theano.function(ins, outs, mode=theano_ocl.OCLMode())
        tol = dict(rtol=1e-4, atol=1e-4) if dtype == 'float32' else dict(rtol=1e-10, atol=1e-10)
        for got, want in zip(f(*vals), wants):
            np.testing.assert_allclose(got, want, **tol)
    n64 = stored['classes']['64']['tile']
    assert tuple(n64) in used           # the stored tile ran
    assert blas.AUTO not in used        # no product fell back to the built-in tile


def test_file_round_trips_and_keeps_other_devices(dev, tuning_file):
    gemm_tune.save(dict(format=gemm_tune.FORMAT, devices={'other | gpu | 1': {'x': 1}}))
    entry = {'float32': dict(classes={'64': dict(backend='kernel', tile=[16, 16, 4, 4, 16])})}
    gemm_tune.store_entry(dev, entry)
    gemm_tune.forget()
    assert gemm_tune.device_entry(dev) == entry
    assert gemm_tune.load()['devices']['other | gpu | 1'] == {'x': 1}
    with settings.active(settings.Settings(tune='off')):
        assert gemm_tune.choice(dev, 'float32', 60, 70, 80) is None
    with settings.active(settings.Settings(tune='cached')):
        c = gemm_tune.choice(dev, 'float32', 60, 70, 80)
    assert c == gemm_tune.Choice('kernel', (16, 16, 4, 4, 16), 64)
    assert not [f for f in os.listdir(tuning_file.parent) if f.startswith('.tmp')]


def test_fast_variant_tile_is_searched_stored_and_run(dev, tuning_file, monkeypatch):
    """The kernel's variant for NVIDIA-like GPUs (a tile's 6th element) is measured first,
    its stored choice round-trips through the file, is described, and a product of its
    class runs with it and gives numpy's result."""
    tiles = gemm_search.kernel_tiles(dev, 'float32')
    assert tiles[0] == gemm_search.FIRST_TILES[0] and len(tiles[0]) == 6
    assert {t[5] for t in tiles if t is not None and len(t) > 5} == {blas.FAST_SINGLE,
                                                                    blas.FAST_DOUBLE}
    gemm_search.tune(dev, ['float32'], budget=0.2, sizes=(32,))
    tried = gemm_tune.device_entry(dev)['float32']['tried']['kernel']
    assert isinstance(tried[gemm_search.tile_name(tiles[0])]['32'], float)
    tile = [16, 16, 4, 4, 16, blas.FAST_DOUBLE]
    gemm_tune.store_entry(dev, {'float32': dict(classes={'64': dict(backend='kernel',
                                                                     tile=tile)})})
    gemm_tune.forget()
    with settings.active(settings.Settings(tune='cached')):
        assert gemm_tune.choice(dev, 'float32', 64, 96, 80) == \
            gemm_tune.Choice('kernel', tuple(tile), 64)
    assert 'two buffers' in gemm_search.describe(dict(backend='kernel', tile=tile))
    setting(monkeypatch, 'blas', 'kernel')
    setting(monkeypatch, 'tune', 'cached')
    used = _tiles_used(monkeypatch)
    ins, outs, vals, wants = _products('float32', (64, 128, 80))     # whole 64 x 64 tiles
    f = theano.function(ins, outs, mode=theano_ocl.OCLMode())
    for got, want in zip(f(*vals), wants):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert used and all(t == tuple(tile) for t in used), used


def test_corrupt_file_is_ignored_with_a_warning_and_rewritten(dev, tuning_file):
    tuning_file.write_text('{"format": 1, "devices": {"trunc')
    with pytest.warns(RuntimeWarning, match='ignored .*tuning.json'):
        assert gemm_tune.device_entry(dev) is None
    gemm_search.tune(dev, ['float32'], budget=0.5, sizes=(32,))
    data = json.loads(tuning_file.read_text())
    assert data['format'] == gemm_tune.FORMAT
    assert data['devices'][gemm_tune.device_key(dev)]['float32']['classes']['32']['backend'] \
        == 'kernel'


def test_search_resumes_where_it_stopped(dev, tuning_file):
    gemm_search.tune(dev, ['float32'], budget=0.2, sizes=(32,))
    first = gemm_tune.device_entry(dev)['float32']['tried']['kernel']
    gemm_search.tune(dev, ['float32'], budget=0.2, sizes=(32,))
    second = gemm_tune.device_entry(dev)['float32']['tried']['kernel']
    assert set(first) < set(second)                   # new tiles, none measured again
    assert all(second[k] == v for k, v in first.items())
    order = [gemm_search.tile_name(t) for t in gemm_search.kernel_tiles(dev, 'float32')]
    assert set(second) == set(order[:len(second)])    # in the search's order


def test_untuned_device_warns_once_naming_the_command(dev, tuning_file, monkeypatch):
    setting(monkeypatch, 'blas', 'kernel')
    setting(monkeypatch, 'tune', 'cached')
    side = gemm_tune.sizes_for(dev)[0] + 3        # a product tuning would take
    x, y = T.matrix('x', 'float32'), T.matrix('y', 'float32')
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for k in range(2):
            f = theano.function([x, y], T.dot(x, y), mode=theano_ocl.OCLMode())
            f(np.ones((side, side + k), 'float32'), np.ones((side + k, side), 'float32'))
    untuned = [w for w in caught if issubclass(w.category, gemm_tune.UntunedWarning)]
    assert len(untuned) == 1
    assert 'python -m theano_ocl tune' in str(untuned[0].message)
    assert dev.name in str(untuned[0].message)


def test_small_products_and_setting_off_do_not_warn(dev, tuning_file, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter('error', gemm_tune.UntunedWarning)
        with settings.active(settings.Settings(tune='cached')):
            assert gemm_tune.choice(dev, 'float32', 8, 5000, 5000) is None   # a side under 32
        with settings.active(settings.Settings(tune='off')):
            assert gemm_tune.choice(dev, 'float32', 500, 500, 500) is None


class _FakeGPU(object):
    is_gpu = True
    name = 'Fake GPU'
    platform_name = 'Fake platform'

    class device:
        driver_version = '1.0'


def test_auto_tunes_a_gpu_once_at_first_use(tuning_file, monkeypatch):
    calls = []

    def tuner(dev, dtypes, budget):
        calls.append((dtypes, budget))
        gemm_tune.store_entry(dev, {dtypes[0]: dict(classes={'1024': dict(backend='clblast')})})
    monkeypatch.setitem(context._provided, 'gemm_tuner', tuner)
    monkeypatch.setenv(gemm_tune.ENV_BUDGET, '7')
    gpu = _FakeGPU()
    with settings.active(settings.Settings(tune='auto')):
        for _ in range(3):
            assert gemm_tune.choice(gpu, 'float32', 2000, 2000, 900) == \
                gemm_tune.Choice('clblast', None, 1024)
    assert calls == [(['float32'], 7.0)]


def test_a_failed_first_use_tuning_warns_and_is_not_retried(tuning_file, monkeypatch):
    calls = []

    def tuner(dev, dtypes, budget):
        calls.append(dtypes)
        raise RuntimeError('no luck')
    monkeypatch.setitem(context._provided, 'gemm_tuner', tuner)
    with settings.active(settings.Settings(tune='auto')):
        with pytest.warns(gemm_tune.UntunedWarning, match='no luck'):
            assert gemm_tune.choice(_FakeGPU(), 'float64', 4096, 4096, 4096) is None
        assert gemm_tune.choice(_FakeGPU(), 'float64', 4096, 4096, 4096) is None
    assert calls == [['float64']]


def test_settings_are_checked(monkeypatch):
    assert settings.Settings().tune == 'auto'
    for good in ('auto', 'cached', 'off'):
        assert settings.Settings(tune=good).tune == good
    with pytest.raises(SettingError, match=r"OCLMode\(tune='now'\): expected one of 'auto'"):
        settings.Settings(tune='now')
    monkeypatch.setenv('THEANO_OCL_TUNE', 'sometimes')
    with pytest.raises(SettingError, match="THEANO_OCL_TUNE='sometimes'"):
        settings.Settings.resolve({})
    monkeypatch.setenv(gemm_tune.ENV_BUDGET, 'soon')
    with pytest.raises(SettingError, match="THEANO_OCL_TUNE_BUDGET='soon': expected a number"):
        gemm_tune.first_use_budget()
    monkeypatch.setenv(gemm_tune.ENV_BUDGET, '0')
    with pytest.raises(SettingError):
        gemm_tune.first_use_budget()


def test_shape_classes():
    assert gemm_tune.shape_class((1024, 2048, 4096), 4096, 4096, 4096) == 4096
    assert gemm_tune.shape_class((1024, 2048, 4096), 3000, 5000, 2900) == 4096
    assert gemm_tune.shape_class((1024, 2048, 4096), 1400, 1400, 1400) == 1024
    assert gemm_tune.shape_class((1024, 2048, 4096), 256, 4096, 4096) is None
    assert gemm_tune.shape_class((1024, 2048, 4096), 512, 4096, 4096) == 1024


def _cli(args, tuning_file):
    env = dict(os.environ, **{gemm_tune.ENV_FILE: str(tuning_file), 'PYTHONUNBUFFERED': '1'})
    return subprocess.run([sys.executable, '-m', 'theano_ocl', 'tune'] + args, env=env,
                          capture_output=True, text=True, timeout=240)


def test_command_line_tune(dev, tuning_file):
    p = _cli(['--device', dev.spec, '--budget', '2', '--dtypes', 'float32', '--no-progress'],
             tuning_file)
    assert p.returncode == 0, p.stdout + p.stderr
    assert 'before GFLOP/s' in p.stdout
    assert 'float32  %d^3' % gemm_tune.sizes_for(dev)[0] in p.stdout
    data = json.loads(tuning_file.read_text())
    assert data['devices'][gemm_tune.device_key(dev)]['float32']['classes']
    p = _cli(['--dtypes', 'float16'], tuning_file)
    assert p.returncode == 2 and 'float32,float64' in p.stderr


def test_a_candidate_that_writes_nothing_is_not_taken_for_the_last_ones_result(dev):
    """The tuner checks each candidate's product against numpy's in the same output
    buffer: one that writes nothing must fail its check, not pass on what the candidate
    before it left there."""
    p = gemm_search._Problem(dev, 'float32', 40, 24, 16)
    kernel = gemm_search._builtin_plan('kernel')
    assert gemm_search._measure(p, kernel, False, repeat=0) == 0.0

    def nothing(bench, problem):
        pass
    assert gemm_search._measure(p, nothing, False, repeat=0) == 'wrong result'
    assert gemm_search._measure(p, kernel, False, repeat=0) == 0.0
