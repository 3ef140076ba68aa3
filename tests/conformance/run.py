#!/usr/bin/env python
"""Theano's own test suite as the judge of "drop-in".

Runs modules of the *installed* Theano 1.0.5's test suite twice, once with the C backend
(``THEANO_FLAGS=mode=FAST_RUN``) and once with theano_ocl as the default mode
(``THEANO_FLAGS=mode=OCL``), and reports per module: passed / failed / errors / skipped
under each mode, the tests that pass under C but not under OCL (the regressions), the
share of Apply nodes that ran on the device and the most frequent host fallbacks.

    python tests/conformance/run.py                       # group core, both modes
    python tests/conformance/run.py --group all           # the full documented run
    python tests/conformance/run.py --quick               # the CI subset of every group;
                                                          # exit 1 on regression
    python tests/conformance/run.py --modes c --write-docs
    python tests/conformance/run.py -k elemwise -k ifelse # only modules matching (regex)
    python tests/conformance/run.py --group scan --modes c --plain-c
                                                          # C as shipped: no Scan fallback

Every module runs in its own interpreter through pynose (``nose_main.py`` = ``python -m
nose`` plus a crash-proof result stream), with the xunit plugin writing junit XML into a
per-run temporary directory.  See docs/conformance.md.

The last line printed is ``conformance: N passed, M failed``: N = tests that pass under
C and under OCL, M = regressions (pass under C, not under OCL, not listed in
expected_failures.txt).  With ``--modes c`` N is the C pass count and M is 0.
Exit status: 0 = no regression, 1 = regressions, 2 = the run itself could not be done.
"""
from __future__ import print_function

import argparse
import collections
import datetime
import fnmatch
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHIM_DIR = os.path.join(HERE, 'shim')
NOSE_MAIN = os.path.join(HERE, 'nose_main.py')
EXPECTED_FILE = os.path.join(HERE, 'expected_failures.txt')
DOCS_FILE = os.path.join(REPO, 'docs', 'conformance.md')

# ---------------------------------------------------------------------------------------
# The module table.
#   group   : one of GROUPS (``--group all`` = every row; ``--group scan,cnn`` = both)
#   module  : dotted name of the Theano test module
#   quick   : what ``--quick`` runs of it: True = the whole module, False = nothing,
#             a list = those nose selectors ("Class", "Class.method", "function"),
#             {'exclude': [names]} = the module less those tests.
#   c_s     : wall seconds of the whole module under C on the reference 2-core machine,
#             compilation included (the full runs in docs/conformance.md, 2026-11-24 and
#             -25; several with a cold compiledir), for planning a run.
# All modules run through pynose: pytest 9 collects differently (it takes the helper
# ``SharedTester.test_internal_type`` for a test, no longer runs nose-style ``setup``
# methods, and skips yield tests), nose's counts match the source.
# ---------------------------------------------------------------------------------------
ELEMWISE_QUICK = [
    # The tests of test_elemwise that compile through theano.function with the default
    # mode (so THEANO_FLAGS=mode=OCL reaches them), minus the long dtype sweeps
    # (T_*_dtype.*custom_dtype, test_Prod.test_other_grad_tests,
    # test_Prod.test_prod_no_zeros_in_input).  Left out as well: the tests that pin a
    # linker (gof.CLinker(), PerformLinker(), Mode(linker='c'/'py'): test_DimShuffle's
    # test_perform/test_c_or_py, test_Broadcast's linker tests, test_CAReduce.test_c*/
    # test_perform*), which run the same code in both modes and only cost C compilation
    # (test_CAReduce.test_c alone: 168 s with a cold compiledir).
    'test_DimShuffle.test_infer_shape', 'test_DimShuffle.test_too_big_rank',
    'test_reduce_axes',
    'test_Broadcast.test_fill_var', 'test_Broadcast.test_fill_grad',
    'test_CAReduce.test_infer_shape',
    'test_Prod.test_verify_grad', 'test_Prod.test_verify_grad_with_zeros',
    'test_Prod.test_mul_without_zeros_zeros', 'test_Prod.test_prod_without_zeros',
    'test_Prod.test_prod_without_zeros_grad', 'test_Prod.test_pickle_bug',
    'test_IsInf_IsNan',
    'T_mean_dtype.test_mean_default_dtype', 'T_mean_dtype.test_mean_precision',
    'T_reduce_dtype.test_reduce_default_dtype', 'T_reduce_dtype.test_reduce_default_acc_dtype',
    'T_reduce_dtype.test_reduce_custom_acc_dtype', 'T_reduce_dtype.test_reduce_precision',
    'T_prod_without_zeros_dtype.test_prod_without_zeros_default_dtype',
    'T_prod_without_zeros_dtype.test_prod_without_zeros_default_acc_dtype',
    'TestBitOpReduceGrad',
    'TestElemwise.test_elemwise_grad_bool', 'TestElemwise.test_infer_shape',
    'test_gt_grad', 'test_clip_grad', 'test_clip_grad_int', 'test_grad_useless_sum',
    'test_elemwise_grad_broadcast', 'test_not_implemented_elemwise_grad',
]

SCAN_QUICK = [
    # One or two tests per scan feature, each under ~2 s in both modes (warm compiledir):
    # sequences, sit-sot, mit-sot taps, go_backwards, until, shared updates, random streams
    # (RandomStreams, MRG), map/reduce, gradients (sit-sot, mit-sot, truncate, second
    # order, R-op), in-place, pickling.  Left out: the long gradient tests
    # (test_grad_multiple_outs_taps_backwards, test_hessian_bug_grad_grad_two_scans: ~75 s
    # each under C), and test_shared_arguments_with_updates / test_speed_batchrnn (~20 s /
    # ~10 s under OCL).
    'T_Scan.test_one_sequence_one_output_weights',
    'T_Scan.test_one_sequence_one_output_weights_shared',
    'T_Scan.test_multiple_inputs_multiple_outputs', 'T_Scan.test_multiple_outs_taps',
    'T_Scan.test_using_taps_sequence', 'T_Scan.test_using_taps_input_output',
    'T_Scan.test_backwards', 'T_Scan.test_while0', 'T_Scan.test_while1', 'T_Scan.test_while2',
    'T_Scan.test_shared_updates', 'T_Scan.test_simple_shared_random',
    'T_Scan.test_simple_shared_mrg_random', 'T_Scan.test_map_functionality',
    'T_Scan.test_reduce', 'T_Scan.test_map', 'T_Scan.test_gibbs_chain',
    'T_Scan.test_grad_grad_mitsot_sitsot', 'T_Scan.test_verify_second_grad_sitsot',
    'T_Scan.test_rop_mitmot', 'T_Scan.test_computing_gradient', 'T_Scan.test_grad_of_shared',
    'T_Scan.test_inplace1', 'T_Scan.test_pickling', 'T_Scan.test_memory_aliasing_updates',
    'T_Scan.test_only_shared_no_input_no_output', 'T_Scan.test_return_steps',
    'T_Scan.test_save_mem', 'TestGradUntil.test_grad_until_and_truncate',
    'test_speed_rnn', 'test_mintap_onestep',
]

