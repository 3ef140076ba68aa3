"""A call reads its host outputs and error flags back as soon as their values are final
(``theano_ocl/runtime/early.py``): the copy is queued right after the last step writing the
value, not after the whole pass, and nothing else a caller sees changes."""
import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import faults, planner

from helpers import assert_close


class _Reads(object):
    """Wraps pyopencl's download primitive (``runtime.memory`` looks it up at every call):
    ``log`` gets ('read', nbytes) per download queued, interleaved with the executor's step
    boundaries ('step k') while a fault hook records them."""

    def __init__(self, monkeypatch):
        import pyopencl._cl as _cl
        self.log = []
        raw = _cl._enqueue_read_buffer

        def wrapped(queue, mem, hostbuf, *args, **kwargs):
            self.log.append(('read', np.asarray(hostbuf).nbytes))
            return raw(queue, mem, hostbuf, *args, **kwargs)
        monkeypatch.setattr(_cl, '_enqueue_read_buffer', wrapped)

    def record(self, call):
        del self.log[:]
        with faults.injected(self.log.append):
            out = call()
        return out, list(self.log)

    def count(self, call):
        del self.log[:]
        call()
        return sum(1 for e in self.log if isinstance(e, tuple))


def _is_step(e):
    """A step boundary of a pass: 'step k', or 'batched step k' in a batched plan."""
    return isinstance(e, str) and (e.startswith('step ') or e.startswith('batched step '))


def _steps(log):
    return [int(e.split()[-1]) for e in log if _is_step(e)]


def _step_before(log, nbytes):
    """The step boundary last seen before the first read of ``nbytes`` bytes."""
    last = None
    for e in log:
        if _is_step(e):
            last = int(e.split()[-1])
        elif e == ('read', nbytes):
            return last
    raise AssertionError('no read of %d bytes in %r' % (nbytes, log))


def _training_like(dtype, biases=True):
    """A loss from a forward pass, then a longer tail: the gradient products and updates
    of the parameters (as a training step's)."""
    rng = np.random.RandomState(3)
    x = T.matrix('x', dtype=dtype)
    W = theano.shared(rng.randn(6, 5).astype(dtype), 'W')
    V = theano.shared(rng.randn(5, 4).astype(dtype), 'V')
    params = [W, V]
    h = T.dot(x, W)
    if biases:
        params.append(theano.shared(rng.randn(5).astype(dtype), 'b'))
        h = h + params[-1]
    out = T.dot(T.tanh(h), V)
    if biases:
        params.append(theano.shared(rng.randn(4).astype(dtype), 'c'))
        out = out + params[-1]
    loss = T.mean(out ** 2)
    lr = np.asarray(0.1, dtype)
    updates = [(p, p - lr * g) for p, g in zip(params, T.grad(loss, params))]
    return x, [loss, out], updates, params, rng


@pytest.mark.parametrize('dtype,settings,biases', [
    ('float32', {}, True), ('float64', {}, True),
    # the GPU's paths (small products as batchable launches, their epilogues): the batched
    # plan must not hold the loss's last launch back behind the backward products
    ('float32', dict(blas='small', epilogues='always'), False)])
