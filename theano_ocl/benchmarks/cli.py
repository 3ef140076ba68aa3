"""``python -m theano_ocl bench`` and ``python -m theano_ocl render``.

    python -m theano_ocl bench [--only NAME ...] [--quick] [--device SPEC] [--repeat N]
                               [--min-time SECONDS] [--set NAME.PARAM=VALUE ...]
                               [--json FILE] [--markdown FILE] [--plot FILE.png]
                               [--record [DIR]] [--force]
    python -m theano_ocl bench --list
    python -m theano_ocl bench --compare A.json B.json [--threshold 0.05] [--fail-on-regression]
    python -m theano_ocl render [--data DIR] [--out DIR]      (same as bench --render)

``--record`` stores the run and renders the tables and plots from every stored run: into
DIR when given; else, in a checkout, as docs/_data/benchmarks/<date>_<device>_<quick|full>.json
rendered into docs/_generated/benchmarks/, and from an installed copy into the current
directory. A run whose times are unreliable (other processes busy, samples scattered,
Theano C off its recorded range) is recorded only with ``--force``.

Exit status: 1 when a case failed (its check against Theano C, or an error; the others
still run) or, with ``--fail-on-regression``, when a case of B is slower than in A; 2 on a
usage error, when no device matches, or when ``--plot`` lacks matplotlib; 3 when an
unreliable run was not recorded.
"""
import os
import sys

from . import paths
from .progress import HINT, missing


def add_parsers(sub):
    p = sub.add_parser('bench', help='time theano_ocl against Theano C; JSON/Markdown/plot',
                       description=__doc__, formatter_class=_raw())
    p.add_argument('--only', nargs='+', action='extend', metavar='NAME',
                   help='run only these benchmarks (see --list)')
    p.add_argument('--quick', action='store_true', help='small sizes (seconds per benchmark)')
    p.add_argument('--device', default=None,
                   help="OpenCL device: 'P:D', 'gpu', 'cpu' or a name fragment "
                        '(default: THEANO_OCL_DEVICE, else a GPU, else the first)')
    p.add_argument('--repeat', type=int, default=None,
                   help='at least this many timed samples per variant (default 5; 3 with --quick)')
    p.add_argument('--min-time', type=float, default=None, metavar='SECONDS',
                   help='sample each variant until its samples total this many seconds '
                        '(default 1; 0.2 with --quick)')
    p.add_argument('--set', action='append', default=[], metavar='NAME.PARAM=VALUE',
                   help='override one size parameter (e.g. nengo.ensembles=100); recorded')
    p.add_argument('--json', metavar='FILE', help='write the run record (raw samples) here')
    p.add_argument('--markdown', metavar='FILE', help='write the Markdown table here')
    p.add_argument('--plot', metavar='FILE.png',
                   help='draw C / OCL per benchmark here (needs matplotlib)')
    p.add_argument('--record', nargs='?', const='', default=None, metavar='DIR',
                   help='store the run in DIR and render every run stored there; without '
                        'DIR: under docs/ in a checkout, else in the current directory')
    p.add_argument('--force', action='store_true', help='record a run even when it is unreliable')
    p.add_argument('--compare', nargs=2, metavar=('A.json', 'B.json'),
                   help="compare run B's theano_ocl times with run A's (no benchmark runs)")
    p.add_argument('--threshold', type=float, default=0.05,
                   help='--compare: the slow-down (share of A\'s median) beyond which a case '
                        'whose interquartile ranges do not overlap is a regression (0.05)')
    p.add_argument('--fail-on-regression', action='store_true',
                   help='--compare: exit status 1 when a case regressed')
    p.add_argument('--render', action='store_true',
                   help='only render the docs from the stored runs (no benchmark runs)')
    p.add_argument('--list', action='store_true', help='list the benchmarks and their sizes')
    p.add_argument('--no-progress', action='store_true', help='no progress bar or lines')
    r = sub.add_parser('render', help='render the docs\' benchmark tables/plots from stored runs')
    _render_args(r)
    _render_args(p, hidden=True)
    return p, r


def _raw():
    import argparse
    return argparse.RawDescriptionHelpFormatter


def _render_args(p, hidden=False):
    import argparse
    p.add_argument('--data', default=None,
                   help=argparse.SUPPRESS if hidden else
                   'directory of the stored runs (*.json; default: docs/_data/benchmarks in a '
                   'checkout, else the current directory)')
    p.add_argument('--out', default=None,
                   help=argparse.SUPPRESS if hidden else
                   'where the .md and .png files go (default: docs/_generated/benchmarks in a '
                   'checkout, else the current directory)')


def _render(data, out):
    """Render, plots included when matplotlib is there (else say what they need)."""
    from . import record
    plots = not missing('matplotlib')
    if not plots:
        print('tables only, no plots: they need matplotlib (%s)' % HINT, file=sys.stderr)
    return record.render(data, out, plots=plots)


def cmd_render(args):
    try:
        written = _render(args.data or paths.data_dir(), args.out or paths.out_dir())
    except FileNotFoundError as e:
        print(str(e), file=sys.stderr)
        return 1
    for p in written:
        print('wrote %s' % p)
    return 0


