"""The one executor's n-pass form, ``OCLFunction.run`` (runtime/executor.py), against the
same function called n times under Theano C: per-step feeds from host or device arrays, a
state carried from an output into an input (what a device Scan needs), probes kept on the
device, and the requests it refuses."""
import numpy as np
import pyopencl.array as cla
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime.executor import RunStepsError

from helpers import assert_close


def _recurrence(dtype):
    x = T.vector('x', dtype=dtype)
    h = T.vector('h', dtype=dtype)
    a = np.asarray(0.9, dtype=dtype)
    h_new = T.tanh(h * a + x)
    return [x, h], [h_new, (h_new * h_new).sum()]


def _case(dtype, n, m, seed):
    """Per-step inputs, the initial state, Theano C's histories of h and y (the function
    called n times) and the OCL function."""
    rng = np.random.RandomState(seed)
    xs = rng.uniform(-1, 1, (n, m)).astype(dtype)
    h0 = rng.uniform(-1, 1, m).astype(dtype)
    inputs, outputs = _recurrence(dtype)
    f_c = theano.function(inputs, outputs, mode='FAST_RUN')
    hs, ys = [], []
    h = h0
    for x in xs:
        h, y = f_c(x, h)
        hs.append(h)
        ys.append(y)
    f_o = theano.function(inputs, outputs, mode=theano_ocl.OCLMode())
    return xs, h0, np.array(hs), np.array(ys), f_o


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('where', ['host', 'device'])
def test_run_with_carried_state_matches_theano_c(dtype, where):
    dev = theano_ocl.get_device()
    if dtype == 'float64' and not dev.has_fp64:
        pytest.skip('the device has no float64')
    n = 13
    xs, h0, want_h, want_y, f_o = _case(dtype, n, 37, 3)
    feed = xs if where == 'host' else cla.to_device(dev.queue, xs)
    stats = {}
    got_h, got_y = f_o.fn.run(n, feeds={0: feed}, probes=[0, 1], carry={1: (0, h0)},
                              probes_on=where, stats=stats)
    if where == 'device':
        assert isinstance(got_h, cla.Array)
        got_h, got_y = got_h.get(), got_y.get()
    assert stats['steps_done'] == n
    assert_close(got_h, want_h, what='h history')
    assert_close(got_y, want_y, what='y history')
    # the function is still an ordinary function afterwards
    assert_close(f_o(xs[0], h0)[0], want_h[0], what='a call after run')


def test_run_probe_every_and_zero_steps():
    n = 12
    xs, h0, want_h, _, f_o = _case('float32', n, 5, 4)
    got = f_o.fn.run(n, feeds={0: xs}, probes=[0], probe_every=4, carry={1: (0, h0)})[0]
    assert_close(got, want_h[3::4], what='every 4th h')
    empty = f_o.fn.run(0, feeds={0: xs[:0]}, probes=[0], carry={1: (0, h0)})
    assert len(empty) == 1 and empty[0].shape[0] == 0


def test_run_refuses_a_carry_that_does_not_fit():
    inputs, outputs = _recurrence('float32')
    f_o = theano.function(inputs, outputs, mode=theano_ocl.OCLMode())
    xs = np.zeros((3, 4), 'float32')
    with pytest.raises(RunStepsError, match='output 1 cannot carry into input 1'):
        f_o.fn.run(3, feeds={0: xs}, carry={1: (1, np.zeros(4, 'float32'))})
    with pytest.raises(RunStepsError, match='carry into input 0'):
        f_o.fn.run(3, feeds={0: xs}, carry={0: (0, np.zeros(4, 'float32'))})