def test_outputs_are_read_where_they_are_final_and_match_theano_c(monkeypatch, dtype, settings,
                                                                  biases):
    """The loss and the forward output are read before the pass's last steps (the backward
    products, the updates); every call returns what Theano C returns, the parameters move
    as under Theano C, through the steps and the batched plan of later calls (``settings``:
    the products as kernels with their epilogues, as on GPUs, where the batched plan would
    otherwise put the loss's last launch behind every product)."""
    # the batched plan as on GPUs: any launch it saves pays (on PoCL a quarter must go)
    monkeypatch.setattr(planner.BatchedPlan, 'pays',
                        lambda self, looped=False, gpu=False:
                        self.n_launches_after < self.n_launches_before)
    x, outs, updates, params, rng = _training_like(dtype, biases)
    f_c = theano.function([x], outs, updates=updates, mode='FAST_RUN')
    # (batch_min_launches=2: a small function, batched all the same)
    f_o = theano.function([x], outs, updates=updates,
                          mode=theano_ocl.OCLMode(batch_min_launches=2, **settings))
    init = [p.get_value() for p in params]
    reads = _Reads(monkeypatch)
    xs = [rng.randn(7, 6).astype(dtype) for _ in range(6)]
    got = []
    for k, xv in enumerate(xs):
        out, log = reads.record(lambda: f_o(xv))
        got.append([np.array(o, copy=True) for o in out])
        steps = _steps(log)
        if k >= 1:          # the first call plans the frame (its steps run as recorded)
            assert steps, log
            last = max(steps)
            loss_at = _step_before(log, np.dtype(dtype).itemsize)
            out_at = _step_before(log, 7 * 4 * np.dtype(dtype).itemsize)
            assert loss_at is not None and loss_at < last, (k, log)
            assert out_at is not None and out_at < last, (k, log)
    counts = theano_ocl.stats(f_o)
    assert counts['batched_launches'] < counts['launches'], counts      # the batched path ran
    ocl_state = [p.get_value() for p in params]
    for p, v in zip(params, init):
        p.set_value(v)
    for xv, g in zip(xs, got):
        want = f_c(xv)
        for a, b in zip(g, want):
            assert_close(a, b, dtype)
    for a, p in zip(ocl_state, params):
        assert_close(a, p.get_value(), dtype, what=p.name)


def test_an_index_flag_is_read_where_it_is_set_and_a_bad_call_commits_nothing(monkeypatch):
    """An advanced index's range flag is read right after the kernel setting it, before the
    update's later steps; a call with an index out of range raises as Theano does and
    leaves the shared variable as it was; the next good call runs and commits."""
    rng = np.random.RandomState(5)
    v = T.vector('v', dtype='float32')
    i = T.lvector('i')
    S = theano.shared(rng.randn(8).astype('float32'), 'S')
    A = theano.shared(rng.randn(8, 8).astype('float32'), 'A')
    picked = v[i]
    new_S = T.tanh(T.dot(A, S)) + T.sum(picked)
    f = theano.function([v, i], T.sum(picked * 2), updates=[(S, new_S)],
                        mode=theano_ocl.OCLMode())
    g = theano.function([v, i], T.sum(picked * 2), updates=[(S, new_S)], mode='FAST_RUN')
    reads = _Reads(monkeypatch)
    vv = rng.randn(10).astype('float32')
    good = np.array([1, 4, 9, -2], 'int64')
    s0 = S.get_value()
    for _ in range(3):
        out, log = reads.record(lambda: f(vv, good))
    # the flag (its size is the family's business; the output is a 4-byte float32) is read
    # before the last step: right after the gather, before the product
    steps = _steps(log)
    early = [e for k, e in enumerate(log) if isinstance(e, tuple) and
             any(_is_step(b) for b in log[k + 1:])]
    assert steps and any(e[1] != 4 for e in early), log
    s_ocl = S.get_value()
    S.set_value(s0)
    for _ in range(3):
        want = g(vv, good)
    assert_close(out, want, 'float32')
    assert_close(s_ocl, S.get_value(), 'float32', what='S')
    before = s_ocl
    S.set_value(before)
    with pytest.raises(IndexError):
        f(vv, np.array([1, 10], 'int64'))
    np.testing.assert_array_equal(S.get_value(), before)
    f(vv, good)
    assert not np.array_equal(S.get_value(), before)


def test_the_passes_of_run_steps_read_nothing(monkeypatch):
    """``run_steps`` reads no output per pass (only its probes, once, at the end): the
    number of downloads does not grow with the number of steps."""
    rng = np.random.RandomState(7)
    u = T.vector('u', dtype='float32')
    s = theano.shared(rng.randn(16).astype('float32'), 's')
    W = theano.shared(rng.randn(16, 16).astype('float32') * 0.1, 'W')
    y = T.tanh(T.dot(W, s) + u.sum())
    f = theano.function([u], [y.sum(), y], updates=[(s, y)])
    sim = theano_ocl.SimulatorOCL(f)
    us = rng.randn(12, 3).astype('float32')
    sim.run_steps(2, inputs={'u': us[:2]})
    reads = _Reads(monkeypatch)
    few = reads.count(lambda: sim.run_steps(3, inputs={'u': us[:3]}, probes=[0]))
    many = reads.count(lambda: sim.run_steps(12, inputs={'u': us}, probes=[0]))
    assert many == few, (few, many)
