"""Data-parallel training with the update code left as it is.

Each rank computes the gradients of its own mini-batch; :func:`average_gradients` puts
them through ``allreduce(..., 'mean')`` in buckets (several small gradients flattened into
one message, large ones alone), and the caller's update rule takes the averages where it
would have taken its own gradients::

    import theano_ocl.distributed as dist
    updates = dist.data_parallel_updates(cost, params, lasagne.updates.adam,
                                         learning_rate=1e-3)
    train = theano.function([x, y], cost, updates=updates, mode='OCL')

The initial parameters are broadcast from rank 0 when the updates are made
(:func:`broadcast_parameters`), so every rank starts where rank 0 does; with the same
gradient average on every rank, the parameters then stay equal on every rank. K ranks of
batch b take the steps one process takes with batch K*b, where the cost is a mean over the
batch (the mean of K means of b equals the mean of K*b).
"""
import numpy as np
import theano
import theano.tensor as T

from . import world
from .collectives import allreduce, broadcast_into

#: gradients are sent in messages of at most this many bytes (or one gradient alone): few
#: messages for many small gradients (biases), no copy of a large one into a message
BUCKET_BYTES = 1 << 20


def buckets(grads, bucket_bytes=BUCKET_BYTES, sizes=None):
    """Lists of indices into ``grads`` sent together: consecutive gradients of one dtype,
    in reverse order (back-propagation computes the last layer's first), a gradient that
    would take a list past ``bucket_bytes`` starting the next one. ``sizes``: the gradients' element counts where known
    (their parameters'), else read off static shapes; a gradient of unknown size is alone."""
    out, cur, cur_bytes, cur_dtype = [], [], 0, None
    for i in reversed(range(len(grads))):
        g = grads[i]
        n = sizes[i] if sizes is not None and sizes[i] is not None else _static_size(g)
        nbytes = bucket_bytes if n is None else n * np.dtype(g.dtype).itemsize
        if cur and (g.dtype != cur_dtype or cur_bytes + nbytes > bucket_bytes):
            out.append(cur)
            cur, cur_bytes = [], 0
        cur.append(i)
        cur_dtype = g.dtype
        cur_bytes += nbytes
    if cur:
        out.append(cur)
    return out


def _static_size(v):
    """The number of elements of ``v`` when its shape is known when building the graph."""
    try:
        shape = [int(theano.tensor.get_scalar_constant_value(s)) for s in v.shape]
    except (theano.tensor.NotScalarConstantError, TypeError, ValueError):
        return None
    return int(np.prod(shape, dtype=np.int64))


def _param_size(p):
    """A shared variable's element count (its gradient's), else None."""
    get = getattr(p, 'get_value', None)
    return None if get is None else int(np.size(get(borrow=True)))


def average_gradients(grads, params=None, bucket_bytes=BUCKET_BYTES, op='mean'):
    """``grads`` averaged (``op``: 'mean' or 'sum') over every rank, each a graph variable of
    the same shape as the gradient it replaces. ``params``: name the messages after them
    (the errors of a mismatch across ranks say which parameter)."""
    world.init()
    names = [getattr(p, 'name', None) or 'param %d' % i for i, p in enumerate(params)] \
        if params is not None else ['grad %d' % i for i in range(len(grads))]
    sizes = [_param_size(p) for p in params] if params is not None else None
    out = [None] * len(grads)
    for idx in buckets(grads, bucket_bytes, sizes):
        if len(idx) == 1:
            g = T.as_tensor_variable(grads[idx[0]])
            g.name = 'grad of %s' % names[idx[0]]
            out[idx[0]] = allreduce(g, op)
            continue
        flat = T.concatenate([T.flatten(grads[i]) for i in idx])
        flat.name = 'grads of %s' % ', '.join(names[i] for i in idx)
        total = allreduce(flat, op)
        start = 0
        for i in idx:
            g = grads[i]
            n = g.size
            out[i] = T.reshape(total[start:start + n], g.shape, ndim=g.ndim)
            start = start + n
    return out


def broadcast_parameters(params, root=0):
    """Set every shared variable in ``params`` to its value on rank ``root`` (host values;
    call before compiling, or before the first step, on every rank)."""
    for p in params:
        value = np.ascontiguousarray(p.get_value(borrow=False))
        broadcast_into(value, value, root, p.name or str(p))
        p.set_value(value, borrow=True)


def data_parallel_updates(cost, params, updates_fn, bucket_bytes=BUCKET_BYTES,
                          broadcast=True, **kwargs):
    """The updates ``updates_fn(grads, params, **kwargs)`` returns, with ``grads`` the
    gradients of ``cost`` averaged over every rank.

    ``updates_fn``: any rule taking gradients and parameters (Lasagne's ``sgd``,
    ``momentum``, ``adam``... take a list of gradients for their ``loss_or_grads``; a
    Keras-style optimizer: ``lambda g, p: opt.get_updates_from_grads(g, p)`` or any wrapper
    handing it the gradients). ``broadcast``: first set every parameter to rank 0's value.
    """
    params = list(params)
    if broadcast:
        broadcast_parameters(params)
    grads = T.grad(cost, params)
    return updates_fn(average_gradients(grads, params, bucket_bytes), params, **kwargs)


def average_parameters_updates(params):
    """Updates setting every parameter to its mean over the ranks: compiled as a function of
    its own (``theano.function([], [], updates=...)``, or a simulator's method), called
    every k steps it is local SGD / periodic model averaging."""
    world.init()
    return [(p, allreduce(p, 'mean')) for p in params]