def cmd_compare(args):
    from . import record, stats
    try:
        a, b = (record.load(p) for p in args.compare)
    except (OSError, ValueError) as e:
        print('--compare: %s' % e, file=sys.stderr)
        return 2
    print('B: %s against A: %s' % (_which(b, args.compare[1]), _which(a, args.compare[0])))
    if a['device']['name'] != b['device']['name']:
        print('(different devices: compare the ratios against Theano C rather than the times)')
    rows = stats.compare(a, b, args.threshold)
    print('\n| benchmark | case | theano_ocl A | theano_ocl B | B / A | Theano C B / A | |')
    print('|---|---|---:|---:|---:|---:|---|')
    for r in rows:
        print('| %s | %s | %s | %s | %.3f | %s | %s |' % (
            r.bench, r.case, record.cell(r.a), record.cell(r.b), r.b.median / r.a.median,
            '' if r.c_ratio is None else '%.3f' % r.c_ratio, r.verdict.upper()))
    slower = [r for r in rows if r.verdict == 'slower']
    print('\n%d case(s) compared; %d slower (median more than %.0f%% above A\'s, interquartile '
          'ranges apart), %d faster.' % (len(rows), len(slower), 100 * args.threshold,
                                         sum(r.verdict == 'faster' for r in rows)))
    return 1 if slower and args.fail_on_regression else 0


def _which(rec, path):
    from . import record
    return '%s (%s, %s)' % (path, record.device_label(rec), record.source(rec))


def _overrides(items, reg, quick):
    """``['nengo.ensembles=100']`` -> ``{'nengo': {'ensembles': 100}}``, values read as
    Python literals and checked against the benchmark's parameters."""
    import ast
    out = {}
    for item in items:
        key, eq, value = item.partition('=')
        name, dot, param = key.partition('.')
        if not (eq and dot) or name not in reg or param not in reg[name].quick:
            raise ValueError('--set %s: expected NAME.PARAM=VALUE with NAME one of %s and PARAM '
                             'one of its parameters (see --list)' % (item, ', '.join(reg)))
        try:
            out.setdefault(name, {})[param] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            raise ValueError('--set %s: %r is not a Python literal' % (item, value))
    return out


def cmd_bench(args):
    from . import record, registry, runner, stats
    if args.render:
        return cmd_render(args)
    if args.compare:
        return cmd_compare(args)
    reg = registry()
    if args.list:
        for b in reg.values():
            print('%-10s %s\n%10s quick %s\n%10s full  %s' % (b.name, b.doc, '', b.quick, '', b.full))
        return 0
    if args.only:
        unknown = [n for n in args.only if n not in reg]
        if unknown:
            print('unknown benchmark %s; known: %s' % (', '.join(unknown), ', '.join(reg)),
                  file=sys.stderr)
            return 2
    if args.plot and missing('matplotlib'):
        print('--plot needs matplotlib (%s)' % HINT, file=sys.stderr)
        return 2
    try:
        overrides = _overrides(args.set, reg, args.quick)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2
    repeat = args.repeat if args.repeat is not None else (3 if args.quick else 5)
    min_time = args.min_time if args.min_time is not None else (0.2 if args.quick else 1.0)
    if repeat < 1 or min_time < 0:
        print('--repeat takes at least 1 sample and --min-time no negative time (got %d, %g)'
              % (repeat, min_time), file=sys.stderr)
        return 2
    from theano_ocl.device import NoOpenCLPlatform
    try:
        rec = runner.run(args.only, device=args.device, quick=args.quick, repeat=repeat,
                         min_time=min_time, progress=not args.no_progress, overrides=overrides)
    except (NoOpenCLPlatform, ValueError) as e:        # no device, or none matches --device
        print(str(e), file=sys.stderr)
        return 2
    data, out = _record_dirs(args)
    earlier = [r for _, r in record.load_runs(data)] if os.path.isdir(data) else []
    rec['unreliable'] = stats.unreliable(rec, earlier)
    md = record.markdown(rec)
    print('\n' + md)
    written = []
    if args.json:
        record.save(rec, args.json)
        written.append(args.json)
    if args.markdown:
        record.write_file(args.markdown, md)
        written.append(args.markdown)
    if args.plot:
        written.append(record.plot([rec], args.plot, title=record.device_label(rec)))
    status = 0
    if args.record is not None and rec['unreliable'] and not args.force:
        print('not recorded: the times are unreliable (%s); --force records them anyway'
              % stats.brief(rec['unreliable']), file=sys.stderr)
        status = 3
    elif args.record is not None:
        path = os.path.join(data, record.run_name(rec) + '.json')
        record.save(rec, path)
        written += [path] + _render(data, out)
    for p in written:
        print('wrote %s' % p)
    failed = [c['name'] for b in rec['benchmarks'] for c in b['cases'] if 'error' in c]
    if failed:
        print('%d case(s) failed: %s' % (len(failed), '; '.join(failed)), file=sys.stderr)
        return 1
    return status


def _record_dirs(args):
    """Where ``--record`` stores the run and renders: the DIR it names (both), else the
    checkout's docs/ (or the current directory from an installed copy); ``--data`` and
    ``--out`` override."""
    if args.record:
        return args.data or args.record, args.out or args.record
    return args.data or paths.data_dir(), args.out or paths.out_dir()
