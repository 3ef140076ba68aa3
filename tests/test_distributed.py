"""theano_ocl.distributed: collectives and data-parallel training over MPI, on CPU devices.

Each test starts ``mpirun -n 2 --oversubscribe`` (and, for the reference, one plain
process) on ``tests/distributed_worker.py`` as a subprocess under a time bound. Skipped
where mpi4py or an MPI launcher is missing (``scripts/bootstrap.sh`` installs them where it
can). The in-process tests need neither: without MPI the world is one rank.
"""
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(REPO, 'tests', 'distributed_worker.py')
RANKS = 2
BATCH = 8
#: the bound on one launch: a hang fails the test, it does not stall the suite
TIMEOUT = 150
#: how soon the job must end once a rank has failed (the launcher's start and Theano's
#: import take most of it)
FAIL_BOUND = 60


def _launcher():
    for name in ('mpirun', 'mpiexec'):
        path = shutil.which(name) or os.path.join(os.path.dirname(sys.executable), name)
        if os.path.exists(path):
            return path
    return None


def _have_mpi4py():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


needs_mpi = pytest.mark.skipif(
    not (_have_mpi4py() and _launcher()),
    reason='needs mpi4py and mpirun/mpiexec (scripts/bootstrap.sh, or: apt-get install '
           'openmpi-bin libopenmpi-dev; pip install mpi4py)')


def _env():
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(p for p in (REPO, env.get('PYTHONPATH')) if p)
    env['THEANO_FLAGS'] = ','.join(f for f in (env.get('THEANO_FLAGS'), 'floatX=float32') if f)
    # Open MPI refuses to start as root without these (CI runs as root)
    env.setdefault('OMPI_ALLOW_RUN_AS_ROOT', '1')
    env.setdefault('OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1')
    env.pop('THEANO_OCL_DEVICE', None)
    return env


def _run(args, ranks=None, timeout=TIMEOUT):
    """Run the worker (under the launcher with ``ranks``); (returncode, output, seconds)."""
    cmd = [sys.executable, WORKER] + list(args)
    if ranks:
        launcher = _launcher()
        extra = ['--oversubscribe'] if 'mpich' not in _library() else []
        cmd = [launcher, '-n', str(ranks)] + extra + cmd
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired as e:
        pytest.fail('%s did not end within %d s (hung?):\n%s' % (
            ' '.join(cmd), timeout, (e.output or b'').decode(errors='replace')[-4000:]))
    return p.returncode, p.stdout.decode(errors='replace'), time.time() - t0


def _library():
    from mpi4py import MPI
    return MPI.Get_library_version().lower()


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    """Final parameters of every case: (RANKS ranks of BATCH, one process of RANKS*BATCH)."""
    d = tmp_path_factory.mktemp('dist')
    runs = []
    for ranks, batch, name in ((RANKS, BATCH, 'ranks.npz'), (None, RANKS * BATCH, 'one.npz')):
        rc, out, _ = _run(['train', str(d / name), str(batch)], ranks)
        assert rc == 0, out[-6000:]
        runs.append(dict(np.load(str(d / name))))
    return runs


CASES = [(rule, how) for rule in ('adam', 'sgd_momentum')
         for how in ('OCL', 'OCL-staged', 'FAST_RUN', 'run_steps')]


@needs_mpi
@pytest.mark.parametrize('rule,how', CASES)
def test_k_ranks_reach_what_one_process_reaches_with_k_times_the_batch(trained, rule, how):
    ranks, one = trained
    prefix = '%s/%s/' % (rule, how)
    keys = sorted(k for k in one if k.startswith(prefix))
    assert keys, 'no parameters recorded for %s' % prefix
    for k in keys:
        np.testing.assert_allclose(ranks[k], one[k], rtol=1e-4, atol=1e-5, err_msg=k)
        # and the case agrees with Theano C's (the same graph on the host)
        theano_c = one[k.replace(prefix, '%s/FAST_RUN/' % rule)]
        np.testing.assert_allclose(one[k], theano_c, rtol=1e-4, atol=1e-5, err_msg=k)


