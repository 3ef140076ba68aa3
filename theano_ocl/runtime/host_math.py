"""Vector elementary functions for the elementwise nodes the host's VM runs.

Theano C computes an elementwise node's ``tanh``, ``exp``, ``log`` ... one element at a
time with the C library's scalar functions. Two vector versions exist, chosen by the
``host_math`` setting (:func:`backend`):

* 'numpy': NumPy 1.22 and later, on a CPU with AVX-512, has vector versions of them (its
  SVML dispatch). Measured on the 2-core Xeon (2026-12-01), nanoseconds an element over
  10,000, Theano C / NumPy: float64 tanh 11.0 / 1.3, exp 3.0 / 0.6, log1p 7.6 / 0.9;
  float32 tanh 10.9 / 0.4, exp 2.0 / 0.45 (every function of :data:`FAST`: 4 to 32 times
  faster; ``sqrt`` is not, C's loop is as fast).
* 'libmvec': glibc's vector math library, called from loops compiled for this CPU
  (``runtime/host_vecmath.py``), for CPUs where NumPy has none (AVX2): 2 to 12 times
  faster than C's loop over 2,048 elements (float64 tanh 9.4 against 31.6 us).

Where the host tier runs Theano's VM (``runtime/host_tier.py``: the cost model's host
choice, tiny hot functions), an elementwise node whose scalar graph (one scalar op or a
fused ``Composite``) computes a function the backend has, in floats of one dtype, over at
least :data:`MIN_ELEMENTS` elements, is computed by those functions: one pass per scalar
node, in its dtype, as Theano's own Python implementation (``Elemwise.perform``) calls
NumPy's (the plain arithmetic of :data:`_PLAIN` is NumPy's under both); a smaller call of
the node runs Theano's C code. The same shapes are accepted and the same ``ValueError``
raised as by Theano C; the results agree with Theano C's to a few units in the last place,
not to the bit (the vector ``tanh`` is not the C library's scalar one): the ``host_math``
setting 'c' keeps Theano C's code, and its bits, for every node.
"""
import numpy as np

from . import host_vecmath

#: the scalar functions NumPy computes faster than the C library's scalar loop (with its
#: AVX-512 dispatch); a node takes NumPy's path only when it computes one of them
FAST = frozenset(['tanh', 'exp', 'log', 'log1p', 'expm1', 'exp2', 'log2', 'log10', 'sin',
                  'cos', 'tan', 'arcsin', 'arccos', 'arctan', 'sinh', 'cosh', 'arcsinh',
                  'arccosh', 'arctanh', 'sigmoid'])
#: exact arithmetic the same in both (IEEE: one rounding each), computed beside them
_PLAIN = frozenset(['add', 'subtract', 'multiply', 'true_divide', 'negative', 'square',
                    'abs', 'maximum', 'minimum', 'sqrt'])
#: below this many elements a call of the node runs Theano's C code: NumPy's passes and
#: the floating-point state switch cost ~3 us, more than C's loop over fewer elements
MIN_ELEMENTS = 1024

_FLOATS = ('float32', 'float64')
# Theano C's ScalarSigmoid: 0 below, 1 above, 1 / (1 + exp(-x)) between (tensor/nnet/sigm.py)
_SIGMOID_LIMITS = {'float32': (-88.0, 15.0), 'float64': (-709.0, 19.0)}


def available():
    """Whether this NumPy has the vector functions (1.22 or later on a CPU with AVX-512:
    its SVML dispatch); elsewhere NumPy calls the same C library functions."""
    try:
        from numpy.core._multiarray_umath import __cpu_features__ as features
    except ImportError:
        return False
    version = tuple(int(p) for p in np.__version__.split('.')[:2] if p.isdigit())
    return version >= (1, 22) and bool(features.get('AVX512_SKX'))


def backend(setting):
    """Which vector functions the ``host_math`` setting ('auto', 'numpy', 'libmvec', 'c')
    has compute: 'numpy', 'libmvec' or None (Theano C's code). 'auto': NumPy's where it
    has vector versions (:func:`available`), else libmvec's where they can be built here;
    'libmvec' where they cannot be built: None (warned by ``host_vecmath``)."""
    if setting == 'numpy' or (setting == 'auto' and available()):
        return 'numpy'
    if setting in ('auto', 'libmvec') and host_vecmath.available():
        return 'libmvec'
    return None


