"""Theano's reference convolutions import private SciPy names again once theano_ocl is in.

Theano 1.0.5's ``theano.tensor.nnet.conv`` and ``abstract_conv`` import
``scipy.signal.signaltools._valfrommode`` / ``_bvalfromboundary`` / ``convolve`` and
``scipy.signal.sigtools._convolve2d`` under ``try``; on SciPy >= 1.8 those paths lost the
names (1.15 has no ``sigtools`` at all), so ``imported_scipy_signal`` was False: the legacy
``ConvOp`` and ``AbstractConv2d`` could not run their Python ``perform`` and Theano's conv
tests skipped. The start-up hook aliases them from ``scipy.signal._signaltools`` /
``_sigtools``. Each test runs a fresh interpreter (the hook acts while Theano imports) in
one import order and runs both Python performs against ``scipy.signal.convolve2d``.
"""
import json
import textwrap

import numpy as np
import pytest

from test_entrypoints import NO_PTH, _env, _flags, _last_json, _pth_active, _run_script

SCRIPT = textwrap.dedent('''
    import json, warnings
    import numpy as np
    import scipy.signal
    warnings.simplefilter('error', DeprecationWarning)   # no deprecated SciPy path used
    import theano.tensor as T
    from theano.tensor.nnet import conv, abstract_conv

    rng = np.random.RandomState(0)
    img = rng.uniform(-1, 1, (2, 3, 7, 6))
    kern = rng.uniform(-1, 1, (4, 3, 3, 2))
    py = theano.Mode(linker='py', optimizer=None)       # the Python performs, no C
    x, w = T.dtensor4('x'), T.dtensor4('w')
    res = dict(conv=conv.imported_scipy_signal, abstract=abstract_conv.imported_scipy_signal)
    for border in ('valid', 'full'):
        want = np.array([[sum(scipy.signal.convolve2d(img[b, c], kern[k, c], mode=border)
                              for c in range(3)) for k in range(4)] for b in range(2)])
        legacy = theano.function([x, w], conv.conv2d(x, w, border_mode=border), mode=py)
        abstract = theano.function(
            [x, w], abstract_conv.AbstractConv2d(border_mode=border)(x, w), mode=py)
        nodes = [type(n.op).__name__ for f in (legacy, abstract)
                 for n in f.maker.fgraph.toposort()]
        res[border] = dict(nodes=nodes, err=[float(np.abs(f(img, kern) - want).max())
                                             for f in (legacy, abstract)])
    print(json.dumps(res))
''')

ORDERS = {
    'pth': 'import theano\n',
    'theano_ocl_first': NO_PTH + 'import theano_ocl\nimport theano\n',
    'theano_first': NO_PTH + 'import theano\nimport theano_ocl\n',     # repaired late
}


@pytest.mark.parametrize('order', sorted(ORDERS))
def test_reference_convolutions_import_scipy(tmp_path, order):
    if order == 'pth' and not _pth_active():
        pytest.skip('needs theano_ocl_startup.pth installed')
    flags = _flags(**({'blas.ldflags': ''} if order == 'theano_first' else {}))
    p = _run_script(ORDERS[order] + SCRIPT, tmp_path, _env(flags))
    res = _last_json(p.stdout)
    assert res['conv'] is True and res['abstract'] is True
    for border in ('valid', 'full'):
        assert res[border]['nodes'] == ['ConvOp', 'AbstractConv2d']
        assert max(res[border]['err']) < 1e-12, res[border]


def test_only_missing_names_are_added():
    """The alias never replaces a name SciPy has, and leaves SciPy's files alone."""
    import importlib
    import os
    import sys
    from theano_ocl import _theano_compat
    import scipy.signal._signaltools as new
    old = importlib.import_module('scipy.signal.signaltools')
    before = {f: os.path.getmtime(os.path.join(os.path.dirname(new.__file__), f))
              for f in os.listdir(os.path.dirname(new.__file__)) if f.endswith('.py')}
    mine = object()
    saved = old.__dict__.get('_bvalfromboundary', None)
    old._bvalfromboundary = mine
    try:
        _theano_compat.alias_scipy_signal()
        assert old._bvalfromboundary is mine
        assert old._valfrommode is new._valfrommode
        assert sys.modules['scipy.signal.sigtools']._convolve2d is not None
    finally:
        if saved is None:
            del old._bvalfromboundary
            _theano_compat.alias_scipy_signal()
        else:
            old._bvalfromboundary = saved
    after = {f: os.path.getmtime(os.path.join(os.path.dirname(new.__file__), f))
             for f in before}
    assert before == after