MODULES = [
    # group    module                                                quick, c_s
    ('core',   'theano.compile.tests.test_function_module',          True, 5),
    ('core',   'theano.compile.tests.test_pfunc',                    True, 4),
    ('core',   'theano.compile.tests.test_shared',                   True, 1),
    ('core',   'theano.tensor.tests.test_sharedvar',                 True, 6),
    ('core',   'theano.tensor.tests.test_elemwise',                  ELEMWISE_QUICK, 334),
    ('core',   'theano.tensor.tests.test_subtensor',
     # test_shape_i_const: 61 s of the module's 176 s under C (cold compiledir)
     {'exclude': ['test_shape_i_const']}, 34),
    ('core',   'theano.tensor.tests.test_inc_subtensor',             True, 5),
    ('core',   'theano.tests.test_ifelse',                           True, 8),
    ('tensor', 'theano.tensor.tests.test_basic',                     False, 781),
    ('tensor', 'theano.tensor.tests.test_blas',                      False, 40),
    ('tensor', 'theano.tensor.tests.test_opt',
     # log(erfc(x)) and its gradient with Theano's fusion off: kept comparisons stored by
     # the switch reading them (ops.fusion.fuse_kept_producers; regressed once)
     ['T_local_erfc'], 273),
    ('tensor', 'theano.tensor.tests.test_extra_ops',                 False, 52),
    ('tensor', 'theano.tensor.nnet.tests.test_nnet',                 False, 53),
    ('tensor', 'theano.tensor.nnet.tests.test_sigm',                 False, 18),
    ('tensor', 'theano.sandbox.tests.test_rng_mrg',                  False, 43),
    ('scan',   'theano.scan_module.tests.test_scan',                 SCAN_QUICK, 648),
    ('scan',   'theano.scan_module.tests.test_scan_opt',
     ['TestPushOutScanOutputDot'], 41),
    ('scan',   'theano.scan_module.tests.test_scan_checkpoints',
     # 2 of its 4 tests cost 20 s of --quick (two interpreters): full runs only
     False, 18),
    ('scan',   'theano.scan_module.tests.test_scan_utils',
     # test_leaf_inside_scan: 7 s of the module's 12 s
     {'exclude': ['test_leaf_inside_scan']}, 12),
    ('cnn',    'theano.tensor.nnet.tests.test_corr',
     # CorrMM on the device: shapes, padding, subsampling, dtypes, strided inputs; the
     # infer_shape and dilation sweeps (15-70 s each under OCL: a kernel per shape) left out
     ['TestCorr2D.test_full_mode', 'TestCorr2D.test_img_kernel_same_shape',
      'TestCorr2D.test_invalid_filter_shape', 'TestCorr2D.test_non_contiguous',
      'TestCorr2D.test_shape_Constant_tensor', 'TestCorr2D.test_wrong_input',
      'TestCorr2D.test_subsample', 'TestCorr2D.test_dtype_upcast'], 69),
    ('cnn',    'theano.tensor.nnet.tests.test_conv',
     # the legacy ConvOp (a CorrMM of the flipped kernel under OCL): a few shapes, the errors
     ['TestConv2D.test_basic1', 'TestConv2D.test_full_mode', 'TestConv2D.test_subsample',
      'TestConv2D.test_shape_Constant_tensor', 'TestConv2D.test_wrong_input',
      'test_broadcast_grad'], 106),
    ('cnn',    'theano.tensor.nnet.tests.test_abstract_conv',
     # shape helpers and checks, the gradient-of-conv2d interfaces, bilinear upsampling and
     # CorrMM_gradInputs on arbitrary output shapes; the test_all generators (~850 conv
     # cases with gradients, hours on 2 cores) left out; c_s without them
     ['TestGetConvOutShape', 'TestConvGradInputsShape', 'TestAssertShape.test_shape_check_conv2d',
      'TestConvTypes', 'test_constant_shapes', 'TestConv2dGrads',
      'TestBilinearUpsampling.test_bilinear_kernel_2D',
      'TestBilinearUpsampling.test_fractional_bilinear_upsampling_shape',
      'TestCorrConv2d.test_gradinput_arbitrary_output_shapes'], 83),
    ('cnn',    'theano.tensor.signal.tests.test_pool',
     # Pool 2-D/3-D/6-D (max, sum, both averages), the gradients and the grad-of-grad on a
     # few parameterized cases; the full sweeps (400 cases) left out
     ['TestDownsampleFactorMax.' + t for t in (
         'test_out_shape', 'test_max_pool_2d_2D', 'test_max_pool_2d_2D_same_size',
         'test_max_pool_2d_3D', 'test_max_pool_2d_6D', 'test_max_pool_3d_3D',
         'test_max_pool_3d_3D_deprecated_interface', 'test_old_pool_interface',
         'test_pooling_with_tensor_vars_deprecated_interface',
         'test_DownsampleFactorMaxPaddingStride_grad_grad',
         'test_DownsampleFactorMax_grad_stride__5_3_3_2_1_2_16_16__False_max',
         'test_AveragePoolGrad_grad_stride__5_3_3_2_1_2_16_16__True_average_exc_pad',
         'test_AveragePoolGrad_grad_stride__5_3_3_2_1_2_16_16__False_average_inc_pad',
         'test_DownsampleFactorMaxGrad_grad_stride__5_3_3_2_1_2_16_16__True')], 223),
    ('cnn',    'theano.tensor.nnet.tests.test_bn',
     # batch_normalization on feature maps, batch_normalization_train (with broadcast
     # patterns, without running averages); the train/test/grad-grad sweeps (80-280 s
     # each under C, cold) left out
     ['test_bn_feature_maps', 'test_batch_normalization_train_without_running_averages',
      'test_batch_normalization_train_broadcast'], 690),
]
#: the groups, by what their modules cover
GROUPS = collections.OrderedDict([
    ('core',   'compiling and calling functions, shared variables, elementwise ops, '
             'indexing, ifelse'),
    ('tensor', 'tensor ops, BLAS, graph optimizations, extra ops, softmax and sigmoid, '
               'MRG random streams'),
    ('scan',   'scan: loops, their gradients and optimizations'),
    ('cnn',    'convolution, pooling and batch normalization'),
])


