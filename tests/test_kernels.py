"""Kernel sources and names (theano_ocl/kernels): every op family renders its templates
through ``kernels.render``, a kernel's name is derived from its source (the same in every
process whatever was generated before it), the memos are bounded, and a second process
finds the first one's elementwise programs in the on-disk cache."""
import ast
import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

import theano_ocl
from theano_ocl import kernels

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG_DIR = os.path.dirname(theano_ocl.__file__)


def _python(script, *argv, **env):
    e = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
             **env)
    p = subprocess.run([sys.executable, '-c', script] + list(argv), env=e,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


# One kernel of each family, rendered through the family's own source function (no device
# needed). With argv[1] == 'after-others' the process first renders other kernels of every
# family (other dtypes, bodies and shapes), as a process that compiled other functions
# first would have.
RENDER = textwrap.dedent('''
    import hashlib, json, sys, types
    import theano.scalar as ts
    from theano_ocl.ops import blas, extra_ops, gemm_small, nnet, random, subtensor
    from theano_ocl.ops import elemwise as ew, reduce as red

    def family_kernels(dt, body, ndim):
        contig = (True,) * 3
        ew_key = ('', body, (dt,), (dt, dt), ndim, contig)
        mm_key = (dt, dt, dt, False, None, None)
        x = types.SimpleNamespace(dtype=dt)
        return dict(
            elemwise=ew.kernel_source(*ew_key, check=False, nd=1),
            ewcheck=ew.kernel_source('', body, (dt,), (dt, dt), ndim, (True, False, True),
                                     check=True, nd=1),
            batched=ew._elemwise_batched_source(ew_key, 8, False, 1, 0)[:2],
            gemm_small=gemm_small._source(mm_key),
            gemm_small_batched=gemm_small._source(mm_key, 4, True, 1, 0),
            gemm=blas.kernel_source(dt, dt, dt, 'one', None, 'none', None, 8),
            nnet=nnet.kernel_source('softmax_grad', (('dy', dt, 2, False), ('sm', dt, 2, False),
                                                     ('dx', dt, 2, True)), 4 * ndim),
            reduce=red.Combine(ts.add, dt, dt, dt, '0').source('generic', ndim, 1, True, 1),
            gather=subtensor._kernel('gather', ('int64',), ndim=ndim, store='uint'),
            scatter=subtensor._kernel('scatter', ('int32',), dt, dt, npd=1, nsd=ndim,
                                      body='o0 = i0 + i1;', support=''),
            mrg_uniform=random.kernel_source(dt, True),
        )

    if sys.argv[1] == 'after-others':
        for dt, body, ndim in (('float64', 'o0 = i0 - i1;', 2), ('float32', 'o0 = i0 * i1;', 3)):
            family_kernels(dt, body, ndim)
    got = family_kernels('float32', 'o0 = i0 + i1;', 1)
    print(json.dumps({k: [name, hashlib.sha1(src.encode()).hexdigest(), src]
                      for k, (src, name) in got.items()}))
''')


def test_kernel_names_do_not_depend_on_what_was_generated_before():
    first = _python(RENDER, 'first')
    after = _python(RENDER, 'after-others')
    assert set(first) == set(after)
    for family in first:
        assert first[family][:2] == after[family][:2], family
    names = [v[0] for v in first.values()]
    assert len(set(names)) == len(names), names
    for family, (name, _, src) in first.items():
        prefix = {'gemm_small_batched': 'gemm_small', 'nnet': 'nnet_softmax_grad'}.get(family,
                                                                                    family)
        assert re.match(r'^%s_[0-9a-f]{12}$' % prefix, name), (family, name)
        # the source names its kernel: exactly one definition, no placeholder left
        assert len(re.findall(r'void\s+%s\s*\(' % name, src)) == 1, (family, name)
        assert '__theano_ocl_kernel__' not in src


def test_the_same_source_gets_the_same_name_and_another_source_another():
    a = kernels.render('random.cl.mako', 'mrg', support='', dtype='float32', out_t='float',
                       norm='4.6566126e-10f', norm_t='float')
    b = kernels.render('random.cl.mako', 'mrg', support='', dtype='float32', out_t='float',
                       norm='4.6566126e-10f', norm_t='float')
    c = kernels.render('random.cl.mako', 'mrg', support='', dtype='float64', out_t='double',
                       norm='4.656612873077392578125e-10', norm_t='double')
    assert a == b
    assert a[1] != c[1] and a[0] != c[0]
    assert a[1] == 'mrg_' + kernels.digest(a[0].replace(a[1], '__theano_ocl_kernel__'))


def test_rendered_sources_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(kernels, 'MAX_RENDERED', 3)
    monkeypatch.setattr(kernels, '_rendered', kernels.collections.OrderedDict())
    firsts = [kernels.render('random.cl.mako', 'mrg', support='', dtype='float32',
                             out_t='float', norm='%d.0f' % k, norm_t='float') for k in range(7)]
    assert kernels.cache_info()['rendered'] == 3
    # an entry dropped from the memo renders again to the same text and name
    again = kernels.render('random.cl.mako', 'mrg', support='', dtype='float32', out_t='float',
                           norm='0.0f', norm_t='float')
    assert again == firsts[0]
    assert len(set(n for _, n in firsts)) == 7


def test_family_source_functions_are_memoized_and_bounded():
    from theano_ocl.ops import elemwise as ew
    args = ('', 'o0 = i0 + i1;', ('float32',), ('float32', 'float32'), 1, (True,) * 3)
    one = ew.kernel_source(*args, check=False, nd=1)
    assert ew.kernel_source(*args, check=False, nd=1) is one
    info = ew.kernel_source.cache_info()
    assert info.maxsize == kernels.MAX_RENDERED and info.currsize >= 1
    assert kernels.cache_info()['memoized'] >= info.currsize


def _loads_templates(path):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.startswith('mako') for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('mako'):
            return True
    return False


def test_templates_are_loaded_through_one_helper():
    loaders = []
    for root, _, files in os.walk(PKG_DIR):
        for f in files:
            if f.endswith('.py') and _loads_templates(os.path.join(root, f)):
                loaders.append(os.path.relpath(os.path.join(root, f), PKG_DIR))
    assert loaders == [os.path.join('kernels', '__init__.py')]


# Compiles and runs elementwise functions under mode='OCL'; argv[1:] says which, in order.
# Prints the process's kernel-cache counters as JSON.
CACHE = textwrap.dedent('''
    import json, sys
    import numpy as np
    import theano, theano.tensor as T
    import theano_ocl
    x = T.fvector('x'); y = T.fvector('y')
    graphs = dict(other=T.exp(x) * np.float32(3) - y,
                  target=T.tanh(x) + y * np.float32(0.5))
    v = np.linspace(-1, 1, 37).astype('float32')
    for which in sys.argv[1:]:
        f = theano.function([x, y], graphs[which], mode='OCL')
        want = theano.function([x, y], graphs[which], mode='FAST_RUN')(v, v[::-1].copy())
        np.testing.assert_allclose(f(v, v[::-1].copy()), want, rtol=1e-5)
    print(json.dumps(theano_ocl.kernel_cache_info()))
''')


@pytest.mark.full   # a second interpreter (70 s); test_kernel_cache's second process runs in CI
def test_second_process_finds_elemwise_programs_in_the_disk_cache(tmp_path):
    # process 1 builds another function's kernels first, so a counter would have named the
    # target's kernel differently from process 2, which builds it first
    first = _python(CACHE, 'other', 'target', THEANO_OCL_KERNEL_CACHE_DIR=str(tmp_path))
    assert first['source_builds'] >= 2 and first['disk_writes'] == first['source_builds']
    second = _python(CACHE, 'target', THEANO_OCL_KERNEL_CACHE_DIR=str(tmp_path))
    assert second['source_builds'] == 0, second
    assert second['disk_hits'] >= 1 and second['disk_writes'] == 0
