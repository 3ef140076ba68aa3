"""pytest set-up shared by tests/: import the checkout's theano_ocl, nothing heavy.

* The repository root goes first on ``sys.path`` so ``import theano_ocl`` is this
  checkout even when another copy is installed in the environment.
* ``THEANO_FLAGS`` is left as the caller set it (Theano's default floatX=float64 stays).
* Nothing here imports theano, numpy or pyopencl.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if sys.path[:1] != [REPO]:
    sys.path.insert(0, REPO)