def group_arg(text):
    """``--group``'s value: a group, ``all``, or groups joined by ',' or '+' -> the run's
    label (``core``, ``scan+cnn``, ``all``): the groups in table order, ``all`` for
    every one."""
    parts = set(p.strip() for p in re.split(r'[,+]', text) if p.strip())
    unknown = sorted(parts - set(GROUPS) - {'all'})
    if unknown or not parts:
        raise argparse.ArgumentTypeError('unknown group %s; expected all or one or more of '
                                         '%s (joined by ",")' % (', '.join(unknown) or "''",
                                                                 ', '.join(GROUPS)))
    if 'all' in parts or parts == set(GROUPS):
        return 'all'
    return '+'.join(g for g in GROUPS if g in parts)


def groups_of(label):
    """The groups a run's label (:func:`group_arg`) stands for."""
    return list(GROUPS) if label == 'all' else label.split('+')

MODE_FLAGS = {'c': 'FAST_RUN', 'ocl': 'OCL'}
MODE_TITLE = {'c': 'C', 'ocl': 'OCL'}
MAX_RESUMES = 3          # restarts of a module after its interpreter died
ADDR_RE = re.compile(r' at 0x[0-9a-fA-F]+')


def log(*a):
    print(*a, file=sys.stderr)
    sys.stderr.flush()


# ------------------------------------------------------------------ expected failures ---
def module_key(text):
    """'theano/tensor/tests/test_blas.py', 'tensor/tests/test_blas.py' or the dotted name
    -> 'theano.tensor.tests.test_blas'."""
    t = text.strip()
    if t.endswith('.py'):
        t = t[:-3]
    t = t.replace('/', '.').strip('.')
    if not t.startswith('theano.') and t != 'theano':
        t = 'theano.' + t
    return t


