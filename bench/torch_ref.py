"""torch eager references for the benchmarks, on the same GPU (a separate process: torch and
Theano 1.0.5 do not share a Python; run it in the same device call as the bench).

    python3 bench/torch_ref.py [--json FILE] [--repeat 5] [--quick]
    python3 bench/torch_ref.py --gemm 4096      # only SGEMM n^3 (bench/gemm.py asks this)

Cases, each the same computation as its theano_ocl benchmark: check1 (exp of a float32
vector of 230400, result kept on the device), the MLP 784-1000-1000-10 batch-256 SGD-momentum
step (bench `mlp`), a LeNet training step (batch 128, float32: bench/lenet.py) with
cuDNN, and an LSTM training step (batch 64, 256 hidden, 50 steps: bench/lstm.py) with
``nn.LSTM`` (cuDNN) and with an ``nn.LSTMCell`` loop. Prints one line per case with the
median and range of the per-call time; ``--json`` writes them with the device and versions.
``--gemm N``: only ``torch.matmul`` of two float32 N x N matrices (cuBLAS, TF32 off), one
line ``JSON {...}`` with the seconds per call of each repeat (wall clock up to a
synchronize, as ``bench/gemm.py`` times theano_ocl).
"""
import argparse
import datetime
import json
import statistics
import sys

import common  # bench/common.py: the script's own folder is on sys.path


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument('--json', default=None)
    p.add_argument('--repeat', type=int, default=5)
    p.add_argument('--quick', action='store_true')
    p.add_argument('--gemm', type=int, default=None, metavar='N')
    a = p.parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit('torch_ref: torch is not importable here (%s)' % e)
    if not torch.cuda.is_available():
        sys.exit('torch_ref: no CUDA device for torch')
    dev = torch.device('cuda')
    sync = torch.cuda.synchronize
    torch.backends.cudnn.benchmark = True
    rows = []
    if a.gemm:
        torch.backends.cuda.matmul.allow_tf32 = False
        x, y = torch.rand(a.gemm, a.gemm, device=dev), torch.rand(a.gemm, a.gemm, device=dev)
        out = torch.empty(a.gemm, a.gemm, device=dev)
        ts = common.timed(lambda: torch.matmul(x, y, out=out), 10, a.repeat, sync)
        print('JSON ' + json.dumps(dict(n=a.gemm, samples=ts, device=torch.cuda.get_device_name(0),
                                        torch=torch.__version__, cuda=torch.version.cuda)))
        return

    def case(name, fn, calls, per='call'):
        ts = common.timed(fn, calls, a.repeat, sync)
        rows.append(dict(case=name, per=per, median_s=statistics.median(ts), min_s=min(ts),
                         max_s=max(ts), samples=ts))
        print('%-45s %10.1f us  (%.1f..%.1f)' % (name, statistics.median(ts) * 1e6,
                                                 min(ts) * 1e6, max(ts) * 1e6), flush=True)

    # check1
    x = torch.rand(230400, device=dev)
    case('check1: exp, n=230400, device result', lambda: torch.exp(x), 1000)

    # MLP step
    def mlp_step_fn(sizes, batch):
        layers = [nn.Linear(i, o) for i, o in zip(sizes[:-1], sizes[1:])]
        net = nn.Sequential(*[m for l in layers for m in (l, nn.Tanh())][:-1]).to(dev)
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        xb = torch.rand(batch, sizes[0], device=dev)
        yb = torch.randint(0, sizes[-1], (batch,), device=dev)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(net(xb), yb)
            loss.backward()
            opt.step()
        return step
    case('mlp: MLP 784-1000-1000-10, batch 256',
         mlp_step_fn([784, 1000, 1000, 10], 256), 20, 'step')

    # LeNet step
    batch = 32 if a.quick else 128
    lenet = nn.Sequential(nn.Conv2d(1, 20, 5), nn.Tanh(), nn.MaxPool2d(2),
                          nn.Conv2d(20, 50, 5), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(50 * 4 * 4, 500), nn.Tanh(), nn.Linear(500, 10)).to(dev)
    opt = torch.optim.SGD(lenet.parameters(), lr=0.01)
    xl = torch.rand(batch, 1, 28, 28, device=dev)
    yl = torch.randint(0, 10, (batch,), device=dev)

    def lenet_step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(lenet(xl), yl).backward()
        opt.step()
    case('lenet: LeNet training step, batch %d' % batch, lenet_step, 20, 'step')

    # LSTM step
    B, H, T = (16, 64, 10) if a.quick else (64, 256, 50)
    lstm = nn.LSTM(H, H).to(dev)
    head = nn.Linear(H, 10).to(dev)
    params = list(lstm.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.01)
    xs = torch.rand(T, B, H, device=dev)
    ys = torch.randint(0, 10, (B,), device=dev)

    def lstm_step():
        opt.zero_grad(set_to_none=True)
        out, _ = lstm(xs)
        F.cross_entropy(head(out[-1]), ys).backward()
        opt.step()
    case('lstm: nn.LSTM step, batch %d, %d hidden, %d steps' % (B, H, T), lstm_step, 10, 'step')
    cell = nn.LSTMCell(H, H).to(dev)
    opt2 = torch.optim.SGD(list(cell.parameters()) + list(head.parameters()), lr=0.01)

    def cell_step():
        opt2.zero_grad(set_to_none=True)
        h = torch.zeros(B, H, device=dev)
        c = torch.zeros(B, H, device=dev)
        for t in range(T):
            h, c = cell(xs[t], (h, c))
        F.cross_entropy(head(h), ys).backward()
        opt2.step()
    case('lstm: LSTMCell loop step, batch %d, %d hidden, %d steps' % (B, H, T), cell_step, 10,
         'step')
    record = dict(bench='torch', date=datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M UTC'),
                  device=torch.cuda.get_device_name(0), torch=torch.__version__,
                  cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
                  repeat=a.repeat, rows=rows)
    if a.json:
        with open(a.json, 'w') as f:
            json.dump(record, f, indent=1)
        print('wrote %s' % a.json)


if __name__ == '__main__':
    main()
