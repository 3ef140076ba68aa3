"""runtime/waits.py: a CPU device's wait polls, then blocks; it returns only once every
event completed, and raises where one failed, as ``clWaitForEvents`` does."""
import threading
import time

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.runtime import waits

from helpers import assert_close


def _complete_later(ev, delay, done):
    def run():
        time.sleep(delay)
        done.append(time.perf_counter())
        ev.set_status(ev_complete())
    th = threading.Thread(target=run)
    th.start()
    return th


def ev_complete():
    import pyopencl as cl
    return cl.command_execution_status.COMPLETE


@pytest.mark.parametrize('poll_s', [0.0, 1e-3, 1.0])
def test_wait_returns_once_every_event_completed(poll_s, monkeypatch):
    """Blocked (0), polled then blocked (1 ms, the default), polled throughout (1 s): the
    wait returns after the last of three user events completed, never before."""
    import pyopencl as cl
    dev = theano_ocl.get_device()
    monkeypatch.setattr(waits, 'POLL_S', poll_s)
    events = [cl.UserEvent(dev.context) for _ in range(3)]
    events[0].set_status(ev_complete())
    done = []
    threads = [_complete_later(events[2], 0.005, done), _complete_later(events[1], 0.02, done)]
    waits.wait(dev, events)
    back = time.perf_counter()
    for th in threads:
        th.join()
    assert len(done) == 2 and back >= max(done)
    assert all(ev.command_execution_status == ev_complete() for ev in events)


def _failed_event(dev):
    import pyopencl as cl
    ev = cl.UserEvent(dev.context)
    ev.set_status(-5)
    return ev


@pytest.mark.parametrize('poll_s', [0.0, 1.0])
def test_a_failed_event_raises_where_the_driver_does(poll_s, monkeypatch):
    """A failed event among those waited for raises where the driver's own
    ``clWaitForEvents`` does (PoCL; NVIDIA's driver returns without an error), and
    otherwise the wait returns, blocked or polled."""
    import pyopencl as cl
    dev = theano_ocl.get_device()
    try:
        cl.wait_for_events([_failed_event(dev)])
        driver_raises = False
    except cl.Error:
        driver_raises = True
    monkeypatch.setattr(waits, 'POLL_S', poll_s)
    ok = cl.UserEvent(dev.context)
    ok.set_status(ev_complete())
    if driver_raises:
        with pytest.raises(cl.Error):
            waits.wait(dev, [ok, _failed_event(dev)])
    else:
        waits.wait(dev, [ok, _failed_event(dev)])
    waits.wait(dev, [])


@pytest.mark.parametrize('poll_s', [0.0, 1e-3])
def test_calls_agree_with_c_whichever_wait(poll_s, monkeypatch):
    """A call's host outputs, its error flag and its update read through the wait, blocked
    or polled: Theano C's values, and the same error."""
    monkeypatch.setattr(waits, 'POLL_S', poll_s)
    x, i = T.fvector('x'), T.lscalar('i')
    s = theano.shared(np.float32(0), 's')
    outs = [T.exp(x).sum(), x[i]]
    f_o = theano.function([x, i], outs, updates=[(s, s + x.sum())],
                          mode=theano_ocl.OCLMode(cost_model='off'))
    s_c = theano.shared(np.float32(0), 's')
    f_c = theano.function([x, i], outs, updates=[(s_c, s_c + x.sum())], mode='FAST_RUN')
    v = np.random.RandomState(0).rand(100000).astype('float32')
    for k in (0, 7, 99999):
        for got, want in zip(f_o(v, k), f_c(v, k)):
            assert_close(got, want)
    assert_close(s.get_value(), s_c.get_value())
    with pytest.raises(IndexError):
        f_c(v, 100000)
    with pytest.raises(IndexError):
        f_o(v, 100000)
    assert_close(s.get_value(), s_c.get_value())
