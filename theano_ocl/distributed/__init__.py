"""Several devices and hosts: collectives over MPI, and data-parallel training.

    mpirun -n K python train.py

    import theano_ocl.distributed as dist
    dist.init()                     # ranks from MPI; this rank's device by its local rank
    y = dist.allreduce(x, 'mean')   # graph ops, under any mode
    updates = dist.data_parallel_updates(cost, params, updates_fn)

``world``: rank, size, local rank, device choice and abort on an uncaught exception;
``collectives``: the ``AllReduce``, ``Broadcast`` and ``Wait`` ops and the exchange thread
(their device implementation is ``theano_ocl/ops/collective.py``); ``data_parallel``: gradients averaged in buckets,
initial parameters broadcast. See docs/distributed.md.
"""
# Theano first: importing it registers theano_ocl's mode, whose op families import
# .collectives; importing .collectives first would meet itself half made
import theano  # noqa: F401,E402

from .world import comm, init, info, local_rank, local_size, rank, size  # noqa: F401
from .collectives import (AllReduce, Broadcast, CollectiveMismatch, Wait,  # noqa: F401
                          allreduce, broadcast)
from .data_parallel import (average_gradients, average_parameters_updates,  # noqa: F401
                            broadcast_parameters, buckets, data_parallel_updates)
