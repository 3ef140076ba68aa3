"""Reduction family: CAReduce (Sum, Prod, Max/Min, All, Any, dtype/acc_dtype), MaxAndArgmax,
Argmax and what mean/var/std/norm/logsumexp lower to, against Theano's C backend."""
import itertools

import numpy as np
import pytest
import theano
import theano.scalar as ts
import theano.tensor as T

import theano_ocl
from theano_ocl.ops import reduce as ocl_reduce, reduce_geometry
from helpers import assert_close, assert_matches_c, compile_both, ocl_mode, rand

DTYPES = ['int8', 'int32', 'int64', 'uint8', 'bool', 'float16', 'float32', 'float64']
SUBSETS_3D = [None] + [c for k in range(3) for c in itertools.combinations(range(3), k)] \
    + [(0, 1, 2)]


def _on_device(f, op_types):
    """Every node of ``op_types`` in ``f`` runs on the device (and there is one), but
    arithmetic on shapes (a mean's divisor), which runs on the host by design."""
    rows = [(n, where) for n, where, _ in theano_ocl.placements(f)
            if isinstance(n.op, op_types)]
    assert rows, 'no %s node in the graph' % (op_types,)
    assert any(where == 'device' for _, where in rows), rows
    assert all(where == 'device' or (where == 'host-shape' and
                                     all(o.ndim <= 1 or all(o.broadcastable) for o in n.outputs))
               for n, where in rows), rows


@pytest.mark.parametrize('dtype', DTYPES)
def test_every_op_and_axis_subset(dtype):
    x = T.tensor3('x', dtype=dtype)
    outs = [T.sum(x, a) for a in [None, (0,), (1,), (2,), (0, 1), (0, 2), (1, 2), ()]]
    outs += [T.max(x, 1), T.min(x, None), T.prod(x, 2), T.all(x, 0), T.any(x, (1, 2)),
             T.argmax(x, 1), T.max_and_argmax(x, None)[1]]
    assert_matches_c([x], outs, [rand((5, 6, 7), dtype)])


@pytest.mark.parametrize('dtype', ['float64', 'int16'])
def test_max_and_argmax_all_axis_subsets(dtype):
    x = T.tensor3('x', dtype=dtype)
    v = rand((4, 5, 6), dtype, low=-2, high=2)      # many ties: first occurrence wins
    outs = []
    for a in SUBSETS_3D[1:]:
        m, i = T.max_and_argmax(x, a)
        outs += [m * 1, i]                          # both outputs used: MaxAndArgmax stays
    assert_matches_c([x], outs, [v])


def test_max_over_axis_subsets_is_careduce():
    x = T.tensor3('x', dtype='float32')
    outs = [T.max(x, a) for a in SUBSETS_3D] + [T.min(x, (0, 2))]
    f = assert_matches_c([x], outs, [rand((3, 4, 5), 'float32')])
    _on_device(f, T.elemwise.CAReduce)


def test_nan_and_ties():
    x = T.matrix('x')
    v = np.array([[1, 3, 3, np.nan, np.nan], [2, 2, 1, 0, 2], [-np.inf] * 5,
                  [np.nan, 1, np.nan, 5, 5]])
    m, i = T.max_and_argmax(x, 1)
    assert_matches_c([x], [m * 1, i, T.argmax(x, 0), T.argmax(x), T.min(x, 1), T.sum(x, 0)], [v])


@pytest.mark.parametrize('build', [lambda x: x[::-1], lambda x: x.T, lambda x: x[:, ::2],
                                   lambda x: x[::-2, ::3].T],
                         ids=['reversed', 'transposed', 'step2', 'mixed'])
def test_strided_views_built_in_graph(build):
    x = T.matrix('x')
    y = build(x)
    outs = [T.sum(y, 0), T.sum(y, 1), T.sum(y), T.max(y, 0), T.argmax(y, 1),
            T.max_and_argmax(y, None)[1], T.prod(y, 1)]
    f = assert_matches_c([x], outs, [rand((9, 14), 'float64')], device_only=False)
    _on_device(f, (T.elemwise.CAReduce, T.basic.Argmax, T.basic.MaxAndArgmax))


def _device_view(queue, host, slicer):
    """A strided pyopencl view of ``host[slicer]``: the device sees the strides, no copy."""
    import pyopencl.array as cla
    base = cla.to_device(queue, np.ascontiguousarray(host))
    view = host[slicer]
    offset = view.__array_interface__['data'][0] - host.__array_interface__['data'][0]
    return view, cla.Array(queue, view.shape, view.dtype, strides=view.strides,
                           data=base.base_data, offset=offset)


