"""``python -m theano_ocl bench`` / ``render``: the run record (JSON), the Markdown table,
the plot, failures recorded rather than fatal, and the docs' rendered benchmark pages
being the rendering of the stored runs."""
import glob
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from theano_ocl.__main__ import main
from theano_ocl import benchmarks
from theano_ocl.benchmarks import paths, record, stats

#: plots need matplotlib: installed by scripts/bootstrap.sh and the [bench] extra; a bare
#: environment (the GPU machine's carried Python) skips the tests that draw
HAVE_MATPLOTLIB = __import__('importlib').util.find_spec('matplotlib') is not None
needs_matplotlib = pytest.mark.skipif(not HAVE_MATPLOTLIB,
                                      reason='matplotlib is not installed (pip install .[bench])')


def _plots(*names):
    """The plot files a run writes: ``names`` where matplotlib is installed, none else
    (the tables are written either way)."""
    return set(names) if HAVE_MATPLOTLIB else set()

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PNG = b'\x89PNG\r\n\x1a\n'


def _png(path):
    with open(path, 'rb') as f:
        return f.read(8) == PNG and os.path.getsize(path) > 1000


@needs_matplotlib
def test_bench_quick_writes_record_markdown_and_plot(tmp_path, capsys):
    js, md, png = (str(tmp_path / n) for n in ('run.json', 'run.md', 'run.png'))
    rc = main(['bench', '--only', 'overhead', '--quick', '--repeat', '2', '--min-time', '0',
               '--no-progress', '--set', 'overhead.calls=500', '--json', js, '--markdown', md,
               '--plot', png])
    assert rc == 0, capsys.readouterr()
    rec = record.load(js)
    assert rec['schema'] == 2 and rec['quick'] is True and rec['repeat'] == 2
    assert rec['min_time'] == 0 and isinstance(rec['unreliable'], list)
    for key in ('name', 'platform', 'platform_version', 'driver_version', 'type', 'spec'):
        assert rec['device'][key], key
    assert rec['host']['cpu'] and rec['host']['python'] == sys.version.split()[0]
    assert rec['versions']['numpy'] == np.__version__
    assert rec['versions']['theano'] and rec['versions']['pyopencl']
    assert len(rec['git']['commit']) == 40
    assert rec['date'].endswith('Z')
    (bench,) = rec['benchmarks']
    assert bench['name'] == 'overhead'
    assert bench['params'] == dict(benchmarks.registry()['overhead'].quick, calls=500)
    assert rec['overrides'] == {'overhead': {'calls': 500}}
    assert len(bench['cases']) == 2
    for case in bench['cases']:
        assert 'error' not in case, case.get('traceback')
        vs = case['variants']
        assert set(vs) == {benchmarks.BASELINE, benchmarks.OCL}
        for v in vs.values():
            assert len(v['samples']) == 2 and min(v['samples']) > 0
            assert v['median'] == pytest.approx(float(np.median(v['samples'])))
            q1, q3 = np.percentile(v['samples'], [25, 75])
            assert (v['q1'], v['q3']) == (pytest.approx(q1), pytest.approx(q3))
            assert v['min'] == min(v['samples']) and v['max'] == max(v['samples'])
            assert v['warmup_s'] > 0 and len(v['others_cpu']) == 2
        assert case['ratio'] == pytest.approx(vs['Theano C']['median'] / vs['theano_ocl']['median'])
        assert case['info']['fallbacks'] == []
    with open(md) as f:
        table = f.read()
    assert table == record.markdown(rec)
    assert rec['device']['name'] in table and 'quick (with overhead.calls=500) sizes' in table
    for case in bench['cases']:
        assert '| overhead | %s | call |' % case['name'] in table
        assert '%.2fx' % case['ratio'] in table
    assert _png(png)
    out = capsys.readouterr().out
    assert 'wrote %s' % js in out and '| benchmark | case |' in out


