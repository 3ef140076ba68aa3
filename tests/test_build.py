"""The first call of an input signature builds its frame and runs it through the same
driver as a replay (``runtime/build.py``): the fault hook sees the same plan boundaries
(``step k``), an error at a plan names the same node, and the results are Theano C's,
with host nodes, an IfElse, a Scan and a shape-dependent Alloc in the graph."""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano import gof
from theano.ifelse import ifelse

import theano_ocl
from theano_ocl.runtime import faults

from helpers import assert_close, setting


class HostTwice(gof.Op):
    """2 x on the host (no device implementation, no C code): a host node whose output
    device nodes read."""
    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return gof.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0] * np.asarray(2, inputs[0].dtype)


def _host_in_the_middle():
    x = T.fvector('x')
    s = theano.shared(np.arange(3, dtype='f4'), 's')
    h = HostTwice()(T.tanh(x) + 1)
    return [x], [T.exp(h) * 2 + x, h.sum() + s.sum()], [(s, s + h[:3])]


def _an_ifelse():
    x = T.fvector('x')
    y = ifelse(T.gt(x.sum(), 0), T.tanh(x) * 2, T.exp(x) - 1)
    return [x], [y + 1, (y * x).sum()], []


def _a_scan():
    x = T.fvector('x')
    w = theano.shared(np.linspace(-0.5, 0.5, 9).astype('f4').reshape(3, 3), 'w')
    seq = T.tanh(x[:12].reshape((4, 3)))
    hs, _ = theano.scan(lambda xt, h: T.tanh(T.dot(h, w) + xt), sequences=seq,
                        outputs_info=T.zeros((3,), 'float32'))
    return [x], [hs * 2, hs[-1].sum() + x.sum()], []


def _a_shaped_alloc():
    x = T.fvector('x')
    z = T.alloc(T.cast(x.mean(), 'float32'), x.shape[0] // 2 + 1, 3)
    return [x], [(z * x[:3]).sum(axis=1), T.exp(z) + 1], []


GRAPHS = {'host node': _host_in_the_middle, 'ifelse': _an_ifelse, 'scan': _a_scan,
          'shaped alloc': _a_shaped_alloc}


def _compile(graph, **kwargs):
    """(Theano C function, OCL function), each over shared variables of its own."""
    fns = []
    for mode in ('FAST_RUN', theano_ocl.OCLMode()):
        inputs, outputs, updates = graph()
        fns.append(theano.function(inputs, outputs, updates=updates, mode=mode, **kwargs))
    return fns


def _x(n, sign=1):
    return (sign * (np.arange(n, dtype='f4') % 7 + 1) / 5).astype('f4')


def _logged(call):
    log = []
    with faults.injected(log.append):
        out = call()
    return [np.array(o, copy=True) for o in out], log


def _steps(log):
    return [w for w in log if w.startswith('step ')]


@pytest.mark.parametrize('name', sorted(GRAPHS))
def test_first_call_runs_the_replays_plans_through_the_driver(name, monkeypatch):
    # (merge off: replays would run merged launches where the first call ran them apart)
    setting(monkeypatch, 'merge', '0')
    f_c, f_o = _compile(GRAPHS[name])
    for n, sign in ((16, 1), (20, -1)):        # two keys (and the other IfElse branch)
        xv = _x(n, sign)
        first, log1 = _logged(lambda: f_o(xv))
        replay, log2 = _logged(lambda: f_o(xv))
        for k, (got, want) in enumerate(zip(first + replay, f_c(xv) + f_c(xv))):
            assert_close(got, want, what='%s, output %d' % (name, k % len(first)))
        assert _steps(log2), log2
        if name == 'scan':
            # the inner function's plans are 'step k' too, its first pass in the middle of
            # the outer frame's build: the same boundaries, not in the same order
            assert set(_steps(log1)) == set(_steps(log2)), (log1, log2)
        else:
            assert _steps(log1) == _steps(log2), (log1, log2)
        assert theano_ocl.stats(f_o)['replans'] == 0


@pytest.mark.parametrize('profile', [False, True])
def test_an_error_at_a_first_calls_plan_names_the_replays_node(profile):
    """A failure raised at the first call's boundary 'step k' names the node a failure at
    a replay's 'step k' names (Theano's 'Toposort index'); the call leaves the function
    usable and its state as it was."""
    f_c, f_o = _compile(_host_in_the_middle, profile=profile)
    topo = f_o.maker.fgraph.toposort()
    xv = _x(16)
    done = [xv, xv]                               # the calls that commit
    f_o(xv)
    steps = _steps(_logged(lambda: f_o(xv))[1])
    assert len(steps) > 3, steps
    named = set()
    for n, where in enumerate(steps):
        def fail_at(w):
            if w == where:
                raise ValueError('injected at %s' % w)
        positions = []
        for call in ('first', 'replay'):
            if call == 'replay':
                f_o(_x(17 + n))                   # planned, without failing
                done.append(_x(17 + n))
            with faults.injected(fail_at):
                with pytest.raises(ValueError, match='injected') as e:
                    f_o(_x(17 + n))
            positions.append([line for line in str(e.value).splitlines()
                              if line.startswith('Toposort index')])
        assert positions[0] == positions[1] and positions[0], (where, positions)
        named.add(positions[0][0])
    assert len(named) > 1, named                  # the plans of several nodes
    for v in done:
        f_c(v)
    for got, want in zip(f_o(xv), f_c(xv)):
        assert_close(got, want)


def test_a_profiled_first_call_times_the_nodes_a_replay_times():
    """The profiler times a build's plans as a replay's: every node a replay gives time
    to has time from the first call, each node counted once per call."""
    f_c, f_o = _compile(_host_in_the_middle, profile=True)
    xv = _x(16)
    prof = f_o.profile
    for got, want in zip(f_o(xv), f_c(xv)):
        assert_close(got, want)
    first = dict(prof.apply_time)
    assert set(prof.apply_callcount.values()) == {1}, prof.apply_callcount
    f_o(xv)
    replay = {n: t - first.get(n, 0.0) for n, t in prof.apply_time.items()}
    timed = {n for n, t in replay.items() if t > 0}
    assert timed and timed <= {n for n, t in first.items() if t > 0}, (first, replay)
    host = [n for n in first if isinstance(n.op, HostTwice)]
    assert host and first[host[0]] > 0