def load_expected(path):
    """Lines ``module::test_id  # reason``; test_id may be an fnmatch pattern."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for lineno, raw in enumerate(fh, 1):
            line = raw.strip()
            if not line or line.startswith('#'):
                continue
            reason = ''
            if '#' in line:
                line, reason = line.split('#', 1)
                line, reason = line.strip(), reason.strip()
            if '::' not in line:
                log('%s:%d: ignored (no "::"): %s' % (path, lineno, raw.rstrip()))
                continue
            mod, tid = line.split('::', 1)
            out.append((module_key(mod), tid.strip(), reason))
    return out


def expected_reason(expected, module, tid):
    for mod, pat, reason in expected:
        if mod == module and (pat == tid or fnmatch.fnmatchcase(tid, pat)):
            return reason or '(no reason given)'
    return None


# ------------------------------------------------------------------------- results ---
def case_id(module, classname, name):
    if classname == module:
        tid = name
    elif classname.startswith(module + '.'):
        tid = classname[len(module) + 1:] + '.' + name
    else:
        tid = classname + '.' + name
    return re.sub(r'\s+', ' ', ADDR_RE.sub('', tid))


def case_key(tid):
    """A yield case's arguments may print differently between runs (random arrays):
    ids of the form gen(args) also match by (generator, position)."""
    return tid.split('(', 1)[0] if '(' in tid else None


def ordinal_index(tests):
    out, seen = {}, collections.Counter()
    for tid in tests:
        base = case_key(tid)
        if base is not None:
            seen[base] += 1
            out['%s[case %d]' % (base, seen[base])] = tid
    return out


def nose_address(module, tid):
    """The nose selector that runs test ``tid`` (a yield case: its generator)."""
    base = tid.split('#', 1)[0]
    if '(' in base:
        base = base[:base.index('(')]
    return '%s:%s' % (module, base)


class ModuleResult(object):
    def __init__(self, module, mode):
        self.module = module
        self.mode = mode
        self.tests = collections.OrderedDict()   # id -> dict(outcome, message, tb, time)
        self.wall = 0.0
        self.rc = None
        self.notes = []            # 'crashed in X', 'timeout', ...
        self.stats = None          # device-share aggregate or None
        self.log_files = []
        self.flaky = collections.OrderedDict()   # id -> first (failing) record

    def counts(self):
        c = collections.Counter(t['outcome'] for t in self.tests.values())
        return c

    def add(self, tid, rec, overwrite=False):
        if tid in self.tests and not overwrite:
            return
        self.tests[tid] = rec


def _dedup(seen, tid):
    n = seen[tid] = seen.get(tid, 0) + 1
    return tid if n == 1 else '%s#%d' % (tid, n)


def parse_junit(path, module):
    """junit XML (nose xunit) -> OrderedDict id -> record."""
    out = collections.OrderedDict()
    tree = ET.parse(path)
    seen = {}
    for tc in tree.iter('testcase'):
        tid = _dedup(seen, case_id(module, tc.get('classname', ''), tc.get('name', '')))
        outcome, message, tb = 'pass', '', ''
        for child in tc:
            if child.tag in ('failure', 'error', 'skipped'):
                outcome = {'failure': 'fail', 'error': 'error', 'skipped': 'skip'}[child.tag]
                message = (child.get('type', '') + ': ' + child.get('message', '')).strip(': ')
                tb = child.text or ''
                break
        try:
            t = float(tc.get('time', '0') or 0)
        except ValueError:
            t = 0.0
        out[tid] = dict(outcome=outcome, message=message, tb=tb, time=t)
    return out


def parse_stream(path, module):
    """The ConformanceStream JSONL -> (OrderedDict id -> record, id of the test that
    started but never ended, or None)."""
    out = collections.OrderedDict()
    seen_start, seen_end = {}, {}
    running = None
    if not os.path.exists(path):
        return out, None
    with open(path) as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue           # a half-written last line
            tid = case_id(module, rec.get('classname', ''), rec.get('name', ''))
            if rec.get('ev') == 'start':
                running = _dedup(seen_start, tid)
            elif rec.get('ev') == 'end':
                did = _dedup(seen_end, tid)
                out[did] = dict(outcome=rec.get('outcome', 'error'),
                                message=rec.get('message', ''), tb=rec.get('tb', ''),
                                time=rec.get('time', 0.0))
                running = None
    return out, running


def read_stats(path):
    """THEANO_OCL_STATS JSON lines -> aggregate dict, or None when the file is absent."""
    if not path or not os.path.exists(path):
        return None
    agg = dict(functions=0, device=0, meta=0, fallback=0, fallback_ops=collections.Counter())
    with open(path) as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            agg['functions'] += 1
            for k in ('device', 'meta', 'fallback'):
                agg[k] += int(rec.get(k, 0) or 0)
            for op, n in (rec.get('fallback_ops') or {}).items():
                agg['fallback_ops'][op] += int(n)
    return agg


def share_text(stats):
    if stats is None:
        return 'n/a'
    total = stats['device'] + stats['meta'] + stats['fallback']
    if not total:
        return 'n/a (0 nodes)'
    return '%.1f%% of %d' % (100.0 * (stats['device'] + stats['meta']) / total, total)


def fallback_text(stats, top=4):
    if stats is None or not stats['fallback_ops']:
        return '' if stats is None else '-'
    return ', '.join('%s %d' % (op, n) for op, n in stats['fallback_ops'].most_common(top))


# ---------------------------------------------------------------------------- runs ---
def compose_flags(mode, user_flags):
    parts = [p for p in (user_flags or '').split(',') if p.strip()]
    parts = [p for p in parts if not p.strip().startswith('mode=')]
    if not any(p.strip().startswith('blas.ldflags') for p in parts):
        # numpy >= 1.22 has no blas_opt_info: Theano's import fails without it (both
        # modes get the same flag, so BLAS is numpy's C API under C and on the host).
        parts.insert(0, 'blas.ldflags=')
    parts.append('mode=' + MODE_FLAGS[mode])
    return ','.join(parts)


def make_env(mode, args, stats_file=None, stream_file=None):
    env = dict(os.environ)
    env['CONFORMANCE_SHIM'] = '1'
    env['PYTHONPATH'] = os.pathsep.join(
        [SHIM_DIR, REPO] + [p for p in env.get('PYTHONPATH', '').split(os.pathsep) if p])
    env['THEANO_FLAGS'] = compose_flags(mode, os.environ.get('THEANO_FLAGS', ''))
    if getattr(args, 'compiledir', None):
        env['THEANO_FLAGS'] += ',base_compiledir=' + os.path.abspath(args.compiledir)
    # the suite judges the device's kernels: its small functions would otherwise go to
    # Theano's VM on a CPU device (runtime/cost.py), which proves nothing about them
    env.setdefault('THEANO_OCL_COST_MODEL', 'off')
    env.pop('THEANO_OCL_STATS', None)
    env.pop('CONFORMANCE_STREAM', None)
    env.pop('CONFORMANCE_IMPORT', None)
    env.pop('CONFORMANCE_PLAIN', None)
    if getattr(args, 'plain_c', False):
        env['CONFORMANCE_PLAIN'] = '1'      # see shim/sitecustomize.py
    if mode == 'ocl':
        # Load the plugin even when its start-up .pth hook is not installed in this
        # interpreter's site-packages (an editable checkout).
        env['CONFORMANCE_IMPORT'] = 'theano_ocl'
        if stats_file:
            env['THEANO_OCL_STATS'] = stats_file
        if args.device:
            env['THEANO_OCL_DEVICE'] = args.device
    if stream_file:
        env['CONFORMANCE_STREAM'] = stream_file
    env.setdefault('PYTHONDONTWRITEBYTECODE', '1')
    return env


PREFLIGHT = r'''
import json, sys
info = {}
import theano
info['theano'] = theano.__version__
info['floatX'] = theano.config.floatX
info['mode'] = str(theano.config.mode)
if sys.argv[1] == 'ocl':
    import theano_ocl
    f = theano.function([], [], mode='OCL')
    f()
    x = theano.tensor.dvector('x')
    g = theano.function([x], x * 2 + 1)          # the default mode, i.e. THEANO_FLAGS
    assert list(g([1.0, 2.0])) == [3.0, 5.0], g([1.0, 2.0])
    info['default_linker'] = type(g.maker.linker).__name__
    dev = None
    try:
        from theano_ocl import device as _d
        d = _d.get_device()
        dev = '%s / %s' % (d.platform_name, d.name)
    except Exception as e:
        dev = 'unknown (%r)' % (e,)
    info['device'] = dev
print('PREFLIGHT ' + json.dumps(info))
'''


def preflight(mode, args, tmp):
    env = make_env(mode, args)
    try:
        p = subprocess.run([args.python, '-c', PREFLIGHT, mode], env=env, cwd=tmp,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, 'preflight timed out'
    for line in p.stdout.splitlines():
        if line.startswith('PREFLIGHT '):
            return json.loads(line[len('PREFLIGHT '):]), None
    return None, p.stdout[-3000:]


def stats_path(workdir, module, mode):
    return os.path.join(workdir, '%s.%s.stats.jsonl' % (module, mode))


def run_nose(module, mode, targets, args, workdir, tag, timeout, stats=None):
    """One interpreter: returns (xml_path or None, stream_path, wall, rc, timed_out, log)."""
    xml = os.path.join(workdir, '%s.xml' % tag)
    stream = os.path.join(workdir, '%s.stream.jsonl' % tag)
    logf = os.path.join(workdir, '%s.log' % tag)
    if stats is None:
        stats = stats_path(workdir, module, mode)
    env = make_env(mode, args, stats_file=stats, stream_file=stream)
    cmd = [args.python, NOSE_MAIN, '-v', '--with-xunit', '--xunit-file=' + xml,
           '--xunit-testsuite-name=' + module] + targets
    cwd = os.path.join(workdir, 'cwd-' + mode)
    if not os.path.isdir(cwd):
        os.makedirs(cwd)
    t0 = time.time()
    timed_out = False
    with open(logf, 'w') as lf:
        lf.write('$ THEANO_FLAGS=%s %s\n' % (env['THEANO_FLAGS'], ' '.join(cmd)))
        lf.flush()
        p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=lf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(p.pid, signal.SIGKILL)   # our own session: the test interpreter
            except OSError:
                pass
            rc = p.wait()
    wall = time.time() - t0
    ok_xml = os.path.exists(xml) and os.path.getsize(xml) > 0 and not timed_out
    return (xml if ok_xml else None), stream, wall, rc, timed_out, logf


def collect_ids(module, mode, args, workdir, opts=()):
    """All test ids of a module (nose --collect-only through the stream plugin)."""
    tag = '%s.%s.collect' % (module, mode)
    stream = os.path.join(workdir, tag + '.stream.jsonl')
    env = make_env(mode, args, stream_file=stream)
    cwd = os.path.join(workdir, 'cwd-' + mode)
    subprocess.run([args.python, NOSE_MAIN, '--collect-only'] + list(opts) + [module],
                   env=env, cwd=cwd,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=900)
    ids, _ = parse_stream(stream, module)
    return list(ids)


def run_module(module, mode, targets, args, workdir, timeout):
    res = ModuleResult(module, mode)
    t_end = time.time() + timeout
    remaining_targets = targets
    attempt = 0
    all_ids = None
    while True:
        tag = '%s.%s.%d' % (module, mode, attempt)
        xml, stream, wall, rc, timed_out, logf = run_nose(
            module, mode, remaining_targets, args, workdir, tag, max(30, t_end - time.time()))
        res.wall += wall
        res.rc = rc
        res.log_files.append(logf)
        if xml is not None:
            try:
                for tid, rec in parse_junit(xml, module).items():
                    res.add(tid, rec)
                break
            except ET.ParseError as e:
                res.notes.append('unreadable XML (%s)' % e)
        # The interpreter died or was killed: recover from the stream.
        done, running = parse_stream(stream, module)
        for tid, rec in done.items():
            res.add(tid, rec)
        why = 'timeout after %ds' % timeout if timed_out else 'exit status %s' % rc
        if running is not None:
            res.add(running, dict(outcome='crash', message='interpreter died (%s) during '
                                  'this test' % why, tb='see %s' % logf, time=0.0),
                    overwrite=True)
            res.notes.append('died in %s (%s)' % (running, why))
        else:
            res.notes.append('died outside a test (%s)' % why)
        if timed_out or attempt >= MAX_RESUMES or time.time() > t_end:
            break
        if all_ids is None:
            if module in targets:     # the whole module (maybe with --exclude)
                all_ids = collect_ids(module, mode, args, workdir,
                                      [t for t in targets if t.startswith('--')])
            else:
                all_ids = []   # a selection: do not resume, keep what we have
        todo = sorted(set(nose_address(module, t) for t in all_ids if t not in res.tests))
        if not todo:
            break
        remaining_targets = todo
        attempt += 1
        log('    %s [%s]: resuming with %d remaining selectors' % (module, mode, len(todo)))
    res.stats = read_stats(stats_path(workdir, module, mode))
    return res


def retry_regressions(module, c_res, o_res, args, workdir, expected, timeout):
    """Run the regressions of one module once more under OCL (a shared compiledir and
    other processes on the machine make a few tests flaky).  Tests that pass now are
    recorded in ``o_res.flaky`` and count as passes."""
    reg, _, _ = compare(module, c_res, o_res, expected)
    if not reg:
        return
    ids = [t for t, rec in reg if rec['outcome'] != 'crash']
    targets = sorted(set(nose_address(module, t) for t in ids))
    if not targets:
        return
    log('    %s [ocl]: retrying %d regression(s) once' % (module, len(ids)))
    tag = '%s.ocl.retry' % module
    xml, stream, wall, rc, timed_out, logf = run_nose(
        module, 'ocl', targets, args, workdir, tag, timeout,
        stats=os.path.join(workdir, tag + '.stats.jsonl'))
    if xml is not None:
        try:
            again = parse_junit(xml, module)
        except ET.ParseError:
            again, _ = parse_stream(stream, module)
    else:
        again, _ = parse_stream(stream, module)
    for tid in ids:
        rec = again.get(tid)
        if rec is not None and rec['outcome'] == 'pass':
            o_res.flaky[tid] = o_res.tests[tid]
            o_res.tests[tid] = dict(rec, flaky=True)


def targets_for(module, quick_spec, quick, exclude=()):
    """nose arguments for one module: the module, a list of selectors, or the module
    with ``--exclude`` (a dict ``{'exclude': [test names]}`` in the table); ``exclude``
    (the ``--exclude`` option) leaves those test names out of every module."""
    names = list(exclude)
    if not quick or quick_spec is True:
        targets = [module]
    elif isinstance(quick_spec, dict):
        names += quick_spec.get('exclude', [])
        targets = [module]
    else:
        targets = ['%s:%s' % (module, s) for s in quick_spec]
    if names:
        targets.insert(0, '--exclude=^(%s)$' % '|'.join(re.escape(n) for n in names))
    return targets


# -------------------------------------------------------------------------- report ---
def fmt_counts(res):
    if res is None:
        return '-'
    c = res.counts()
    extra = ''
    if c.get('crash'):
        extra = ' / %d crashed' % c['crash']
    return '%d / %d / %d / %d%s' % (c.get('pass', 0), c.get('fail', 0), c.get('error', 0),
                                    c.get('skip', 0), extra)


def short_tb(rec, frames=2, width=200):
    """The last ``frames`` frames of the traceback and the first line of the exception
    (Theano appends long node dumps, creation backtraces and hints to its messages),
    each line cut to ``width``."""
    tb = [l.rstrip() for l in (rec.get('tb') or '').splitlines() if l.strip()]
    starts = [i for i, l in enumerate(tb) if l.startswith('Traceback (most recent call last)')]
    if not starts:
        return one_line(rec)
    body = tb[starts[-1] + 1:]
    end = next((i for i, l in enumerate(body) if not l.startswith(' ')), len(body))
    stack, exc = body[:end], body[end:]
    last = [i for i, l in enumerate(stack) if l.lstrip().startswith('File "')
            and '/unittest/' not in l and '/nose/' not in l]
    keep = []
    for i in last[-frames:]:
        keep.append(stack[i])
        if i + 1 < len(stack) and not stack[i + 1].lstrip().startswith('File "'):
            keep.append(stack[i + 1])
    keep.append(_first_line(exc[0]) if exc else one_line(rec))
    return '\n'.join(l if len(l) <= width else l[:width] + '...' for l in keep)


def _first_line(text):
    """First line of an exception message; also cuts at a repr'd newline (KeyError("a\\nb"))."""
    text = text.strip().splitlines()[0] if text.strip() else ''
    return text.split('\\n', 1)[0]