def test_failing_case_is_recorded_and_exits_1(tmp_path, capsys):
    """A case whose theano_ocl result differs from C's fails alone: the record says why,
    the other cases of the run still run, the exit status is 1."""
    from theano_ocl.benchmarks.timing import check_close

    def setup_wrong():
        check_close(np.array([1.0, 2.0]), np.array([1.0, 2.5]), what='sum')

    def setup_right():
        return [benchmarks.Variant(benchmarks.BASELINE, lambda: None),
                benchmarks.Variant(benchmarks.OCL, lambda: None)], {}

    benchmarks.register('broken', quick={}, full={})(
        lambda ctx: [benchmarks.Case('wrong', setup_wrong), benchmarks.Case('right', setup_right)])
    try:
        js = str(tmp_path / 'run.json')
        assert main(['bench', '--only', 'broken', '--quick', '--min-time', '0', '--no-progress',
                     '--json', js]) == 1
    finally:
        del benchmarks._REGISTRY['broken']
    wrong, right = record.load(js)['benchmarks'][0]['cases']
    assert 'theano_ocl sum differs from Theano C' in wrong['error']
    assert 'variants' not in wrong and 'error' not in right
    assert len(right['variants']['theano_ocl']['samples']) == 3      # --quick: 3 samples
    assert '| broken | wrong | | | | failed |' in record.markdown(record.load(js))


def test_usage_errors_exit_2(capsys):
    assert main(['bench', '--only', 'no-such-benchmark']) == 2
    assert main(['bench', '--only', 'overhead', '--set', 'overhead.no_such_param=1']) == 2
    assert main(['bench', '--only', 'overhead', '--set', 'overhead.calls=x y']) == 2
    assert main(['bench', '--only', 'overhead', '--device', 'no-such-device-name']) == 2
    assert main(['bench', '--only', 'overhead', '--repeat', '0']) == 2
    assert main(['bench', '--only', 'overhead', '--min-time', '-1']) == 2
    err = capsys.readouterr().err
    assert '(got 0, 1)' in err and '(got 5, -1)' in err
    assert 'unknown benchmark no-such-benchmark' in err and 'no_such_param' in err
    assert 'is not a Python literal' in err and "no OpenCL device matches 'no-such-device-name'" in err


def _sample(device, ratio_scale, date, others=0.5):
    """A made-up record of schema 1 (no quartiles stored) with the fields render reads:
    theano_ocl's samples spread 5% around their median."""
    def case(name, c, o, unit='call'):
        return dict(name=name, unit=unit, info=dict(launches=1, fallbacks=[]), ratio=c / o,
                    variants={'Theano C': dict(samples=[c], median=c, min=c, max=c,
                                               others_cpu=[0.0]),
                              'theano_ocl': dict(samples=[o, o * 0.95, o * 1.05], median=o,
                                                 min=o * 0.95, max=o * 1.05,
                                                 others_cpu=[others, None, others])})
    return dict(schema=1, quick=True, repeat=1, date=date, git=dict(commit='ab' * 20, dirty=False),
                device=dict(name=device, platform='Plat', platform_version='OpenCL 3.0',
                            driver_version='1.2', version='OpenCL 3.0', type='GPU',
                            compute_units=4, spec='0:0', global_mem=1),
                host=dict(cpu='Some CPU', cpus=2, os='Linux', python='3.11.7'),
                versions=dict(theano='1.0.5', numpy='1.23.5', pyopencl='2026.1'),
                benchmarks=[dict(name='elemwise', doc='', params={}, cases=[
                    case('exp', 3e-3, 1.5e-3 / ratio_scale),
                    case('steps', 2e-5, 4e-5, 'step'),
                    dict(name='broke', unit='call', error='AssertionError: differs')])])


