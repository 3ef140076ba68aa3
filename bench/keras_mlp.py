"""Keras 2.x's MNIST MLP example (Theano backend) under Theano C and theano_ocl in one
process: how far apart their weights end, against how far Theano C moves by itself.

The model of Keras' ``examples/mnist_mlp.py``: Dense(512, relu), Dropout(0.2),
Dense(512, relu), Dropout(0.2), Dense(10, softmax), categorical cross-entropy, here with
Adam, trained ``--epochs`` epochs at batch 128 on ``--samples`` synthetic digits (seeded:
no download). Both backends start from the same weights, the same dropout seeds and the
same shuffling (numpy's global seed is reset before each model is built and trained).

Besides the two runs it trains Theano C a second time on inputs moved by one ulp
(``numpy.nextafter``): the distance between those two is how far the reference moves under
a change that small, the scale against which the OCL distance is read. ``--variants``
runs the same comparison without dropout (``nodrop``), with plain SGD (``sgd``), and with
device-side diagnostics (``diagnostic``: contraction off, correctly rounded float32
division and square root, float32 ``pow`` computed in double), to tell which part makes a
difference. Prints one table; ``--json`` writes it.

    KERAS_BACKEND=theano python bench/keras_mlp.py [--epochs 2] [--variants all]
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault('KERAS_BACKEND', 'theano')
import numpy as np  # noqa: E402
import theano_ocl  # noqa: E402,F401  (first: Theano on numpy >= 1.22)
import theano  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def data(n, seed=0):
    """Synthetic 28x28 'digits': ten random prototypes plus noise, in [0, 1], float32."""
    rng = np.random.RandomState(seed)
    protos = rng.rand(10, 784).astype('float32')
    y = rng.randint(0, 10, n)
    x = np.clip(protos[y] + 0.3 * rng.randn(n, 784).astype('float32'), 0, 1)
    return x.astype('float32'), np.eye(10, dtype='float32')[y]


def train(mode, x, y, epochs, dropout, optimizer, weights=None, seed=1):
    """Final weights and per-batch losses of the example model trained under ``mode``."""
    import keras
    from keras.layers import Dense, Dropout
    from keras.models import Sequential
    theano.config.mode = mode
    np.random.seed(seed)                 # dropout seeds are drawn while the model is built
    model = Sequential()
    model.add(Dense(512, activation='relu', input_shape=(784,)))
    if dropout:
        model.add(Dropout(dropout))
    model.add(Dense(512, activation='relu'))
    if dropout:
        model.add(Dropout(dropout))
    model.add(Dense(10, activation='softmax'))
    if weights is not None:
        model.set_weights(weights)
    opt = keras.optimizers.Adam() if optimizer == 'adam' else keras.optimizers.SGD(0.01)
    model.compile(loss='categorical_crossentropy', optimizer=opt)
    losses = []
    cb = keras.callbacks.LambdaCallback(
        on_batch_end=lambda b, logs: losses.append(float(logs['loss'])))
    np.random.seed(seed + 1)             # the shuffling
    t0 = time.perf_counter()
    model.fit(x, y, batch_size=128, epochs=epochs, verbose=0, callbacks=[cb])
    return model.get_weights(), np.array(losses), time.perf_counter() - t0, model


def distance(wa, wb):
    """Largest absolute difference over all weights, and relative to the largest weight."""
    d = max(float(np.max(np.abs(a - b))) for a, b in zip(wa, wb))
    scale = max(float(np.max(np.abs(a))) for a in wa)
    return d, d / scale


def first_divergence(la, lb, rel=1e-6):
    """The first batch whose losses differ by more than ``rel`` (relative), or -1."""
    d = np.abs(la - lb) / np.maximum(np.abs(la), 1e-30)
    idx = np.nonzero(d > rel)[0]
    return int(idx[0]) if idx.size else -1


_PATCHES = {}


def diagnostic(variant):
    """Switch on the device-side change a diagnostic ``variant`` names (all off for others):
    ``nocontract`` prepends ``#pragma OPENCL FP_CONTRACT OFF`` to every program;
    ``divsqrt`` builds with ``-cl-fp32-correctly-rounded-divide-sqrt``; ``pow64`` computes
    float32 ``pow`` in double; ``exact`` both of the last two."""
    from theano import scalar as scal
    from theano_ocl.device import OCLDevice
    from theano_ocl.scalar import codegen
    for undo in _PATCHES.values():
        undo()
    _PATCHES.clear()
    if variant in ('nocontract', 'divsqrt', 'exact'):
        build = OCLDevice.build
        pragma = '#pragma OPENCL FP_CONTRACT OFF\n' if variant == 'nocontract' else ''
        extra = () if variant == 'nocontract' else ('-cl-fp32-correctly-rounded-divide-sqrt',)

        def patched(self, source, options=()):
            return build(self, pragma + source, tuple(options) + extra)
        OCLDevice.build = patched
        _PATCHES['build'] = lambda: setattr(OCLDevice, 'build', build)
    if variant in ('pow64', 'exact'):
        pow_code = codegen.op_code.dispatch(scal.Pow)

        def pow64(op, c):
            if c.od == 'float32':
                x, y = c.xs()
                c.gen.fp64 = True
                return c.set('(float)pow((double)%s, (double)%s)' % (x, y))
            return pow_code(op, c)
        codegen.op_code.register(scal.Pow, pow64)
        _PATCHES['pow'] = lambda: codegen.op_code.register(scal.Pow, pow_code)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--epochs', type=int, default=2)
    p.add_argument('--samples', type=int, default=12000)
    p.add_argument('--variants', default='base',
                   help="comma-separated: base, nodrop, sgd, nocontract, divsqrt, pow64, "
                   "exact; or 'all'")
    p.add_argument('--json', default=None)
    args = p.parse_args()
    import collections
    import collections.abc
    for name in ('Iterable', 'Mapping', 'MutableMapping', 'Sequence', 'Callable'):
        # Keras 2.3.1 imports these from collections, which Python 3.10 removed
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    try:
        import keras  # noqa: F401
    except ImportError as e:
        print('keras_mlp: needs Keras 2.x with its Theano backend (pip install keras==2.3.1): '
              '%s' % e)
        return 2
    from theano_ocl.device import get_device
    dev = get_device()
    common.header('Keras MLP example (784-512-512-10, Adam), %d epochs of %d samples'
                  % (args.epochs, args.samples), dev)
    variants = ['base', 'nodrop', 'sgd', 'nocontract', 'divsqrt', 'pow64', 'exact'] \
        if args.variants == 'all' \
        else args.variants.split(',')
    x, y = data(args.samples)
    x_ulp = np.nextafter(x, np.float32(2))
    rows = []
    for v in variants:
        dropout = 0.0 if v == 'nodrop' else 0.2
        opt = 'sgd' if v == 'sgd' else 'adam'
        w0, _, _, _ = train('FAST_RUN', x[:128], y[:128], 0, dropout, opt)   # the start
        wc, lc, tc, _ = train('FAST_RUN', x, y, args.epochs, dropout, opt, w0)
        wu, lu, _, _ = train('FAST_RUN', x_ulp, y, args.epochs, dropout, opt, w0)
        diagnostic(v)
        try:
            wo, lo, to, _ = train('OCL', x, y, args.epochs, dropout, opt, w0)
        finally:
            diagnostic(None)
        d_ocl, r_ocl = distance(wc, wo)
        d_ulp, r_ulp = distance(wc, wu)
        rows.append({'variant': v, 'C vs OCL': d_ocl, 'C vs C(x+1ulp)': d_ulp,
                     'ratio': d_ocl / d_ulp if d_ulp else float('inf'),
                     'first batch apart (OCL)': first_divergence(lc, lo),
                     'first batch apart (ulp)': first_divergence(lc, lu),
                     'final loss C': float(lc[-1]), 'final loss OCL': float(lo[-1]),
                     'C s': tc, 'OCL s': to, 'rel C vs OCL': r_ocl, 'rel ulp': r_ulp})
    cols = ['variant', 'C vs OCL', 'C vs C(x+1ulp)', 'ratio', 'first batch apart (OCL)',
            'first batch apart (ulp)', 'final loss C', 'final loss OCL', 'C s', 'OCL s']
    common.table(rows, cols)
    if args.json:
        with open(args.json, 'w') as fh:
            json.dump({'bench': 'keras_mlp', 'device': dev.name, 'commit': common.commit(),
                       'epochs': args.epochs, 'samples': args.samples, 'rows': rows}, fh,
                      indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