def one_line(rec):
    """A one-line cause: the exception's first line, plus for a bare assert the failing
    source line and its place in the test file."""
    msg = (rec.get('message') or '').strip()
    first = _first_line(msg)
    tb = [l for l in (rec.get('tb') or '').splitlines() if l.strip()]
    if not first and tb:
        first = tb[-1].strip()
    if not first:
        first = rec.get('outcome', '?')
    bare = re.sub(r'^(builtins\.)?', '', first).rstrip(': ')
    if bare in ('AssertionError', 'assert') or bare.endswith('AssertionError'):
        where, src = '', ''
        for i, l in enumerate(tb):
            m = re.match(r'\s*File "([^"]+)", line (\d+), in (\S+)', l)
            if m and '/tests/' in m.group(1):
                where = '%s:%s' % (os.path.basename(m.group(1)), m.group(2))
                src = tb[i + 1].strip() if i + 1 < len(tb) else ''
        if src:
            first = 'AssertionError: `%s` (%s)' % (src, where)
    first = first.replace('|', '\\|')
    return first[:240] + ('...' if len(first) > 240 else '')


def compare(module, c_res, o_res, expected):
    regress, xfail, unexpected = [], [], []
    if c_res is None or o_res is None:
        return regress, xfail, unexpected
    c_ord = {v: k for k, v in ordinal_index(c_res.tests).items()}
    o_ord = ordinal_index(o_res.tests)
    for tid, crec in c_res.tests.items():
        orec = o_res.tests.get(tid)
        if orec is None and tid in c_ord and c_ord[tid] in o_ord:
            orec = o_res.tests[o_ord[c_ord[tid]]]
        if orec is None:
            orec = dict(outcome='missing', message='not run under OCL', tb='', time=0.0)
        reason = expected_reason(expected, module, tid)
        if orec['outcome'] == 'pass':
            if reason is not None:
                unexpected.append((tid, reason))
            continue
        if crec['outcome'] != 'pass':
            continue
        if reason is not None:
            xfail.append((tid, orec, reason))
        else:
            regress.append((tid, orec))
    return regress, xfail, unexpected


