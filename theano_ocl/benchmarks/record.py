"""Recorded runs: JSON files (one per run) in, Markdown tables and PNG plots out.

Everything here reads only the records, so the tables and plots in the docs are rendered
from the stored runs (``python -m theano_ocl render``), never typed by hand; matplotlib
(Agg, no display) is imported only to plot.
"""
import glob
import json
import os

from . import BASELINE, OCL

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(os.path.dirname(os.path.dirname(HERE)), 'docs')
DATA_DIR = os.path.join(DOCS, '_data', 'benchmarks')
OUT_DIR = os.path.join(DOCS, '_generated', 'benchmarks')


def save(record, path):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    with open(path, 'w') as f:
        json.dump(record, f, indent=1, sort_keys=True)
        f.write('\n')


def load(path):
    with open(path) as f:
        return json.load(f)


def run_name(record):
    """A file stem for a record: date and time, device, size
    (``2026-11-25T1303_nvidia-h100-80gb-hbm3_full``)."""
    slug = ''.join(c if c.isalnum() else '-' for c in record['device']['name'].lower())
    slug = '-'.join(w for w in slug.split('-') if w)[:40]
    date = record['date'][:16].replace(':', '')
    return '%s_%s_%s' % (date, slug, 'quick' if record['quick'] else 'full')