@needs_matplotlib
def test_render_from_stored_runs(tmp_path, capsys):
    data, out = tmp_path / 'data', tmp_path / 'out'
    data.mkdir()
    for name, dev, scale, date in (('a', 'Dev A', 1.0, '2026-01-02T00:00:00Z'),
                                   ('b', 'Dev B', 4.0, '2026-03-04T00:00:00Z'),
                                   ('c', 'Dev A', 2.0, '2026-01-01T00:00:00Z')):
        record.save(_sample(dev, scale, date), str(data / (name + '.json')))
    (data / 'notes.json').write_text('{"something": "else"}')      # not runs: left alone
    (data / 'broken.json').write_text('[1, 2')
    assert main(['render', '--data', str(data), '--out', str(out)]) == 0
    assert sorted(os.listdir(out)) == ['a.md', 'a.png', 'b.md', 'b.png', 'c.md', 'c.png',
                                       'history.png', 'index.md', 'ratios.png']
    a = (out / 'a.md').read_text()
    assert 'Device **Dev A** (Plat, GPU, driver 1.2, 4 compute units); 2026-01-02 00:00:00 UTC' in a
    assert 'median and interquartile range of 1-3 samples per variant; commit abababab' in a
    assert ('Other processes used 50% of the CPUs while samples were taken (median; at most '
            '50%). **Unreliable**: other processes used 50% of the CPUs') in a
    # medians and quartiles computed from the samples; the ratio's range from both IQRs
    assert ('| elemwise | exp | call | 3 ms (3 ms..3 ms) | 1.5 ms (1.46 ms..1.54 ms) | '
            '2.00x (1.95..2.05) | 1 |  |') in a
    assert '| elemwise | steps | step | 20 us (20 us..20 us) | 40 us (39 us..41 us) | 0.50x' in a
    assert '| elemwise | broke | | | | failed | | AssertionError: differs |' in a
    assert '| elemwise | exp | call | 3 ms (3 ms..3 ms) | 375 us (366 us..384 us) | 8.00x' \
        in (out / 'b.md').read_text()
    index = (out / 'index.md').read_text()
    assert index.index('Dev B') < index.index('Dev A')          # newest first
    assert '![C / OCL per benchmark, the latest run of each device](ratios.png)' in index
    assert all(_png(str(out / p)) for p in ('a.png', 'b.png', 'ratios.png', 'history.png'))
    # the README picture: the latest run of each device, one panel each, README-sized
    assert [r['date'] for r in record.latest_per_device(
        [record.load(str(data / n)) for n in ('a.json', 'b.json', 'c.json')])] == \
        ['2026-01-02T00:00:00Z', '2026-03-04T00:00:00Z']
    width, height = _png_size(str(out / 'ratios.png'))
    assert 800 <= width <= 1200 and 200 <= height <= 700, (width, height)
    # bench --render is the same command
    assert main(['bench', '--render', '--data', str(data), '--out', str(tmp_path / 'o2')]) == 0
    assert (tmp_path / 'o2' / 'a.md').read_text() == a
    assert main(['render', '--data', str(tmp_path / 'empty'), '--out', str(out)]) == 1


def _png_size(path):
    import struct
    with open(path, 'rb') as f:
        head = f.read(24)
    return struct.unpack('>II', head[16:24])


def _script_dirs(tmp_path):
    """(data, scripts, out) folders for a render: one stored run in data, scripts empty."""
    data, scripts, out = tmp_path / 'data', tmp_path / 'scripts', tmp_path / 'out'
    data.mkdir()
    scripts.mkdir()
    record.save(_sample('Dev A', 1.0, '2026-01-02T00:00:00Z'), str(data / 'a.json'))
    return data, scripts, out


@needs_matplotlib
def test_render_shows_script_and_torch_records(tmp_path):
    # the training scripts' --json records and torch_ref.py's, kept in scripts/ beside the
    # data folder, become two tables of index.md (torch's rows: its median and range)
    data, scripts, out = _script_dirs(tmp_path)
    with open(str(scripts / '2026-01-02T00_dev_lenet.json'), 'w') as f:
        json.dump(dict(bench='lenet', device='Dev A', commit=dict(commit='abcdef123'),
                       ms_per_step={'Theano C': 120.0, 'theano_ocl': 3.0}, ratio=40.0,
                       rounds={'theano_ocl': [[0.0029, 0.0], [0.0031, 0.0]]}), f)
    with open(str(scripts / '2026-01-02T00_dev_torch.json'), 'w') as f:
        json.dump(dict(bench='torch', device='Dev A', torch='9.9', rows=[dict(
            case='lenet: step', per='step', median_s=0.0015, min_s=0.0014, max_s=0.0021)]), f)
    assert main(['render', '--data', str(data), '--out', str(out)]) == 0
    index = (out / 'index.md').read_text()
    assert '| 2026-01-02T00_dev_lenet | Dev A | abcdef1 | 120.0 ms | 3.0 ms (2.9..3.1) | 40.0x |' \
        in index
    assert '| 2026-01-02T00_dev_torch | Dev A | torch 9.9 | lenet: step | 1.50 ms (1.40 ms..' \
        '2.10 ms) |' in index

