"""The machinery every scalar op's OpenCL code is generated with.

Owns: the dtype -> OpenCL type mapping (``ctype``, ``compute_ctype``), ``Gen`` (one body under
construction: its helper functions, temporaries and ``th_err`` codes), ``Call`` (one op applied
to OpenCL values: what a code generator receives), exact literals and conversions between
dtypes (x86's float -> integer conversions, float16 rounding), the registry ``op_code`` (a
``singledispatch`` on the scalar op's class that ``arith``, ``functions`` and ``complex`` fill;
an op without an entry raises ``NoDeviceImplementation``) and ``Composite``, whose fused graph
is generated op by op through the same registry.
"""
import functools
import math
import string

import numpy as np

import theano.scalar as scal
from theano.gof import Constant

from ..errors import NoDeviceImplementation
from . import complex as scomplex

_CTYPES = {
    'bool': 'uchar', 'int8': 'char', 'uint8': 'uchar', 'int16': 'short', 'uint16': 'ushort',
    'int32': 'int', 'uint32': 'uint', 'int64': 'long', 'uint64': 'ulong',
    'float16': 'half', 'float32': 'float', 'float64': 'double'}
SIGNED = ('int8', 'int16', 'int32', 'int64')
UNSIGNED = ('uint8', 'uint16', 'uint32', 'uint64')
INTS = SIGNED + UNSIGNED
FLOATS = ('float16', 'float32', 'float64')


def is_int(dtype):
    return dtype in INTS or dtype == 'bool'


# complex values as (real, imaginary) vectors, numpy's layout; only the kernels that know
# complex arithmetic (elementwise, products, copies) ask for them with complex_ok
_COMPLEX_CTYPES = {'complex64': 'float2', 'complex128': 'double2'}


def ctype(dtype, complex_ok=False):
    """The OpenCL type that stores one element of ``dtype``."""
    dtype = str(dtype)
    try:
        return _CTYPES[dtype]
    except KeyError:
        if complex_ok and dtype in _COMPLEX_CTYPES:
            return _COMPLEX_CTYPES[dtype]
        raise NoDeviceImplementation(
            "dtype %s has no OpenCL type (only bool, integer and float dtypes run on the "
            "device%s)" % (dtype, '' if complex_ok else ' in this kernel'))


def compute_ctype(dtype, complex_ok=False):
    """The OpenCL type a kernel computes ``dtype`` values in (float16 is storage only)."""
    t = ctype(dtype, complex_ok)
    return 'float' if t == 'half' else t



# ---------------------------------------------------------------------------------------------
# Generation state, literals and conversions

class Gen(object):
    """One body under construction: the helper functions it calls and its temporaries."""

    def __init__(self, check=False):
        self.helpers = {}  # name -> guarded code, in dependency (= first use) order
        self.fp64 = False
        self.ntmp = 0
        self.check = check      # integer // and % by zero set th_err (elemwise_code_checked)
        self.codes = set()      # th_err codes the body may set
        self.nonzero = set()    # input expressions known to hold no zero

    def ct(self, dtype):
        t = compute_ctype(dtype, complex_ok=True)
        if t in ('double', 'double2'):
            self.fp64 = True
        return t

    def code(self, op, ins, in_dtypes, outs, out_dtypes):
        for d in list(in_dtypes) + list(out_dtypes):
            self.ct(d)
        call = Call(self, ins, in_dtypes, outs, out_dtypes)
        if not isinstance(op, scal.Composite) and \
                any(scomplex.is_complex(d) for d in list(in_dtypes) + list(out_dtypes)):
            return scomplex.op_code(op, call)
        return op_code(op, call)

    def temp(self):
        self.ntmp += 1
        return 't%d' % (self.ntmp - 1)

    def helper(self, name, template, T=None, **subs):
        """Define helper code ``template`` (a string.Template) once under ``name``.

        ``T`` ('float' or 'double') fills $T, $F (the literal suffix) and $EPS; ``subs`` the rest.
        Helpers a template calls must be defined first (their order is the file's order).
        """
        if name not in self.helpers:
            if T is not None:
                subs = dict(subs, T=T, F='f' if T == 'float' else '',
                            EPS='FLT_EPSILON' if T == 'float' else 'DBL_EPSILON')
                if T == 'double':
                    self.fp64 = True
            guard = 'THEANO_OCL_' + name.upper()
            self.helpers[name] = '#ifndef %s\n#define %s\n%s\n#endif' % (
                guard, guard, template.substitute(subs).strip('\n'))
        return name

    def support(self):
        parts = ['#pragma OPENCL EXTENSION cl_khr_fp64 : enable'] if self.fp64 else []
        return '\n'.join(parts + list(self.helpers.values()))


