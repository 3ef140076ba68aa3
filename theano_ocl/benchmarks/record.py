"""Recorded runs: JSON files (one per run) in, Markdown tables and PNG plots out.

Everything here reads only the records, so the tables and plots in the docs are rendered
from the stored runs (``python -m theano_ocl render``), never typed by hand; matplotlib
(Agg, no display) is imported only to plot. Records of every schema render: the spread
of a variant is computed from its raw samples, which all of them keep.
"""
import glob
import json
import os
import statistics

from . import BASELINE, OCL, paths
from .stats import (brief, cases, fmt_time, others_cpu, ratio_range, spread, unreliable,
                    variant_spread)


def save(record, path):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, 'w') as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write('\n')


def load(path):
    with open(path) as f:
        return json.load(f)


def _json_objects(directory):
    """(file stem, dict) of the JSON files in ``directory`` that hold an object, by name;
    other files there (a directory the user chose may hold any) are left alone."""
    for p in sorted(glob.glob(os.path.join(directory, '*.json'))):
        try:
            obj = load(p)
        except (OSError, ValueError):
            continue
        if isinstance(obj, dict):
            yield os.path.splitext(os.path.basename(p))[0], obj


def load_runs(data_dir):
    """(file stem, record) of the suite's records in ``data_dir``, newest first."""
    runs = [(stem, rec) for stem, rec in _json_objects(data_dir)
            if {'benchmarks', 'device', 'date'} <= set(rec)]
    runs.sort(key=lambda sr: sr[1]['date'], reverse=True)
    return runs


def run_name(record):
    """A file stem for a record: date and time, device, size
    (``2026-11-25T1303_nvidia-h100-80gb-hbm3_full``)."""
    slug = ''.join(c if c.isalnum() else '-' for c in record['device']['name'].lower())
    slug = '-'.join(w for w in slug.split('-') if w)[:40]
    date = record['date'][:16].replace(':', '')
    return '%s_%s_%s' % (date, slug, 'quick' if record['quick'] else 'full')


def device_label(record):
    dev = record['device']
    return '%s (%s), %s' % (dev['name'][:40], dev['platform'], record['date'][:10])


def header(record):
    """The lines that say what a run measured on: device, driver, date, commit, software,
    and why its times are unreliable when they are."""
    dev, host, ver = record['device'], record['host'], record['versions']
    return ('Device **%s** (%s, %s, driver %s, %d compute units); %s UTC; %s sizes, '
            'median and interquartile range of %s samples per variant; %s; host %s (%s CPUs); '
            'Python %s, Theano %s, numpy %s, pyopencl %s.' % (
                dev['name'], dev['platform'], dev['type'], dev['driver_version'],
                dev['compute_units'], record['date'].replace('T', ' ').rstrip('Z'),
                _sizes(record), _counts(record), source(record), host['cpu'], host['cpus'],
                host['python'], ver.get('theano'), ver.get('numpy'),
                ver.get('pyopencl')) + _load_note(record) + _unreliable_note(record))


def source(record):
    """The commit a run ran from, or the installed version when it ran from no checkout."""
    git = record.get('git') or {}
    if git.get('commit'):
        return 'commit %s%s' % (git['commit'][:10], ' (with local changes)' if git.get('dirty')
                                else '')
    version = (record.get('versions') or {}).get('theano_ocl')
    return 'installed theano_ocl %s (no checkout)' % version if version else 'commit unknown'


def _counts(record):
    ns = [len(v['samples']) for _, c in cases(record)
          for v in c.get('variants', {}).values() if v.get('samples')]
    if not ns:
        return 'no'
    return '%d' % ns[0] if min(ns) == max(ns) else '%d-%d' % (min(ns), max(ns))


def _sizes(record):
    sizes = 'quick' if record['quick'] else 'full'
    changed = ['%s.%s=%r' % (b, k, v) for b, kv in sorted((record.get('overrides') or {}).items())
               for k, v in sorted(kv.items())]
    return sizes + (' (with %s)' % ', '.join(changed) if changed else '')


