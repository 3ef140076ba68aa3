"""``profile=True`` under mode='OCL' (theano_ocl/profiling.py): Theano's summary with device
nodes typed ``D``, host nodes ``C``/``Py`` as ``theano_ocl.report`` places them, transfers
with their bytes, kernel builds counted as compile time (only), device events exported as a
Chrome trace."""
import copy
import io
import json
import re
import time

import numpy as np
import pytest
import theano
import theano.tensor as T
from theano import gof

import theano_ocl
from theano_ocl import profiling
from theano_ocl.runtime import kernel_cache as kc

from helpers import assert_close, setting

N, D_IN, D_HID, D_OUT = 33, 20, 16, 5
CALLS = 4


class HostCopy(gof.Op):
    """A node with no device implementation and no C code: the host fallback, type Py."""
    __props__ = ()

    def make_node(self, x):
        x = T.as_tensor_variable(x)
        return gof.Apply(self, [x], [x.type()])

    def perform(self, node, inputs, outputs):
        outputs[0][0] = inputs[0].copy()

    def grad(self, inputs, grads):
        return grads


@pytest.fixture
def fresh_builds(tmp_path, monkeypatch):
    """An empty disk cache and an empty program memo: this test's kernels get built."""
    monkeypatch.setenv(kc.ENV_DIR, str(tmp_path))
    monkeypatch.delenv(kc.ENV_SWITCH, raising=False)
    kc.reset()
    theano_ocl.get_device()._programs.clear()
    yield
    kc.reset()


def _mlp(mode, profile=True):
    rng = np.random.RandomState(0)
    x = T.fmatrix('x')
    W = theano.shared(rng.randn(D_IN, D_HID).astype('f4') * 0.1, 'W')
    V = theano.shared(rng.randn(D_HID, D_OUT).astype('f4') * 0.1, 'V')
    h = HostCopy()(T.tanh(T.dot(x, W)))           # downloaded, copied on the host, uploaded
    cost = T.sqr(T.dot(h, V)).mean()
    gW, gV = T.grad(cost, [W, V])
    upd = [(W, W - np.float32(0.1) * gW), (V, V - np.float32(0.1) * gV)]
    f = theano.function([x], cost, updates=upd, mode=mode, profile=profile)
    return f, (W, V)


def _summary(f):
    s = io.StringIO()
    f.profile.summary(file=s)
    return s.getvalue()


def _op_types(text):
    """{op name: type} from the summary's Ops section."""
    section = text.split('\nOps\n---\n', 1)[1].split('\n\n', 1)[0]
    types = {}
    for line in section.splitlines()[1:]:
        tok = line.split()
        if len(tok) < 8 or not tok[0].endswith('%'):
            continue
        j = 4
        kinds = []
        while not tok[j].isdigit():
            kinds.append(tok[j])
            j += 1
        types[' '.join(tok[j + 2:])] = ' '.join(kinds)
    return types


def _transfers(text, kind):
    m = re.search(r'Transfers, %ss: (\d+), (\d+) bytes, (\S+)s' % kind, text)
    assert m, text
    return int(m.group(1)), int(m.group(2)), float(m.group(3))


def _builds(text):
    m = re.search(r'Kernel builds: (\d+) programs in (\S+)s .*: (\d+) from source \((\S+)s\), '
                  r'(\d+) from the disk cache \((\S+)s\); (\d+) memoized', text)
    assert m, text
    n, secs, src, src_s, disk, disk_s, memo = m.groups()
    return dict(programs=int(n), seconds=float(secs), source=int(src), disk=int(disk),
                memo=int(memo))


def _assert_types_agree_with_report(f, types):
    rows = theano_ocl.placements(f)
    assert any(where == 'device' for _, where, _ in rows)
    for node, where, impl in rows:
        got = types[str(node.op)]
        if where == 'device':
            assert got == 'D', (node, got)
        elif where == 'host-fallback':
            assert got == ('C' if impl.startswith('C ') else 'Py'), (node, got, impl)
        else:
            assert got in ('C', 'Py'), (node, got)