def build_report(rows, modes, expected, meta):
    """rows: [(module, {mode: ModuleResult})] -> (markdown, n_pass, n_regress, details)."""
    out = []
    both = 'c' in modes and 'ocl' in modes
    hdr = ['module']
    for m in modes:
        hdr += ['%s pass / fail / error / skip' % MODE_TITLE[m], '%s time' % MODE_TITLE[m]]
    if both:
        hdr += ['regressions', 'expected fail', 'unexpected pass']
    if 'ocl' in modes:
        hdr += ['on device', 'top fallbacks']
    out.append('| ' + ' | '.join(hdr) + ' |')
    out.append('|' + '---|' * len(hdr))
    n_pass = n_reg = 0
    totals = collections.defaultdict(float)
    details = []
    for module, by_mode in rows:
        short = module[len('theano.'):] if module.startswith('theano.') else module
        cells = [short]
        for m in modes:
            r = by_mode.get(m)
            cells.append(fmt_counts(r) + (' (%s)' % '; '.join(r.notes) if r and r.notes else ''))
            cells.append('%.0f s' % r.wall if r else '-')
            if r:
                totals[m] += r.wall
        if both:
            reg, xf, up = compare(module, by_mode.get('c'), by_mode.get('ocl'), expected)
            cells += [str(len(reg)), str(len(xf)), str(len(up))]
            n_reg += len(reg)
            c_res, o_res = by_mode.get('c'), by_mode.get('ocl')
            if c_res and o_res:
                # every C pass is either an OCL pass, a regression or an expected failure
                n_pass += (sum(1 for rec in c_res.tests.values() if rec['outcome'] == 'pass')
                           - len(reg) - len(xf))
            fl = list(by_mode['ocl'].flaky.items()) if by_mode.get('ocl') else []
            details.append((module, reg, xf, up, fl))
        elif modes:
            r = by_mode.get(modes[0])
            if r:
                n_pass += r.counts().get('pass', 0)
        if 'ocl' in modes:
            r = by_mode.get('ocl')
            cells += [share_text(r.stats if r else None), fallback_text(r.stats if r else None)]
        out.append('| ' + ' | '.join(c.replace('|', '\\|') for c in cells) + ' |')
    tot = ['**total**']
    for m in modes:
        agg = collections.Counter()
        for _, by_mode in rows:
            if by_mode.get(m):
                agg.update(by_mode[m].counts())
        tot += ['%d / %d / %d / %d' % (agg.get('pass', 0), agg.get('fail', 0),
                                       agg.get('error', 0), agg.get('skip', 0)),
                '%.0f s' % totals[m]]
    if both:
        tot += [str(n_reg), str(sum(len(d[2]) for d in details)),
                str(sum(len(d[3]) for d in details))]
    if 'ocl' in modes:
        agg = None
        for _, by_mode in rows:
            r = by_mode.get('ocl')
            if r and r.stats:
                if agg is None:
                    agg = dict(functions=0, device=0, meta=0, fallback=0,
                               fallback_ops=collections.Counter())
                for k in ('functions', 'device', 'meta', 'fallback'):
                    agg[k] += r.stats[k]
                agg['fallback_ops'].update(r.stats['fallback_ops'])
        tot += [share_text(agg), fallback_text(agg)]
    out.append('| ' + ' | '.join(tot) + ' |')
    return '\n'.join(out), n_pass, n_reg, details


