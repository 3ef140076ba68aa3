"""pytest set-up shared by tests/: import the checkout's theano_ocl, nothing heavy.

* The repository root goes first on ``sys.path`` so ``import theano_ocl`` is this
  checkout even when another copy is installed in the environment.
* ``THEANO_FLAGS`` is left as the caller set it (Theano's default floatX=float64 stays).
* Nothing here imports theano, numpy or pyopencl.
* ``THEANO_OCL_TUNE`` defaults to ``off``: the suite tests the built-in GEMM choices, and
  never waits for a first-use tuning on a GPU (``tests/test_gemm_tune.py`` sets its own).
* Under pytest-xdist with ``THEANO_OCL_TEST_WORKER_COMPILEDIR=DIR`` each worker compiles
  Theano's C code into ``DIR/<worker>`` (workers do not wait on one compiledir's lock).
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if sys.path[:1] != [REPO]:
    sys.path.insert(0, REPO)

os.environ.setdefault('THEANO_OCL_TUNE', 'off')
# the tests check the device's kernels against Theano C on small values, which the CPU
# device's cost model (runtime/cost.py) would hand to Theano's VM: off here, and on in
# tests/test_cost_model.py, which checks the choice itself
os.environ.setdefault('THEANO_OCL_COST_MODEL', 'off')

_worker = os.environ.get('PYTEST_XDIST_WORKER')
_per_worker = os.environ.get('THEANO_OCL_TEST_WORKER_COMPILEDIR')
if _worker and _per_worker and 'theano' not in sys.modules:
    os.environ['THEANO_FLAGS'] = ','.join(
        f for f in (os.environ.get('THEANO_FLAGS', ''),
                    'base_compiledir=%s' % os.path.join(_per_worker, _worker)) if f)


# ``THEANO_OCL_TEST_TIMES=DIR``: every test's duration (setup, call and teardown) is
# appended, as it finishes, to DIR/<worker>.tsv -- a run stopped by a time limit (a device
# call) still tells which tests took its time, where ``--durations`` prints nothing
_times = os.environ.get('THEANO_OCL_TEST_TIMES')
if _times:
    def pytest_runtest_logreport(report):
        if getattr(report, 'node', None) is not None:
            return      # (a worker's report relayed to pytest-xdist's controller)
        os.makedirs(_times, exist_ok=True)
        with open(os.path.join(_times, '%s.tsv' % (_worker or 'main')), 'a') as fh:
            fh.write('%.2f\t%s\t%s\t%s\n' % (report.duration, report.when, report.outcome,
                                             report.nodeid))


# ``THEANO_OCL_TEST_ORDER=FILE`` (lines "seconds<TAB>test id", setup, call and teardown
# together: tests/durations_h200.tsv, the tests of 3 s or more in an H200 call of 2026-11-29
# at 24 workers, scripts/device_suite.sh; tests/durations_cpu.tsv, those of 2 s or more in
# make test's 2 workers on the 2-core CPU, 2026-11-30, warm compile directories): the longest tests
# first, the others after them in their order, so that pytest-xdist's workers end
# together instead of waiting on a long test sent last
_order = os.environ.get('THEANO_OCL_TEST_ORDER')
if _order:
    def pytest_collection_modifyitems(session, config, items):
        seconds = {}
        with open(_order) as fh:
            for line in fh:
                t, _, nodeid = line.rstrip('\n').partition('\t')
                seconds[nodeid] = float(t)
        items.sort(key=lambda item: -seconds.get(item.nodeid, 0.0))