@pytest.mark.parametrize('launch', ['native', 'pyopencl'])
def test_launch_paths_match_theano_c(launch, monkeypatch):
    """The native launch path (ctypes, no event: runtime/native.py) and pyopencl's give
    Theano C's results, in calls and in run's loop, and the setting picks the path."""
    from theano_ocl.runtime import native
    if launch == 'native' and not native.available():
        pytest.skip('no OpenCL ICD loader to call through ctypes')
    n = 9
    xs, h0, want_h, want_y, _ = _case('float32', n, 33, 5)
    inputs, outputs = _recurrence('float32')
    f_o = theano.function(inputs, outputs, mode=theano_ocl.OCLMode(launch=launch))
    built = []          # the kernel of each native launcher the call's plans made
    real = native.launcher
    monkeypatch.setattr(native, 'launcher', lambda queue, kernel, name, *a:
                        built.append(name) or real(queue, kernel, name, *a))
    got = f_o(xs[0], h0)
    monkeypatch.undo()
    assert_close(got[0], want_h[0], what='h after one call')
    kernels = [name for _, name, _ in theano_ocl.stats(f_o)['kernels']]
    # native: a launcher for each kernel the call launches (and for the launches that the
    # planner merged into one after building the frame); pyopencl: none
    assert kernels and (set(kernels) <= set(built) if launch == 'native' else not built), \
        (built, kernels)
    got_h, got_y = f_o.fn.run(n, feeds={0: xs}, probes=[0, 1], carry={1: (0, h0)},
                              batch=False)
    assert_close(got_h, want_h, what='h history')
    assert_close(got_y, want_y, what='y history')


def test_native_launch_error_names_the_kernel():
    from theano_ocl.runtime import native
    if not native.available():
        pytest.skip('no OpenCL ICD loader to call through ctypes')
    dev = theano_ocl.get_device()
    cl = dev.cl
    prg = cl.Program(dev.context, '__kernel void twice(__global float *a) '
                     '{ a[get_global_id(0)] *= 2.0f; }').build()
    kernel = cl.Kernel(prg, 'twice')
    buf = cl.Buffer(dev.context, cl.mem_flags.READ_WRITE, 4 * 12)
    kernel.set_args(buf)
    host = np.arange(12, dtype='float32')
    cl.enqueue_copy(dev.queue, buf, host)
    native.launcher(dev.queue, kernel, 'twice', (12,), None)()
    out = np.empty_like(host)
    cl.enqueue_copy(dev.queue, out, buf)
    np.testing.assert_array_equal(out, host * 2)
    # a local size that does not divide the global size: the driver refuses it
    with pytest.raises(native.LaunchError, match=r'twice.*OpenCL error -\d+'):
        native.launcher(dev.queue, kernel, 'twice', (12,), (5,))()


def test_run_probes_a_strided_output_as_n_calls_would():
    """A probed output that is a strided view on the device (a transpose): its per-step
    slots come from one strided copy kernel whose destination moves from slot to slot."""
    x = T.matrix('x')
    W = theano.shared(np.random.RandomState(6).uniform(-1, 1, (3, 5)), name='W')
    W_new = W * 0.5 + x
    out = W_new.T            # a view of the update's value, which the frame keeps
    f_c = theano.function([x], out, updates=[(W, W_new)], mode='FAST_RUN')
    sim = theano_ocl.SimulatorOCL(f_c)      # (run_steps: the n-pass run, as a user calls it)
    xs = np.random.RandomState(7).uniform(-1, 1, (6, 3, 5))
    start = W.get_value()
    got = sim.run_steps(6, inputs=[xs], probes=[0], probe_every=2)[0]
    W.set_value(start)
    want = [f_c(v) for v in xs]
    assert_close(got, np.array(want[1::2]), what='every 2nd transposed output')
    # the case under test: a strided device value (a layout no public number gives)
    vm = sim.function.fn
    assert not vm.last_frame.dvals[vm.program.fgraph.outputs[0]].is_c_contiguous()


@pytest.mark.parametrize('where', ['host', 'device'])
def test_runs_alike_carry_each_runs_own_initial_state(where):
    """Runs alike with a carried state, on the device (the cost model off: these are
    small), take the last run's loop (``stats['loop_kept']``) and start from their own
    initial value and per-step inputs (host or device arrays): Theano C's histories."""
    n = 6
    inputs, outputs = _recurrence('float32')
    f_o = theano.function(inputs, outputs, mode=theano_ocl.OCLMode(cost_model='off'))
    for run in range(4):
        xs, h0, want_h, want_y, _ = _case('float32', n, 7, 40 + run)
        if where == 'device':
            xs = cla.to_device(theano_ocl.get_device().queue, xs)
        stats = {}
        got_h, got_y = f_o.fn.run(n, feeds={0: xs}, probes=[0, 1], carry={1: (0, h0)},
                                  stats=stats)
        assert_close(got_h, want_h, what='run %d: h history' % run)
        assert_close(got_y, want_y, what='run %d: y history' % run)
        # (the first run's step 0 is a call, the second's a step of its loop: another loop)
        assert stats['loop_kept'] == (run >= 2), (run, stats)
