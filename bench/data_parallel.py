"""Data-parallel training throughput: K ranks against one, in the same run.

    mpirun -n K python bench/data_parallel.py [--model mlp|lenet] [--batch B] [--json PATH]

Every rank takes its device by local rank (``theano_ocl.distributed.init``: GPU k of the
host; on a CPU, PoCL on the rank's share of the cores). Each round has two parts:

1. one rank: rank 0 alone runs ``--steps`` training steps of batch B with no collective (the
   other ranks wait without spinning), on its own device / share of the cores;
2. K ranks: every rank runs ``--steps`` steps of batch B with its gradients averaged
   (``theano_ocl.distributed.average_gradients``): K*B samples per step;
   then, to tell the two costs of scaling apart, the exchange alone (the gradients'
   buckets averaged, no step) and every rank computing its step at once with no exchange.

Throughput per rank is B over the median step time; the speedup is K ranks' throughput over
one rank's, and the scaling efficiency that speedup over K. Rounds alternate the phases, so a
machine shared with other work loads both alike; the median and the range over rounds are
reported. Models: the MLP 784-1000-1000-10 (SGD with momentum,
``theano_ocl.benchmarks.mlp.build``) and LeNet (SGD, ``bench/lenet.py``), float32.
``--json PATH`` (rank 0) writes the run: device, date, commit, per-round samples.
``--cost-model`` (no MPI needed) prints the ring allreduce's predicted time per step for
both models over 2, 8 and 64 hosts (docs/distributed.md).
"""
import argparse
import json
import os
import sys
import time

import theano_ocl.distributed as dist

# first: binds this rank to its device and its share of the cores before OpenCL starts
WORLD = dist.init()

import numpy as np  # noqa: E402
import theano_ocl  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build(model, mode, batch, average):
    if model == 'mlp':
        from theano_ocl.benchmarks.mlp import build as build_mlp, make_data
        f, params = build_mlp(mode, (784, 1000, 1000, 10), batch, 0.01, 0.9, 0, average=average)
        xs, ys = make_data(batch * 4, 784, 10, np.random.RandomState(1234 + dist.rank()))
    else:
        from lenet import build_lenet, make_data
        f, params = build_lenet(mode, batch, average=average)
        xs, ys = make_data(batch * 4, np.random.RandomState(1234 + dist.rank()))
    return f, lambda k: (xs[(k % 4) * batch:(k % 4 + 1) * batch],
                         ys[(k % 4) * batch:(k % 4 + 1) * batch]), params


def build_exchange(mode, params):
    """A function that only exchanges: buffers of the gradients' shapes averaged over the
    ranks exactly as a training step averages its gradients (same buckets), stored back."""
    import theano
    bufs = [theano.shared(np.zeros_like(p.get_value()), name=p.name) for p in params]
    means = dist.average_gradients(bufs, params)
    return theano.function([], [], updates=list(zip(bufs, means)), mode=mode)


def wait_for_all():
    """A barrier that sleeps rather than spins (the waiting ranks leave the cores alone)."""
    if WORLD.size > 1:
        req = WORLD.comm.Ibarrier()
        while not req.Test():
            time.sleep(0.002)


def timed(f, args_for, steps):
    """(median seconds per step, the share of the host's CPUs that processes other than
    this job's ranks used meanwhile, or None)."""
    from theano_ocl.benchmarks.timing import OtherLoad
    t0_load = OtherLoad._read()
    times = common.step_times(f, args_for, steps)
    t1_load = OtherLoad._read()
    mine = None if t0_load is None or t1_load is None else t1_load[2] - t0_load[2]
    return float(np.median(times)), (t0_load, t1_load, mine)


def outside_load(loads):
    """Other processes' share of the CPUs from every rank's ``timed`` load readings (rank
    0's /proc/stat, every rank's own CPU time; ranks on one host)."""
    loads = [ld for ld in loads if ld is not None]
    if not loads or loads[0][0] is None or loads[0][1] is None:
        return None
    (b0, t0, _), (b1, t1, _) = loads[0][0], loads[0][1]
    mine = sum(ld[2] for ld in loads if ld[2] is not None)
    return max(0.0, (b1 - b0 - mine) / float(max(t1 - t0, 1)))


#: gradient bytes per step (float32): the MLP's (W, b) per layer; LeNet's two convolutions
#: (20x1x5x5, 50x20x5x5), dense 800x500 and 500x10, with their biases
GRADIENT_BYTES = {
    'mlp': 4 * sum(a * b + b for a, b in zip((784, 1000, 1000), (1000, 1000, 10))),
    'lenet': 4 * (20 * 25 + 20 + 50 * 20 * 25 + 50 + 800 * 500 + 500 + 500 * 10 + 10),
}
#: links of the cost model: (name, bytes per second one way, latency per message in s)
LINKS = (('100 Gb/s InfiniBand', 12.5e9, 5e-6), ('25 Gb/s Ethernet', 3.125e9, 25e-6))


def ring_allreduce_seconds(nbytes, k, bandwidth, latency):
    """A ring allreduce of ``nbytes`` over ``k`` hosts: 2(k-1) steps (reduce-scatter, then
    allgather), each sending nbytes/k over the link and paying one latency."""
    return 2.0 * (k - 1) / k * nbytes / bandwidth + 2 * (k - 1) * latency


