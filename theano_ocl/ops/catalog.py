"""The supported-ops page (docs/ops.md), generated from the registry.

``python -m theano_ocl ops-table [--out FILE] [--check FILE]`` writes what :func:`markdown`
returns: per Theano op type registered with :data:`~theano_ocl.ops.registry.ocl_impl`, the
:class:`~theano_ocl.ops.base.DeviceImpl` classes its factory declares, the dtypes they take
(``dtypes``, ``complex_ok``) and when the node stays on the host anyway (``host_when``),
then the scalar ops that elementwise kernels compute (the registry of
:mod:`theano_ocl.scalar`). Nothing here needs a device: the page is the same on every
machine, and tests/test_docs.py checks the committed page is current.
"""
import importlib
import inspect

from . import ocl_impl
from .base import COMPLEX_DTYPES, DEVICE_DTYPES, FLOAT_DTYPES, INT_DTYPES

#: the families in the order of ops/__init__.py, with what each covers
FAMILIES = ('basic', 'shape', 'subtensor', 'elemwise', 'reduce', 'blas', 'nnet', 'conv',
            'pool', 'bn', 'random', 'extra_ops')

#: modules whose ScalarOp instances make up Theano's scalar op set (the ones that have
#: an instance somewhere are the concrete ones)
SCALAR_MODULES = ('theano.scalar.basic', 'theano.scalar.basic_scipy',
                  'theano.tensor.nnet.sigm', 'theano.tensor.nnet.nnet', 'theano.tensor.opt',
                  'theano.tensor.elemwise', 'theano.tensor.inplace')

HEAD = """\
# Supported ops

Generated from the registry by `python -m theano_ocl ops-table`: do not edit; a test checks
that this page is current.

At link time the OCL linker picks, per Apply node, the device implementation registered
for the node's op type (below), or Theano's own code on the host (its C code where the op
has one, else `perform`), with the transfers that takes. `theano_ocl.report(f)` shows the
choice and the reason per node of a compiled function. Whatever the op, a node stays on
the host when:

- it computes small integers from values already on the host (shape arithmetic), or is
  elementwise arithmetic, a broadcast or an indexing of such values and constants of at
  most 64 elements with a vector or one-element result of any dtype (`T.mean`'s
  `1 / cast(n)`): Theano's thunk runs on the host by design, once per frame where the
  shapes decide it, and its value is a constant of the frame; `Shape` and `Shape_i` are
  read off the array shapes;
- an input or output is not a tensor (a Scalar, a typed list, a slice), except inputs the
  implementation takes as host values (sizes, axes, indices);
- a tensor has a dtype the implementation does not take (the dtypes column), a complex
  dtype where the implementation has no complex code, or float64 on a device without
  `cl_khr_fp64`;
- its op type is not in this table (`no device implementation for <Op>`), such as
  `Unique` or the RandomStreams ops of `theano.tensor.shared_randomstreams`.
"""


def _name(cls, strip):
    mod = cls.__module__
    for prefix in strip:
        if mod.startswith(prefix):
            mod = mod[len(prefix):]
            break
    return '%s.%s' % (mod, cls.__name__) if mod else cls.__name__


def op_name(op_type):
    return _name(op_type, ('theano.',))


def impl_name(impl):
    return _name(impl, ('theano_ocl.ops.', 'theano_ocl.'))


def impl_dtypes(impl):
    """The dtypes an implementation class takes, in DEVICE_DTYPES order."""
    allowed = impl.dtypes if impl.dtypes is not None else DEVICE_DTYPES
    return tuple(d for d in DEVICE_DTYPES
                 if d in allowed and (impl.complex_ok or d not in COMPLEX_DTYPES))


def fmt_dtypes(dtypes):
    """``('bool', 'int8', ..., 'float64')`` -> ``'bool, int8-uint64, float16-float64'``."""
    dtypes = set(dtypes)
    if dtypes == set(DEVICE_DTYPES):
        return 'all'
    parts = ['bool'] if 'bool' in dtypes else []
    for group, whole in ((INT_DTYPES, 'int8-uint64'), (FLOAT_DTYPES, 'float16-float64'),
                         (COMPLEX_DTYPES, 'complex64, complex128')):
        got = [d for d in group if d in dtypes]
        parts.append(whole if len(got) == len(group) else ', '.join(got))
    return ', '.join(p for p in parts if p)