@needs_mpi
@pytest.mark.parametrize('how', ['raise', 'die'])
def test_a_failing_rank_ends_the_job(how):
    rc, out, seconds = _run(['fail', how], RANKS, timeout=FAIL_BOUND + 30)
    assert rc != 0, out[-4000:]
    assert seconds < FAIL_BOUND, 'the job took %.0f s to end:\n%s' % (seconds, out[-4000:])
    assert 'the collective returned' not in out, out[-4000:]
    if how == 'raise':
        assert 'rank 1 fails on purpose' in out, out[-4000:]
        assert 'aborting every rank' in out, out[-4000:]


@needs_mpi
def test_collectives_of_every_dtype_agree_with_numpy_on_every_rank():
    # float16 too (MPI has no half type: exchanged as float32 and rounded once), under
    # Theano C and both device paths
    rc, out, seconds = _run(['dtypes'], RANKS, timeout=TIMEOUT)
    assert rc == 0, out[-4000:]
    assert out.count('every dtype agrees') == RANKS, out[-4000:]


@needs_mpi
def test_a_shape_mismatch_names_the_tensor_and_every_rank():
    rc, out, seconds = _run(['fail', 'mismatch'], RANKS, timeout=FAIL_BOUND + 30)
    assert rc != 0, out[-4000:]
    assert 'CollectiveMismatch' in out and "collective on 'x'" in out, out[-4000:]
    assert "rank 0: 'x' (4,) float32" in out and "rank 1: 'x' (5,) float32" in out, out[-4000:]


@needs_mpi
@pytest.mark.parametrize('path', ['mapped', 'staged'])
def test_a_caught_mismatch_commits_nothing_on_any_rank(path):
    rc, out, _ = _run(['caught', path], RANKS, timeout=FAIL_BOUND + 30)
    assert rc == 0, out[-4000:]
    assert out.count('all or nothing on every rank') == RANKS, out[-4000:]


@needs_mpi
def test_a_call_does_not_wait_for_its_exchanges_and_reads_see_their_result():
    rc, out, _ = _run(['deferred'], RANKS, timeout=TIMEOUT)
    assert rc == 0, out[-4000:]
    assert out.count('the call returned before its exchanges, with their result') == RANKS, \
        out[-4000:]


@needs_mpi
def test_an_exchange_failing_after_its_call_returned_ends_the_job():
    rc, out, _ = _run(['deferred', 'fail'], RANKS, timeout=2 * FAIL_BOUND + 30)
    ended = time.time()
    assert rc != 0, out[-4000:]
    failed = re.search(r'rank 1 fails at ([0-9.]+)', out)
    assert failed, out[-4000:]
    # (timed from the failure: before it, the ranks import Theano and compile a step)
    assert ended - float(failed.group(1)) < FAIL_BOUND, \
        'the job took %.0f s to end after the failure:\n%s' % (
            ended - float(failed.group(1)), out[-4000:])
    assert 'rank 1: an exchange failed after its call had returned' in out, out[-4000:]
    assert 'fails on purpose after its call returned' in out, out[-4000:]
    assert 'with their result' not in out, out[-4000:]


# ---- one process, no launcher: the world is one rank ----------------------------------------

