"""Where recorded runs are kept and rendered: a checkout's ``docs/`` when theano_ocl runs
from one, else the directory the user names (default: the current one).

An installed copy (site-packages) is no checkout: writing ``../docs`` there would leave
files that ``pip uninstall`` does not remove, and git would describe whatever repository
happens to hold the environment (a virtual environment inside some other checkout).
"""
import os

#: the directory of the ``theano_ocl`` package
PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def checkout_root(package=PACKAGE):
    """The root of the theano_ocl checkout that ``package`` lives in, or None: the
    package's parent holds ``.git`` (a directory, or a file in a worktree), ``setup.py``
    and ``docs/``."""
    root = os.path.dirname(package)
    marks = ('.git', 'setup.py', 'docs')
    return root if all(os.path.exists(os.path.join(root, m)) for m in marks) else None


def data_dir(root=None):
    """The stored runs: ``docs/_data/benchmarks`` of the checkout, else the current
    directory."""
    root = root or checkout_root()
    return os.path.join(root, 'docs', '_data', 'benchmarks') if root else os.getcwd()


def out_dir(root=None):
    """The rendered tables and plots: ``docs/_generated/benchmarks`` of the checkout, else
    the current directory."""
    root = root or checkout_root()
    return os.path.join(root, 'docs', '_generated', 'benchmarks') if root else os.getcwd()