def test_profile_types_transfers_and_builds(fresh_builds):
    f, (W, V) = _mlp('OCL')
    f_c, (Wc, Vc) = _mlp('FAST_RUN', profile=False)
    rng = np.random.RandomState(1)
    xs = [rng.randn(N, D_IN).astype('f4') for _ in range(CALLS)]
    for xv in xs:
        assert_close(f(xv), f_c(xv), what='cost')
    assert_close(W.get_value(), Wc.get_value(), what='W')
    assert_close(V.get_value(), Vc.get_value(), what='V')
    text = _summary(f)

    types = _op_types(text)
    assert types['HostCopy'] == 'Py'
    _assert_types_agree_with_report(f, types)
    n_dev = sum(1 for _, where, _ in theano_ocl.placements(f) if where == 'device')
    assert 'Nodes: %d on the device (type D)' % n_dev in text

    # every call uploads x and HostCopy's output, and downloads tanh(x W) for HostCopy and
    # the cost; the first call also places W and V on the device, and the values mean()
    # and its gradient divide by (the two sizes cast to float32 and their product,
    # computed on the host from the shapes, which the frame's key decides: constants of
    # the frame)
    f4 = 4
    n_up, up_bytes, up_s = _transfers(text, 'upload')
    n_down, down_bytes, down_s = _transfers(text, 'download')
    assert up_bytes == CALLS * (N * D_IN + N * D_HID) * f4 + 3 * f4 \
        + (D_IN * D_HID + D_HID * D_OUT) * f4
    assert n_up == 2 * CALLS + 2 + 3
    assert down_bytes == CALLS * (N * D_HID + 1) * f4
    assert n_down == 2 * CALLS
    assert 0 < up_s < 1 and 0 < down_s < 1

    b = _builds(text)
    assert b['source'] > 0 and b['disk'] == 0 and b['programs'] == b['source']
    assert b['seconds'] > 0
    # kernel builds count as compile time (they happened during the first call)
    assert f.profile.compile_time >= f.profile.linker_time >= b['seconds']

    # node times: device nodes from events, the fallback from the clock; all were called
    prof = f.profile
    for node, where, _ in theano_ocl.placements(f):
        assert prof.apply_callcount[node] == CALLS
    host = [n for n in prof.apply_time if isinstance(n.op, HostCopy)][0]
    assert prof.apply_time[host] > 0
    assert sum(prof.apply_time.values()) < prof.vm_call_time


def test_second_function_loads_its_kernels_from_the_disk_cache(fresh_builds):
    f, _ = _mlp('OCL')
    f(np.ones((N, D_IN), 'f4'))
    first = _builds(_summary(f))
    theano_ocl.get_device()._programs.clear()      # as in a new process: memo empty
    g, _ = _mlp('OCL')
    g(np.ones((N, D_IN), 'f4'))
    second = _builds(_summary(g))
    assert second['source'] == 0 and second['disk'] == first['source'] > 0
    g(np.ones((N, D_IN), 'f4'))                    # replays build nothing
    assert _builds(_summary(g)) == second


class HostCCopy(HostCopy):
    """The same node with Theano C code: the host fallback, type C."""

    def c_code(self, node, name, inputs, outputs, sub):
        x, = inputs
        z, = outputs
        fail = sub['fail']
        return """
        Py_XDECREF(%(z)s);
        %(z)s = (PyArrayObject*)PyArray_NewCopy(%(x)s, NPY_CORDER);
        if (!%(z)s) %(fail)s
        """ % locals()

    def c_code_cache_version(self):
        return (1,)


def test_c_fallback_typed_c():
    """A host fallback running Theano's C code is typed C, with its own time."""
    x = T.fmatrix('x')
    out = HostCCopy()(T.exp(x)).sum() + HostCopy()(x).sum()
    f = theano.function([x], out, mode='OCL', profile=True)
    f_c = theano.function([x], out, mode='FAST_RUN')
    xv = np.random.RandomState(0).uniform(-1, 1, (7, 3)).astype('f4')
    assert_close(f(xv), f_c(xv))
    types = _op_types(_summary(f))
    assert types['HostCCopy'] == 'C' and types['HostCopy'] == 'Py'
    _assert_types_agree_with_report(f, types)
    fb = theano_ocl.fallback_nodes(f)
    assert len(fb) == 2 and all(f.profile.apply_time[n] > 0 for n in fb)


def test_profiles_summed_at_exit_keep_the_types():
    """Theano sums the profiles it prints at exit into a copy of the first, merging the
    per-node dicts: device nodes stay D; the theano_ocl counters, not merged, are not
    printed as if they were the sum."""
    x = T.fvector('x')
    fs = [theano.function([x], T.exp(x) * k, mode='OCL', profile=True) for k in (2, 3)]
    for f in fs:
        f(np.ones(5, 'f4'))
    cum = copy.copy(fs[0].profile)
    for attr in ('apply_time', 'apply_callcount', 'apply_cimpl'):
        getattr(cum, attr).update(getattr(fs[1].profile, attr))
    text = _summary(type('F', (), {'profile': cum}))
    assert set(_op_types(text).values()) == {'D'}
    assert "kernel builds and transfers are in each function's profile" in text
    assert 'Transfers,' in _summary(fs[0])


