"""Errors: bad inputs, no OpenCL, kernel build failures, out of memory, failed calls."""
import numpy as np
import pytest
import theano
import theano.tensor as T
from theano import gof

import theano_ocl
from theano_ocl import device as device_mod
from helpers import assert_close


def ocl():
    return theano_ocl.OCLMode()


def test_bad_input_dtype_ndim_shape_name_the_input():
    x = T.fmatrix('xin')
    y = T.fmatrix('yin')
    f = theano.function([x, y], x + y, mode=ocl())
    with pytest.raises(TypeError, match='index 0'):
        f(np.zeros((2, 2), 'float64'), np.zeros((2, 2), 'f4'))       # would downcast
    with pytest.raises(TypeError, match='index 1'):
        f(np.zeros((2, 2), 'f4'), np.zeros(2, 'f4'))                  # wrong ndim
    with pytest.raises(ValueError, match='mis-match') as e:
        f(np.zeros((2, 3), 'f4'), np.zeros((2, 4), 'f4'))             # wrong shape
    assert 'Apply node that caused the error' in str(e.value)
    # still usable
    assert_close(f(np.ones((2, 2), 'f4'), np.ones((2, 2), 'f4')), np.full((2, 2), 2, 'f4'))


def test_no_platform_says_how_to_install_pocl(monkeypatch):
    monkeypatch.setattr(device_mod, 'list_devices', lambda: [])
    with pytest.raises(device_mod.NoOpenCLPlatform) as e:
        device_mod.resolve_spec('0:0')
    assert 'pocl-opencl-icd' in str(e.value)
    x = T.fvector()
    with pytest.raises(device_mod.NoOpenCLPlatform, match='apt-get install'):
        theano.function([x], x * 2, mode=theano_ocl.OCLMode(device='cpu'))


def test_bad_device_spec_lists_choices():
    with pytest.raises(ValueError, match=r"device='77:0': platform 77 does not exist; "
                                         r"platforms: 0 "):
        device_mod.resolve_spec('77:0')


def test_kernel_build_failure_shows_numbered_source_and_log():
    dev = theano_ocl.get_device()
    src = '__kernel void k(__global float *a) {\n  a[0] = undefined_name;\n}\n'
    with pytest.raises(theano_ocl.KernelBuildError) as e:
        dev.build(src)
    msg = str(e.value)
    assert '   2 |   a[0] = undefined_name;' in msg
    assert 'build log' in msg and 'undefined_name' in msg.split('build log')[1]


def _doubling_after_one_call():
    """f(x) = 2 x updating a counter vector s, called once (s = 1): (f, s, device)."""
    x = T.fvector('x')
    s = theano.shared(np.zeros(4, 'f4'), 's')
    f = theano.function([x], x * 2, updates={s: s + 1}, mode=ocl())
    f(np.ones(16, 'f4'))
    return f, s, theano_ocl.get_device()


def test_out_of_memory_is_a_memory_error_and_function_survives(monkeypatch):
    f, s, dev = _doubling_after_one_call()
    # the device's memory is full: a MemoryError naming the sizes, nothing committed
    monkeypatch.setattr(dev, 'memory_limit', dev.pool.active_bytes + 1000)
    with pytest.raises(MemoryError) as e:
        f(np.ones(100000, 'f4'))            # a new shape: plans new buffers
    assert '390.6 KiB' in str(e.value) and 'out of memory' in str(e.value)
    assert_close(s.get_value(), np.full(4, 1, 'f4'))   # the failed call did not update
    monkeypatch.setattr(dev, 'memory_limit', dev.global_mem_size)
    assert_close(f(np.ones(100000, 'f4')), np.full(100000, 2, 'f4'))
    assert_close(s.get_value(), np.full(4, 2, 'f4'))


def test_a_buffer_over_the_largest_allocation_runs_on_the_host(monkeypatch):
    # Theano C computes it: so does theano_ocl, on the host, with a warning
    f, s, dev = _doubling_after_one_call()
    monkeypatch.setattr(dev, 'max_alloc', 1000)
    with pytest.warns(RuntimeWarning, match='largest allocation'):
        out = f(np.ones(100000, 'f4'))
    assert_close(out, np.full(100000, 2, 'f4'))
    assert_close(s.get_value(), np.full(4, 2, 'f4'))
    # its intermediates are freed after their last use, as Theano's allow_gc frees them
    assert_close(f(np.ones(100000, 'f4')), np.full(100000, 2, 'f4'))
    assert theano_ocl.stats(f)['host_kept_bytes'] == 0


class Interrupt(gof.Op):
    """A host op that raises (KeyboardInterrupt or ValueError) when asked to."""
    __props__ = ()

    def __init__(self):
        self.exc = None

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return gof.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        if Interrupt.raise_next is not None:
            exc, Interrupt.raise_next = Interrupt.raise_next, None
            raise exc
        outputs[0][0] = inputs[0].copy()


Interrupt.raise_next = None


@pytest.mark.parametrize('exc', [KeyboardInterrupt, ValueError])
def test_failed_call_keeps_last_good_shared_values(exc):
    a = theano.shared(np.arange(4, dtype='f4'), 'a')
    b = theano.shared(np.zeros(4, 'f4'), 'b')
    x = T.fvector('x')
    mid = Interrupt()(x * 2)                # runs on the host, between device nodes
    f = theano.function([x], mid + a, updates=[(a, a + 1), (b, b + mid)], mode=ocl())
    assert [n for n in theano_ocl.fallback_nodes(f) if isinstance(n.op, Interrupt)]
    f(np.ones(4, 'f4'))
    Interrupt.raise_next = exc('stop')
    with pytest.raises(exc):
        f(np.ones(4, 'f4'))
    assert_close(a.get_value(), np.arange(4, dtype='f4') + 1)
    assert_close(b.get_value(), np.full(4, 2, 'f4'))
    assert_close(f(np.ones(4, 'f4')), np.arange(4, dtype='f4') + 1 + 2)
    assert_close(a.get_value(), np.arange(4, dtype='f4') + 2)
    assert_close(b.get_value(), np.full(4, 4, 'f4'))


@pytest.mark.parametrize('profile', [False, True])
def test_an_error_in_a_calls_pass_names_its_node(profile):
    """A host node raising in a replayed call (its pass: a one-step loop of the driver,
    the profiler's timed plans when profiled) gives Theano's error naming that node, not
    the last one, with its position; the function stays usable."""
    x = T.fvector('x')
    mid = Interrupt()(x * 2)
    f = theano.function([x], T.tanh(mid) + 1, mode=ocl(), profile=profile)
    topo = f.maker.fgraph.toposort()
    k = [i for i, node in enumerate(topo) if isinstance(node.op, Interrupt)][0]
    assert k < len(topo) - 1                  # (an unknown position names the last node)
    v = np.ones(4, 'f4')
    for _ in range(4):
        assert_close(f(v), np.tanh(2 * v) + 1)
    st = theano_ocl.stats(f)
    assert st['frames'] == 1 and st['replans'] == 0 and st['host_steps'], st   # replays
    Interrupt.raise_next = ValueError('stop here')
    with pytest.raises(ValueError, match='stop here') as e:
        f(v)
    msg = str(e.value)
    assert 'Apply node that caused the error: %s' % (topo[k],) in msg, msg
    assert 'Toposort index: %d' % k in msg, msg
    assert_close(f(v), np.tanh(2 * v) + 1)