def _load_note(record):
    load = others_cpu(record)
    if load is None:
        return ''
    return (' Other processes used %.0f%% of the CPUs while samples were taken (median; '
            'at most %.0f%%).' % (100 * load[0], 100 * load[1]))


def _unreliable_note(record):
    """The reasons stored with the run (``bench --record --force``), else those its own
    samples give (records older than the check)."""
    reasons = record['unreliable'] if 'unreliable' in record else unreliable(record)
    if not reasons:
        return ''
    return ' **Unreliable**: %s.' % brief(reasons)


def cell(s):
    """A variant's median and interquartile range, ``1.5 ms (1.4..1.6)``."""
    if s is None:
        return ''
    return '%s (%s..%s)' % (fmt_time(s.median), fmt_time(s.q1), fmt_time(s.q3))


def markdown(record):
    """One run as Markdown: its header line and one table row per case."""
    lines = [header(record), '',
             '| benchmark | case | per | Theano C | theano_ocl | C / OCL | launches | also |',
             '|---|---|---|---:|---:|---:|---:|---|']
    for bench, c in cases(record):
        if 'error' in c:
            lines.append('| %s | %s | | | | failed | | %s |' % (
                bench, c['name'], c['error'].replace('|', '/').split('\n')[0][:120]))
            continue
        also = ['%s %s' % (k, cell(spread(v['samples']))) for k, v in c['variants'].items()
                if k not in (BASELINE, OCL)]
        info = c.get('info') or {}
        if info.get('fallbacks'):
            also.append('host fallbacks: %s' % ', '.join(info['fallbacks']))
        ratio, span = c.get('ratio'), ratio_range(c)
        launches = info.get('launches')
        lines.append('| %s | %s | %s | %s | %s | %s | %s | %s |' % (
            bench, c['name'], c['unit'], cell(variant_spread(c, BASELINE)),
            cell(variant_spread(c, OCL)),
            '%.2fx (%.2f..%.2f)' % ((ratio,) + span) if ratio and span else '',
            '' if launches is None else launches, '; '.join(also)))
    for b in record.get('benchmarks', ()):
        if b.get('skipped'):
            lines.append('| %s | | | | | skipped | | %s |' % (
                b['name'], b['skipped'].replace('|', '/')))
    lines += ['', 'Times: median (first..third quartile) of the samples. C / OCL: Theano C\'s '
              'median time over theano_ocl\'s (above 1: theano_ocl is faster), both measured in '
              'the same process; in brackets the lowest and highest ratio of the two '
              'interquartile ranges.', '']
    return '\n'.join(lines)


def ratios(record):
    """(benchmark: case, C / OCL, (low, high)) in suite order, for the cases that have one."""
    return [('%s: %s' % (bench, c['name']), c['ratio'], ratio_range(c))
            for bench, c in cases(record) if c.get('ratio') and ratio_range(c)]


def latest_per_device(records):
    """The newest record of each device, in the order of the devices' names."""
    newest = {}
    for r in records:
        name = r['device']['name']
        if name not in newest or r['date'] > newest[name]['date']:
            newest[name] = r
    return [newest[k] for k in sorted(newest)]


def _pyplot():
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    return plt


def _log_ratio_axis(axis):
    import matplotlib.ticker
    axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 2, 5)))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: '%gx' % v))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _save(fig, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches='tight', metadata={'Software': None})
    _pyplot().close(fig)
    return path