def test_unprofiled_function_has_no_profiler(tmp_path):
    x = T.fvector('x')
    f = theano.function([x], T.exp(x), mode='OCL')
    assert f.profile is None
    with pytest.raises(TypeError, match='has no device events'):     # no profile hook
        theano_ocl.export_chrome_trace(f, str(tmp_path / 'trace.json'))
    assert_close(f(np.ones(3, 'f4')), np.exp(np.ones(3, 'f4')))


def test_kernel_builds_count_as_compile_time_only(fresh_builds):
    """The first call builds the kernels: Theano timed it, builds included, but they are
    compile time (as the C linker's compilation), so they leave the call times."""
    f, _ = _mlp('OCL')
    xv = np.ones((N, D_IN), 'f4')
    t0 = time.perf_counter()
    f(xv)
    wall = time.perf_counter() - t0
    prof = f.profile
    b = _builds(_summary(f))
    assert b['source'] > 0 and b['seconds'] > 0
    assert prof.compile_time >= prof.linker_time >= b['seconds']
    assert 0 < prof.vm_call_time <= prof.fct_call_time
    assert prof.fct_call_time + b['seconds'] <= wall
    first = prof.fct_call_time
    f(xv)                                          # builds nothing: all of it is call time
    assert _builds(_summary(f)) == b
    assert prof.fct_call_time > first


def _trace(f, tmp_path, name='trace.json'):
    path = tmp_path / name
    n = profiling.export_chrome_trace(f, str(path))
    with open(str(path)) as fh:
        events = json.load(fh)['traceEvents']
    timed = [e for e in events if e['ph'] == 'X']
    assert n == len(timed)
    return events, timed


def test_chrome_trace_has_the_profiled_device_events(tmp_path):
    f, _ = _mlp('OCL')
    rng = np.random.RandomState(1)
    for _ in range(CALLS):
        f(rng.randn(N, D_IN).astype('f4'))
    events, timed = _trace(f, tmp_path)
    assert {(e['name'], e['ph']) for e in events if e['ph'] == 'M'} == \
        {('process_name', 'M'), ('thread_name', 'M')}
    assert sorted({e['args']['call'] for e in timed}) == list(range(1, CALLS + 1))
    assert all(e['dur'] >= 0 for e in timed)

    # one queue, in order: each command starts once the one before it ended
    queue = [e for e in timed if e['tid'] == 1]
    for a, b in zip(queue, queue[1:]):
        assert b['ts'] >= a['ts'] + a['dur'] - 1e-3, (a, b)

    # every kernel and device copy of a node is there: their durations add up to the
    # node's time in the profile, and they are named by the node
    prof = f.profile
    rows = theano_ocl.placements(f)
    device = {node for node, where, _ in rows if where == 'device'}
    per_node = {}
    for e in timed:
        if e['cat'] in ('kernel', 'copy'):
            node = rows[e['args']['node']][0]
            assert node in device and e['name'] == str(node.op)
            assert e['args']['apply'] == str(node)
            per_node[node] = per_node.get(node, 0.0) + e['dur']
    launched = [n for n in device if prof.apply_time[n] > 0]
    assert launched and set(per_node) == set(launched)
    for node in launched:
        assert per_node[node] == pytest.approx(prof.apply_time[node] * 1e6, rel=1e-6)

    # transfers: as many and as large as the summary counts them, the input's named
    text = _summary(f)
    for kind in ('upload', 'download'):
        count, nbytes, _ = _transfers(text, kind)
        mine = [e for e in timed if e['cat'] == kind]
        assert len(mine) == count and sum(e['args']['bytes'] for e in mine) == nbytes
    assert sum(1 for e in timed if e['name'] == 'input x') == CALLS

    # the host fallback's steps, on the host's track, as long as its time in the profile
    host = [e for e in timed if e['cat'] == 'host' and e['name'] == 'HostCopy']
    assert len(host) == CALLS and all(e['tid'] == 2 for e in host)
    node = rows[host[0]['args']['node']][0]
    assert sum(e['dur'] for e in host) == pytest.approx(prof.apply_time[node] * 1e6, rel=1e-6)


def test_chrome_trace_of_a_shared_profile_and_its_limit(tmp_path, monkeypatch):
    """A profile shared by two functions exports both, one process each; a function keeps
    the events of its last TRACE_EVENTS commands."""
    monkeypatch.setattr(profiling, 'TRACE_EVENTS', 5)
    shared = theano.compile.profiling.ProfileStats(message='two functions')
    x = T.fvector('x')
    fs = [theano.function([x], T.exp(x) * k, mode='OCL', profile=shared) for k in (2, 3)]
    for _ in range(3):
        for f in fs:
            f(np.ones(7, 'f4'))
    events, timed = _trace(shared, tmp_path)
    names = {e['pid']: e['args']['name'] for e in events if e['name'] == 'process_name'}
    assert sorted(names) == [1, 2] and all('two functions' in v for v in names.values())
    for pid in (1, 2):
        mine = [e for e in timed if e['pid'] == pid]
        assert len(mine) == 5 and mine[-1]['args']['call'] == 3
    one = _trace(fs[1], tmp_path, 'one.json')[1]
    assert [(e['name'], e['dur']) for e in one] == \
        [(e['name'], e['dur']) for e in timed if e['pid'] == 2]