def vector_loops(name):
    """The loops of backend ``name`` (:func:`backend`) as ``_apply`` takes them:
    {(function, dtype): f(x, out)} for 'libmvec', None for NumPy's own functions."""
    return host_vecmath.loops() if name == 'libmvec' else None


def fast_names(loops):
    """The functions a node must compute one of to take the path: :data:`FAST`, or of
    those the ones ``loops`` has (and the sigmoid, by its ``exp``)."""
    if loops is None:
        return FAST
    have = {name for name, _ in loops}
    return frozenset(n for n in FAST if n in have or (n == 'sigmoid' and 'exp' in have))


def _scalar_name(scalar_op):
    name = type(scalar_op).__name__
    if name == 'ScalarSigmoid':
        return 'sigmoid'
    if name in ('Second', 'Identity'):
        return name.lower()
    spec = getattr(scalar_op, 'nfunc_spec', None)
    if spec is None or '.' in spec[0]:
        return None
    return spec[0]


def plan(node, fast=FAST):
    """The NumPy program of elementwise ``node``: a list of (function name, argument
    slots, result slot) over slots 0..n-1 (the node's inputs) then the results, with the
    output slots; None where the node cannot take this path (another op, dtypes other
    than one float dtype, a scalar op outside ``fast`` (:func:`fast_names`) and the plain
    arithmetic, or no function of ``fast``)."""
    op = node.op
    scalar_op = getattr(op, 'scalar_op', None)
    if type(op).__name__ != 'Elemwise' or scalar_op is None:
        return None
    dtypes = {getattr(v.type, 'dtype', None) for v in node.inputs + node.outputs}
    if len(dtypes) != 1 or not dtypes <= set(_FLOATS):
        return None
    dtype = dtypes.pop()
    n_in = len(node.inputs)
    if type(scalar_op).__name__ != 'Composite':
        name = _scalar_name(scalar_op)
        if name not in fast:
            return None
        return [(name, tuple(range(n_in)), n_in)], [n_in], [], dtype
    fg = scalar_op.fgraph
    slot = {v: k for k, v in enumerate(fg.inputs)}
    consts, steps = [], []
    any_fast = False
    for k, snode in enumerate(fg.toposort()):
        name = _scalar_name(snode.op)
        if name is None or name not in fast | _PLAIN | {'second', 'identity'}:
            return None
        any_fast = any_fast or name in fast
        args = []
        for v in snode.inputs:
            if v in slot:
                args.append(slot[v])
                continue
            value = getattr(v, 'data', None)       # a constant of the composite
            if value is None or np.asarray(value).astype(dtype) != value:
                return None
            slot[v] = ('const', len(consts))
            consts.append(np.asarray(value, dtype))
            args.append(slot[v])
        for v in snode.outputs:
            if getattr(v.type, 'dtype', None) != dtype:
                return None
        slot[snode.outputs[0]] = n_in + k
        steps.append((name, tuple(args), n_in + k))
    if not any_fast:
        return None
    outs = []
    for v in fg.outputs:
        if v not in slot or isinstance(slot[v], tuple):
            return None
        outs.append(slot[v])
    return steps, outs, consts, dtype


def _vector(f, x, out, dtype):
    """``f`` (a loop of ``host_vecmath``: contiguous arrays only) of ``x`` into ``out``
    (None: a new array), broadcasting ``x`` to ``out``'s shape as NumPy's ``out=`` does."""
    if out is None:
        out = np.empty(x.shape, dtype)
    elif not (out.flags.c_contiguous and out.flags.writeable):
        np.copyto(out, _vector(f, x, None if out.shape == x.shape else
                               np.empty(out.shape, dtype), dtype))
        return out
    if x.shape != out.shape or x.dtype != out.dtype or not x.flags.c_contiguous:
        np.copyto(out, x)
        x = out
    f(x, out)
    return out