def plot(records, path, title='Speed against Theano C, same process'):
    """C / OCL per case, one panel per record (titled with its device and date): bars
    from 1 to the ratio of the medians, error bars over the interquartile ranges."""
    plt = _pyplot()
    rows = [ratios(r) for r in records]
    every = [x for rs in rows for _, m, span in rs for x in (m,) + span] or [1.0]
    lo, hi = min(every + [1.0]), max(every + [1.0])
    fig, axes = plt.subplots(
        len(records), 1, sharex=True, squeeze=False,
        figsize=(10, 0.9 + 0.24 * sum(max(len(rs), 1) for rs in rows) + 0.45 * len(records)),
        gridspec_kw=dict(height_ratios=[max(len(rs), 1) for rs in rows]))
    for ax, r, rs in zip(axes[:, 0], records, rows):
        ys = range(len(rs))
        xs = [m for _, m, _ in rs]
        err = [[m - span[0] for _, m, span in rs], [span[1] - m for _, m, span in rs]]
        colours = ['tab:green' if x >= 1 else 'tab:red' for x in xs]
        # bars grow from 1 (as fast as Theano C) to the ratio, left when slower
        ax.barh(ys, [x - 1.0 for x in xs], left=1.0, height=0.7, color=colours, xerr=err,
                error_kw=dict(ecolor='0.25', lw=0.8, capsize=2))
        for y, (_, m, span) in zip(ys, rs):
            ax.annotate('%.2fx' % m, (span[1] if m >= 1 else span[0], y),
                        xytext=(4 if m >= 1 else -4, 0), textcoords='offset points',
                        va='center', fontsize=7, ha='left' if m >= 1 else 'right')
        ax.axvline(1.0, color='k', lw=0.8)
        ax.set_yticks(list(ys))
        ax.set_yticklabels([label for label, _, _ in rs], fontsize=8)
        ax.set_ylim(len(rs) - 0.5, -0.5)
        ax.set_title(device_label(r) + ('' if len(records) == 1 else ' (latest run)'),
                     fontsize=9, loc='left')
    ax = axes[-1, 0]
    ax.set_xscale('log')
    ax.set_xlim(lo / 1.8, hi * 1.8)
    _log_ratio_axis(ax.xaxis)
    ax.set_xlabel('Theano C time / theano_ocl time (log scale; right of 1: theano_ocl faster; '
                  'error bars: interquartile ranges)', fontsize=8)
    fig.suptitle(title, fontsize=10)
    return _save(fig, path)


def plot_history(records, path):
    """C / OCL of every recorded run over time, one panel per device, one line per case
    (colours and markers both vary, so that no two cases look alike)."""
    import matplotlib.dates
    plt = _pyplot()
    devices = sorted({r['device']['name'] for r in records})
    fig, axes = plt.subplots(len(devices), 1, squeeze=False, figsize=(12, 3.6 * len(devices)))
    colours = plt.get_cmap('tab20').colors
    markers = 'osD^vP*Xh<>'
    for ax, dev in zip(axes[:, 0], devices):
        runs = sorted((r for r in records if r['device']['name'] == dev), key=lambda r: r['date'])
        series = {}
        for r in runs:
            when = matplotlib.dates.datestr2num(r['date'].rstrip('Z'))
            for label, m, span in ratios(r):
                series.setdefault(label, []).append((when, m, span))
        for k, (label, pts) in enumerate(series.items()):
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts],
                        yerr=[[p[1] - p[2][0] for p in pts], [p[2][1] - p[1] for p in pts]],
                        color=colours[k % len(colours)], marker=markers[k % len(markers)],
                        ms=4, lw=1, capsize=2, label=label)
        ax.axhline(1.0, color='k', lw=0.8)
        ax.set_yscale('log')
        _log_ratio_axis(ax.yaxis)
        ax.xaxis.set_major_formatter(matplotlib.dates.DateFormatter('%m-%d %H:%M'))
        ax.set_ylabel('C / OCL', fontsize=8)
        ax.set_title('%s: %d recorded runs' % (dev, len(runs)), fontsize=9, loc='left')
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7, loc='upper left', bbox_to_anchor=(1.01, 1.0))
    return _save(fig, path)


