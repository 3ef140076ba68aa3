"""Command line: ``python -m theano_ocl info`` lists the OpenCL devices theano_ocl can use;
``bench`` times theano_ocl against Theano C and ``render`` draws the docs' benchmark tables
and plots from the recorded runs (:mod:`theano_ocl.benchmarks.cli`);
``cache [info|clear]`` shows or clears the on-disk kernel cache; ``tune`` searches the
GEMM choices of a device ahead of time and stores them (:mod:`theano_ocl.ops.gemm_search`,
:mod:`theano_ocl.ops.gemm_tune`); ``ops-table`` writes the supported-ops page from the
registry (:mod:`theano_ocl.ops.catalog`).

``info`` reads only :mod:`theano_ocl.device` (pyopencl), never Theano, so it answers quickly
and works before Theano is set up (``cache`` imports Theano for its compiledir). Exit
status: 0 when at least one device is usable, 1 when
no OpenCL platform/device is visible (the install hint is printed), 2 on a usage error.
"""
import argparse
import os
import sys


def _yes(v):
    if v is None:
        return '?'
    return 'yes' if v else 'no'


def _table(rows, header):
    cols = list(zip(*([header] + rows)))
    widths = [max(len(str(c)) for c in col) for col in cols]
    line = '  '.join('%-*s' % (w, h) for w, h in zip(widths, header))
    out = [line.rstrip(), '  '.join('-' * w for w in widths)]
    for r in rows:
        out.append('  '.join('%-*s' % (w, c) for w, c in zip(widths, r)).rstrip())
    return '\n'.join(out)


def cmd_info(args):
    from theano_ocl import device as devmod
    try:
        rows = devmod.device_info()
    except devmod.NoOpenCLPlatform as e:
        print(str(e), file=sys.stderr)
        return 1
    if not rows:
        print(devmod.INSTALL_HINT, file=sys.stderr)
        return 1
    if args.json:
        import json
        print(json.dumps(rows, indent=2, sort_keys=True))
        return 0

    fmt = devmod.fmt_bytes
    header = ['', 'spec', 'type', 'platform', 'device', 'CUs', 'global mem', 'max alloc',
              'local mem', 'fp64', 'fp16', 'unified', 'cmd-buf']
    table = []
    for r in rows:
        table.append(['*' if r['default'] else '', r['spec'], r['type'], r['platform'],
                      r['device'], str(r['compute_units']), fmt(r['global_mem']),
                      fmt(r['max_alloc']), fmt(r['local_mem']), _yes(r['fp64']),
                      _yes(r['fp16']), _yes(r['unified_memory']), _yes(r['command_buffer'])])
    print('OpenCL devices visible to theano_ocl:\n')
    print(_table(table, header))
    print()
    for r in rows:
        print('  %s  %s / %s' % (r['spec'], r['platform_version'], r['version']))
    print()

    source = devmod.requested_device()[0]
    default = [r for r in rows if r['default']]
    if default:
        d = default[0]
        print('* default device: %s  %s / %s  from %s' % (d['spec'], d['platform'], d['device'],
                                                          source))
    else:
        try:
            devmod.resolve_spec()
        except ValueError as e:
            print('! %s; theano_ocl will refuse it.' % (e,))
    print('\nTo pick another device (the first of these that is set wins):\n'
          "  in code:   theano.function(..., mode=theano_ocl.OCLMode(device='P:D'))\n"
          "  anywhere:  export %s=P:D      (or 'gpu', 'cpu', or a fragment of the\n"
          '             platform/device name)\n'
          '  Theano:    THEANO_FLAGS=device=openclP:D  (also runs functions on it)\n'
          '  pyopencl:  export %s=P:D  (or P, or name fragments)\n'
          "  These apply to mode='OCL' and THEANO_FLAGS=linker=ocl / mode=OCL too."
          % (devmod.ENV_VAR, devmod.PYOPENCL_VAR))
    missing64 = [r['spec'] for r in rows if r['fp64'] is False]
    if missing64:
        print('\nNote: %s without fp64: float64 graphs run their float64 nodes on the host '
              '(set floatX=float32 for device speed).' % ', '.join(missing64))
    return 0


