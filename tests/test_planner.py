"""planner.plan_steps: batched and unbatched replays of a frame give the same values."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import planner
from theano_ocl.runtime.memory import download
from theano_ocl.runtime.plans import Enqueue, HostStep, whole_groups
from helpers import assert_close, rand, setting


def _frame(inputs, outputs, values):
    """The function and its last frame: the steps, buffers and values ``plan_steps`` (the
    unit under test) takes, which no public number holds. (``merge=False``: the frame's
    launches as recorded, none merged once it is built: ``plan_steps`` is what is tested.)"""
    f = theano.function(inputs, outputs, mode=theano_ocl.OCLMode(merge=False))
    f(*values)
    return f, f.fn.last_frame


def _outputs(f, frame):
    vm = f.fn
    return [download(vm.dev, vm.queue, frame.dvals[v]) if frame.dvals[v].is_c_contiguous()
            else None for v in vm.program.fgraph.outputs]


def _assert_same_results(inputs, outputs, values, expect_fewer=True, against_c=True):
    f, frame = _frame(inputs, outputs, values)
    vm = f.fn
    want = _outputs(f, frame)
    for o in _outputs(f, frame):
        assert o is not None
    # clobber outputs, then replay the batched plan
    for v in vm.program.fgraph.outputs:
        d = frame.dvals[v]
        vm.dev.cl.enqueue_copy(vm.queue, d.root.buf, np.full(d.shape, 99, d.dtype),
                               dst_offset=d.offset, is_blocking=True)
    plan = planner.plan_steps(frame.steps, vm.dev, vm.queue)
    assert plan.valid()
    for c, v in zip(f.input_storage, values):     # the frame's uploads read the input cells
        c.storage[0] = v
    plan.run()
    got = _outputs(f, frame)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, what='output %d' % k)
    if against_c:
        c_out = theano.function(inputs, outputs, mode='FAST_RUN')(*values)
        for k, (g, w) in enumerate(zip(got, c_out)):
            assert_close(g, w, what='output %d vs C' % k)
    before = sum(1 for s in frame.steps if s.kind in ('launch', 'copy'))
    assert plan.n_launches_before == before
    if expect_fewer:
        assert plan.n_launches_after < before, (plan.n_launches_after, before)
    return plan


#: CPU devices: 0 = chunked work-items, 64 = the default (work-groups of one operation when
#: operations average >= 16 elements), 4 = tiny work-groups (several per operation, ragged
#: ends); GPUs take one element per work-item whatever the value
CPU_GROUPS = pytest.mark.parametrize('cpu_group', [0, 4, 64], indirect=True)


@pytest.fixture
def cpu_group(request, monkeypatch):
    setting(monkeypatch, 'cpu_group', request.param)
    return request.param


@CPU_GROUPS
def test_independent_same_expression_ops_merge(cpu_group):
    xs = [T.fvector('x%d' % k) for k in range(12)]
    outs = [T.tanh(x) * 2 + 1 for x in xs]
    vals = [rand((3 + 5 * k,), 'float32', np.random.RandomState(k)) for k in range(12)]
    plan = _assert_same_results(xs, outs, vals)
    assert plan.n_launches_after == 1


def test_chain_is_not_merged_across_dependency():
    x = T.fvector('x')
    ys = [x]
    for k in range(4):
        ys.append(T.tanh(ys[-1]) * 2 + 1)       # each reads the previous one's output
    plan = _assert_same_results([x], ys[1:], [rand((50,), 'float32')], expect_fewer=False)
    assert plan.n_launches_after == plan.n_launches_before


@CPU_GROUPS
def test_mixed_kernels_broadcast_strided_and_float64(cpu_group):
    rng = np.random.RandomState(3)
    ms = [T.dmatrix('m%d' % k) for k in range(5)]
    rows = [T.drow('r%d' % k) for k in range(5)]
    outs = [T.exp(m) * r for m, r in zip(ms, rows)] + [m.T + 1 for m in ms] + \
        [T.sqr(m) - r for m, r in zip(ms, rows)]
    vals = [rand((2 + k, 4 + k), 'float64', rng) for k in range(5)] + \
        [rand((1, 4 + k), 'float64', rng) for k in range(5)]
    _assert_same_results(ms + rows, outs, vals)


def test_many_ops_chunked_by_parameter_limit():
    n = 300
    xs = [T.fvector('x%d' % k) for k in range(n)]
    outs = [x * x for x in xs]
    vals = [rand((k % 7 + 2,), 'float32', np.random.RandomState(k)) for k in range(n)]
    plan = _assert_same_results(xs, outs, vals, against_c=False)
    f, frame = _frame(xs, outs, vals)
    key = [planner.analyse(i, s) for i, s in enumerate(frame.steps) if s.kind == 'launch'][0].key
    # operand sets that fit one launch's arguments
    per_launch = planner.max_batch(theano_ocl.stats(f)['device'], key)
    assert per_launch < n
    assert plan.n_launches_after == -(-n // per_launch)


@CPU_GROUPS
def test_half_integer_strided_and_larger_operations(cpu_group):
    # float16 storage, signed and unsigned integers, negative-stride and sliced views,
    # operations from 1 to ~300 elements (whole, partial and several work-groups each)
    rng = np.random.RandomState(5)
    hs = [T.vector('h%d' % k, dtype='float16') for k in range(4)]
    ins = [T.vector('i%d' % k, dtype='int32') for k in range(4)]
    us = [T.vector('u%d' % k, dtype='uint8') for k in range(4)]
    ms = [T.fmatrix('m%d' % k) for k in range(4)]
    outs = [T.exp(h[::-1]) * h for h in hs] + [(i // 3) * i[::2].sum() - i for i in ins] + \
        [u[1::2] + u[::2] for u in us] + [T.tanh(m[:, ::-2]) + m[:, 1].dimshuffle(0, 'x') for m in ms]
    sizes = [1, 37, 130, 301]
    vals = [rand((n,), 'float16', rng) for n in sizes] + \
        [rng.randint(-1000, 1000, n).astype('int32') for n in sizes] + \
        [rng.randint(0, 255, 2 * n).astype('uint8') for n in sizes] + \
        [rand((n, 7), 'float32', rng) for n in sizes]
    _assert_same_results(hs + ins + us + ms, outs, vals)


@pytest.mark.parametrize('cpu_group', [4, 64], indirect=True)
def test_operations_of_whole_groups_merge(cpu_group):
    # sizes with a common divisor near the work-group size: on CPU devices every
    # operation is whole work-groups (runtime.plans.whole_groups), so the kernel tests no bounds
    xs = [T.fvector('x%d' % k) for k in range(6)]
    outs = [T.exp(x) * x - T.tanh(x) for x in xs]
    sizes = [50, 100, 150, 300, 50, 1000]
    vals = [rand((n,), 'float32', np.random.RandomState(n + k)) for k, n in enumerate(sizes)]
    plan = _assert_same_results(xs, outs, vals)
    assert plan.n_launches_after == 1
    assert whole_groups(sizes, cpu_group)[1]


def test_whole_groups_divide_every_size():
    for sizes, L in [([50, 100, 150], 64), ([128, 256], 64), ([100], 64), ([3, 7], 64),
                     ([64 * 7, 64 * 3], 64), ([96, 160], 64), ([50, 100], 4), ([1000], 64)]:
        g, whole = whole_groups(sizes, L)
        if whole:
            assert all(n % g == 0 for n in sizes) and L // 2 <= g <= 2 * L, (sizes, g)
        else:
            assert g == L and not any(all(n % d == 0 for n in sizes)
                                      for d in range(L // 2, 2 * L + 1)), (sizes, g)
    assert whole_groups([128, 256], 64) == (64, True)
    assert whole_groups([3, 7], 64) == (64, False)


def test_schedule_respects_barriers_and_conflicts():
    log = []

    def mk(name, kind='launch'):
        # launches that declare nothing (library calls) and host steps are barriers
        return (Enqueue if kind == 'launch' else HostStep)(lambda: log.append(name), 0)
    steps = [mk('a'), mk('h', 'host'), mk('b')]
    ops = [planner.analyse(i, s) for i, s in enumerate(steps)]
    groups = planner.schedule(ops)
    for g in groups:
        for o in g:
            o.step.fn()
    assert log == ['a', 'h', 'b']


@CPU_GROUPS
def test_small_products_merge(cpu_group):
    # Nengo-style encoders and decoders: many independent tiny matrix-vector products
    # (ops/gemm_small.py) run as one batched launch per kind, with alpha/beta per product.
    rng = np.random.RandomState(3)
    n = 9
    shapes = [(k + 3, k % 4 + 1) for k in range(n)]
    As = [T.fmatrix('A%d' % k) for k in range(n)]
    xs = [T.fvector('x%d' % k) for k in range(n)]
    zs = [T.fvector('z%d' % k) for k in range(n)]
    ys = [T.fvector('y%d' % k) for k in range(n)]
    outs = [T.dot(A, x) for A, x in zip(As, xs)]
    outs += [np.float32(0.25 + k) * y + np.float32(0.5 - k) * T.dot(A.T, z)
             for k, (A, z, y) in enumerate(zip(As, zs, ys))]
    vals = [rand(s, 'float32', rng) for s in shapes]
    vals += [rand((c,), 'float32', rng) for r, c in shapes]
    vals += [rand((r,), 'float32', rng) for r, c in shapes]
    vals += [rand((c,), 'float32', rng) for r, c in shapes]
    ins = As + xs + zs + ys
    f, frame = _frame(ins, outs, vals)
    kinds = [s.batch.family for s in frame.steps if getattr(s, 'batch', None) is not None]
    assert kinds.count('gemm_small') >= 2 * n, kinds
    plan = _assert_same_results(ins, outs, vals)
    assert plan.n_launches_after <= plan.n_launches_before - (2 * n - 4)


def test_one_step_calls_use_a_batched_plan_when_hot():
    # mode='OCL' without the simulator: after a few replays a frame with many independent
    # same-kernel launches runs its batched plan; every call still matches Theano C.
    n = 24
    xs = [T.fvector('x%d' % k) for k in range(n)]
    outs = [T.tanh(x) * x + 1 for x in xs]
    f = theano.function(xs, outs, mode='OCL')
    g = theano.function(xs, outs, mode='FAST_RUN')
    rng = np.random.RandomState(0)
    for call in range(6):
        vals = [rand((k + 2,), 'float32', rng) for k in range(n)]
        for k, (a, b) in enumerate(zip(f(*vals), g(*vals))):
            assert_close(a, b, what='call %d output %d' % (call, k))
    counts = theano_ocl.stats(f)
    assert counts['batched_launches'] * 4 <= counts['launches'], counts


@pytest.mark.parametrize('as_gpu', [True, False])
def test_a_batched_plan_pays_on_gpus_for_any_launch_it_saves(monkeypatch, as_gpu):
    """The rule of ``BatchedPlan.pays``: on CPU devices a quarter of the launches, on GPUs
    and for a loop's step any. Then a frame whose batching saves fewer than a quarter (two
    merged launches beside a chain that cannot merge) replays it where the device is a
    GPU and not where it is a CPU device, with the values of Theano C either way. The
    device's kind is set for the test (``is_gpu``), so the rule is checked whatever the
    device running the suite is. The merged launches compute updates, not outputs: a
    call reads its outputs early and the batched plan emits their producers as soon as
    they can run (``planner.schedule``'s ``urgent``), which may leave nothing to merge."""
    plan = planner.BatchedPlan([], 36, 30, [], [])
    assert not plan.pays() and plan.pays(gpu=True) and plan.pays(looped=True)
    assert planner.BatchedPlan([], 8, 6, [], []).pays()
    assert not planner.BatchedPlan([], 8, 8, [], []).pays(gpu=True, looped=True)
    monkeypatch.setattr(theano_ocl.get_device(), 'is_gpu', as_gpu)
    x, y = T.fvector('x'), T.fvector('y')
    h = x
    for k in range(15):                 # a chain: one launch each, nothing to merge
        h = T.tanh(h * (0.5 + k) + 1)

    def build(mode):
        a = theano.shared(np.zeros(7, 'float32'), name='a')
        b = theano.shared(np.zeros(7, 'float32'), name='b')
        # two independent launches of one elementwise kernel: they merge
        upd = [(a, T.exp(y) * 2 + a), (b, T.exp(x) * 2 + b)]
        return theano.function([x, y], h, updates=upd, mode=mode), (a, b)
    # (merge=False: the two launches are left to the batched plan, not merged once built)
    f, ab_o = build(theano_ocl.OCLMode(fuse=False, merge=False).excluding('fusion'))
    g, ab_c = build('FAST_RUN')
    rng = np.random.RandomState(0)
    for call in range(8):
        vals = [rand((7,), 'float32', rng), rand((7,), 'float32', rng)]
        assert_close(f(*vals), g(*vals), what='call %d' % call)
    for so, sc in zip(ab_o, ab_c):
        assert_close(so.get_value(), sc.get_value(), what=so.name)
    counts = theano_ocl.stats(f)
    assert counts['launches'] >= 16, counts
    if as_gpu:
        # fewer launches, by well under a quarter: replayed batched on a GPU only
        assert counts['launches'] * 3 < counts['batched_launches'] * 4, counts
        assert counts['batched_launches'] < counts['launches'], counts
    else:
        assert counts['batched_launches'] == counts['launches'], counts


@CPU_GROUPS
def test_launches_writing_disjoint_slices_of_one_array_merge(cpu_group):
    """Updates of column slices of one matrix (a gradient of slices outside a loop) write
    bytes of interleaved spans but no common element (``darray.disjoint``): their launches
    of one kernel merge; slices that share columns stay in order. Against Theano C."""
    xs = [T.fmatrix('x%d' % k) for k in range(4)]

    def updates(cols):
        z = T.zeros((xs[0].shape[0], 9), dtype='float32')
        for x, (a, b) in zip(xs, cols):
            z = T.inc_subtensor(z[:, a:b], T.exp(x))
        return z
    rng = np.random.RandomState(7)
    vals = [rand((5, 3), 'float32', rng) for _ in xs]
    plan = _assert_same_results(xs[:3], [updates([(0, 3), (3, 6), (6, 9)])], vals[:3])
    assert plan.n_launches_after == 1, (plan.n_launches_before, plan.n_launches_after)
    plan = _assert_same_results(xs, [updates([(0, 3), (2, 5), (4, 7), (5, 8)])], vals,
                                expect_fewer=False)
    assert plan.n_launches_after == plan.n_launches_before


def test_urgent_steps_and_what_they_need_are_scheduled_as_soon_as_ready():
    """``schedule(ops, urgent)``: a batchable launch whose value a call reads early (and the
    launches it depends on) is emitted once ready, with the ready launches of its kernel,
    not held back behind non-batchable steps; without ``urgent`` it waits."""
    from theano_ocl.darray import DArray, Root
    arrays = {}

    def ops_of(specs):
        ops = []
        for i, (reads, writes, key) in enumerate(specs):
            o = planner.Op(i, None)
            for names, into in ((reads, o.reads), (writes, o.writes)):
                for n in names:
                    d = arrays.setdefault(n, DArray(Root(None, 32), (8,), 'float32'))
                    into.append(planner._span(d))
            o.key = key
            ops.append(o)
        return ops
    # 0: a -> b (elementwise E), 1: b -> loss (elementwise F), then two products (no key)
    # on a, and 4: c -> d (elementwise E): E's two launches merge if 0 waits for 4
    specs = [(['a'], ['b'], 'E'), (['b'], ['loss'], 'F'), (['a'], ['p'], None),
             (['p'], ['q'], None), (['c'], ['d'], 'E')]
    order = [[o.index for o in g] for g in planner.schedule(ops_of(specs))]
    assert order.index([1]) > order.index([3])          # the loss waited behind the products
    order = [[o.index for o in g] for g in planner.schedule(ops_of(specs), urgent={1})]
    assert order[:2] == [[0, 4], [1]]      # the loss's chain first, 0 still merged with 4
    assert sorted(i for g in order for i in g) == list(range(5))