def render(data_dir=None, out_dir=None, plots=True):
    """Per recorded run ``<run>.md`` and ``<run>.png``; over all runs ``ratios.png`` (the
    latest run of each device), ``history.png`` and ``index.md`` (newest first). Returns
    the paths written. ``plots=False`` (no matplotlib) writes the Markdown alone."""
    data_dir, out_dir = data_dir or paths.data_dir(), out_dir or paths.out_dir()
    runs = load_runs(data_dir)
    if not runs:
        raise FileNotFoundError('no recorded runs (*.json) in %s' % data_dir)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    index = ['# Recorded benchmark runs', '',
             'Rendered by `python -m theano_ocl render` from the recorded runs (one JSON file '
             'each); do not edit.', '',
             '![C / OCL per benchmark, the latest run of each device](ratios.png)', '',
             '## History', '',
             '![C / OCL of every recorded run, per device](history.png)', '']
    for stem, rec in runs:
        md = markdown(rec)
        path = os.path.join(out_dir, stem + '.md')
        write_file(path, md)
        written.append(path)
        if plots:
            written.append(plot([rec], os.path.join(out_dir, stem + '.png'),
                                title=device_label(rec)))
        index += ['## %s' % device_label(rec), '', md]
    scripts = os.path.join(os.path.dirname(data_dir), 'scripts')
    index += _script_runs(scripts) + _small_model_runs(scripts) + _torch_runs(scripts) + \
        _keras_runs(scripts) + _data_parallel_runs(scripts) + _nengo_compare_runs(scripts) + \
        _step0_runs(scripts) + _gemm_runs(scripts)
    records = [r for _, r in runs]
    if plots:
        written.append(plot(latest_per_device(records), os.path.join(out_dir, 'ratios.png')))
        written.append(plot_history(records, os.path.join(out_dir, 'history.png')))
    path = os.path.join(out_dir, 'index.md')
    write_file(path, '\n'.join(index))
    written.append(path)
    return written


def _script_runs(scripts_dir):
    """A table of the scripts' recorded runs (``bench/lenet.py``, ``bench/lstm.py``,
    ``bench/rnn.py``, ``bench/nengo_like.py`` ``--json``, kept in ``scripts_dir`` under names
    that start with their date and say their device and variant), newest first: the lines
    of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('lenet', 'lstm', 'rnn', 'nengo')):
        times = rec.get('ms_per_step')
        if not times:
            continue
        commit = _commit_label(rec)
        ocl = [r[0] * 1e3 for r in rec.get('rounds', {}).get('theano_ocl', [])]
        rows.append('| %s | %s | %s | %s ms | %s ms (%s) | %.1fx |' % (
            name, rec['device'], commit,
            _ms(times['Theano C']), _ms(times['theano_ocl']),
            '%s..%s' % (_ms(min(ocl)), _ms(max(ocl))) if ocl else '-', rec['ratio']))
    if not rows:
        return []
    return ['## Training scripts and the Nengo-like network', '',
            'The `--json` records of `bench/lenet.py` (batch 128), `bench/lstm.py` (batch '
            '64, 256 hidden, 50 steps unless the name says otherwise), `bench/rnn.py` (a '
            'scan RNN trained with its gradient: 16 inputs, 64 hidden, 20 steps, batch 32, '
            'float64) and `bench/nengo_like.py` (a step of `run_steps`, batched, from the state the run '
            'before left; the name says the network) kept in '
            '`docs/_data/scripts/`: median step time over rounds, and the range of the rounds\' '
            'medians.', '',
            '| run | device | commit | Theano C | theano_ocl | C / OCL |',
            '|---|---|---|---:|---:|---:|'] + rows + ['']


def _small_model_runs(scripts_dir):
    """A table of ``bench/small_models.py --json`` records (tutorial-sized functions under
    Theano C and theano_ocl, and theano_ocl with other settings), newest first: the lines
    of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('small_models',)):
        commit = _commit_label(rec)
        for c in rec.get('cases', []):
            ms = c['ms_per_call']
            others = '; '.join('%s %.2fx' % (k.replace('theano_ocl ', ''), v)
                               for k, v in sorted(c.get('ratios', {}).items()))
            rows.append('| %s | %s | %s | %s | %s ms | %s ms | %.2fx | %s |' % (
                name, rec['device'], commit, c['case'], _ms(ms['Theano C']),
                _ms(ms['theano_ocl']), c['ratio'], others or '-'))
    if not rows:
        return []
    return ['## Small models', '',
            'The `--json` records of `bench/small_models.py` (docs/quickstart.md\'s logistic '
            'regression step, a tutorial\'s minibatch logistic regression, its MLP 784-500-10 '
            'error-rate and training functions, a LeNet-style step at batch 20; the record\'s '
            '`note` says where it ran): the median time per call over rounds that took turns '
            'in one process, and the ratio against Theano C of theano_ocl with other settings.',
            '', '| run | device | commit | case | Theano C | theano_ocl | C / OCL | other '
            'settings: C / OCL |', '|---|---|---|---|---:|---:|---:|---|'] + rows + ['']