def cost_model(hosts=(2, 8, 64)):
    """Print the ring allreduce's predicted time per step for each model, link and host
    count (docs/distributed.md quotes this table)."""
    print('| model | gradient bytes | link | ' + ' | '.join('K=%d' % k for k in hosts) + ' |')
    print('|---|---|---|' + '---|' * len(hosts))
    for model, nbytes in sorted(GRADIENT_BYTES.items()):
        for link, bw, lat in LINKS:
            print('| %s | %.2f MB | %s | %s |' % (model, nbytes / 1e6, link, ' | '.join(
                '%.2f ms' % (1e3 * ring_allreduce_seconds(nbytes, k, bw, lat)) for k in hosts)))


def main():
    if '--cost-model' in sys.argv:
        cost_model()
        return 0
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--model', choices=('mlp', 'lenet'), default='mlp')
    ap.add_argument('--batch', type=int, default=128, help='samples per rank and step')
    ap.add_argument('--steps', type=int, default=10, help='timed steps per phase and round')
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--warmup', type=int, default=3)
    ap.add_argument('--mode', default='OCL', help="'OCL' or a Theano mode ('FAST_RUN')")
    ap.add_argument('--json', default=None, help='write the run to this file (rank 0)')
    ap.add_argument('--note', default=None,
                    help='stored in the record: where it ran, what the variant is')
    args = ap.parse_args()
    K, rank = WORLD.size, WORLD.rank
    dev = theano_ocl.get_device() if args.mode == 'OCL' else None
    lines = dist.comm().allgather(dist.info()) if K > 1 else [dist.info()]
    if rank == 0:
        print('# data-parallel %s, batch %d per rank, float32, %s: %d ranks, %d rounds x %d '
              'steps per phase' % (args.model, args.batch, args.mode, K, args.rounds, args.steps))
        if dev is not None:
            common.header('data_parallel', dev)
        for ln in lines:
            print('#   %s' % ln)
    one, one_args, _ = build(args.model, args.mode, args.batch, None)
    par, par_args, params = build(args.model, args.mode, args.batch, dist.average_gradients)
    exchange = build_exchange(args.mode, params)
    for k in range(args.warmup):
        one(*one_args(k))
        par(*par_args(k))
        exchange()
    rounds = []
    for r in range(args.rounds):
        wait_for_all()
        t_one, load_one = timed(one, one_args, args.steps) if rank == 0 else (None, None)
        wait_for_all()
        t_par, load_par = timed(par, par_args, args.steps)
        wait_for_all()
        t_ex, _ = timed(lambda: exchange(), lambda k: (), args.steps)
        wait_for_all()
        # every rank computing its own step at once, with no exchange: what the ranks' share
        # of the machine costs (cores, memory, caches), apart from exchanging
        t_all, _ = timed(one, one_args, args.steps)
        every = dist.comm().allgather((t_par, load_par, t_ex, t_all)) if K > 1 else \
            [(t_par, load_par, t_ex, t_all)]
        slowest = max(e[0] for e in every)
        exchange_ms = 1e3 * max(e[2] for e in every)
        concurrent_ms = 1e3 * max(e[3] for e in every)
        if rank == 0:
            speedup = K * t_one / slowest
            other = (outside_load([load_one]), outside_load([e[1] for e in every]))
            rounds.append(dict(one_ms=t_one * 1e3, ranks_ms=slowest * 1e3, speedup=speedup,
                               exchange_ms=exchange_ms, concurrent_ms=concurrent_ms,
                               other_load=other))
            print('round %d: one rank %.2f ms/step (%.0f samples/s); %d ranks %.2f ms/step '
                  '(%.0f samples/s per rank): %.2fx, efficiency %.0f%%; the exchange alone '
                  '%.2f ms; every rank computing at once, no exchange, %.2f ms; other '
                  'processes: %s of the CPUs' % (
                      r, t_one * 1e3, args.batch / t_one, K, slowest * 1e3,
                      args.batch / slowest, speedup, 100 * speedup / K, exchange_ms,
                      concurrent_ms,
                      '/'.join('?' if o is None else '%.0f%%' % (100 * o) for o in other)))
    if rank != 0:
        return 0
    sp = np.array([x['speedup'] for x in rounds])
    one_ms = np.median([x['one_ms'] for x in rounds])
    par_ms = np.median([x['ranks_ms'] for x in rounds])
    print('the gradients\' exchange alone (%.2f MB, the same buckets): median %.2f ms per '
          'step' % (GRADIENT_BYTES[args.model] / 1e6,
                    np.median([x['exchange_ms'] for x in rounds])))
    print('\nthroughput per rank: one rank %.0f samples/s, %d ranks %.0f samples/s each' % (
        args.batch / one_ms * 1e3, K, args.batch / par_ms * 1e3))
    print('speedup of %d ranks over one: median %.2fx (range %.2f..%.2f), scaling efficiency '
          '%.0f%% (%.0f..%.0f%%)' % (K, np.median(sp), sp.min(), sp.max(),
                                     100 * np.median(sp) / K, 100 * sp.min() / K,
                                     100 * sp.max() / K))
    if args.json:
        record = dict(bench='data_parallel', model=args.model, batch=args.batch, ranks=K,
                      mode=args.mode, date=time.strftime('%Y-%m-%dT%H:%M', time.gmtime()),
                      commit=common.commit(), placement=lines,
                      device=None if dev is None else dev.name,
                      platform=None if dev is None else dev.platform_name,
                      gradient_bytes=GRADIENT_BYTES[args.model], note=args.note,
                      rounds=rounds, speedup_median=float(np.median(sp)),
                      efficiency_median=float(np.median(sp) / K))
        with open(args.json, 'w') as fh:
            json.dump(record, fh, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