@needs_matplotlib
def test_render_shows_step0_records(tmp_path):
    # bench/step0.py's --json records: per run the range over its rounds of a later step,
    # and of run_steps(1) after set_value and with nothing set over that round's later step
    data, scripts, out = _script_dirs(tmp_path)
    with open(str(scripts / '2026-01-02T00_dev_step0.json'), 'w') as f:
        json.dump(dict(bench='step0', device='Dev A', host='CPU B', ensembles=500,
                       commit=dict(commit='abcdef123', dirty=False), rounds=[
                           dict(later_step_s=50e-6, after_set_value_s=200e-6,
                                nothing_set_s=100e-6),
                           dict(later_step_s=40e-6, after_set_value_s=200e-6,
                                nothing_set_s=60e-6)]), f)
    assert main(['render', '--data', str(data), '--out', str(out)]) == 0
    index = (out / 'index.md').read_text()
    assert '| 2026-01-02T00_dev_step0 | Dev A | CPU B | abcdef1 | 500 | 40.0 us..50.0 us | ' \
        '4.00..5.00x | 1.50..2.00x |' in index


@needs_matplotlib
def test_docs_benchmark_pages_are_rendered_from_the_stored_runs(tmp_path):
    """The tables under docs/_generated/benchmarks are what the stored runs render to:
    nobody edits them by hand, and a stored run is never left unrendered."""
    data, out = paths.data_dir(), paths.out_dir()
    assert data.startswith(REPO) and out.startswith(REPO)        # this checkout's docs/
    assert glob.glob(os.path.join(data, '*.json')), 'no recorded run in the docs'
    record.render(data, str(tmp_path))
    fresh = sorted(p for p in os.listdir(tmp_path) if p.endswith('.md'))
    stored = sorted(p for p in os.listdir(out) if p.endswith('.md'))
    assert fresh == stored
    for name in fresh:
        with open(os.path.join(out, name)) as f:
            assert f.read() == (tmp_path / name).read_text(), \
                '%s is stale: run python -m theano_ocl render' % name
    for name in os.listdir(tmp_path):
        assert os.path.exists(os.path.join(out, name)), name


def test_listing_and_rendering_need_neither_theano_nor_opencl():
    """The registry lists the suite and record renders without importing Theano or
    pyopencl (the families import them when a case is set up)."""
    code = ('import sys; from theano_ocl import benchmarks; from theano_ocl.benchmarks import '
            'record, cli; names = list(benchmarks.registry()); '
            'print(names, [m for m in ("theano", "pyopencl", "torch", "pyclblast") '
            'if m in sys.modules])')
    p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                       cwd=REPO, env=dict(os.environ, PYTHONPATH=REPO), timeout=120)
    assert p.returncode == 0, p.stderr
    names, loaded = p.stdout.rsplit('] [', 1)
    assert 'elemwise' in names and 'nengo' in names
    assert loaded.strip() == ']', loaded


def test_registry_sizes():
    """Every benchmark has quick and full sizes with the same parameter names."""
    reg = benchmarks.registry()
    assert list(reg)[:3] == ['elemwise', 'check1', 'overhead']
    for b in reg.values():
        assert set(b.quick) == set(b.full) and b.doc, b.name


def test_progress_bar_on_a_terminal(monkeypatch, tmp_path):
    """On a terminal the run shows a progress bar (tqdm) over cases and samples."""
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    term = Terminal()
    monkeypatch.setattr(sys, 'stderr', term)
    assert main(['bench', '--only', 'overhead', '--quick', '--repeat', '2', '--min-time', '0',
                 '--set', 'overhead.calls=100']) == 0
    bar = term.getvalue().replace('\r', '\n')
    assert 'overhead: x*2+1 + shared update' in bar and '2/2' in bar, bar[-500:]