def cmd_cache(args):
    """``cache info`` / ``cache clear``: the on-disk kernel cache (runtime/kernel_cache.py)."""
    from theano_ocl.runtime import kernel_cache
    if args.action == 'clear':
        n = kernel_cache.clear()
        print('removed %d program binaries from %s' % (n, kernel_cache.default_directory()))
        return 0
    info = kernel_cache.kernel_cache_info()
    if not info['enabled']:
        print('kernel cache: off (%s=%s)' % (kernel_cache.ENV_SWITCH,
                                            os.environ.get(kernel_cache.ENV_SWITCH)))
        return 0
    from theano_ocl.device import fmt_bytes
    print('kernel cache: %s\n  %d program binaries, %s of at most %s' % (
        info['directory'], info['files'], fmt_bytes(info['bytes']), fmt_bytes(info['max_bytes'])))
    return 0


def cmd_tune(args):
    """``tune``: the GEMM search on one device, its before/after GFLOP/s per size."""
    import theano_ocl
    from theano_ocl.benchmarks.progress import bar
    from theano_ocl.ops import gemm_search, gemm_tune
    dtypes = [d.strip() for d in args.dtypes.split(',') if d.strip()]
    bad = [d for d in dtypes if d not in gemm_tune.DTYPES]
    if bad or not dtypes:
        print('tune: --dtypes takes %s (got %r)' % (','.join(gemm_tune.DTYPES), args.dtypes),
              file=sys.stderr)
        return 2
    if args.budget is not None and not args.budget > 0:
        print('tune: --budget takes a number of seconds > 0', file=sys.stderr)
        return 2
    try:
        dev = theano_ocl.get_device(args.device)
    except Exception as e:
        print('tune: %s' % e, file=sys.stderr)
        return 2
    budget = args.budget or gemm_search.DEFAULT_BUDGET * len(
        [d for d in dtypes if dev.supports_dtype(d)])
    print('tuning GEMM on %s / %s (driver %s) for up to %.0f s: %s; results kept in %s'
          % (dev.platform_name, dev.name, dev.device.driver_version.strip(), budget,
             ', '.join(dtypes), gemm_tune.tuning_file()), flush=True)
    rows = gemm_search.tune(dev, dtypes, budget=budget, log=print,
                            progress=lambda total: bar(total, show=not args.no_progress))
    if not rows:
        print('no size was tuned')
        return 1
    header = ['dtype', 'size', 'before GFLOP/s', 'after GFLOP/s', 'gain', 'choice']
    print('\n' + _table([[r['dtype'], '%d^3' % r['n'], _gflops(r['before']),
                          _gflops(r['after']),
                          '%.2fx' % (r['after'] / r['before']) if r['before'] else '?',
                          r['choice']] for r in rows], header))
    print('\nbefore: the built-in choice; after: the tuned one (wall clock per product)')
    return 0


def _gflops(v):
    return '?' if v is None else '%.1f' % v


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m theano_ocl',
        description='theano_ocl: an OpenCL backend for Theano 1.0.5.')
    sub = parser.add_subparsers(dest='command')
    p_info = sub.add_parser('info', help='list OpenCL platforms/devices and the default')
    p_info.add_argument('--json', action='store_true', help='machine-readable output')
    p_cache = sub.add_parser('cache', help='the on-disk kernel cache: where, how big; clear it')
    p_cache.add_argument('action', nargs='?', choices=['info', 'clear'], default='info')
    from .benchmarks import cli as bench_cli
    bench_cli.add_parsers(sub)
    p_tune = sub.add_parser('tune', help="search this device's GEMM choices and store them")
    p_tune.add_argument('--device', default=None, help="OpenCL device ('P:D', 'gpu', 'cpu', name)")
    p_tune.add_argument('--budget', type=float, default=None, metavar='SECONDS',
                        help='seconds in all (default: %.0f per dtype)' % 90)
    p_tune.add_argument('--dtypes', default='float32,float64',
                        help='comma-separated (default: float32,float64)')
    p_tune.add_argument('--no-progress', action='store_true', help='no progress display')
    p_ops = sub.add_parser('ops-table', help='the supported-ops page (docs/ops.md), from the registry')
    p_ops.add_argument('--out', metavar='FILE', help='write it here (default: stdout)')
    p_ops.add_argument('--check', metavar='FILE', help='exit 1 when FILE differs from it')
    args = parser.parse_args(argv)
    if args.command == 'info':
        return cmd_info(args)
    if args.command == 'cache':
        return cmd_cache(args)
    if args.command == 'bench':
        return bench_cli.cmd_bench(args)
    if args.command == 'render':
        return bench_cli.cmd_render(args)
    if args.command == 'tune':
        return cmd_tune(args)
    if args.command == 'ops-table':
        from .ops import catalog
        return catalog.main(args)
    parser.print_help()
    return 2


if __name__ == '__main__':
    sys.exit(main())