def others_cpu(record):
    """The median and the largest share of the CPUs that other processes used while
    samples were taken (None off Linux)."""
    shares = [x for b in record['benchmarks'] for c in b['cases']
              for v in c.get('variants', {}).values() for x in v.get('others_cpu') or ()
              if x is not None]
    return (float(sorted(shares)[len(shares) // 2]), max(shares)) if shares else None


def fmt_time(s):
    if s is None:
        return ''
    for unit, scale in (('s', 1.0), ('ms', 1e-3), ('us', 1e-6)):
        if s >= scale:
            break
    v = s / scale
    return ('%.0f %s' if v >= 100 else '%.3g %s') % (v, unit)


def device_label(record):
    dev = record['device']
    return '%s (%s), %s' % (dev['name'][:40], dev['platform'], record['date'][:10])


def header(record):
    """The lines that say what a run measured on: device, driver, date, commit, software."""
    dev, host, ver = record['device'], record['host'], record['versions']
    git = record.get('git') or {}
    commit = (git.get('commit') or 'unknown')[:10] + (' (with local changes)' if git.get('dirty') else '')
    return ('Device **%s** (%s, %s, driver %s, %d compute units); %s UTC; %s sizes, '
            'median of %d samples; commit %s; host %s (%s CPUs); Python %s, Theano %s, '
            'numpy %s, pyopencl %s.' % (
                dev['name'], dev['platform'], dev['type'], dev['driver_version'],
                dev['compute_units'], record['date'].replace('T', ' ').rstrip('Z'),
                _sizes(record), record['repeat'], commit,
                host['cpu'], host['cpus'], host['python'], ver.get('theano'), ver.get('numpy'),
                ver.get('pyopencl')) + _load_note(record))


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
            'at most %.0f%%)%s.' % (100 * load[0], 100 * load[1],
                                    ': the times are unreliable' if load[0] > 0.05 else ''))


def markdown(record):
    """One run as Markdown: its header line and one table row per case."""
    lines = [header(record), '',
             '| benchmark | case | per | Theano C | theano_ocl | C / OCL | theano_ocl min..max '
             '| launches | also |',
             '|---|---|---|---:|---:|---:|---|---:|---|']
    for b in record['benchmarks']:
        for c in b['cases']:
            if 'error' in c:
                lines.append('| %s | %s | | | | failed | | | %s |' % (
                    b['name'], c['name'], c['error'].replace('|', '/').split('\n')[0][:120]))
                continue
            vs = c['variants']
            cv, ov = vs.get(BASELINE, {}), vs.get(OCL, {})
            also = ['%s %s' % (k, fmt_time(v['median'])) for k, v in vs.items()
                    if k not in (BASELINE, OCL)]
            info = c.get('info') or {}
            if info.get('fallbacks'):
                also.append('host fallbacks: %s' % ', '.join(info['fallbacks']))
            ratio = c.get('ratio')
            launches = info.get('launches')
            lines.append('| %s | %s | %s | %s | %s | %s | %s | %s | %s |' % (
                b['name'], c['name'], c['unit'], fmt_time(cv.get('median')),
                fmt_time(ov.get('median')), '%.2fx' % ratio if ratio else '',
                '%s..%s' % (fmt_time(ov['min']), fmt_time(ov['max'])) if ov else '',
                '' if launches is None else launches, '; '.join(also)))
    lines += ['', 'C / OCL: Theano C\'s median time over theano_ocl\'s (above 1: theano_ocl is '
              'faster), both measured in the same process.', '']
    return '\n'.join(lines)


def ratios(record):
    """(benchmark: case) -> C / OCL, in suite order, for the cases that have one."""
    return [('%s: %s' % (b['name'], c['name']), c['ratio'])
            for b in record['benchmarks'] for c in b['cases'] if c.get('ratio')]


def plot(records, path, title='Speed against Theano C, same process'):
    """Horizontal bars of C / OCL per case, one colour per recorded run (device)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import matplotlib.transforms
    labels = []
    for r in records:
        for label, _ in ratios(r):
            if label not in labels:
                labels.append(label)
    n = max(len(records), 1)
    height = 0.8 / n
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.32 * len(labels) * max(1, n * 0.7)))
    lo, hi = 1.0, 1.0
    for k, r in enumerate(records):
        got = dict(ratios(r))
        ys = [i + (k - (n - 1) / 2.0) * height for i, lab in enumerate(labels) if lab in got]
        xs = [got[lab] for lab in labels if lab in got]
        # bars grow from 1 (as fast as Theano C) to the ratio, left when slower
        ax.barh(ys, [x - 1.0 for x in xs], left=1.0, height=height, label=device_label(r))
        for y, x in zip(ys, xs):
            ax.annotate('%.2fx' % x, (x, y), xytext=(3 if x >= 1 else -3, 0),
                        textcoords='offset points', va='center', fontsize=7,
                        ha='left' if x >= 1 else 'right')
        lo, hi = min([lo] + xs), max([hi] + xs)
    ax.axvline(1.0, color='k', lw=0.8)
    ax.set_xscale('log')
    ax.set_xlim(lo / 1.6, hi * 1.6)
    ax.xaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1, 2, 5)))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: '%gx' % v))
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel('Theano C time / theano_ocl time (log scale; right of 1: theano_ocl faster)')
    ax.set_title(title, fontsize=10)
    # under the x label, whatever the figure's height
    below = matplotlib.transforms.offset_copy(ax.transAxes, fig=fig, y=-0.5, units='inches')
    ax.legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, 0), bbox_transform=below)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches='tight', metadata={'Software': None})
    plt.close(fig)
    return path


def render(data_dir=DATA_DIR, out_dir=OUT_DIR):
    """Per recorded run ``<run>.md`` and ``<run>.png``; over all runs ``ratios.png`` and
    ``index.md`` (newest first). Returns the paths written."""
    paths = sorted(glob.glob(os.path.join(data_dir, '*.json')))
    if not paths:
        raise FileNotFoundError('no recorded runs (*.json) in %s' % data_dir)
    runs = [(os.path.splitext(os.path.basename(p))[0], load(p)) for p in paths]
    runs.sort(key=lambda sr: sr[1]['date'], reverse=True)
    os.makedirs(out_dir, exist_ok=True)
    written = []
    index = ['# Recorded benchmark runs', '',
             'Rendered by `python -m theano_ocl render` from the files in '
             '`docs/_data/benchmarks/`; do not edit.', '',
             '![C / OCL per benchmark and device](ratios.png)', '']
    for stem, rec in runs:
        md = markdown(rec)
        for ext, write in (('.md', lambda p: _write(p, md)),
                           ('.png', lambda p: plot([rec], p, title=device_label(rec)))):
            path = os.path.join(out_dir, stem + ext)
            write(path)
            written.append(path)
        index += ['## %s' % device_label(rec), '', md]
    scripts = os.path.join(os.path.dirname(data_dir), 'scripts')
    index += _script_runs(scripts) + _torch_runs(scripts)
    written.append(plot([r for _, r in runs], os.path.join(out_dir, 'ratios.png')))
    path = os.path.join(out_dir, 'index.md')
    _write(path, '\n'.join(index))
    written.append(path)
    return written


def _script_runs(scripts_dir):
    """A table of the scripts' recorded runs (``bench/lenet.py``, ``bench/lstm.py``,
    ``bench/nengo_like.py`` ``--json``, kept in ``scripts_dir`` under names that start with
    their date and say their device and variant), newest first: the lines of index.md's
    last part."""
    rows = []
    for name, rec in _scripts(scripts_dir, ('lenet', 'lstm', 'nengo')):
        times = rec.get('ms_per_step')
        if not times:
            continue
        commit = rec.get('commit')
        dirty = isinstance(commit, dict) and commit.get('dirty')
        commit = commit.get('commit', '?') if isinstance(commit, dict) else str(commit)
        commit = commit[:7] + (' with changes' if dirty else '')
        ocl = [r[0] * 1e3 for r in rec.get('rounds', {}).get('theano_ocl', [])]
        rows.append('| %s | %s | %s | %s ms | %s ms (%s) | %.1fx |' % (
            name, rec['device'], commit,
            _ms(times['Theano C']), _ms(times['theano_ocl']),
            '%s..%s' % (_ms(min(ocl)), _ms(max(ocl))) if ocl else '-', rec['ratio']))
    if not rows:
        return []
    return ['## Training scripts and the Nengo-like network', '',
            'The `--json` records of `bench/lenet.py` (batch 128), `bench/lstm.py` (batch '
            '64, 256 hidden, 50 steps unless the name says otherwise) and '
            '`bench/nengo_like.py` (a step of `run_steps`, batched, from the state the run '
            'before left; the name says the network) kept in '
            '`docs/_data/scripts/`: median step time over rounds, and the range of the rounds\' '
            'medians.', '',
            '| run | device | commit | Theano C | theano_ocl | C / OCL |',
            '|---|---|---|---:|---:|---:|'] + rows + ['']


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


def _scripts(scripts_dir, benches):
    """(name, record) of the ``--json`` records in ``scripts_dir`` of the scripts ``benches``
    (their ``bench`` key), newest first (names start with their date)."""
    for p in sorted(glob.glob(os.path.join(scripts_dir, '*.json')), reverse=True):
        rec = load(p)
        if rec.get('bench') in benches:
            yield os.path.splitext(os.path.basename(p))[0], rec


def _ms(ms):
    """Milliseconds to one decimal, or three significant digits below 1 ms."""
    return '%.1f' % ms if ms >= 1 else '%.3g' % ms


def _us(seconds):
    return '%.2f ms' % (seconds * 1e3) if seconds >= 1e-3 else '%.1f us' % (seconds * 1e6)


def _write(path, text):
    with open(path, 'w') as f:
        f.write(text if text.endswith('\n') else text + '\n')