@pytest.mark.parametrize('staged', [False, True], ids=['mapped', 'staged'])
def test_one_rank_collectives_are_the_identity_under_c_and_ocl(monkeypatch, staged):
    """Both device paths: buffers mapped (a CPU device) and staged through a page-locked
    block (a GPU's, taken here on the CPU device by hiding its shared memory)."""
    import theano
    import theano.tensor as T
    import theano_ocl
    import theano_ocl.distributed as dist
    from helpers import assert_matches_c
    x = T.matrix('x')
    v = np.arange(12.).reshape(3, 4).astype(x.dtype)
    if dist.size() != 1:
        pytest.skip('started under an MPI launcher')
    if staged:
        monkeypatch.setattr(theano_ocl.get_device(), 'unified_memory', False)
    elif not theano_ocl.get_device().unified_memory:
        pytest.skip('the device does not share memory with the host: staging is its path')
    outs = [dist.allreduce(x, 'sum'), dist.allreduce(x * 2, 'mean'),
            dist.allreduce(x, 'max'), dist.broadcast(x.T, 0)]
    f = assert_matches_c([x], outs, [v])
    impls = [impl for node, where, impl in theano_ocl.placements(f)
             if type(node.op).__name__ in ('AllReduce', 'Broadcast')]
    assert len(impls) == 4 and all(('staged' if staged else 'mapped') in i for i in impls), impls
    got = f(v)
    for g, want in zip(got, [v, 2 * v, v, v.T]):
        np.testing.assert_array_equal(g, want)
    assert theano.grad(outs[1].sum(), x) is not None


def test_buckets_group_small_gradients_in_reverse_and_keep_large_ones_alone():
    import theano
    from theano_ocl.distributed import buckets
    shapes = [(1000, 1000), (1000,), (1000, 10), (10,)]
    grads = [theano.shared(np.zeros(s, 'float32')) for s in shapes]
    sizes = [int(np.prod(s)) for s in shapes]
    assert buckets(grads, 1 << 20, sizes) == [[3, 2, 1], [0]]
    assert buckets(grads, 1, sizes) == [[3], [2], [1], [0]]
    # sizes unknown (a shared variable's shape is symbolic): each one alone
    assert buckets(grads, 1 << 20) == [[3], [2], [1], [0]]


def test_core_share_gives_every_local_rank_its_own_cores():
    from theano_ocl.distributed.world import core_share
    assert [core_share(r, 2, [0, 1]) for r in range(2)] == [[0], [1]]
    assert [core_share(r, 3, range(8)) for r in range(3)] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert [core_share(r, 4, [0, 1]) for r in range(4)] == [[0], [1], [0], [1]]


def _mlp_step(mode):
    """A 2-layer network's SGD step with its gradients averaged (data_parallel_updates),
    compiled under ``mode``; (function, parameters)."""
    import theano
    import theano.tensor as T
    import theano_ocl.distributed as dist
    rng = np.random.RandomState(7)
    x, y = T.matrix('x'), T.ivector('y')
    params = [theano.shared(rng.uniform(-.1, .1, s).astype(x.dtype), name=n)
              for s, n in (((6, 5), 'W1'), ((5,), 'b1'), ((5, 3), 'W2'), ((3,), 'b2'))]
    h = T.tanh(T.dot(x, params[0]) + params[1])
    p = T.nnet.softmax(T.dot(h, params[2]) + params[3])
    cost = T.nnet.categorical_crossentropy(p, y).mean()
    updates = dist.data_parallel_updates(
        cost, params, lambda g, ps: [(q, q - 0.5 * d) for q, d in zip(ps, g)],
        bucket_bytes=64)
    return theano.function([x, y], cost, updates=updates, mode=mode), params


@pytest.fixture
def staged_batches(monkeypatch):
    """One rank, the collectives on the GPU path (staged, overlapped until their Waits) on
    the CPU device by hiding its shared memory; 3 random batches (xs, ys) of 4 samples."""
    import theano_ocl
    import theano_ocl.distributed as dist
    if dist.size() != 1:
        pytest.skip('started under an MPI launcher')
    monkeypatch.setattr(theano_ocl.get_device(), 'unified_memory', False)
    rng = np.random.RandomState(3)
    return rng.rand(3, 4, 6).astype('float32'), rng.randint(0, 3, size=(3, 4)).astype('int32')