def test_settle_calls_run_untimed_before_each_sample(monkeypatch):
    """A case's ``settle`` calls run right before each of its samples, after the pause and
    outside the timed span: every sample times exactly ``calls`` calls, and the record
    says how many settled it."""
    from theano_ocl.benchmarks import runner
    log = []
    clock = [0.0]

    import types
    monkeypatch.setattr(runner, 'time', types.SimpleNamespace(perf_counter=lambda: clock[0],
                                                              sleep=lambda s: None))

    def make(label, cost):
        def fn():
            log.append(label)
            clock[0] += cost          # each call costs `cost` seconds of the fake clock
        return benchmarks.Variant(label, fn)

    case = benchmarks.Case('c', lambda: ([make('a', 1.0), make('b', 3.0)], {}), calls=4,
                           settle=2)
    res = runner.run_case(case, repeat=3)
    # one warm-up call each, then per round and variant 2 settle + 4 timed calls
    assert log == ['a', 'b'] + (['a'] * 6 + ['b'] * 6) * 3, log
    assert res['settle'] == 2
    assert res['variants']['a']['samples'] == [1.0] * 3
    assert res['variants']['b']['samples'] == [3.0] * 3
    plain = runner.run_case(benchmarks.Case('c', case.setup, calls=4), repeat=1)
    assert 'settle' not in plain


def test_script_records_of_every_script_are_listed(tmp_path):
    """The scripts' ``--json`` records (bench/common.write_record's layout) are rendered in
    index.md's table, the Nengo-like network's among the training scripts', newest first,
    with each run's median step, its rounds' range and the ratio."""
    def rec(bench, c_ms, ocl_rounds_ms, dirty=False):
        med = float(np.median(ocl_rounds_ms))
        return dict(bench=bench, date='2026-11-27', commit=dict(commit='abcdef0123', dirty=dirty),
                    device='Some GPU', platform='P',
                    rounds={'Theano C': [(c_ms / 1e3,)],
                            'theano_ocl': [(t / 1e3,) for t in ocl_rounds_ms]},
                    ms_per_step={'Theano C': c_ms, 'theano_ocl': med}, ratio=c_ms / med,
                    loss_rel_diff=0.0)
    runs = {'2026-11-27T0101_gpu_lenet_b128': rec('lenet', 141.0, [1.8, 1.9, 1.8], dirty=True),
            '2026-11-27T0202_gpu_nengo_e500': rec('nengo', 59.5, [0.27, 0.28, 0.272]),
            '2026-11-27T0303_gpu_other': rec('other', 1.0, [1.0])}
    for name, r in runs.items():
        with open(str(tmp_path / (name + '.json')), 'w') as fh:
            json.dump(r, fh)
    lines = record._script_runs(str(tmp_path))
    rows = [l for l in lines if l.startswith('| 2026')]
    assert [r.split(' | ')[0] for r in rows] == ['| 2026-11-27T0202_gpu_nengo_e500',
                                                 '| 2026-11-27T0101_gpu_lenet_b128']
    assert '| 59.5 ms | 0.272 ms (0.27..0.28) | 218.7x |' in rows[0]   # the rounds' median
    assert '| abcdef0 with changes | 141.0 ms | 1.8 ms (1.8..1.9) | 78.3x |' in rows[1]
    assert '| abcdef0 | 59.5 ms |' in rows[0]          # (a clean checkout's commit)


def test_samples_autorange_to_min_time(monkeypatch):
    """Rounds continue past ``repeat`` until every variant's timed calls add up to
    ``min_time``, and stop once the case has sampled for MAX_TIME_FACTOR * min_time
    (a case that pauses before each sample)."""
    from theano_ocl.benchmarks import runner
    import types
    clock = [0.0]

    def sleep(s):
        clock[0] += s
    monkeypatch.setattr(runner, 'time', types.SimpleNamespace(perf_counter=lambda: clock[0],
                                                              sleep=sleep))

    def variants():
        return [benchmarks.Variant(label, lambda c=cost: sleep(c))
                for label, cost in (('fast', 0.01), ('slow', 0.05))], {}
    res = runner.run_case(benchmarks.Case('c', variants, calls=2), repeat=3, min_time=0.49)
    # 'fast' takes 0.02 s a sample: 25 samples reach 0.49 s ('slow' had enough after 5)
    assert [len(res['variants'][k]['samples']) for k in ('fast', 'slow')] == [25, 25]
    paused = runner.run_case(benchmarks.Case('c', variants, calls=2, pause=1.0), repeat=3,
                             min_time=0.5)
    # each round pauses 2 s: past 10 * 0.5 s of sampling after 3 rounds
    assert len(paused['variants']['fast']['samples']) == 3
    few = runner.run_case(benchmarks.Case('c', variants, calls=2), repeat=4, min_time=0.0)
    assert len(few['variants']['slow']['samples']) == 4


