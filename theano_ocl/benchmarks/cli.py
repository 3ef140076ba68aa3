"""``python -m theano_ocl bench`` and ``python -m theano_ocl render``.

    python -m theano_ocl bench [--only NAME ...] [--quick] [--device SPEC] [--repeat N]
                               [--set NAME.PARAM=VALUE ...] [--json FILE] [--markdown FILE]
                               [--plot FILE.png] [--record]
    python -m theano_ocl bench --list
    python -m theano_ocl render [--data DIR] [--out DIR]      (same as bench --render)

``--record`` stores the run as docs/_data/benchmarks/<date>_<device>_<quick|full>.json and
renders the docs' tables and plots from every stored run. Exit status 1 when a case
failed (its check against Theano C, or an error; the others still run).
"""
import os
import sys


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
                   help='timed samples per variant (default 5; 3 with --quick)')
    p.add_argument('--set', action='append', default=[], metavar='NAME.PARAM=VALUE',
                   help='override one size parameter (e.g. nengo.ensembles=100); recorded')
    p.add_argument('--json', metavar='FILE', help='write the run record (raw samples) here')
    p.add_argument('--markdown', metavar='FILE', help='write the Markdown table here')
    p.add_argument('--plot', metavar='FILE.png', help='draw C / OCL per benchmark here')
    p.add_argument('--record', action='store_true',
                   help='store the run under docs/_data/benchmarks/ and render the docs')
    p.add_argument('--render', action='store_true',
                   help='only render the docs from the stored runs (no benchmark runs)')
    p.add_argument('--list', action='store_true', help='list the benchmarks and their sizes')
    p.add_argument('--no-progress', action='store_true', help='no progress bar')
    r = sub.add_parser('render', help='render the docs\' benchmark tables/plots from stored runs')
    _render_args(r)
    _render_args(p, hidden=True)
    return p, r


def _raw():
    import argparse
    return argparse.RawDescriptionHelpFormatter


def _render_args(p, hidden=False):
    from . import record
    import argparse
    p.add_argument('--data', default=record.DATA_DIR,
                   help=argparse.SUPPRESS if hidden else 'directory of the stored runs (*.json)')
    p.add_argument('--out', default=record.OUT_DIR,
                   help=argparse.SUPPRESS if hidden else 'where the .md and .png files go')


def cmd_render(args):
    from . import record
    try:
        paths = record.render(args.data, args.out)
    except FileNotFoundError as e:
        print(str(e), file=sys.stderr)
        return 1
    for p in paths:
        print('wrote %s' % p)
    return 0


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
    from . import record, registry, runner
    if args.render:
        return cmd_render(args)
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
    try:
        overrides = _overrides(args.set, reg, args.quick)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2
    repeat = args.repeat or (3 if args.quick else 5)
    from theano_ocl.device import NoOpenCLPlatform
    try:
        rec = runner.run(args.only, device=args.device, quick=args.quick, repeat=repeat,
                         progress=not args.no_progress, overrides=overrides)
    except (NoOpenCLPlatform, ValueError) as e:        # no device, or none matches --device
        print(str(e), file=sys.stderr)
        return 2
    md = record.markdown(rec)
    print('\n' + md)
    written = []
    if args.json:
        record.save(rec, args.json)
        written.append(args.json)
    if args.markdown:
        record._write(args.markdown, md)
        written.append(args.markdown)
    if args.plot:
        written.append(record.plot([rec], args.plot, title=record.device_label(rec)))
    if args.record:
        path = os.path.join(args.data, record.run_name(rec) + '.json')
        record.save(rec, path)
        written += [path] + record.render(args.data, args.out)
    for p in written:
        print('wrote %s' % p)
    failed = [c['name'] for b in rec['benchmarks'] for c in b['cases'] if 'error' in c]
    if failed:
        print('%d case(s) failed: %s' % (len(failed), '; '.join(failed)), file=sys.stderr)
        return 1
    return 0
