"""``theano_ocl.report(f)`` and ``placements(f)`` (theano_ocl/report.py): long details cut
to the line width with the whole text still available, and the "device" nodes whose
products run as host BLAS in the device's mapped buffers named as such."""
import io

import numpy as np
import pytest
import theano
import theano.tensor as T

import theano_ocl
from theano_ocl.report import HOST_BLAS, HOST_BLAS_QUEUED, WIDTH

from helpers import setting, assert_close


def _lines(f, **kw):
    out = io.StringIO()
    theano_ocl.report(f, file=out, **kw)
    header, *rows = out.getvalue().splitlines()
    return header, rows


def test_long_details_are_cut_and_kept_whole():
    x = T.fmatrix('x')
    # Theano fuses the terms into one Composite, which the sum's kernel computes: its
    # detail names that whole expression
    f = theano.function([x], sum(T.tanh(x * np.float32(k)) for k in range(1, 25)).sum(),
                        mode='OCL')
    details = [d for _, where, d in theano_ocl.placements(f) if where == 'device']
    longest = max(details, key=len)
    assert len(longest) > 2 * WIDTH

    _, rows = _lines(f)
    assert all(len(r) <= WIDTH for r in rows)
    cut = [r for r in rows if r.endswith('...')]
    assert len(cut) == 1 and longest.startswith(cut[0][:-3].split('  ')[-1])

    _, rows = _lines(f, width=60)
    assert all(len(r) <= 60 for r in rows) and len(rows) == len(details)

    _, rows = _lines(f, width=None)
    assert any(r.endswith(longest) for r in rows)
    assert not any(r.endswith('...') for r in rows)


@pytest.mark.parametrize('host_blas', ['queued', 'mapped'])
def test_host_blas_nodes_say_so(monkeypatch, host_blas):
    """On a CPU device a product too large for the small-product kernel runs as host BLAS,
    a command of the device's queue or on the mapped buffers: "device" in placement, the
    host's CPU in fact."""
    dev = theano_ocl.get_device()
    if not dev.is_cpu:
        pytest.skip('host BLAS runs the products of CPU devices')
    from theano_ocl.ops import blas_queued
    setting(monkeypatch, 'host_blas', host_blas)
    label = HOST_BLAS_QUEUED if host_blas == 'queued' and blas_queued.available(dev) \
        else HOST_BLAS
    rng = np.random.RandomState(0)
    x, s = T.fmatrix('x'), T.fmatrix('s')
    W = theano.shared(rng.randn(100, 64).astype('f4'), 'W')     # 409600 multiply-adds
    V = theano.shared(rng.randn(4, 4).astype('f4'), 'V')         # 64: the small kernel
    outs = [T.dot(x, W), T.dot(s, V)]
    f = theano.function([x, s], outs, mode='OCL')

    def dots():
        return {str(node.inputs[1]): d for node, where, d in theano_ocl.placements(f)
                if where == 'device' and 'Dot' in str(node.op)}

    before = dots()
    assert all(d.startswith('host BLAS where a product is not small: ')
               for d in before.values()), before
    xv, sv = rng.randn(64, 100).astype('f4'), rng.randn(4, 4).astype('f4')
    got = f(xv, sv)
    assert_close(got[0], xv.dot(W.get_value()), rtol=1e-4, atol=1e-4)
    assert_close(got[1], sv.dot(V.get_value()))

    after = dots()
    assert after['W'].startswith(label + ': ')
    assert after['V'].startswith('a kernel, not host BLAS: ')
    header, rows = _lines(f)
    assert '(1 of them host BLAS)' in header
    assert sum(label + ': ' in r for r in rows) == 1
