"""Start-up shim for the conformance runner (tests/conformance/run.py).

Put on PYTHONPATH by the runner only, for BOTH modes, so the comparison is fair:

* Python 3.11: Theano 1.0.5's Cython ``scan_perform`` no longer compiles and the
  failure is a plain Exception, not the ImportError that makes Scan fall back to its
  Python loop.  Blocking the module makes every Scan use the Python loop.
* ``CONFORMANCE_PLAIN=1`` (``run.py --plain-c``) does the opposite: it also takes
  theano_ocl's start-up finder (``theano_ocl_startup.pth``) off ``sys.meta_path`` so the
  interpreter runs Theano 1.0.5 as shipped, Scan's failing Cython compile included: the
  baseline "what C gives without theano_ocl".
* ``CONFORMANCE_IMPORT=mod1,mod2`` imports those modules first (the OCL run uses it
  to load ``theano_ocl`` when its start-up ``.pth`` hook is not installed).

Inert unless ``CONFORMANCE_SHIM=1``.  Chains to any other ``sitecustomize`` that this
file shadows.
"""
import os
import sys


def _chain():
    here = os.path.dirname(os.path.abspath(__file__))
    import importlib.machinery
    import importlib.util
    path = [p for p in sys.path if os.path.abspath(p or '.') != here]
    spec = importlib.machinery.PathFinder.find_spec('sitecustomize', path)
    if spec is not None and spec.loader is not None:
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)


if os.environ.get('CONFORMANCE_SHIM') == '1':
    if os.environ.get('CONFORMANCE_PLAIN') == '1':
        sys.meta_path[:] = [f for f in sys.meta_path
                            if not getattr(f, '_theano_ocl_bootstrap', False)]
    else:
        sys.modules['theano.scan_module.scan_perform_ext'] = None
    for _name in filter(None, os.environ.get('CONFORMANCE_IMPORT', '').split(',')):
        __import__(_name.strip())

try:
    _chain()
except Exception as _e:  # never break interpreter start-up
    sys.stderr.write('conformance shim: chained sitecustomize failed: %r\n' % (_e,))