@pytest.mark.parametrize('fail_at', [None, 0, 1, 2])
def test_overlapped_exchanges_match_c_and_a_failed_one_commits_nothing(monkeypatch, fail_at,
                                                                       staged_batches):
    """The GPU path (staged, overlapped until each Wait), on the CPU device by hiding its
    shared memory, one rank: the AllReduces run before work that does not need them and
    their Waits after it; three steps equal Theano C's; an exchange that fails (the
    ``fail_at``-th of a call) raises from the call, which commits no update, and the next
    call takes the step."""
    import theano_ocl
    from theano_ocl.distributed import collectives
    xs, ys = staged_batches
    f_c, p_c = _mlp_step('FAST_RUN')
    f_o, p_o = _mlp_step('OCL')
    places = theano_ocl.placements(f_o)
    order = [node for node, _, _ in places]
    starts = [i for i, n in enumerate(order) if type(n.op).__name__ == 'AllReduce']
    assert len(starts) >= 2, [type(n.op).__name__ for n in order]
    for i in starts:
        assert 'overlapped' in places[i][2], places[i]
        j = next(j for j, n in enumerate(order) if type(n.op).__name__ == 'Wait' and
                 n.inputs[0] is order[i].outputs[0])
        between = [type(n.op).__name__ for n in order[i + 1:j]]
        assert any(b not in ('AllReduce', 'Wait') for b in between), between
    # the earliest exchange starts before the backward pass is over
    assert starts[0] < max(i for i, n in enumerate(order)
                           if type(n.op).__name__ not in ('AllReduce', 'Wait')) - 1
    real = collectives.reduce_into
    calls = []
    armed = []

    def failing(src, dst, op, name, check=True):
        calls.append(name)
        if armed and len(calls) == fail_at + 1:
            raise RuntimeError('exchange %d fails on purpose' % fail_at)
        return real(src, dst, op, name, check)
    from theano_ocl.ops import collective
    monkeypatch.setattr(collective, 'reduce_into', failing)
    for s in range(3):
        before = [p.get_value() for p in p_o]
        if s == 1 and fail_at is not None:
            calls[:] = []
            armed.append(True)
            with pytest.raises(RuntimeError, match='fails on purpose'):
                f_o(xs[s], ys[s])
            armed[:] = []
            assert len(calls) > fail_at
            for p, b in zip(p_o, before):
                np.testing.assert_array_equal(p.get_value(), b, err_msg=p.name)
        want = f_c(xs[s], ys[s])
        got = f_o(xs[s], ys[s])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        for a, b in zip(p_o, p_c):
            np.testing.assert_allclose(a.get_value(), b.get_value(), rtol=1e-5, atol=1e-6,
                                       err_msg=a.name)


def test_overlapped_exchanges_in_run_steps_agree_with_calls(staged_batches):
    """The same overlapped step (the GPU path on the CPU device, one rank) run by
    ``SimulatorOCL.run_steps`` takes the steps that plain calls take: the parameters after
    each of 3 steps (run 1, 2, 3 steps from the same start) equal those of the calls."""
    import theano_ocl
    xs, ys = staged_batches
    f_o, p_o = _mlp_step('OCL')
    start = [p.get_value() for p in p_o]
    after_calls = []
    for s in range(3):
        f_o(xs[s], ys[s])
        after_calls.append([p.get_value() for p in p_o])
    f_c, p_c = _mlp_step('FAST_RUN')          # relinked by the simulator
    sim = theano_ocl.SimulatorOCL(f_c)
    for n in (1, 2, 3):
        for p, v in zip(p_c, start):
            p.set_value(v)
        sim.run_steps(n, inputs={'x': xs[:n], 'y': ys[:n]})
        sim.sync_to_theano()
        for p, want in zip(p_c, after_calls[n - 1]):
            np.testing.assert_allclose(p.get_value(), want, rtol=1e-6, atol=1e-7,
                                       err_msg='%s after %d steps' % (p.name, n))
    impls = [impl for node, _, impl in theano_ocl.placements(sim.function)
             if type(node.op).__name__ == 'AllReduce']
    assert impls and all('overlapped' in i for i in impls), impls
