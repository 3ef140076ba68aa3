"""What tests/test_distributed.py runs under ``mpirun -n K`` (and alone, as the reference).

    python tests/distributed_worker.py train OUT.npz BATCH
    python tests/distributed_worker.py fail raise|die|mismatch
    python tests/distributed_worker.py caught
    python tests/distributed_worker.py deferred [fail]

``train``: every (update rule, mode) case trains a small softmax MLP for STEPS steps,
rank r taking rows [r*BATCH, (r+1)*BATCH) of each global batch of size*BATCH rows, with
the gradients averaged by ``data_parallel_updates``; rank 0 writes the final parameters of
every case to OUT.npz, after checking every rank holds the same. Run alone with
BATCH = K*b it is the one-process run the K ranks must reach.
``fail``: one rank fails (raises, dies, or brings a tensor of another shape) while the
other waits in a collective; the job must end, not hang.
``caught``: every rank catches a mismatch; no rank commits that call's update.
``deferred``: on the GPU's path, a call whose exchanges check nothing returns before they
are over (the first made to take ``SLOW`` s), and the parameters read after it are those Theano
C reaches; ``deferred fail``: such an exchange failing on rank 1 ends the job.
"""
import contextlib
import os
import sys
import time

import numpy as np
import theano
import theano.tensor as T

import theano_ocl.distributed as dist

STEPS = 6
SIZES = (12, 16, 3)
#: seconds each exchange of a deferred call is made to take
SLOW = 3.0


def sgd_momentum(grads, params, learning_rate=0.1, momentum=0.9):
    updates = []
    for g, p in zip(grads, params):
        v = theano.shared(np.zeros_like(p.get_value()))
        v_new = momentum * v - learning_rate * g
        updates += [(v, v_new), (p, p + v_new)]
    return updates


def adam(grads, params, learning_rate=0.01, b1=0.9, b2=0.999, eps=1e-8):
    t = theano.shared(np.float32(0))
    t_new = t + 1
    a = learning_rate * T.sqrt(1 - b2 ** t_new) / (1 - b1 ** t_new)
    updates = [(t, t_new)]
    for g, p in zip(grads, params):
        m = theano.shared(np.zeros_like(p.get_value()))
        v = theano.shared(np.zeros_like(p.get_value()))
        m_new = b1 * m + (1 - b1) * g
        v_new = b2 * v + (1 - b2) * g ** 2
        updates += [(m, m_new), (v, v_new), (p, p - a * m_new / (T.sqrt(v_new) + eps))]
    return updates


RULES = {'sgd_momentum': sgd_momentum, 'adam': adam}