def details_markdown(details, with_tb):
    out = []
    regs = [(m, t, r) for m, reg, _, _, _ in details for t, r in reg]
    if regs:
        out.append('\n### Regressions (pass under C, not under OCL)\n')
        for m, t, r in regs:
            out.append('- `%s::%s` — **%s**: %s' % (m, t, r['outcome'], one_line(r)))
            if with_tb:
                out.append('\n  ```\n' + '\n'.join('  ' + l for l in short_tb(r).splitlines())
                           + '\n  ```')
    xf = [(m, t, r, why) for m, _, xfl, _, _ in details for t, r, why in xfl]
    if xf:
        out.append('\n### Expected failures (expected_failures.txt)\n')
        for m, t, r, why in xf:
            out.append('- `%s::%s` — %s (%s)' % (m, t, r['outcome'], why))
    up = [(m, t, why) for m, _, _, upl, _ in details for t, why in upl]
    if up:
        out.append('\n### Unexpected passes (listed in expected_failures.txt, pass now)\n')
        for m, t, why in up:
            out.append('- `%s::%s` — listed as: %s' % (m, t, why))
    fl = [(m, t, r) for m, _, _, _, fll in details for t, r in fll]
    if fl:
        out.append('\n### Flaky under OCL (failed, then passed on the one retry; counted as passed)\n')
        for m, t, r in fl:
            out.append('- `%s::%s` — first run: %s: %s' % (m, t, r['outcome'], one_line(r)))
    return '\n'.join(out)


def machine_text():
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo') as fh:
            for line in fh:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    return '%s, %d cores, %s %s, Python %s' % (cpu, os.cpu_count() or 0, platform.system(),
                                               platform.release(), platform.python_version())


def write_docs(key, section):
    begin, end = '<!-- results:%s:begin -->' % key, '<!-- results:%s:end -->' % key
    block = begin + '\n' + section.strip() + '\n' + end
    if os.path.exists(DOCS_FILE):
        with open(DOCS_FILE) as fh:
            text = fh.read()
    else:
        text = '# Conformance: Theano\'s own tests under theano_ocl\n\n## Results\n'
    if begin in text and end in text:
        pre, rest = text.split(begin, 1)
        _, post = rest.split(end, 1)
        text = pre + block + post
    else:
        anchor = '<!-- results:insert-here -->'
        if anchor in text:
            text = text.replace(anchor, block + '\n\n' + anchor, 1)
        else:
            text = text.rstrip('\n') + '\n\n' + block + '\n'
    with open(DOCS_FILE, 'w') as fh:
        fh.write(text)


# ---------------------------------------------------------------------------- main ---
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--group', type=group_arg, default=None,
                    help='modules of these groups: %s, or all (default core; with --quick: '
                         'all); several joined by ","' % ', '.join(
                             '%s (%s)' % kv for kv in GROUPS.items()))
    ap.add_argument('--modes', default='c,ocl',
                    help='comma list of c, ocl (default c,ocl)')
    ap.add_argument('--quick', action='store_true',
                    help='the CI subset (see MODULES); exit 1 on any regression')
    ap.add_argument('-k', dest='only', action='append', default=[],
                    help='only modules whose name matches this regular expression '
                         '(re.search; repeatable): -k blas, -k "test_scan$"')
    ap.add_argument('--timeout', type=float, default=None,
                    help='seconds per module and mode (default 3600, --quick 600)')
    ap.add_argument('--device', default=None, help='THEANO_OCL_DEVICE for the OCL run')
    ap.add_argument('--python', default=sys.executable,
                    help='interpreter with Theano installed (default: this one)')
    ap.add_argument('--expected', default=EXPECTED_FILE)
    ap.add_argument('--write-docs', action='store_true',
                    help='write the table into docs/conformance.md')
    ap.add_argument('--json', default=None, help='write all per-test results here')
    ap.add_argument('--keep', action='store_true', help='keep the temporary directory')
    ap.add_argument('--no-tb', action='store_true', help='no tracebacks for regressions')
    ap.add_argument('--compiledir', default=None,
                    help="Theano base_compiledir for both modes (default: Theano's own, "
                         "~/.theano); one for the whole run")
    ap.add_argument('--no-retry', action='store_true',
                    help='do not re-run regressions once to tell flaky tests apart')
    ap.add_argument('--note', default=None,
                    help='a sentence added to the report head (e.g. "cold compiledir")')
    ap.add_argument('--exclude', action='append', default=[], metavar='NAME',
                    help='leave tests, classes or generators of this name out of every '
                         'module (repeatable; e.g. test_all, the long conv generators)')
    ap.add_argument('--plain-c', action='store_true',
                    help="with --modes c only: Theano as shipped, without theano_ocl's "
                         "start-up hook and the shim's Scan fallback (on Python 3.11 every "
                         "Scan then fails to compile)")
    ap.add_argument('--from-json', default=None, metavar='FILE',
                    help='re-render the report of an earlier --json run (no tests run)')
    args = ap.parse_args(argv)

    if args.group is None:
        args.group = 'all' if args.quick else 'core'
    if args.from_json:
        dump, rows = load_json_rows(args.from_json)
        args.group, args.quick = dump.get('group', args.group), dump.get('quick', False)
        args.only = dump.get('only') or args.only
        args.plain_c = dump.get('plain_c', False)
        args.exclude = dump.get('exclude') or []
        elapsed = dump.get('elapsed') or sum(r.wall for _, b in rows for r in b.values())
        args.json = None if args.json == args.from_json else args.json
        return finish(rows, dump['modes'], load_expected(args.expected), dump['meta'], args,
                      elapsed, None)

    modes = [m.strip() for m in args.modes.split(',') if m.strip()]
    for m in modes:
        if m not in MODE_FLAGS:
            ap.error('unknown mode %r' % m)
    modes = [m for m in ('c', 'ocl') if m in modes]
    if args.plain_c and modes != ['c']:
        ap.error('--plain-c needs --modes c')
    timeout = args.timeout or (600 if args.quick else 3600)
    rows_spec = [(mod, quick) for grp, mod, quick, c_s in MODULES
                 if grp in groups_of(args.group)]
    if args.quick:
        rows_spec = [(mod, q) for mod, q in rows_spec if q]
    if args.only:
        rows_spec = [(mod, q) for mod, q in rows_spec if any(re.search(k, mod) for k in args.only)]
    if not rows_spec:
        log('no module selected')
        print('conformance: 0 passed, 0 failed')
        return 2
    expected = load_expected(args.expected)

    tmp = tempfile.mkdtemp(prefix='theano_ocl_conformance_')
    log('conformance: %d modules, modes %s, temp dir %s' % (len(rows_spec), ','.join(modes), tmp))
    if not args.quick and not args.exclude:
        c_s = dict((mod, c) for _, mod, _, c in MODULES)
        log('  (these modules took ~%d s under C on the reference 2-core machine)'
            % sum(c_s[mod] for mod, _ in rows_spec))
    t_start = time.time()

    meta = dict(date=datetime.datetime.now().strftime('%Y-%m-%d %H:%M'),
                machine=machine_text(), device='n/a (C only)', theano='?', floatX='?')
    ocl_broken = None
    for m in modes:
        info, err = preflight(m, args, tmp)
        if info is None:
            if m == 'c':
                log('the C-mode preflight failed; cannot run:\n' + (err or ''))
                print('conformance: 0 passed, 0 failed')
                return 2
            ocl_broken = err or 'unknown error'
            log('OCL preflight FAILED: THEANO_FLAGS=mode=OCL does not work:\n' + ocl_broken)
            meta['device'] = 'unavailable (preflight failed)'
        else:
            meta['theano'] = info.get('theano', '?')
            meta['floatX'] = info.get('floatX', '?')
            if m == 'ocl':
                meta['device'] = info.get('device', '?')
                meta['ocl_default_linker'] = info.get('default_linker', '?')
            log('preflight %s: %s' % (m, json.dumps(info)))

    rows = []
    for module, quick in rows_spec:
        targets = targets_for(module, quick, args.quick, args.exclude)
        by_mode = {}
        for m in modes:
            if m == 'ocl' and ocl_broken is not None:
                r = ModuleResult(module, m)
                c_res = by_mode.get('c')
                for tid in (c_res.tests if c_res else []):
                    r.add(tid, dict(outcome='error', message='OCL mode unavailable: '
                                    + ocl_broken.strip().splitlines()[-1], tb=ocl_broken,
                                    time=0.0))
                r.notes.append('not run: OCL preflight failed')
                by_mode[m] = r
                continue
            log('  %-45s [%s] ...' % (module, m))
            r = run_module(module, m, targets, args, tmp, timeout)
            by_mode[m] = r
            if m == 'ocl' and 'c' in by_mode and not args.no_retry:
                retry_regressions(module, by_mode['c'], r, args, tmp, expected, timeout)
            log('  %-45s [%s] %s in %.0f s%s%s' % (
                module, m, fmt_counts(r), r.wall,
                (' — ' + '; '.join(r.notes)) if r.notes else '',
                (' — on device ' + share_text(r.stats)) if m == 'ocl' else ''))
        rows.append((module, by_mode))
    elapsed = time.time() - t_start
    return finish(rows, modes, expected, meta, args, elapsed, tmp)