class Call(object):
    """One scalar op applied to OpenCL values: what an op's code generator receives.

    ``ins`` are input expressions (names or literals, safe to repeat), ``outs`` output names.
    """

    def __init__(self, gen, ins, in_dtypes, outs, out_dtypes):
        self.gen = gen
        self.ins, self.in_dtypes = list(ins), list(in_dtypes)
        self.outs, self.out_dtypes = list(outs), list(out_dtypes)

    @property
    def od(self):
        return self.out_dtypes[0]

    @property
    def T(self):
        return self.gen.ct(self.od)

    def x(self, k, dtype=None):
        """Input ``k`` converted to ``dtype`` (default: the output dtype)."""
        return convert(self.gen, self.ins[k], self.in_dtypes[k], dtype or self.od)

    def xs(self, dtype=None):
        return [self.x(k, dtype) for k in range(len(self.ins))]

    def convert(self, expr, src, dst):
        """``expr`` (of dtype ``src``) as a ``dst`` value."""
        return convert(self.gen, expr, src, dst)

    def lit(self, value, dtype=None):
        return literal(value, dtype or self.od)

    def set(self, expr):
        return '%s = %s;' % (self.outs[0], expr)


def float_valued(gen_fn):
    """An op whose Theano C code computes in floating point (its helpers are templated on
    float/double): an integer output -- Theano's inplace ops keep an int array's dtype
    (transfer_type) -- is computed into a double temporary and converted, truncating as
    Theano's assignment does."""
    @functools.wraps(gen_fn)
    def wrapped(op, c):
        if c.od in FLOATS:
            return gen_fn(op, c)
        tmp = c.gen.temp()
        c.gen.ct('float64')
        sub = Call(c.gen, c.ins, c.in_dtypes, [tmp], ['float64'])
        return '{\ndouble %s;\n%s\n%s\n}' % (tmp, gen_fn(op, sub),
                                              c.set(convert(c.gen, tmp, 'float64', c.od)))
    return wrapped


def literal(value, dtype):
    """``value`` as an exact OpenCL literal of ``dtype``'s compute type."""
    dtype = str(dtype)
    if dtype == 'bool':
        return '1' if value else '0'
    if scomplex.is_complex(dtype):
        return scomplex.literal(value, dtype, literal)
    if dtype in INTS:
        v = int(value)
        if dtype in ('int32', 'int64') and v == np.iinfo(dtype).min:
            # -2147483648 is '-' applied to a literal too large for int
            suffix = 'L' if dtype == 'int64' else ''
            return '(%d%s - 1%s)' % (v + 1, suffix, suffix)
        text = '%d%s' % (v, {'uint32': 'u', 'int64': 'L', 'uint64': 'UL'}.get(dtype, ''))
        if dtype in ('int8', 'int16', 'uint8', 'uint16'):
            return '((%s)%s)' % (ctype(dtype), text)
        return '(%s)' % text if v < 0 else text
    ctype(dtype)
    v = float(np.asarray(value).astype(dtype))
    if math.isnan(v):
        return 'NAN'
    if math.isinf(v):
        return 'INFINITY' if v > 0 else '(-INFINITY)'
    # the shortest decimal that reads back as the same double / float (correctly rounded)
    text = repr(v) if dtype == 'float64' else str(np.float32(v)) + 'f'
    return '(%s)' % text if text.startswith('-') else text


def convert(gen, expr, src, dst):
    """``expr`` (of dtype ``src``) as a ``dst`` value."""
    if src == dst:
        return expr
    if scomplex.is_complex(src) or scomplex.is_complex(dst):
        gen.ct(src), gen.ct(dst)
        return scomplex.convert(gen, expr, src, dst, convert)
    if dst == 'bool':
        return '(%s != 0)' % expr
    if src in FLOATS and dst in INTS:
        return _float_to_int(gen, expr, src, dst)
    if dst == 'float16' and src not in ('bool', 'int8', 'uint8'):  # those are exact in half
        gen.helper('round_half', _ROUND_HALF)
        return 'th_round_half(%s)' % convert(gen, expr, src, 'float32')
    if gen.ct(src) == gen.ct(dst):
        return expr
    return '((%s)%s)' % (gen.ct(dst), expr)