def model(seed_offset):
    # rank 0's start is broadcast: other ranks start elsewhere on purpose
    rng = np.random.RandomState(7 + seed_offset)
    params = []
    for i, (n_in, n_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        params.append(theano.shared(
            (rng.randn(n_in, n_out) / np.sqrt(n_in)).astype('float32'), name='W%d' % i))
        params.append(theano.shared(np.zeros(n_out, 'float32'), name='b%d' % i))
    x, y = T.fmatrix('x'), T.ivector('y')
    h = T.tanh(T.dot(x, params[0]) + params[1])
    p = T.nnet.softmax(T.dot(h, params[2]) + params[3])
    cost = T.nnet.categorical_crossentropy(p, y).mean()
    return x, y, cost, params


def data(batch, size):
    rng = np.random.RandomState(3)
    n = STEPS * batch * size
    xs = rng.randn(n, SIZES[0]).astype('float32')
    ys = rng.randint(0, SIZES[-1], n).astype('int32')
    # step s, rank r: rows of global batch s, the r-th slice of it
    xs = xs.reshape(STEPS, size, batch, SIZES[0])[:, dist.rank()]
    ys = ys.reshape(STEPS, size, batch)[:, dist.rank()]
    return xs, ys


@contextlib.contextmanager
def staged(on):
    """Within: the device's collectives take a GPU's path (staged through page-locked
    blocks, overlapped until their Waits), on the CPU device, by hiding its shared memory."""
    if not on:
        yield
        return
    import theano_ocl
    dev = theano_ocl.get_device()
    before = dev.unified_memory
    dev.unified_memory = False
    try:
        yield
    finally:
        dev.unified_memory = before


def overlapped(f):
    """Assert ``f``'s AllReduces took the overlapped path, and that every one of them is
    followed by some other node before its Wait (the schedule moved work in between)."""
    import theano_ocl
    places = theano_ocl.placements(f)
    impls = [impl for node, where, impl in places if type(node.op).__name__ == 'AllReduce']
    assert impls and all('overlapped' in i for i in impls), impls
    order = [node for node, _, _ in places]
    for i, node in enumerate(order):
        if type(node.op).__name__ == 'AllReduce':
            wait = next(j for j in range(i + 1, len(order))
                        if type(order[j].op).__name__ == 'Wait' and
                        order[j].inputs[0] is node.outputs[0])
            assert wait > i + 1, 'nothing between %s and its Wait' % node


def train(out, batch):
    results = {}
    xs, ys = data(batch, dist.size())
    for rule in sorted(RULES):
        for how in ('OCL', 'OCL-staged', 'FAST_RUN', 'run_steps'):
            with staged(how == 'OCL-staged'):
                x, y, cost, params = model(dist.rank())
                updates = dist.data_parallel_updates(cost, params, RULES[rule])
                mode = 'FAST_RUN' if how == 'FAST_RUN' else 'OCL'
                f = theano.function([x, y], cost, updates=updates, mode=mode)
                if how == 'run_steps':
                    import theano_ocl
                    sim = theano_ocl.SimulatorOCL(f)
                    sim.run_steps(STEPS, inputs={'x': xs, 'y': ys})
                    sim.sync_to_theano()
                else:
                    for s in range(STEPS):
                        f(xs[s], ys[s])
                if how == 'OCL-staged':
                    overlapped(f)
            for p in params:
                value = p.get_value()
                every = dist.comm().allgather(value) if dist.size() > 1 else [value]
                for r, v in enumerate(every):
                    assert np.array_equal(v, value), '%s %s: rank %d holds other %s' % (
                        rule, how, r, p.name)
                results['%s/%s/%s' % (rule, how, p.name)] = value
    if dist.rank() == 0:
        np.savez(out, **results)


def fail(how):
    x = T.fvector('x')
    f = theano.function([x], dist.allreduce(x, 'sum'), mode='OCL')
    n = 4
    if how != 'mismatch':
        f(np.ones(n, 'float32'))                # both ranks meet once
    if dist.rank() == 1:
        if how == 'raise':
            raise RuntimeError('rank 1 fails on purpose')
        if how == 'die':
            os._exit(3)
        n = 5
    f(np.ones(n, 'float32'))                    # rank 0 waits here for rank 1
    print('rank %d: the collective returned' % dist.rank(), flush=True)


def caught(path):
    """A mismatch every rank catches: no rank commits its update; the next call, whose
    shapes agree, commits it on every rank. ``path``: 'mapped' or 'staged'."""
    with staged(path == 'staged'):
        _caught()


def _caught():
    x = T.fvector('x')
    w = theano.shared(np.float32(1), name='w')
    s = dist.allreduce(x, 'sum').sum()
    f = theano.function([x], s, updates=[(w, w + s)], mode='OCL')
    try:
        f(np.ones(4 + dist.rank(), 'float32'))
    except dist.CollectiveMismatch:
        pass
    else:
        raise AssertionError('rank %d: no CollectiveMismatch' % dist.rank())
    assert w.get_value() == 1, 'rank %d committed %r' % (dist.rank(), w.get_value())
    f(np.ones(4, 'float32'))
    values = dist.comm().allgather(float(w.get_value()))
    assert values == [1.0 + 4 * dist.size()] * dist.size(), values
    print('rank %d: all or nothing on every rank' % dist.rank(), flush=True)


def dtypes():
    """Every collective over float16, float32, float64, int32 and uint8 under Theano C and
    OCL (buffers mapped, and staged as on a GPU), against the values every rank gathers:
    the same on every rank, equal to numpy's sum (in float32, rounded once, for float16),
    mean, max and rank 0's values."""
    results = {}
    for dtype in ('float16', 'float32', 'float64', 'int32', 'uint8'):
        x = T.vector('x', dtype=dtype)
        outs = [dist.allreduce(x, 'sum'), dist.allreduce(x, 'max'), dist.broadcast(x, 0)]
        if dtype.startswith('float'):
            outs.append(dist.allreduce(x, 'mean'))
        rng = np.random.RandomState(10 + dist.rank())
        v = (rng.randn(7) * 3).astype(dtype) if dtype.startswith('float') else \
            rng.randint(0, 50, 7).astype(dtype)
        every = np.array(dist.comm().allgather(v))
        wide = every.astype('float32') if dtype == 'float16' else every
        want = [wide.sum(axis=0).astype(dtype), every.max(axis=0), every[0]]
        if dtype.startswith('float'):
            want.append((wide.sum(axis=0) / wide.dtype.type(len(every))).astype(dtype))
        for how in ('FAST_RUN', 'OCL', 'OCL-staged'):
            with staged(how == 'OCL-staged'):
                f = theano.function([x], outs, mode='FAST_RUN' if how == 'FAST_RUN' else 'OCL')
                got = f(v)
            for k, (g, w) in enumerate(zip(got, want)):
                assert g.dtype == w.dtype and np.array_equal(g, w), (
                    'rank %d, %s, %s, output %d: %r against %r' % (dist.rank(), dtype, how, k,
                                                                   g, w))
                results[(dtype, how, k)] = g.tobytes()
    gathered = dist.comm().allgather(results)
    assert all(r == gathered[0] for r in gathered), 'ranks disagree'
    print('rank %d: every dtype agrees' % dist.rank(), flush=True)


def deferred(how):
    """The GPU's path (staged), the first exchange of a call that checks nothing made to
    take SLOW s (the others queue behind it): the second call returns sooner than that
    exchange takes, and the parameters read after it (the reads wait for the device, which
    waits for the exchanges) equal Theano C's after the same two steps. ``how`` 'fail': rank 1's deferred exchange raises, which
    must end the job."""
    from theano_ocl.ops import collective
    real = collective.reduce_into
    slowed = []

    def slow(src, dst, op, name, check=True):
        if not check:
            slowed.append(name)
            if len(slowed) == 1:        # (the first: the call must return before it ends)
                time.sleep(SLOW)
            if how == 'fail' and dist.rank() == 1:
                print('rank 1 fails at %.3f' % time.time(), flush=True)
                raise RuntimeError('rank 1 fails on purpose after its call returned')
        return real(src, dst, op, name, check)
    collective.reduce_into = slow
    xs, ys = data(4, dist.size())
    finals = []
    for mode in ('OCL', 'FAST_RUN'):
        with staged(mode == 'OCL'):
            x, y, cost, params = model(dist.rank())
            updates = dist.data_parallel_updates(cost, params, sgd_momentum)
            f = theano.function([x, y], cost, updates=updates, mode=mode)
            f(xs[0], ys[0])                     # checks the ranks agree: waits for them
            t0 = time.time()
            f(xs[1], ys[1])
            took = time.time() - t0
            if mode == 'OCL':
                overlapped(f)
                assert took < SLOW, 'rank %d: the call took %.2f s, waiting for its ' \
                    'exchanges' % (dist.rank(), took)
            finals.append([p.get_value() for p in params])
    assert slowed, 'no exchange was deferred'
    for p, a, b in zip(params, *finals):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=p.name)
    print('rank %d: the call returned before its exchanges, with their result' % dist.rank(),
          flush=True)


if __name__ == '__main__':
    dist.init()
    if sys.argv[1] == 'dtypes':
        dtypes()
    elif sys.argv[1] == 'train':
        train(sys.argv[2], int(sys.argv[3]))
    elif sys.argv[1] == 'caught':
        caught(sys.argv[2])
    elif sys.argv[1] == 'deferred':
        deferred(sys.argv[2] if len(sys.argv) > 2 else 'ok')
    else:
        fail(sys.argv[2])