def _first_line(doc):
    doc = inspect.cleandoc(doc or '')
    return doc.split('\n\n')[0].replace('\n', ' ')


def rows():
    """(family, op type, factory) per registered op type, in family then op-name order."""
    out = []
    for op_type, factory in ocl_impl.registry.items():
        if op_type is object:
            continue
        impls = getattr(factory, 'impls', None)
        if impls is None:
            raise TypeError('the factory %s.%s registered for %s declares no implementation '
                            'classes (registry.implemented_by)'
                            % (factory.__module__, factory.__qualname__, op_name(op_type)))
        family = factory.__module__.rsplit('.', 1)[-1]
        out.append((family, op_type, factory))
    order = {f: k for k, f in enumerate(FAMILIES)}
    out.sort(key=lambda r: (order.get(r[0], len(order)), r[0], op_name(r[1])))
    return out


def _cell(text):
    return text.replace('|', '\\|')


def op_table():
    lines = []
    family = None
    for fam, op_type, factory in rows():
        if fam != family:
            family = fam
            mod = importlib.import_module('theano_ocl.ops.' + fam)
            lines += ['', '## %s' % fam, '', _first_line(mod.__doc__), '',
                      '| Theano op | device implementation | dtypes | stays on the host when |',
                      '|---|---|---|---|']
        impls = factory.impls
        if not impls:
            lines.append('| `%s` | (none) | | always: %s |'
                         % (op_name(op_type), _cell(_first_line(factory.__doc__))))
            continue
        dtypes = sorted({d for i in impls for d in impl_dtypes(i)}, key=DEVICE_DTYPES.index)
        when = '; '.join(sorted({i.host_when for i in impls if i.host_when}))
        lines.append('| `%s` | %s | %s | %s |' % (
            op_name(op_type), ', '.join('`%s`' % impl_name(i) for i in impls),
            fmt_dtypes(dtypes), _cell(when) or '-'))
    return lines


def scalar_op_classes():
    """(with OpenCL code, without) lists of Theano's concrete scalar op classes."""
    from theano import scalar as ts
    from ..scalar import codegen
    found = set()
    for name in SCALAR_MODULES:
        mod = importlib.import_module(name)
        for value in vars(mod).values():
            if isinstance(value, ts.ScalarOp):
                found.add(type(value))
    found |= {c for c in codegen.op_code.registry if c is not object}
    with_code, without = [], []
    for cls in sorted(found, key=lambda c: (c.__name__, c.__module__)):
        has = codegen.op_code.dispatch(cls) is not codegen.no_code
        (with_code if has else without).append(cls)
    return with_code, without


def scalar_table():
    with_code, without = scalar_op_classes()
    return ['', '## Scalar ops in elementwise kernels', '',
            '`Elemwise` nodes (fused `Composite` ones included) run on the device when every '
            'scalar op in them has OpenCL code for the node\'s dtypes '
            '(`theano_ocl/scalar/`; `scalar/complex.py` for complex values).', '',
            '**With OpenCL code** (%d): %s.' % (
                len(with_code), ', '.join('`%s`' % c.__name__ for c in with_code)), '',
            '**Without** (%d; an `Elemwise` of these runs on the host): %s.' % (
                len(without), ', '.join('`%s`' % c.__name__ for c in without) or 'none')]


def markdown():
    return HEAD + '\n'.join(op_table() + scalar_table()) + '\n'


def main(args):
    """``ops-table``: print the page, write it to ``--out``, or ``--check`` a file."""
    import sys
    text = markdown()
    if args.check:
        with open(args.check) as f:
            if f.read() != text:
                print('%s is not what the registry generates: run python -m theano_ocl '
                      'ops-table --out %s' % (args.check, args.check), file=sys.stderr)
                return 1
        return 0
    if args.out:
        with open(args.out, 'w') as f:
            f.write(text)
        print('wrote %s' % args.out)
    else:
        sys.stdout.write(text)
    return 0
