"""planner.plan_steps: batched and unbatched replays of a frame give the same values."""
import numpy as np
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl import planner
from theano_ocl.vm import Step, download
from helpers import assert_close, rand


def _frame(inputs, outputs, values):
    f = theano.function(inputs, outputs, mode=theano_ocl.OCLMode())
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


def test_independent_same_expression_ops_merge():
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


def test_mixed_kernels_broadcast_strided_and_float64():
    rng = np.random.RandomState(3)
    ms = [T.dmatrix('m%d' % k) for k in range(5)]
    rows = [T.drow('r%d' % k) for k in range(5)]
    outs = [T.exp(m) * r for m, r in zip(ms, rows)] + [m.T + 1 for m in ms] + \
        [T.sqr(m) - r for m, r in zip(ms, rows)]
    vals = [rand((2 + k, 4 + k), 'float64', rng) for k in range(5)] + \
        [rand((1, 4 + k), 'float64', rng) for k in range(5)]
    _assert_same_results(ms + rows, outs, vals)


def test_many_ops_chunked_by_parameter_limit():
    xs = [T.fvector('x%d' % k) for k in range(40)]
    outs = [x * x for x in xs]
    vals = [rand((k + 2,), 'float32', np.random.RandomState(k)) for k in range(40)]
    plan = _assert_same_results(xs, outs, vals, against_c=False)
    assert plan.n_launches_after == 2      # 32 operand sets fit in one launch's arguments


def test_schedule_respects_barriers_and_conflicts():
    log = []

    def mk(name, kind='launch'):
        return Step(lambda: log.append(name), 0, kind)
    steps = [mk('a'), mk('h', 'host'), mk('b')]
    ops = [planner.analyse(i, s) for i, s in enumerate(steps)]
    groups = planner.schedule(ops)
    for g in groups:
        for o in g:
            o.step.fn()
    assert log == ['a', 'h', 'b']