@pytest.mark.parametrize('slicer', [np.s_[::-1, :, ::2], np.s_[:, ::-3, 1:], np.s_[1:, 2, ::-1]],
                         ids=['neg0-step2', 'neg1', 'int-index'])
def test_strided_device_inputs(slicer):
    host = rand((6, 7, 8), 'float32')
    mode = ocl_mode()
    queue = theano_ocl.get_device(None).queue
    view, dview = _device_view(queue, host, slicer)
    x = T.TensorType('float32', (False,) * view.ndim)('x')
    axes = [a for k in range(1, view.ndim + 1) for a in itertools.combinations(range(view.ndim), k)]
    outs = [T.sum(x, a) for a in axes] + [T.argmax(x, view.ndim - 1)]
    f_c = theano.function([x], outs, mode='FAST_RUN')
    f_o = theano.function([x], outs, mode=mode)
    for want, got in zip(f_c(view), f_o(dview)):
        assert_close(got, want)


def test_empty_and_0d():
    x = T.matrix('x')
    e = np.zeros((0, 4))
    assert_matches_c([x], [T.sum(x, 0), T.prod(x, 0), T.sum(x), T.prod(x), T.sum(x, 1),
                         T.any(x, 0), T.all(x, 0), T.max(x, 1)], [e])
    s = T.scalar('s')
    assert_matches_c([s], [T.sum(s), T.max(s), T.argmax(s), T.prod(s, dtype='float32')],
                   [np.asarray(2.5)])


@pytest.mark.parametrize('reduce', [lambda x: T.max(x, 0), lambda x: T.min(x),
                                    lambda x: T.argmax(x, 0),
                                    lambda x: T.max_and_argmax(x, 0)[0] * 1],
                         ids=['max', 'min', 'argmax', 'max_and_argmax'])
def test_max_of_empty_raises_like_theano(reduce):
    x = T.matrix('x')
    out = reduce(x)
    f_c = theano.function([x], out, mode='FAST_RUN')
    f_o = theano.function([x], out, mode=ocl_mode())
    e = np.zeros((0, 3))
    with pytest.raises(ValueError):
        f_c(e)
    with pytest.raises(ValueError):
        f_o(e)


def test_dtype_and_acc_dtype():
    i8 = T.tensor3('i8', dtype='int8')
    u8 = T.matrix('u8', dtype='uint8')
    f32 = T.matrix('f32', dtype='float32')
    b = T.matrix('b', dtype='bool')
    outs = [T.sum(i8, 1), T.sum(i8, 1, dtype='int8'), T.prod(i8, 0, dtype='int16'),
            T.sum(u8, 0), T.sum(u8, dtype='float32'), T.sum(f32, 1, acc_dtype='float32'),
            T.sum(f32, 0, dtype='float64'), T.prod(f32, 1, dtype='float16'),
            T.sum(b, 0), T.sum(b, dtype='int8'), T.sum(i8, 2, acc_dtype='float64')]
    vi8 = rand((4, 50, 3), 'int8', low=-120, high=120)
    vu8 = rand((30, 20), 'uint8', low=0, high=255)
    assert_matches_c([i8, u8, f32, b], outs,
                   [vi8, vu8, rand((6, 40), 'float32', low=-1.5, high=1.5), rand((5, 9), 'bool')],
                   rtol=1e-5)


def test_mean_var_std_norm_logsumexp():
    x = T.matrix('x')
    xf = T.matrix('xf', dtype='float32')
    xm = T.max(x, 1, keepdims=True)
    lse = T.log(T.sum(T.exp(x - xm), 1)) + xm.flatten()
    outs = [T.mean(x), T.mean(x, 0), T.var(x, 1), T.std(x), T.std(xf, 0), x.norm(1, 1),
            x.norm(2), xf.norm(2, 0), lse, T.mean(xf, 1), T.var(xf)]
    f = assert_matches_c([x, xf], outs, [rand((13, 21), 'float64'), rand((8, 33), 'float32')],
                       device_only=False)
    _on_device(f, (T.elemwise.CAReduce, T.elemwise.Elemwise))


@pytest.mark.parametrize('shape,axis', [((200003,), None), ((3, 70001), 1), ((70001, 3), 0),
                                        ((5, 300, 211), (0, 2)), ((2, 3), 1)],
                         ids=['full', 'rows-few', 'cols-few', 'outer-inner', 'tiny'])