def test_chrome_trace_needs_a_profiled_function(tmp_path):
    x = T.fvector('x')
    f = theano.function([x], T.exp(x), mode='OCL')
    with pytest.raises(TypeError, match='profile=True'):
        profiling.export_chrome_trace(f, str(tmp_path / 't.json'))


@pytest.mark.parametrize('host_blas', ['mapped', 'queued'])
def test_host_blas_time_is_its_own(tmp_path, monkeypatch, host_blas):
    """On a CPU device a product's host BLAS maps its buffers, which waits for the kernels
    queued before it: their time is theirs (from their events), not the product's. Queued
    (ops/blas_queued.py), the product is a command of the queue timed by its own event."""
    if not theano_ocl.get_device().is_cpu:
        pytest.skip('host BLAS runs the products of CPU devices')
    from theano_ocl.ops import blas_queued
    queued = host_blas == 'queued'
    if queued and not blas_queued.available(theano_ocl.get_device()):
        pytest.skip('the device runs no native kernels')
    setting(monkeypatch, 'host_blas', host_blas)
    rng = np.random.RandomState(0)
    big, x = T.fmatrix('big'), T.fmatrix('x')
    W = theano.shared(rng.randn(100, 64).astype('f4'), 'W')    # not small: host BLAS
    heavy = T.tanh(T.exp(T.sin(big) * 2) + T.cos(big)).mean()
    f = theano.function([big, x], T.dot(x * heavy, W), mode='OCL', profile=True)
    args = (rng.randn(800, 800).astype('f4'), rng.randn(64, 100).astype('f4'))
    for _ in range(3):
        f(*args)
    rows = theano_ocl.placements(f)
    dot, = [n for n, where, d in rows if d.startswith('host BLAS') and 'Dot' in str(n.op)]
    times = f.profile.apply_time
    kernels = sum(times[n] for n, where, _ in rows if where == 'device' and n is not dot)
    assert kernels > 0 and times[dot] > 0
    assert times[dot] < 0.5 * kernels, (times[dot], kernels)

    # in the trace, each call's product starts once the kernels before it ended (the
    # host's clock read against the device's: within a millisecond)
    trace = tmp_path / 'trace.json'
    profiling.export_chrome_trace(f, str(trace))
    with open(str(trace)) as fh:
        timed = [e for e in json.load(fh)['traceEvents'] if e['ph'] == 'X']
    for call in (1, 2, 3):
        mine = [e for e in timed if e['args']['call'] == call]
        if queued:      # a command among the kernels, not a host step
            assert not [e for e in mine if e['cat'] == 'host' and e['name'] == str(dot.op)]
            assert [e for e in mine if e['cat'] == 'kernel' and e['name'] == str(dot.op)]
            continue
        blas, = [e for e in mine if e['cat'] == 'host' and e['name'] == str(dot.op)]
        before = [e for e in mine if e['cat'] == 'kernel']
        assert before and blas['ts'] >= max(e['ts'] + e['dur'] for e in before) - 1000


def test_a_device_scans_kernel_builds_count_as_compile_time_only(fresh_builds):
    """A device Scan's loop runs inside the call that plans it, its inner function's
    kernels built there: the node's time leaves those builds out (compile time)."""
    x = T.fmatrix('x')
    W = theano.shared(np.eye(4, dtype='f4') * 0.5, 'W')
    hs, _ = theano.scan(lambda xt, h: T.tanh(T.dot(h, W) + xt), sequences=x,
                        outputs_info=T.zeros((4,), 'float32'))
    f = theano.function([x], hs[-1], mode=theano.compile.mode.get_mode('OCL'), profile=True)
    xv = np.random.RandomState(0).rand(5, 4).astype('f4')
    t0 = time.perf_counter()
    got = f(xv)
    wall = time.perf_counter() - t0
    h = np.zeros(4, 'f4')
    for xt in xv:
        h = np.tanh(h.dot(np.eye(4, dtype='f4') * 0.5) + xt)
    assert_close(got, h, rtol=1e-5)
    prof = f.profile
    b = _builds(_summary(f))
    assert b['seconds'] > 0, b
    scan_time = sum(t for node, t in prof.apply_time.items()
                    if type(node.op).__name__ == 'Scan')
    assert 0 < scan_time and scan_time + b['seconds'] <= wall, (scan_time, b, wall)