def _blocker(tmp_path, *modules):
    """A directory whose sitecustomize makes importing ``modules`` fail as if they were
    not installed (the [bench] extra missing)."""
    d = tmp_path / 'blocker'
    d.mkdir()
    (d / 'sitecustomize.py').write_text(
        'import sys\n'
        'class Block:\n'
        '    def find_spec(self, name, path=None, target=None):\n'
        '        if name.split(".")[0] in %r:\n'
        '            raise ModuleNotFoundError("No module named %%r" %% name, name=name)\n'
        'sys.meta_path.insert(0, Block())\n' % (modules,))
    return str(d)


def _cli(args, cwd, pythonpath, timeout=600):
    # (without a commit given by the caller's environment: the runs name their own)
    env = {k: v for k, v in os.environ.items() if k != 'THEANO_OCL_BENCH_COMMIT'}
    return subprocess.run([sys.executable, '-m', 'theano_ocl'] + args, capture_output=True,
                          text=True, cwd=str(cwd), timeout=timeout,
                          env=dict(env, PYTHONPATH=os.pathsep.join(pythonpath)))


def test_bench_runs_without_the_bench_extra(tmp_path):
    """Without tqdm and matplotlib, bench runs with plain progress lines, --plot says what
    it needs before running anything, and render writes the tables without the plots."""
    path = [_blocker(tmp_path, 'tqdm', 'matplotlib'), REPO]
    p = _cli(['bench', '--plot', str(tmp_path / 'x.png'), '--only', 'overhead'], tmp_path, path)
    assert p.returncode == 2 and "--plot needs matplotlib (pip install 'theano_ocl[bench]')" \
        in p.stderr, p.stderr
    js = tmp_path / 'run.json'
    p = _cli(['bench', '--only', 'overhead', '--quick', '--repeat', '2', '--min-time', '0',
              '--set', 'overhead.calls=100', '--json', str(js)], tmp_path, path)
    assert p.returncode == 0, p.stderr
    assert '[1/2] overhead: x*2+1, scalar in and out' in p.stderr
    assert '[2/2] overhead: x*2+1 + shared update' in p.stderr
    assert 'overhead | x*2+1 + shared update | per call: Theano C' in p.stdout
    assert len(record.load(str(js))['benchmarks'][0]['cases']) == 2
    p = _cli(['bench', '--only', 'overhead', '--quick', '--repeat', '2', '--min-time', '0',
              '--set', 'overhead.calls=100', '--no-progress'], tmp_path, path)
    assert p.returncode == 0 and '[1/2]' not in p.stderr, p.stderr
    out = tmp_path / 'out'
    p = _cli(['render', '--data', str(tmp_path), '--out', str(out)], tmp_path, path)
    assert p.returncode == 0 and 'no plots: they need matplotlib' in p.stderr, p.stderr
    assert sorted(os.listdir(out)) == ['index.md', 'run.md']


def _package_copy(root):
    """theano_ocl's package alone under ``root`` (as pip installs it into site-packages)."""
    import shutil
    shutil.copytree(os.path.join(REPO, 'theano_ocl'), str(root / 'theano_ocl'),
                    ignore=shutil.ignore_patterns('__pycache__'))
    return str(root)