def test_large_two_stage(shape, axis):
    x = T.TensorType('float32', (False,) * len(shape))('x')
    v = rand(shape, 'float32')
    assert_matches_c([x], [T.sum(x, axis), T.max(x, axis), T.argmax(x, axis), T.all(x > -2.9, axis)],
                   [v], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('forced', [(64, 1, False), (64, 7, True), (32, 5, False),
                                    (1, 1, False), (1, 9, False), (256, 3, True)],
                         ids=['tree', 'tree-interleaved-parts', 'tree-chunked-parts', 'serial',
                              'serial-parts', 'wide-tree-interleaved'])
def test_every_kernel_geometry(forced, monkeypatch):
    """The generic kernel's geometries (what it picks for GPUs too), run on whatever device
    the tests have; the fast paths are off, so every layout takes the generic kernel."""
    monkeypatch.setattr(ocl_reduce, 'FAST_PATHS', False)
    monkeypatch.setattr(ocl_reduce, 'geometry', lambda dev, n_out, n_red, rows: forced)
    x = T.matrix('x')
    y = T.matrix('y', dtype='int32')
    v = rand((37, 523), 'float64')
    v[5, 100] = np.nan
    outs = [T.sum(x, 1), T.sum(x[::-1].T, 1), T.sum(x), T.max(x, 0), T.argmax(x, 1),
            T.argmax(x.T, 1), T.argmax(x, None), T.prod(y, 0), T.max(y), T.argmax(y, 0)]
    assert_matches_c([x, y], outs, [v, rand((40, 300), 'int32', low=-1, high=1)],
                   device_only=False)


# ------------------------------------------------------------------ fast paths (rows, cols, full)
# The geometry depends on the device (CPU: one work-item per row / per band of columns;
# GPU: lanes per row, column tiles with row-lanes, partials when there are few outputs).
# 'gpu-*' plan for a GPU's traits and run those kernels on whatever device the tests have.
TRAITS = {'gpu-132cu': reduce_geometry.Traits(False, 132, 1024, 49152),
          'gpu-2cu': reduce_geometry.Traits(False, 2, 256, 32768)}


@pytest.fixture(params=['device', 'gpu-132cu', 'gpu-2cu'])
def traits(request, monkeypatch):
    """Plan with the device's traits or a GPU's; records every fast geometry planned."""
    if request.param != 'device':
        t = TRAITS[request.param]
        monkeypatch.setattr(ocl_reduce, 'device_traits', lambda dev: t)
    return request.param, _record_geometries(monkeypatch)


def _record_geometries(monkeypatch):
    """The list every fast geometry planned from here on is appended to."""
    planned = []
    real = ocl_reduce.fast_geometry

    def recording(*args, **kwargs):
        g = real(*args, **kwargs)
        if g is not None:
            planned.append(g)
        return g
    monkeypatch.setattr(ocl_reduce, 'fast_geometry', recording)
    return planned


def _layout_outputs(x):
    """Reductions of matrix ``x`` covering rows, cols and full fast paths on views."""
    views = [x, x[1:], x[:, 1:], x[::-1], x[:, ::-1], x[::2], x.T]
    outs = []
    for y in views:
        outs += [T.sum(y, 1), T.sum(y, 0), T.sum(y)]
    return outs


KINDS = ['device', 'gpu-132cu', 'gpu-2cu']
_SUM_SHAPES = {'mid': (37, 523), 'thin': (70, 3), 'wide': (9, 4099)}
# fewer shapes on the emulated GPUs: 'gpu-2cu' only 'mid', 'gpu-132cu' not 'thin'
_SUM_CASES = [(k, d, n) for k in KINDS
              for d in ['float32', 'float64', 'int8', 'uint8', 'int64', 'bool', 'float16']
              for n in _SUM_SHAPES
              if k == 'device' or (k == 'gpu-2cu' and n == 'mid') or (k == 'gpu-132cu' and n != 'thin')]


@pytest.mark.parametrize('traits,dtype,shape_id', _SUM_CASES, indirect=['traits'],
                         ids=['-'.join(c) for c in _SUM_CASES])
def test_fast_layouts_sum(traits, dtype, shape_id):
    kind, planned = traits
    shape = _SUM_SHAPES[shape_id]
    x = T.matrix('x', dtype=dtype)
    v = rand(shape, dtype, low=-5, high=5)
    assert_matches_c([x], _layout_outputs(x), [v], rtol=1e-3 if dtype == 'float16' else 1e-5,
                     device_only=False)
    modes = {g.mode for g in planned}
    assert modes == {'rows', 'cols'}, planned
    if dtype != 'float16' or kind == 'device':
        assert any(g.V > 1 for g in planned), planned


@pytest.mark.parametrize('traits', ['device', 'gpu-132cu'], indirect=True)
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_short_sums_add_in_index_order(traits, dtype):
    """Fewer than 8 elements per output are added one after another in index order on
    every device, as Theano C (and numpy) add them, each product of a fused producer
    rounded before it is added (no fma): the results are equal, not only close (Theano's
    test_pfunc compares a sum of 5 float64 squares with numpy's for equality)."""
    x = T.matrix('x', dtype=dtype)
    outs = [T.sum(x[0, :5]), T.sum(x[:, :7], 1), T.sum(x[:3], 0), T.sum(x[:, ::-1][:, :6], 1),
            T.prod(x[:4, :2], 0), T.sum(x[:7].T, 1),
            T.sum(x[:, :5] ** 2, 1), T.sum(x[:6] * x[1:7], 0)]   # fused producers
    f_c, f_o = compile_both([x], outs)
    v = rand((300, 11), dtype, rng=np.random.RandomState(9))
    for k, (a, b) in enumerate(zip(f_o(v), f_c(v))):
        assert np.array_equal(a, b), (k, np.max(np.abs(a - b)))


def _op_outputs(x, dtype):
    outs = []
    for y in [x, x[:, 1:], x[::-1]]:
        for a in [1, 0, None]:
            outs += [T.max(y, a), T.min(y, a), T.argmax(y, a), T.prod(y, a)]
            m, i = T.max_and_argmax(y, a)
            outs += [m * 1, i]
            if dtype == 'bool':
                outs += [T.all(y, a), T.any(y, a)]
    if dtype in ('int8', 'uint8', 'bool'):
        outs += [T.sum(x, 1, dtype=dtype), T.sum(x, 0, acc_dtype='float64'),
                 T.sum(x, None, dtype='float32')]
    if dtype == 'float32':
        outs += [T.sum(x, 0, dtype='float64'), T.sum(x, 1, acc_dtype='float64'),
                 T.prod(x, 1, dtype='float16'), T.sum(x.astype('int32'), 0, dtype='int16')]
    return outs


_OPS_SHAPES = {'long-rows': (40, 300), 'short-rows': (300, 40)}
# a dtype subset on the emulated GPUs
_OPS_CASES = [(k, d, n) for k in KINDS
              for d in ['float32', 'float64', 'int8', 'uint8', 'int16', 'int32', 'uint64', 'bool',
                        'float16']
              for n in _OPS_SHAPES
              if k == 'device' or d in ('float32', 'int8', 'float16', 'bool')]


@pytest.mark.parametrize('traits,dtype,shape_id', _OPS_CASES, indirect=['traits'],
                         ids=['-'.join(c) for c in _OPS_CASES])
def test_fast_ops(traits, dtype, shape_id):
    """max/min/argmax/prod/all/any and dtype/acc_dtype through the rows, cols and full paths
    (values in [-2, 2]: many ties; products of few elements stay finite)."""
    kind, planned = traits
    shape = _OPS_SHAPES[shape_id]
    x = T.matrix('x', dtype=dtype)
    v = rand(shape, dtype, low=-2, high=2)
    if dtype.startswith('float'):
        v = (v * (np.abs(v) > 1.5) + np.sign(v)).astype(dtype)     # products stay finite
    # (uint64: Theano C's min is wrong -- Theano computes it as (2^64 - 1) - max((2^64 - 1)
    # - x), and its C code gives 2^64 - 1 for min over [0, 1, 2] where its Python
    # implementation, NumPy's, gives 0 -- so the reference is Theano's Python backend)
    reference = theano.compile.Mode(linker='py', optimizer='fast_run') \
        if dtype == 'uint64' else 'FAST_RUN'
    assert_matches_c([x], _op_outputs(x, dtype), [v], device_only=False,
                     rtol=1e-2 if dtype == 'float16' else 1e-5,
                     atol=1e-2 if dtype == 'float16' else None, reference=reference)
    assert {'rows', 'cols'} <= {g.mode for g in planned}, planned


def _nan_matrix(n_rows, n_cols, rng):
    v = rng.uniform(-3, 3, size=(n_rows, n_cols))
    for i, cols in enumerate([[0], [n_cols - 1], [17, 40], [5, 3], [n_cols // 2, 1],
                              list(range(n_cols))]):
        v[i, cols] = np.nan                            # head, tail, vector lanes, everywhere
    v[6] = -np.inf                                     # all equal to max's identity
    v[7] = 1.0                                         # all tied
    v[8, 20] = v[8, 60] = v[8, 99] = 100               # ties across lanes
    v[9, ::3] = np.inf
    v[:, 33] = np.where(np.arange(n_rows) % 4 == 0, np.nan, v[:, 33])
    return v


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'float16'])
def test_fast_argmax_nan_inf_ties(traits, dtype):
    kind, planned = traits
    x = T.matrix('x', dtype=dtype)
    v = _nan_matrix(24, 130, np.random.RandomState(3)).astype(dtype)
    outs = []
    for y in [x, x[:, 1:], x[::-1], x[:, ::-1], x.T]:
        m, i = T.max_and_argmax(y, 1)
        outs += [m * 1, i, T.argmax(y, 0), T.argmax(y), T.max(y, 0), T.min(y, 1), T.sum(y, 1)]
    f = assert_matches_c([x], outs, [v], device_only=False,
                         rtol=1e-2 if dtype == 'float16' else None,
                         atol=1e-2 if dtype == 'float16' else None)
    _on_device(f, (T.basic.Argmax, T.basic.MaxAndArgmax))
    assert {'rows', 'cols'} <= {g.mode for g in planned}, planned


