"""Device implementations, one module per op family; importing registers them."""
from .registry import ocl_impl  # noqa: F401
from . import elemwise  # noqa: F401
from . import elemwise_merge  # noqa: F401
from . import fusion  # noqa: F401
from . import basic  # noqa: F401
from . import shape  # noqa: F401
from . import subtensor  # noqa: F401
from . import gathers  # noqa: F401
from . import reduce  # noqa: F401
from . import random  # noqa: F401
from . import blas  # noqa: F401
from . import nnet  # noqa: F401
from . import extra_ops  # noqa: F401
from . import pool  # noqa: F401
from . import conv  # noqa: F401
from . import bn  # noqa: F401
from . import scan  # noqa: F401
from . import gemm_search  # noqa: F401  (the tuner gemm_tune runs at first use)
from . import collective  # noqa: F401
from . import host_blas  # noqa: F401  (the host VM's Gemm / Dot22 on NumPy's BLAS)