def _torch_runs(scripts_dir):
    """A table of torch eager's recorded runs (``bench/torch_ref.py --json``, kept in
    ``scripts_dir`` beside the training scripts' records of the same device call), newest
    first: the lines of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('torch',)):
        for r in rec.get('rows', []):
            rows.append('| %s | %s | torch %s | %s | %s (%s..%s) |' % (
                name, rec['device'], rec.get('torch', '?'), r['case'],
                _us(r['median_s']), _us(r['min_s']), _us(r['max_s'])))
    if not rows:
        return []
    return ['## torch eager on the same GPU', '',
            'The `--json` records of `bench/torch_ref.py` (the same computations in torch eager, '
            'cuDNN for convolutions and `nn.LSTM`), each run in the same device call as the '
            'training scripts\' and benchmarks\' records whose names share its date and hour: '
            'median per step or call over the runs, and their range.', '',
            '| run | device | version | case | median (min..max) |',
            '|---|---|---|---|---:|'] + rows + ['']


def _keras_runs(scripts_dir):
    """A table of ``bench/keras_mlp.py --json`` records (Keras' MLP example trained under
    Theano C and theano_ocl, and Theano C again on inputs one ulp away), newest first: the
    lines of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('keras_mlp',)):
        commit = _commit_label(rec)
        for r in rec.get('rows', []):
            rows.append('| %s | %s | %s | %s | %.3g | %.3g | %.3g | %d | %d |' % (
                name, rec['device'], commit, r['variant'], r['C vs OCL'], r['C vs C(x+1ulp)'],
                r['ratio'], r['first batch apart (OCL)'], r['first batch apart (ulp)']))
    if not rows:
        return []
    return ['## Keras\' MLP example against Theano C', '',
            'The `--json` records of `bench/keras_mlp.py` (784-512-512-10, relu, dropout 0.2, '
            'Adam, batch 128, synthetic digits; the record says epochs and samples): the '
            'largest weight difference between theano_ocl and Theano C after training, beside '
            'the one between Theano C and Theano C on inputs moved by one ulp (how far the '
            'reference moves by itself), and the first batch whose losses differ by more than '
            '1e-6 (relative; -1: none). Variants: `base` as shipped at that commit; `nodrop`, '
            '`sgd` without dropout or with SGD; `nocontract`, `divsqrt`, `pow64`, `exact` '
            'with a device-side change made for the run only (contraction off, correctly '
            'rounded division and square root, float32 `pow` in double, both of the last '
            'two).', '',
            '| run | device | commit | variant | C vs OCL | C vs C (1 ulp) | ratio | first '
            'batch apart | first batch apart (1 ulp) |',
            '|---|---|---|---|---:|---:|---:|---:|---:|'] + rows + ['']