_F2I = string.Template('''
/* x86's truncating conversions (cvttss2si, cvttsd2si): NaN and out-of-range values give the
   "integer indefinite" INT_MIN / LONG_MIN. C leaves them undefined; numpy's and Theano's casts
   behave this way on x86, narrower targets keeping the low bits of the int32 conversion. */
int th_f2i32_$T($T x)
{
    return (x >= -0x1p31$F && x < 0x1p31$F) ? (int)x : INT_MIN;
}
long th_f2i64_$T($T x)
{
    return (x >= -0x1p63$F && x < 0x1p63$F) ? (long)x : LONG_MIN;
}
/* gcc's conversion to uint64 without AVX-512: values >= 2**63 are converted less 2**63. */
ulong th_f2u64_$T($T x)
{
    return x >= 0x1p63$F ? ((ulong)th_f2i64_$T(x - 0x1p63$F) ^ 0x8000000000000000UL)
                         : (ulong)th_f2i64_$T(x);
}
''')


def _float_to_int(gen, expr, src, dst):
    T = gen.ct(src)
    gen.helper('f2i_' + T, _F2I, T)
    if dst == 'uint64':
        return 'th_f2u64_%s(%s)' % (T, expr)
    via = 'i64' if dst in ('int64', 'uint32') else 'i32'
    call = 'th_f2%s_%s(%s)' % (via, T, expr)
    return call if dst in ('int32', 'int64') else '((%s)%s)' % (gen.ct(dst), call)


_ROUND_HALF = string.Template('''
/* A value converted to float16 but held in a float: keep only what storing it as half keeps
   (a cast to float16 inside a Composite rounds, as numpy's does). */
float th_round_half(float x)
{
    ushort h;
    vstore_half_rte(x, 0, (half *)&h);
    return vload_half(0, (const half *)&h);
}
''')


# ---------------------------------------------------------------------------------------------
# The registry

def no_code(op, call):
    raise NoDeviceImplementation("scalar op %s (%s.%s) has no OpenCL code" % (
        op, type(op).__module__, type(op).__name__))


op_code = functools.singledispatch(no_code)


def register(*classes):
    def decorate(fn):
        for cls in classes:
            op_code.register(cls, fn)
        return fn
    return decorate


# ---------------------------------------------------------------------------------------------
# Composite: the fused graph, in topological order, with typed temporaries

@register(scal.Composite)
def _composite(op, c):
    gen = c.gen
    fg = op.fgraph
    names = {}
    for var, expr, dtype in zip(fg.inputs, c.ins, c.in_dtypes):
        names[var] = convert(gen, expr, dtype, var.type.dtype)
        if expr in gen.nonzero and dtype == var.type.dtype:
            gen.nonzero.add(names[var])
    first_out = {}
    for name, var, dtype in zip(c.outs, fg.outputs, c.out_dtypes):
        if var.owner is not None and var.type.dtype == dtype:
            first_out.setdefault(var, name)

    def value(var):
        if var in names:
            return names[var]
        if isinstance(var, Constant):
            gen.ct(var.type.dtype)
            text = literal(var.data, var.type.dtype)
            if np.all(np.asarray(var.data) != 0):
                gen.nonzero.add(text)
            return text
        raise ValueError("Composite %s: %s is neither an input, a constant nor computed "
                         "before it is used" % (op, var))

    lines = []
    for node in fg.toposort():
        outs = []
        for var in node.outputs:
            name = first_out.get(var)
            if name is None:
                name = gen.temp()
                lines.append('%s %s;' % (gen.ct(var.type.dtype), name))
            names[var] = name
            outs.append(name)
        lines.append(gen.code(node.op, [value(v) for v in node.inputs],
                              [v.type.dtype for v in node.inputs],
                              outs, [v.type.dtype for v in node.outputs]))
    # outputs that are inputs, constants, another output or of another dtype
    for name, var, dtype in zip(c.outs, fg.outputs, c.out_dtypes):
        if names.get(var) != name:
            lines.append('%s = %s;' % (name, convert(gen, value(var), var.type.dtype, dtype)))
    return '{\n%s\n}' % '\n'.join(lines)