def load_json_rows(path):
    with open(path) as fh:
        dump = json.load(fh)
    rows = []
    for module, by in dump['modules'].items():
        by_mode = {}
        for m, d in by.items():
            r = ModuleResult(module, m)
            r.wall, r.rc, r.notes = d['wall'], d.get('rc'), d.get('notes', [])
            r.tests = collections.OrderedDict(d['tests'])
            r.flaky = collections.OrderedDict(d.get('flaky') or {})
            if d.get('stats'):
                r.stats = dict(d['stats'], fallback_ops=collections.Counter(
                    d['stats'].get('fallback_ops') or {}))
            by_mode[m] = r
        rows.append((module, by_mode))
    return dump, rows


def finish(rows, modes, expected, meta, args, elapsed, tmp):
    """Print the report (and write docs / JSON); return the exit status."""
    table, n_pass, n_reg, details = build_report(rows, modes, expected, meta)
    note = args.note.strip().rstrip('.') if args.note else ''
    note = (' ' + note[:1].upper() + note[1:] + '.') if note else ''
    head = ('**%s** — group `%s`%s, modes %s; %s; Theano %s, floatX=%s; OCL device: %s; '
            'run took %.0f s.%s' % (meta['date'], args.group, ' (--quick)' if args.quick else '',
                                    '+'.join(MODE_TITLE[m] for m in modes)
                                    + (' as shipped (no theano_ocl start-up hook, no Scan '
                                       'fallback)' if args.plain_c else '')
                                    + (', tests named %s left out' % ', '.join(
                                        '`%s`' % n for n in args.exclude)
                                       if args.exclude else ''), meta['machine'],
                                    meta['theano'], meta['floatX'], meta['device'], elapsed,
                                    note))
    cols = ('Counts are passed / failed / errors / skipped as reported by nose; times are the '
            'wall time of the module\'s interpreter, compilation included (they depend on how '
            'warm the Theano compiledir is and on other processes sharing it). '
            '"on device" = (device + meta) / all Apply nodes linked by the OCL linker.')
    body = details_markdown(details, with_tb=not args.no_tb)
    print(head + '\n\n' + cols + '\n\n' + table + '\n' + body + '\n')
    if args.write_docs:
        key = '%s-%s-%s' % (args.group, 'quick' if args.quick else 'full', '+'.join(modes))
        if args.plain_c:
            key += '-plain'
        if args.exclude:
            key += '-x-' + '-'.join(re.sub(r'[^A-Za-z0-9_]', '', n) for n in args.exclude)
        if args.only:
            key += '-k-' + '-'.join(re.sub(r'[^A-Za-z0-9_]', '', k) for k in args.only)
        doc_body = details_markdown(details, with_tb=False)
        write_docs(key, '### %s\n\n%s\n\n%s\n\n%s\n%s' % (
            key, head, cols, table, doc_body))
        log('wrote %s (section %s)' % (DOCS_FILE, key))
    if args.json:
        dump = dict(meta=meta, modes=modes, group=args.group, quick=args.quick,
                    plain_c=args.plain_c, exclude=args.exclude,
                    only=args.only, elapsed=elapsed, modules=collections.OrderedDict())
        for module, by_mode in rows:
            dump['modules'][module] = {
                m: dict(wall=r.wall, rc=r.rc, notes=r.notes, flaky=r.flaky,
                        stats=(dict(r.stats, fallback_ops=dict(r.stats['fallback_ops']))
                               if r.stats else None),
                        tests=r.tests) for m, r in by_mode.items()}
        with open(args.json, 'w') as fh:
            json.dump(dump, fh, indent=1)
    crashed = any(r.notes for _, by_mode in rows for r in by_mode.values())
    if tmp:
        if args.keep or n_reg or crashed:
            log('logs and XML kept in %s' % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print('conformance: %d passed, %d failed' % (n_pass, n_reg))
    return 1 if n_reg else 0

if __name__ == '__main__':
    sys.exit(main())