def _data_parallel_runs(scripts_dir):
    """A table of ``mpirun -n K python bench/data_parallel.py --json`` records (K ranks with
    their gradients averaged against one rank alone, in the same run), newest first: the
    lines of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('data_parallel',)):
        commit = _commit_label(rec)
        rounds = rec.get('rounds', [])
        if not rounds:
            continue
        sp = [r['speedup'] for r in rounds]
        ex = [r['exchange_ms'] for r in rounds if r.get('exchange_ms') is not None]
        median = statistics.median
        rows.append('| %s | %s | %s | %s | %d | %d | %s | %s | %s | %.2fx (%.2f..%.2f) | '
                    '%.0f%% |' % (
            name, rec.get('device') or rec.get('mode'), commit, rec['model'], rec['batch'],
            rec['ranks'], _ms(median([r['one_ms'] for r in rounds])),
            _ms(median([r['ranks_ms'] for r in rounds])),
            _ms(median(ex)) + ' ms' if ex else '-', median(sp), min(sp), max(sp),
            100 * median(sp) / rec['ranks']))
    if not rows:
        return []
    return ['## Data-parallel training', '',
            'The `--json` records of `mpirun -n K python bench/data_parallel.py` (the MLP '
            '784-1000-1000-10 with SGD and momentum, LeNet with SGD; float32; the record\'s '
            '`note` says where it ran and what the variant in its name is): per round, one rank '
            'alone without collectives, then K ranks with their gradients averaged, then the '
            'exchange alone (the same buckets, no computation); the medians over rounds of '
            'the milliseconds per step, and the speedup (K ranks\' samples per second over one '
            'rank\'s) with its range over rounds and its share of K (scaling efficiency).', '',
            '| run | device | commit | model | batch per rank | ranks | one rank, ms / step | '
            'K ranks, ms / step | exchange alone | speedup (range) | efficiency |',
            '|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|'] + rows + ['']


def _step0_runs(scripts_dir):
    """A table of ``bench/step0.py --json`` records (``run_steps(1)`` of the Nengo-like
    step after ``set_value`` on every state variable and with nothing set, against a later
    step, in one process), newest first: the lines of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('step0',)):
        rounds = rec.get('rounds') or []
        if not rounds:
            continue
        after = [r['after_set_value_s'] / r['later_step_s'] for r in rounds]
        still = [r['nothing_set_s'] / r['later_step_s'] for r in rounds]
        rows.append('| %s | %s | %s | %s | %d | %s..%s | %.2f..%.2fx | %.2f..%.2fx |' % (
            name, rec['device'], rec.get('host', '?'), _commit_label(rec), rec['ensembles'],
            _us(min(r['later_step_s'] for r in rounds)),
            _us(max(r['later_step_s'] for r in rounds)),
            min(after), max(after), min(still), max(still)))
    if not rows:
        return []
    return ['## Step 0 after set_value', '',
            'The `--json` records of `bench/step0.py` (the Nengo-like step of the `nengo_ocl` '
            'case, E ensembles of 100 LIF neurons, its parameters drawn at random): a whole '
            '`run_steps(1)` after `set_value` on every state variable, and with nothing set, '
            'over a later step (a run of 200 steps over 200), each round in one process; the '
            'range over its rounds.', '',
            '| run | device | host | commit | E | a later step | after set_value | '
            'nothing set |',
            '|---|---|---|---|---:|---:|---:|---:|'] + rows + ['']