def _apply(name, args, out, dtype, loops=None):
    """One scalar node over arrays ``args``, into ``out`` (None: a new array); ``loops``:
    the vector loops computing :data:`FAST`'s functions (None: NumPy's)."""
    if loops is not None:
        f = loops.get((name, dtype))
        if f is not None:
            return _vector(f, args[0], out, dtype)
    if name in ('second', 'identity'):
        value = args[-1]
        if out is None:
            return value
        np.copyto(out, value)
        return out
    if name == 'sigmoid':
        lo, hi = _SIGMOID_LIMITS[dtype]
        x = args[0]
        low, high = x < lo, x > hi          # (before ``out``, which may be ``x``, is written)
        r = np.negative(x, out=out)
        exp = loops.get(('exp', dtype)) if loops is not None else None
        if exp is not None:
            _vector(exp, r, r, dtype)
        else:
            np.exp(r, out=r)
        r += 1
        np.reciprocal(r, out=r)
        np.copyto(r, 0, where=low)
        np.copyto(r, 1, where=high)
        return r
    f = getattr(np, name)
    if len(args) > 2:                      # Theano's n-ary add, mul: left to right, as C
        acc = f(args[0], args[1])
        for a in args[2:-1]:
            f(acc, a, out=acc)
        return f(acc, args[-1], out=out) if out is not None else f(acc, args[-1], out=acc)
    return f(*args, out=out) if out is not None else f(*args)


def thunk(node, storage_map, compute_map, c_thunk, program, counts, loops=None):
    """A thunk for ``node`` (``program``: :func:`plan`'s) that runs ``c_thunk`` (Theano's)
    below :data:`MIN_ELEMENTS` elements and the program above (counted in ``counts[1]``),
    with ``loops``' vector functions (:func:`vector_loops`; None: NumPy's)."""
    steps, outs, consts, dtype = program
    in_cells = [storage_map[v] for v in node.inputs]
    out_cells = [storage_map[v] for v in node.outputs]
    done = [compute_map[v] for v in node.outputs]
    ndim = node.outputs[0].ndim
    # per dimension, the inputs whose type does not broadcast it (their sizes must agree)
    fixed = [[j for j, v in enumerate(node.inputs) if not v.type.broadcastable[d]]
             for d in range(ndim)]
    # (an output computed in the input it destroys: only where it is the one output, whose
    # step is then the last, so no later step reads the input it overwrote)
    inplace = dict(getattr(node.op, 'inplace_pattern', None) or {}) if len(outs) == 1 else {}
    quiet = np.errstate(all='ignore')
    first = {}                  # the result slot an output's target receives: its first
    for o, s in enumerate(outs):
        first.setdefault(s, o)

    def run():
        vals = [cell[0] for cell in in_cells]
        shape = []
        for d, js in enumerate(fixed):
            if not js:
                shape.append(1)
                continue
            n = vals[js[0]].shape[d]
            for j in js[1:]:
                if vals[j].shape[d] != n:
                    raise ValueError(
                        'Input dimension mis-match. (input[%d].shape[%d] = %d, '
                        'input[%d].shape[%d] = %d)' % (js[0], d, n, j, d, vals[j].shape[d]))
            shape.append(n)
        size = 1
        for n in shape:
            size *= n
        if size < MIN_ELEMENTS:
            return c_thunk()
        shape = tuple(shape)
        counts[1] += 1
        targets = []
        for o, cell in enumerate(out_cells):
            j = inplace.get(o)
            if j is not None:
                target = vals[j]
            else:
                target = cell[0]
                if not (type(target) is np.ndarray and target.shape == shape
                        and target.dtype == dtype and target.flags.c_contiguous
                        and target.flags.writeable):
                    target = np.empty(shape, dtype)
            targets.append(target)
        into = {s: targets[o] for s, o in first.items()}
        slots = vals + [None] * len(steps)
        with quiet:
            for name, args, res in steps:
                a = [consts[s[1]] if type(s) is tuple else slots[s] for s in args]
                slots[res] = _apply(name, a, into.get(res), dtype, loops)
        for o, cell in enumerate(out_cells):
            value, target = slots[outs[o]], targets[o]
            if value is not target:         # (an input, or a result two outputs share)
                np.copyto(target, value)
            cell[0] = target
            done[o][0] = True
        return None
    run.inputs = in_cells
    run.outputs = out_cells
    run.lazy = False
    run.host_math = True
    return run