@pytest.mark.parametrize('shape,axis', [((200003,), None), ((3, 70001), 1), ((70001, 3), 0),
                                        ((600, 1031), 0), ((5, 300, 211), (0, 2))],
                         ids=['full', 'rows-few', 'cols-few', 'cols-many', 'outer-inner'])
def test_fast_two_stage(traits, shape, axis):
    """Few outputs over long ranges: partials and a second pass (GPU traits split more)."""
    kind, planned = traits
    x = T.TensorType('float32', (False,) * len(shape))('x')
    v = rand(shape, 'float32')
    v.flat[len(v.flat) // 3] = 7.5                   # one clear maximum
    assert_matches_c([x], [T.sum(x, axis), T.max(x, axis), T.argmax(x, axis),
                           T.all(x > -2.9, axis)], [v], rtol=1e-4, atol=1e-4)
    if kind == 'gpu-132cu' and shape != (5, 300, 211):        # that one is generic
        assert any(g.parts > 1 for g in planned), planned


@pytest.mark.parametrize('traits', ['gpu-2cu'], indirect=True)
def test_fast_parts_small(traits):
    """About the smallest reductions a GPU splits in parts (rows: a full sum; cols: few
    columns), reduced by the cross-group path this device takes: cheap enough for
    ``make sanitize`` to run on Oclgrind."""
    kind, planned = traits
    x = T.vector('x', dtype='float32')
    m = T.matrix('m', dtype='float32')
    v = rand((70001,), 'float32')
    v[12345] = 7.5                                   # one clear maximum
    w = rand((2000, 16), 'float32')
    assert_matches_c([x, m], [T.sum(x), T.argmax(x), T.sum(m, 0), T.argmax(m, 0)], [v, w],
                     rtol=1e-4, atol=1e-4)
    assert {g.mode for g in planned if g.parts > 1} == {'rows', 'cols'}, planned


def _paths_of(dev):
    """The cross-group paths ``dev`` can run."""
    return {'launch', reduce_geometry.cross_group_sync(dev)} | \
        ({'atomics'} if reduce_geometry.atomics_std(dev) else set())


@pytest.mark.parametrize('sync', ['atomics', 'ptx', 'launch'])
@pytest.mark.parametrize('gpu', ['gpu-132cu', 'gpu-2cu'])
def test_fast_parts_cross_group(gpu, sync, monkeypatch):
    """Parts on a GPU: the last work-group of the launch reduces the partials (one launch per
    reduction) with a device-scope release-acquire handshake ('atomics': OpenCL C atomics;
    'ptx': NVIDIA's), or a second launch does ('launch'). Called with new values each time:
    the counters the last group resets must be back at 0 for the replayed launch. A
    handshake the device lacks must be refused by name."""
    monkeypatch.setattr(ocl_reduce, 'device_traits', lambda dev: TRAITS[gpu])
    monkeypatch.setattr(ocl_reduce, 'CROSS_GROUP', sync)
    planned = []
    real = ocl_reduce.fast_geometry
    monkeypatch.setattr(ocl_reduce, 'fast_geometry',
                        lambda *a, **k: planned.append(real(*a, **k)) or planned[-1])
    x = T.matrix('x')
    y = T.matrix('y', dtype='int32')
    h = T.matrix('h', dtype='float16')
    b = T.matrix('b', dtype='bool')
    c = T.matrix('c', dtype='complex64')
    outs = [T.sum(x), T.argmax(x), T.max(x, 0), T.argmax(x, 0), T.sum(x[:3], 1),
            T.argmax(x[:2], 1), T.prod(y, 0), T.sum(y, dtype='int64'), T.max(y),
            T.sum(h), T.argmax(h, 0), T.any(b), T.all(b, 0), T.sum(c), T.sum(c, 0)]
    f_c = theano.function([x, y, h, b, c], outs, mode='FAST_RUN')
    f_o = theano.function([x, y, h, b, c], outs, mode=ocl_mode())
    assert not theano_ocl.fallback_nodes(f_o)
    rng = np.random.RandomState(11)
    dev = theano_ocl.get_device()
    for call in range(4):
        v = rng.uniform(-3, 3, (1500, 700))
        v[rng.randint(1500), rng.randint(700)] = 9.0         # one clear maximum
        if call == 2:
            v[700, 3] = v[11, 650] = 9.5                     # a tie: the first one wins
        w = rng.randint(-1, 2, (1400, 520)).astype('int32')
        w[w == 0] = 1
        ins = [v, w, rng.uniform(-3, 3, (1100, 600)).astype('float16'),
               rng.rand(1200, 530) > 1e-5 * call, rand((1000, 640), 'complex64', rng)]
        if sync not in _paths_of(dev):
            with pytest.raises(ValueError, match='%r cross-group handshake cannot run on %s'
                               % (sync, dev.platform_name)):
                f_o(*ins)
            pytest.skip('%s has no %r handshake (refused by name)' % (dev.name, sync))
        for k, (g, e) in enumerate(zip(f_o(*ins), f_c(*ins))):
            tol = {'float16': 3e-3, 'complex64': 1e-4}.get(str(e.dtype), 1e-9)
            assert_close(g, e, rtol=tol, atol=tol, what='call %d output %d' % (call, k))
    n_red = sum(isinstance(n.op, (T.elemwise.CAReduce, T.basic.Argmax, T.basic.MaxAndArgmax))
                for n in f_o.maker.fgraph.apply_nodes)
    split = sum(g is not None and g.parts > 1 for g in planned)
    assert split >= 4, planned
    # one launch per reduction, or one more for each reduction split in parts
    assert theano_ocl.stats(f_o)['launches'] == n_red + (split if sync == 'launch' else 0), planned


class _Dev(object):
    """A device's facts as cross_group_sync reads them (pyopencl's names)."""

    def __init__(self, platform, version='OpenCL 1.2', c_version='OpenCL C 1.2', cc=None,
                 caps=None, features=(), c_versions=()):
        self.platform_name = platform
        self.name = platform + ' device'
        self.device = type('D', (), {})()
        self.device.version = version
        self.device.opencl_c_version = c_version
        if cc is not None:
            self.device.compute_capability_major_nv = cc
        if caps is not None:
            self.device.atomic_memory_capabilities = caps
            self.device.opencl_c_features = [type('F', (), {'name': f})() for f in features]
            self.device.opencl_c_all_versions = [type('V', (), {'version': (a << 22) | (b << 12)})()
                                                 for a, b in c_versions]


def test_cross_group_sync_from_device_capabilities():
    """The handshake is chosen from what the device declares: PTX's on NVIDIA from Volta on,
    OpenCL C atomics where device-scope acq_rel exists (OpenCL C 2.x; OpenCL 3.0 with the
    capability bits and features), else a second launch (OpenCL 1.2: Oclgrind, older
    NVIDIA GPUs, NVIDIA's 3.0 driver's relaxed work-group-scope atomics)."""
    acq, dev_scope, wg, relaxed = 1 << 1, 1 << 5, 1 << 4, 1
    feats = reduce_geometry.ACQ_REL_FEATURES
    c30 = [(1, 2), (3, 0)]
    cases = [(_Dev('NVIDIA CUDA', 'OpenCL 3.0 CUDA', cc=9, caps=relaxed | wg, c_versions=c30),
              'ptx', None),
             (_Dev('NVIDIA CUDA', 'OpenCL 3.0 CUDA', cc=6, caps=relaxed | wg, c_versions=c30),
              None, None),
             (_Dev('NVIDIA CUDA', cc=None), None, None),
             (_Dev('Portable Computing Language', 'OpenCL 3.0 PoCL', caps=acq | dev_scope | wg,
                   features=feats, c_versions=c30), 'atomics', 'CL3.0'),
             (_Dev('Some 3.0 GPU', 'OpenCL 3.0', caps=acq | wg, features=feats, c_versions=c30),
              None, None),
             (_Dev('Some 3.0 GPU', 'OpenCL 3.0', caps=acq | dev_scope, features=feats[:1],
                   c_versions=c30), None, None),
             (_Dev('Some 3.0 GPU', 'OpenCL 3.0', caps=relaxed, c_versions=[(1, 2), (2, 0)]),
              'atomics', 'CL2.0'),
             (_Dev('AMD Accelerated Parallel Processing', 'OpenCL 2.0 AMD',
                   'OpenCL C 2.0'), 'atomics', 'CL2.0'),
             (_Dev('Oclgrind', 'OpenCL 1.2 (Oclgrind 21.10)', 'OpenCL C 1.2 (Oclgrind 21.10)'),
              None, None)]
    for dev, sync, std in cases:
        what = '%s %s' % (dev.platform_name, dev.device.version)
        assert reduce_geometry.cross_group_sync(dev) == sync, what
        assert reduce_geometry.atomics_std(dev) == std, what
        if std is not None:
            assert reduce_geometry.sync_options(dev, 'atomics') == ('-cl-std=' + std,), what
        else:
            with pytest.raises(ValueError, match="'atomics' cross-group handshake cannot run"):
                reduce_geometry.sync_options(dev, 'atomics')


def test_cross_group_handshake_source():
    """The last-group handshake each ``sync`` gets: one release-acquire atom.inc that wraps
    the counter back to 0 (PTX), or one device-scope acq_rel atomic_fetch_add_explicit and an
    atomic reset (OpenCL C atomics); no plain store or load of the counter (rows: one counter,
    cols: one per column tile). The PTX instruction itself runs in
    test_fast_parts_cross_group on an NVIDIA device."""
    comb = ocl_reduce.Combine(ts.add, 'float32', 'float32', 'float32', '0.0f')
    geo = {'rows': dict(kd=0, L=256, V=4, U=8, T=256, aligned=True),
           'cols': dict(rd=1, L=256, V=4, U=8, CX=8, RY=32, aligned=True)}
    for mode, kw in sorted(geo.items()):
        for sync in ('ptx', 'atomics'):
            src, _ = comb.source(mode, sync=sync, **kw)
            what = '%s, %s' % (mode, sync)
            atom = src.count('atom.acq_rel.gpu.global.inc.u32')
            fetch = src.count('atomic_fetch_add_explicit(')
            assert 'atomic_inc(' not in src and 'mem_fence(' not in src, what
            if sync == 'ptx':
                assert atom == 1 and fetch == 0, what
            else:
                assert atom == 0 and fetch == 1, what
                assert src.count('memory_order_acq_rel') == 1, what
                assert src.count('memory_scope_device') == 2, what
                assert 'volatile' not in src and '__global atomic_int *ctr_p' in src, what
                counter = [ln for ln in src.splitlines() if 'ctr_p' in ln
                           and 'atomic_' not in ln and '__global' not in ln]
                assert not counter, (what, counter)


def test_fast_long_index_path(monkeypatch):
    """argmax lanes with 64-bit offsets (chunks of 2**31 elements and more)."""
    monkeypatch.setattr(reduce_geometry, 'IDX32_LIMIT', 0)
    x = T.matrix('x')
    v = _nan_matrix(24, 130, np.random.RandomState(4))
    outs = [T.argmax(x, 1), T.argmax(x, 0), T.argmax(x), T.argmax(x[:, 2:], 1)]
    assert_matches_c([x], outs, [v])


def test_fast_paths_off_matches(monkeypatch):
    """The generic kernel alone (what every layout falls back to) still matches."""
    monkeypatch.setattr(ocl_reduce, 'FAST_PATHS', False)
    x = T.matrix('x', dtype='float32')
    assert_matches_c([x], _layout_outputs(x) + [T.argmax(x, 1), T.argmax(x, 0)],
                     [rand((37, 523), 'float32')], rtol=1e-5)


def test_fast_empty_and_0d(traits):
    x = T.matrix('x')
    for e in [np.zeros((0, 40)), np.zeros((40, 0)), np.zeros((1, 40)), np.zeros((40, 1))]:
        assert_matches_c([x], [T.sum(x, 0), T.sum(x, 1), T.sum(x), T.prod(x, 1), T.any(x, 0)],
                         [e])
    s = T.scalar('s')
    assert_matches_c([s], [T.sum(s), T.max(s), T.argmax(s)], [np.asarray(-1.5)])


@pytest.mark.parametrize('knobs', [dict(GPU_UNROLL=8, GPU_MIN_SWEEPS=2, GPU_LOCAL=512,
                                        GPU_COLS_CX=16, GPU_COLS_MIN_CX=4),
                                   dict(GPU_UNROLL=2, GPU_LOCAL=64, GPU_THREADS_PER_CU=256,
                                        GPU_COLS_THREADS_PER_CU=256, GPU_COLS_CX=8)],
                         ids=['wide', 'narrow'])
def test_fast_gpu_knobs(knobs, monkeypatch):
    """Other GPU geometries (what a benchmark sweep may set) on the emulated H100."""
    monkeypatch.setattr(ocl_reduce, 'device_traits', lambda dev: TRAITS['gpu-132cu'])
    for name, value in knobs.items():
        monkeypatch.setattr(reduce_geometry, name, value)
    x = T.matrix('x')
    v = _nan_matrix(24, 1030, np.random.RandomState(5))
    w = rand((600, 1031), 'float64')
    outs = _layout_outputs(x) + [T.argmax(x, 1), T.argmax(x[:, 3:], 1), T.argmax(x, 0),
                                 T.max(x, 0), T.argmax(x)]
    assert_matches_c([x], outs, [v], device_only=False)
    assert_matches_c([x], _layout_outputs(x) + [T.argmax(x, 1), T.argmax(x, 0)], [w],
                     device_only=False)


def _tied_across_accumulators(n_rows, n_cols, dtype, rng):
    """Rows whose largest value repeats in every pair of vector positions (whichever
    accumulator and lane reads them first), at the smallest value too, and values equal to
    the accumulator's identity: the first occurrence must win wherever it sits."""
    info = np.iinfo(dtype) if dtype.startswith(('int', 'uint')) else None
    lo, hi = (-50, 50) if info is None or info.min < 0 else (0, 100)
    v = rng.randint(lo, hi, size=(n_rows, n_cols)).astype(dtype)
    top = 127 if info is None else min(info.max, 127)
    for i in range(n_rows):
        first = (i * 7) % n_cols
        for j in range(first, n_cols, 16 + i % 17):
            v[i, j] = top                              # first at `first`, then everywhere
    v[0] = top                                         # all tied
    bottom = -np.inf if info is None else info.min     # max's identity
    v[1] = bottom
    v[2, 40:] = bottom
    return v


@pytest.mark.parametrize('dtype', ['float32', 'float64', 'int32', 'int8', 'uint16', 'int64'])
def test_cpu_rows_accumulators_keep_the_first_occurrence(dtype, monkeypatch):
    """A CPU device reduces cache-sized rows with independent vector accumulators where
    the combine is exact in any order (reduce_geometry.CPU_ROWS_ACCUMULATORS): argmax's ties
    go to the first occurrence, max/min/and/or/integer sums equal Theano C's, over row
    lengths around the accumulators' sweep and unaligned starts (views)."""
    planned = _record_geometries(monkeypatch)
    monkeypatch.setattr(ocl_reduce, 'device_traits',
                        lambda dev: reduce_geometry.Traits(True, 2, 4096, 32768))
    rng = np.random.RandomState(11)
    x = T.matrix('x', dtype=dtype)
    for n_cols in (33, 64, 95, 130, 517):
        v = _tied_across_accumulators(12, n_cols, dtype, rng)
        outs = []
        for y in [x, x[:, 1:], x[:, 3:]]:
            m, i = T.max_and_argmax(y, 1)
            outs += [m * 1, i, T.argmax(y), T.min(y, 1), T.max(y)]
            if not dtype.startswith('float'):
                # (not over the rows holding the type's least value: Theano C's % of it is
                # not Python's, which the device computes)
                z = y[3:]
                outs += [T.sum(z, 1), T.prod(z % 3 + 1, 1), T.all(y > 0, 1), T.any(y > 90, 1)]
        assert_matches_c([x], outs, [v], device_only=False)
    assert any(g.mode == 'rows' and g.K > 1 for g in planned), planned