def test_record_and_render_outside_a_checkout(tmp_path):
    """From an installed copy, --record and render write into the current directory (or
    the DIR given), nothing next to the package, and the run says it came from no
    checkout; in a checkout they keep to its docs/."""
    site, work = tmp_path / 'site', tmp_path / 'work'
    site.mkdir()
    work.mkdir()
    path = [_package_copy(site)]
    p = _cli(['bench', '--only', 'overhead', '--quick', '--repeat', '2', '--min-time', '0',
              '--set', 'overhead.calls=100', '--no-progress', '--record', '--force'], work, path)
    assert p.returncode == 0, p.stderr
    (js,) = glob.glob(str(work / '*_quick.json'))
    rec = record.load(js)
    assert rec['git'] is None
    stem = os.path.basename(js)[:-5]
    assert {stem + '.md', 'index.md'} | _plots(stem + '.png', 'ratios.png', 'history.png') <= \
        set(os.listdir(work))
    assert 'installed theano_ocl %s (no checkout)' % rec['versions']['theano_ocl'] in \
        (work / (stem + '.md')).read_text()
    assert sorted(os.listdir(site)) == ['theano_ocl']
    # render alone: into the current directory, or where --out says
    p = _cli(['render', '--out', str(tmp_path / 'pages')], work, path)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / 'pages' / (stem + '.md')).read_text() == \
        (work / (stem + '.md')).read_text()
    assert sorted(os.listdir(site)) == ['theano_ocl']


def test_record_in_a_checkout_keeps_to_its_docs(tmp_path):
    """From a checkout, --record stores the run under docs/_data/benchmarks and renders
    into docs/_generated/benchmarks, whatever the current directory, with its commit."""
    co, work = tmp_path / 'co', tmp_path / 'work'
    co.mkdir()
    work.mkdir()
    path = [_package_copy(co)]
    (co / 'setup.py').write_text('')
    (co / 'docs').mkdir()
    git = ['git', '-C', str(co), '-c', 'user.name=t', '-c', 'user.email=t@t']
    subprocess.run(git + ['init', '-q'], check=True)
    subprocess.run(git + ['add', 'setup.py'], check=True)
    subprocess.run(git + ['commit', '-q', '-m', 'x'], check=True)
    head = subprocess.run(git + ['rev-parse', 'HEAD'], capture_output=True, text=True).stdout
    p = _cli(['bench', '--only', 'overhead', '--quick', '--repeat', '2', '--min-time', '0',
              '--set', 'overhead.calls=100', '--no-progress', '--record', '--force'], work, path)
    assert p.returncode == 0, p.stderr
    (js,) = glob.glob(str(co / 'docs' / '_data' / 'benchmarks' / '*_quick.json'))
    assert record.load(js)['git']['commit'] == head.strip()
    stem = os.path.basename(js)[:-5]
    assert {stem + '.md', 'index.md'} | _plots('ratios.png') <= \
        set(os.listdir(co / 'docs' / '_generated' / 'benchmarks'))
    assert os.listdir(work) == []


def test_checkout_root_finds_this_checkout_only(tmp_path):
    """The package of this checkout stores its runs in docs/; a copy of the package
    anywhere else (no .git, setup.py and docs/ beside it) in the current directory."""
    assert paths.checkout_root() == REPO
    assert paths.data_dir() == os.path.join(REPO, 'docs', '_data', 'benchmarks')
    assert paths.out_dir() == os.path.join(REPO, 'docs', '_generated', 'benchmarks')
    assert paths.checkout_root(str(tmp_path / 'theano_ocl')) is None
    for mark in ('.git', 'docs'):
        (tmp_path / mark).mkdir()
    assert paths.checkout_root(str(tmp_path / 'theano_ocl')) is None     # no setup.py
    (tmp_path / 'setup.py').write_text('')
    assert paths.checkout_root(str(tmp_path / 'theano_ocl')) == str(tmp_path)


def _noisy(costs):
    """A registered benchmark 'noisy' whose Theano C and theano_ocl calls busy-wait the
    given seconds in turn (a scattered variant: several costs)."""
    import itertools
    import time

    def wait(cycle):
        t = time.perf_counter() + next(cycle)
        while time.perf_counter() < t:
            pass

    def setup():
        return [benchmarks.Variant(label, lambda c=itertools.cycle(cs): wait(c))
                for label, cs in costs.items()], {}
    benchmarks.register('noisy', quick={}, full={})(
        lambda ctx: [benchmarks.Case('busy wait', setup)])


