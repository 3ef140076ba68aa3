"""pyopencl's argument handlers memoized per process (runtime/invokers.py): kernels made
after the memo takes over compute what they did before, each with its own arguments."""
import numpy as np
import pytest

import theano_ocl  # noqa: F401
from theano_ocl.device import get_device
from theano_ocl.runtime import invokers

SRC = """
__kernel void scale(__global float *out, __global const float *x, const float a,
                    const long n)
{
    const long i = get_global_id(0);
    if (i < n)
        out[i] = a * x[i];
}
"""


def test_kernels_share_handlers_and_keep_their_own_arguments(monkeypatch):
    dev = get_device()
    cl = dev.cl
    from pyopencl import invoker
    wrapper = invoker.generate_enqueue_and_set_args
    assert getattr(wrapper, 'original', None) is not None, 'memo not installed'
    calls = []
    original = wrapper.original

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)
    # a fresh memo over a counting original: the first kernel of a signature generates its
    # handlers, the others reuse them
    monkeypatch.setattr(invoker, 'generate_enqueue_and_set_args', counting)
    monkeypatch.setattr(invokers, '_installed', False)
    invokers.install()
    prg = cl.Program(dev.context, SRC).build()
    n = 37
    x = np.linspace(-1, 1, n).astype('float32')
    mf = cl.mem_flags
    xb = cl.Buffer(dev.context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    outs = [cl.Buffer(dev.context, mf.READ_WRITE, x.nbytes) for _ in range(3)]
    kernels = [cl.Kernel(prg, 'scale') for _ in range(3)]
    for k, (kern, ob) in enumerate(zip(kernels, outs)):
        kern.set_args(ob, xb, np.float32(k + 2), np.int64(n))
    for kern in kernels:                 # each launch with the arguments set on its kernel
        cl.enqueue_nd_range_kernel(dev.queue, kern, (64,), None)
    kernels[1](dev.queue, (64,), None, outs[1], xb, np.float32(7), np.int64(n))  # call form
    got = []
    for ob in outs:
        h = np.empty_like(x)
        cl.enqueue_copy(dev.queue, h, ob)
        got.append(h)
    np.testing.assert_array_equal(got[0], np.float32(2) * x)
    np.testing.assert_array_equal(got[1], np.float32(7) * x)
    np.testing.assert_array_equal(got[2], np.float32(4) * x)
    assert calls == ['scale'], calls       # generated once for the three kernels


def test_install_is_idempotent():
    from pyopencl import invoker
    before = invoker.generate_enqueue_and_set_args
    invokers.install()
    assert invoker.generate_enqueue_and_set_args is before


def test_set_long_sets_one_argument_and_keeps_the_others():
    """``set_long`` (an offset re-set per call or step) through pyopencl's buffer path: the
    kernel reads the new value, its other arguments stay bound, for values of every sign
    and size a byte offset may have; the same as ``set_arg`` with a numpy int64."""
    dev = get_device()
    cl = dev.cl
    src = """
    __kernel void put(__global long *out, const long a, const long b)
    { out[get_global_id(0)] = a * 3 + b; }
    """
    k = cl.Kernel(dev.build(src), 'put')
    out = cl.Buffer(dev.queue.context, cl.mem_flags.READ_WRITE, 16)
    k.set_args(out, np.int64(0), np.int64(7))
    host = np.zeros(2, np.int64)
    for v in (0, 1, -1, 2 ** 40 + 3, -(2 ** 62), np.int64(12345), 2 ** 63 - 1):
        invokers.set_long(k, 1, v)
        cl.enqueue_nd_range_kernel(dev.queue, k, (2,), None)
        cl.enqueue_copy(dev.queue, host, out, is_blocking=True)
        want = (np.int64(v) * np.int64(3) + np.int64(7)) if abs(int(v)) < 2 ** 61 else None
        if want is not None:
            assert (host == want).all(), (v, host)
        k.set_arg(1, np.int64(v))
        cl.enqueue_nd_range_kernel(dev.queue, k, (2,), None)
        again = np.zeros_like(host)
        cl.enqueue_copy(dev.queue, again, out, is_blocking=True)
        assert (again == host).all(), (v, host, again)
    with pytest.raises(Exception):
        invokers.set_long(k, 1, 2 ** 63)          # does not fit a long: an error, not a wrap
