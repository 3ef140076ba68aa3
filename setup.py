"""Packaging for theano_ocl.

Besides the package and its kernel templates, a wheel/installation carries
``theano_ocl_startup.pth`` at the top of site-packages: the start-up hook that lets
``THEANO_FLAGS=linker=ocl`` / ``mode=OCL`` work on scripts that never import theano_ocl
(see ``theano_ocl/_startup.py``). ``data_files`` cannot do that (it is relative to
``sys.prefix``), so ``build_py`` copies the file into the build root, from where
``install_lib`` and ``bdist_wheel`` put it into site-packages (purelib) and the
installation record (so ``pip uninstall`` removes it).

An editable install (``pip install -e .``) does not get the .pth this way;
``scripts/bootstrap.sh`` copies it into the virtual environment itself.

``install_requires`` and the extras say what works; ``constraints.txt`` pins the tested
versions of all of them and of what they pull in: ``pip install -c constraints.txt .``
(the bootstrap installs with it; ``tests/test_constraints.py`` keeps the two in step).
"""
import os

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
PTH = 'theano_ocl_startup.pth'
VERSION = '0.1.0'


class build_py_with_pth(build_py):
    """build_py that also places the start-up .pth at the root of build_lib."""

    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False):
            return  # editable wheels map the checkout; bootstrap.sh installs the .pth
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH),
                       preserve_mode=0)

    def get_outputs(self, include_bytecode=1):
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, 'editable_mode', False):
            return outputs
        return list(outputs) + [os.path.join(self.build_lib, PTH)]


def _long_description():
    try:
        with open(os.path.join(HERE, 'README.md')) as f:
            return f.read()
    except OSError:
        return ''


setup(
    name='theano_ocl',
    version=VERSION,
    description='An OpenCL backend for Theano 1.0.5 (a Linker/Mode plugin)',
    long_description=_long_description(),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['theano_ocl', 'theano_ocl.*']),
    package_data={'theano_ocl': ['clblast_tuned.json', 'kernels/*.mako', 'kernels/*.cl',
                                 'kernels/*/*.mako', 'kernels/*/*.cl']},
    include_package_data=False,
    zip_safe=False,
    python_requires='>=3.7,<3.12',
    install_requires=[
        'theano==1.0.5',
        'numpy>=1.17,<1.24',
        'pyopencl',
        'mako',
        'six',
    ],
    extras_require={
        'test': ['pytest', 'pytest-xdist', 'pynose', 'parameterized', 'scipy'],
        'clblast': ['pyclblast'],
        # python -m theano_ocl bench's progress bar and the plots of --plot / render (bench
        # itself runs without them: plain progress lines, tables only)
        'bench': ['tqdm', 'matplotlib'],
        # python -m theano_ocl bench's nengo_ocl case and bench/nengo_compare.py: the same
        # Nengo network run by nengo-ocl (3.0 supports nengo up to 3.1; it warns on later)
        'nengo': ['nengo>=3.1,<3.2', 'nengo-ocl>=3.0,<3.1'],
        # make docs / tests/test_docs.py (Sphinx 9 needs Python >= 3.11)
        'docs': ['sphinx>=9,<10', 'myst-parser>=5,<6'],
        # theano_ocl.distributed (several devices and hosts over MPI): needs an MPI library
        # (Debian: openmpi-bin libopenmpi-dev; or the `mpich` wheel where no system
        # package can be installed)
        'mpi': ['mpi4py>=3.1'],
    },
    cmdclass={'build_py': build_py_with_pth},
    classifiers=[
        'Programming Language :: Python :: 3',
        'Programming Language :: Python :: 3.11',
        'Operating System :: POSIX :: Linux',
        'Topic :: Scientific/Engineering',
    ],
)