def test_unreliable_run_is_recorded_only_with_force(tmp_path, capsys):
    """A run whose samples scatter (IQR above 10% of the median) is printed but not
    recorded (exit status 3); --force records it, its page saying why it is unreliable."""
    _noisy({benchmarks.BASELINE: [0.001], benchmarks.OCL: [0.001, 0.004]})
    args = ['bench', '--only', 'noisy', '--quick', '--repeat', '6', '--min-time', '0',
            '--no-progress', '--record', str(tmp_path)]
    try:
        assert main(args) == 3
        err = capsys.readouterr().err
        assert 'not recorded: the times are unreliable' in err
        assert "noisy: busy wait: theano_ocl's interquartile range is" in err
        assert os.listdir(tmp_path) == []
        assert main(args + ['--force']) == 0
    finally:
        del benchmarks._REGISTRY['noisy']
    (js,) = glob.glob(str(tmp_path / '*.json'))
    rec = record.load(js)
    assert any("theano_ocl's interquartile range" in r for r in rec['unreliable'])
    assert '**Unreliable**: ' in (tmp_path / (os.path.basename(js)[:-5] + '.md')).read_text()


def test_theano_c_off_its_recorded_range_is_unreliable():
    """Theano C's median more than 10% outside the quartiles it had in earlier runs of the
    same device, sizes and case says the machine changed: the run is unreliable."""
    earlier = [_sample('Dev A', 1.0, '2026-01-01T00:00:00Z', others=0.0)]
    now = _sample('Dev A', 1.0, '2026-01-02T00:00:00Z', others=0.0)
    assert stats.unreliable(now, earlier) == []
    exp = now['benchmarks'][0]['cases'][0]
    exp['variants']['Theano C']['samples'] = [3.5e-3]            # 3 ms before
    (reason,) = stats.unreliable(now, earlier)
    assert reason == ('elemwise: exp: Theano C took 3.5 ms, outside 3 ms..3 ms, its range in '
                      '1 earlier run(s) on this device (more than 10% off)')
    exp['variants']['Theano C']['samples'] = [3.2e-3]            # within 10%
    assert stats.unreliable(now, earlier) == []
    other = _sample('Dev B', 1.0, '2026-01-01T00:00:00Z', others=0.0)
    exp['variants']['Theano C']['samples'] = [9e-3]
    assert stats.unreliable(now, [other]) == []                  # another device says nothing


def test_compare_flags_regressions(tmp_path, capsys):
    """bench --compare: per case theano_ocl's B / A, 'SLOWER' when B's median is more than
    the threshold above A's and the interquartile ranges do not overlap; exit status 1
    with --fail-on-regression."""
    a = _sample('Dev A', 1.0, '2026-01-01T00:00:00Z', others=0.0)
    b = _sample('Dev A', 1.0, '2026-01-02T00:00:00Z', others=0.0)
    exp, steps = (c['variants']['theano_ocl'] for c in b['benchmarks'][0]['cases'][:2])
    exp['samples'] = [x * 1.5 for x in exp['samples']]          # exp 50% slower
    steps['samples'] = [x * 1.04 for x in steps['samples']]     # steps: within the IQR
    pa, pb = str(tmp_path / 'a.json'), str(tmp_path / 'b.json')
    record.save(a, pa)
    record.save(b, pb)
    assert main(['bench', '--compare', pa, pb]) == 0
    assert main(['bench', '--compare', pa, pb, '--fail-on-regression']) == 1
    out = capsys.readouterr().out
    assert ('| elemwise | exp | 1.5 ms (1.46 ms..1.54 ms) | 2.25 ms (2.19 ms..2.31 ms) | '
            '1.500 | 1.000 | SLOWER |') in out
    assert '| elemwise | steps | 40 us (39 us..41 us) | 41.6 us (40.6 us..42.6 us) | 1.040 | ' \
        '1.000 |  |' in out
    assert '2 case(s) compared; 1 slower' in out
    assert main(['bench', '--compare', pb, pa, '--fail-on-regression']) == 0
    assert '| elemwise | exp |' in capsys.readouterr().out.split('FASTER')[0]
    assert main(['bench', '--compare', pa, str(tmp_path / 'missing.json')]) == 2