def _nengo_compare_runs(scripts_dir):
    """A table of ``bench/nengo_compare.py --json`` records (one Nengo network run by
    nengo-ocl and by ``SimulatorOCL.run_steps`` on one device, in one process), newest
    first: the lines of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('nengo_compare',)):
        times = rec.get('ms_per_step') or {}
        rounds = rec.get('rounds', {}).get('theano_ocl', [])
        if 'nengo-ocl' not in times or 'theano_ocl' not in times or not rounds:
            continue
        ocl = [r[0] * 1e3 for r in rounds]
        agree = rec.get('agreement', {}).get('theano_ocl vs nengo-ocl', {})
        launches = rec.get('launches_per_step')
        where = '-' if launches is None else \
            'host (cost model)' if launches == 0 else '%d launches' % launches
        env = rec.get('environment') or {}
        if env.get('THEANO_OCL_COST_MODEL') == 'off':
            where += ' (cost model off)'
        c_over = '%.2fx' % (times['Theano C'] / times['theano_ocl']) \
            if 'Theano C' in times else '-'
        rows.append('| %s | %s | %s | %d x %d, %d steps | %s ms | %s ms (%s..%s) | %s | '
                    '%.2fx | %s | %s of %s |' % (
                        name, rec['device'], _commit_label(rec), rec['ensembles'],
                        rec['neurons'], rec['steps'], _ms(times['nengo-ocl']),
                        _ms(times['theano_ocl']), _ms(min(ocl)), _ms(max(ocl)), where,
                        times['nengo-ocl'] / times['theano_ocl'], c_over,
                        agree.get('steps_equal', '-'), agree.get('steps', '-')))
    if not rows:
        return []
    return ['## Nengo against nengo-ocl', '',
            'The `--json` records of `bench/nengo_compare.py`: a Nengo network (E ensembles '
            'of N LIF neurons, 5 ms lowpass connections in a chain, a probe on the last) run '
            'by `nengo_ocl.Simulator` and by `SimulatorOCL.run_steps` of the Theano graph of '
            'its step, on the same device in one process: median milliseconds per step over '
            'the timed runs (theano_ocl\'s range of runs), nengo-ocl\'s time over theano_ocl\'s '
            '(above 1: theano_ocl is faster), where theano_ocl ran the step (a CPU device\'s '
            'cost model may run it as Theano C\'s code), Theano C\'s time over theano_ocl\'s '
            'in the same run, and the steps whose outputs are equal within float32 rounding.',
            '', '| run | device | commit | network | nengo-ocl | theano_ocl | theano_ocl ran '
            'on | nengo-ocl / OCL | C / OCL | steps equal |',
            '|---|---|---|---|---:|---:|---|---:|---:|---:|'] + rows + ['']


def _gemm_runs(scripts_dir):
    """A table of ``bench/gemm.py --json`` records (SGEMM n^3 by theano_ocl untuned and
    tuned, CLBlast called directly, Theano C and cuBLAS in one process), newest first: the
    lines of index.md's last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('gemm',)):
        commit = _commit_label(rec)
        for r in rec.get('rows', []):
            kernel = r.get('kernel GFLOP/s')
            rows.append('| %s | %s | %s | %d | %s | %.1f | %s | %.3f |' % (
                name, rec['device'], commit, rec['n'], r['variant'], r['GFLOP/s'] / 1e3,
                '%.1f' % (kernel / 1e3) if kernel else '-',
                r['x cuBLAS'] if r.get('x cuBLAS') is not None else float('nan')))
    if not rows:
        return []
    return ['## Matrix products', '',
            'The `--json` records of `bench/gemm.py` (`T.dot` of two n x n float32 shared '
            'variables, the result kept on the device; with `--tune` the tuner first searched '
            'the device, the record\'s `note` says from what): TFLOP/s by the wall clock over '
            'calls back to back up to a queue finish (by OpenCL profiling events where a '
            'kernel ran alone), and the ratio to cuBLAS\'s wall-clock time in the same run.', '',
            '| run | device | commit | n | variant | TFLOP/s | kernel TFLOP/s | x cuBLAS |',
            '|---|---|---|---:|---|---:|---:|---:|'] + rows + ['']


def _commit_label(rec):
    """A script record's commit (``common.commit()``: a dict, or a string), shortened."""
    commit = rec.get('commit')
    if not isinstance(commit, dict):
        return str(commit)
    return (commit.get('commit') or '?')[:7] + (' with changes' if commit.get('dirty') else '')


def _scripts(scripts_dir, benches):
    """(name, record) of the ``--json`` records in ``scripts_dir`` of the scripts ``benches``
    (their ``bench`` key), newest first (names start with their date)."""
    for stem, rec in reversed(list(_json_objects(scripts_dir))):
        if rec.get('bench') in benches:
            yield stem, rec


def _ms(ms):
    """Milliseconds to one decimal, or three significant digits below 1 ms."""
    return '%.1f' % ms if ms >= 1 else '%.3g' % ms


def _us(seconds):
    return '%.2f ms' % (seconds * 1e3) if seconds >= 1e-3 else '%.1f us' % (seconds * 1e6)


def write_file(path, text):
    with open(path, 'w') as f:
        f.write(text if text.endswith('\n') else text + '\n')
