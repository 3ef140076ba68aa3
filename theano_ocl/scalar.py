"""Theano scalar ops as OpenCL C, for the elementwise and reduction kernels.

Owns: the dtype -> OpenCL type mapping (``ctype``, ``compute_ctype``) and ``elemwise_code``:
the OpenCL statements that compute one element of a scalar op -- every op of
``theano.scalar.basic`` and ``theano.scalar.basic_scipy`` with real dtypes, the scalar ops
``theano.tensor`` defines (sigmoid, ultra_fast_sigmoid, softplus, softsign, xlogx, xlogy0,
mul_without_zeros) and ``Composite`` -- plus the helper functions those statements call.
Code generators are registered per op class on ``_op_code`` (a ``singledispatch``);
an op without one raises ``NoDeviceImplementation`` and runs on the host.

The code computes what each op's ``c_code`` computes in Theano's C backend, except where that
result is undefined, crashes, or comes from C's type promotion instead of the dtypes Theano
declares:

* Integer operands of mixed signedness combine as Theano's C code combines them: in C's
  common type (usual arithmetic conversions, LP64), where a signed value converts to an
  unsigned type modulo 2**n, and the result then converts to the dtype Theano declares.
  int32 + uint32 -> int64 gives 4294967295 for (-1, 0) (numpy: -1), int64 + uint64 ->
  float64 gives 2**64 - 1 for (-1, 0), int32 < uint32 is false for (-1, 0), maximum(int32 -1,
  uint32 7) is -1; likewise ``//``, ``%``, bitwise ops, clip, switch and mul_without_zeros
  (``_c_mixed``). Where no signed value meets an unsigned common type (int8 + uint8,
  uint32 + int64, same signedness), C's result is numpy's and the inputs are converted to the
  output dtype before arithmetic, as numpy does.
* Integers mixed with floats follow numpy: float32 + int64 -> float64 is computed in double,
  not in C's float. Comparisons of an integer with a float32 compare in float, as in C (no
  double where no dtype is float64).
* Integer ``//`` and ``%`` by zero: Theano's C code raises ZeroDivisionError ("integer division
  by zero", "integer modulo by zero"). ``elemwise_code_checked`` gives a body that reports it
  through ``th_err`` (1 for division, 2 for modulo; the first failing op of an element wins),
  which the elementwise kernel hands back in an error flag; ``elemwise_code``'s bodies (the
  reductions', the scatters') give 0 there, numpy's result. INT_MIN // -1 wraps to INT_MIN (it
  traps on x86). Signed integer arithmetic wraps (it is done in unsigned arithmetic, never
  undefined).
* maximum/minimum of integers are exact (Theano's C code passes them through double).
* Float -> integer conversion of NaN and out-of-range values, undefined in C, follows x86's
  scalar conversions as gcc emits them without AVX-512 (``th_f2i32``): the value numpy gives
  except for some out-of-range -> uint32 conversions, where numpy's own SIMD loops disagree
  with its scalar code. Integer ``pow`` follows Theano (double result converted the same way)
  with exact integer arithmetic, so int64 results above 2**53 are exact, not rounded.
* float16 is storage only: computed in float, rounded to half where a value is stored and where
  a value is converted to float16 (a cast inside a Composite). Other float16 temporaries of a
  Composite keep float precision, as Theano's Python Composite keeps double (Theano's C backend
  has no float16 code).
* Float kernels stay in float: no double literal or operation appears unless a dtype involved is
  float64, so float32 code builds without cl_khr_fp64. Where Theano's C code computes a float32
  op in double (``1.0 / x``, the ultra-fast sigmoid, psi) results may differ in the last bits.
* psi and tri_gamma use Theano's C algorithms (~1e-10 accurate, 0 for x <= 0); erfcx, erfinv and
  erfcinv, which Theano computes with scipy, are computed here to full precision.
"""
import functools
import math
import string

import numpy as np

import theano.scalar as scal
from theano.gof import Constant
from theano.scalar import basic_scipy
from theano.tensor.elemwise import MulWithoutZeros
from theano.tensor.nnet.nnet import ScalarSoftsign
from theano.tensor.nnet.sigm import ScalarSigmoid, ScalarSoftplus, UltraFastScalarSigmoid
from theano.tensor.xlogx import XlogX, XlogY0

from . import scalar_complex as scomplex
from .errors import NoDeviceImplementation

_CTYPES = {
    'bool': 'uchar', 'int8': 'char', 'uint8': 'uchar', 'int16': 'short', 'uint16': 'ushort',
    'int32': 'int', 'uint32': 'uint', 'int64': 'long', 'uint64': 'ulong',
    'float16': 'half', 'float32': 'float', 'float64': 'double'}
_SIGNED = ('int8', 'int16', 'int32', 'int64')
_UNSIGNED = ('uint8', 'uint16', 'uint32', 'uint64')
_INTS = _SIGNED + _UNSIGNED
_FLOATS = ('float16', 'float32', 'float64')


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


def elemwise_code(scalar_op, in_dtypes, out_dtypes):
    """OpenCL code computing ``scalar_op`` on one element: ``(support, body)``.

    ``body`` reads the inputs ``i0, i1, ...`` (declared ``compute_ctype(in_dtypes[k])``) and
    assigns the outputs ``o0, o1, ...`` (declared ``compute_ctype(out_dtypes[k])``); bool outputs
    are 0 or 1. ``support`` goes once at file scope before the kernel: the cl_khr_fp64 pragma
    where float64 is involved, then helper functions, each guarded so that the supports of
    several bodies can be concatenated into one program.
    Raises NoDeviceImplementation when the op or a dtype cannot be expressed in OpenCL.
    """
    in_dtypes = [str(d) for d in in_dtypes]
    out_dtypes = [str(d) for d in out_dtypes]
    for d in in_dtypes + out_dtypes:
        ctype(d, complex_ok=True)
    nin = getattr(scalar_op, 'nin', -1)
    nout = getattr(scalar_op, 'nout', 1)
    if (nin >= 0 and nin != len(in_dtypes)) or nout != len(out_dtypes):
        raise TypeError("%s takes %s inputs and gives %d outputs; got %d input and %d output "
                        "dtypes" % (scalar_op, nin if nin >= 0 else 'any number of', nout,
                                    len(in_dtypes), len(out_dtypes)))
    support, body, _ = _elemwise_code(scalar_op, in_dtypes, out_dtypes, False, ())
    return support, body


# th_err codes of a checked body, and the error Theano's C code raises for each
ZERO_DIVISION_ERRORS = {1: 'integer division by zero', 2: 'integer modulo by zero'}


def elemwise_code_checked(scalar_op, in_dtypes, out_dtypes, nonzero=()):
    """``elemwise_code`` whose integer ``//`` and ``%`` report a zero divisor: ``(support,
    body, codes)``.

    When ``codes`` (the th_err values the body may set, see ``ZERO_DIVISION_ERRORS``) is not
    empty, the body expects an ``int th_err`` declared 0 before it and sets it to the code of
    the first op that divided by zero, as Theano's C code raises ZeroDivisionError at the
    first one. ``nonzero``: indices of inputs known to hold no zero (constants); divisions by
    those (and by nonzero constants inside a Composite) need no check. Without codes the body
    is exactly ``elemwise_code``'s.
    """
    in_dtypes = [str(d) for d in in_dtypes]
    out_dtypes = [str(d) for d in out_dtypes]
    support, body, codes = _elemwise_code(scalar_op, in_dtypes, out_dtypes, True, nonzero)
    if not codes:
        return elemwise_code(scalar_op, in_dtypes, out_dtypes) + ((),)
    return support, body, tuple(sorted(codes))


def _elemwise_code(scalar_op, in_dtypes, out_dtypes, check, nonzero):
    gen = _Gen(check)
    ins = ['i%d' % k for k in range(len(in_dtypes))]
    gen.nonzero.update(ins[k] for k in nonzero)
    body = gen.code(scalar_op, ins, in_dtypes,
                    ['o%d' % k for k in range(len(out_dtypes))], out_dtypes)
    return gen.support(), body, gen.codes


# ---------------------------------------------------------------------------------------------
# Generation state, literals and conversions

class _Gen(object):
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
        call = _Call(self, ins, in_dtypes, outs, out_dtypes)
        if not isinstance(op, scal.Composite) and \
                any(scomplex.is_complex(d) for d in list(in_dtypes) + list(out_dtypes)):
            return scomplex.op_code(op, call)
        return _op_code(op, call)

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


class _Call(object):
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
        return _convert(self.gen, self.ins[k], self.in_dtypes[k], dtype or self.od)

    def xs(self, dtype=None):
        return [self.x(k, dtype) for k in range(len(self.ins))]

    def convert(self, expr, src, dst):
        """``expr`` (of dtype ``src``) as a ``dst`` value."""
        return _convert(self.gen, expr, src, dst)

    def lit(self, value, dtype=None):
        return _literal(value, dtype or self.od)

    def set(self, expr):
        return '%s = %s;' % (self.outs[0], expr)


def _float_valued(gen_fn):
    """An op whose Theano C code computes in floating point (its helpers are templated on
    float/double): an integer output -- Theano's inplace ops keep an int array's dtype
    (transfer_type) -- is computed into a double temporary and converted, truncating as
    Theano's assignment does."""
    @functools.wraps(gen_fn)
    def wrapped(op, c):
        if c.od in _FLOATS:
            return gen_fn(op, c)
        tmp = c.gen.temp()
        c.gen.ct('float64')
        sub = _Call(c.gen, c.ins, c.in_dtypes, [tmp], ['float64'])
        return '{\ndouble %s;\n%s\n%s\n}' % (tmp, gen_fn(op, sub),
                                              c.set(_convert(c.gen, tmp, 'float64', c.od)))
    return wrapped


def _literal(value, dtype):
    """``value`` as an exact OpenCL literal of ``dtype``'s compute type."""
    dtype = str(dtype)
    if dtype == 'bool':
        return '1' if value else '0'
    if scomplex.is_complex(dtype):
        return scomplex.literal(value, dtype, _literal)
    if dtype in _INTS:
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


def _convert(gen, expr, src, dst):
    """``expr`` (of dtype ``src``) as a ``dst`` value."""
    if src == dst:
        return expr
    if scomplex.is_complex(src) or scomplex.is_complex(dst):
        gen.ct(src), gen.ct(dst)
        return scomplex.convert(gen, expr, src, dst, _convert)
    if dst == 'bool':
        return '(%s != 0)' % expr
    if src in _FLOATS and dst in _INTS:
        return _float_to_int(gen, expr, src, dst)
    if dst == 'float16' and src not in ('bool', 'int8', 'uint8'):  # those are exact in half
        gen.helper('round_half', _ROUND_HALF)
        return 'th_round_half(%s)' % _convert(gen, expr, src, 'float32')
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


def complex_convert(expr, src, dst):
    """``expr`` (dtype ``src``) as a ``dst`` value, where one of them is complex: for copies."""
    return _convert(_Gen(), expr, str(src), str(dst))


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

def _no_code(op, call):
    raise NoDeviceImplementation("scalar op %s (%s.%s) has no OpenCL code" % (
        op, type(op).__module__, type(op).__name__))


_op_code = functools.singledispatch(_no_code)


def _register(*classes):
    def decorate(fn):
        for cls in classes:
            _op_code.register(cls, fn)
        return fn
    return decorate


# ---------------------------------------------------------------------------------------------
# Composite: the fused graph, in topological order, with typed temporaries

@_register(scal.Composite)
def _composite(op, c):
    gen = c.gen
    fg = op.fgraph
    names = {}
    for var, expr, dtype in zip(fg.inputs, c.ins, c.in_dtypes):
        names[var] = _convert(gen, expr, dtype, var.type.dtype)
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
            text = _literal(var.data, var.type.dtype)
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
            lines.append('%s = %s;' % (name, _convert(gen, value(var), var.type.dtype, dtype)))
    return '{\n%s\n}' % '\n'.join(lines)


# ---------------------------------------------------------------------------------------------
# Arithmetic

def _int_arith(c, sym, args):
    """Integer ``args`` combined with ``sym`` in unsigned arithmetic: it wraps where signed
    overflow would be undefined, and assigning to the output truncates as numpy does."""
    U = 'ulong' if c.od in ('int64', 'uint64') else 'uint'
    return (' %s ' % sym).join(a if c.T == U else '(%s)%s' % (U, a) for a in args)


def _arith(c, sym):
    if _c_chain_mixed(c.in_dtypes):
        return c.set(_c_chain(c, sym))
    floats = [d for d in c.in_dtypes if d in _FLOATS]
    if floats and c.od not in _FLOATS and c.od != 'bool':
        # an integer output of float operands (an inplace op on an int array, Theano's
        # transfer_type): Theano's C code computes in C's common type (the float) and the
        # assignment truncates toward zero
        ft = 'float64' if 'float64' in floats else 'float32'
        return c.set(_convert(c.gen, '(%s)' % (' %s ' % sym).join(c.xs(ft)), ft, c.od))
    if c.od in _INTS:
        return c.set(_int_arith(c, sym, c.xs()))
    return c.set((' %s ' % sym).join(c.xs()))


# ---------------------------------------------------------------------------------------------
# C's integer conversions, for operands of mixed signedness

def _c_int(dtype):
    """The dtype of C's integer promotion of a ``dtype`` value (bool, 8 and 16 bits: int)."""
    return 'int32' if dtype in ('bool', 'int8', 'int16', 'uint8', 'uint16') else dtype


def _c_common(a, b):
    """C's common type of integer dtypes ``a`` and ``b`` (usual arithmetic conversions; long
    is 64 bits, as for Theano's npy_int64 on LP64 hosts)."""
    a, b = _c_int(a), _c_int(b)
    if a == b:
        return a
    if (a in _SIGNED) == (b in _SIGNED):
        return max(a, b, key=lambda d: np.dtype(d).itemsize)
    s, u = (a, b) if a in _SIGNED else (b, a)
    return u if np.dtype(u).itemsize >= np.dtype(s).itemsize else s


def _is_int(dtype):
    return dtype in _INTS or dtype == 'bool'


def _c_mixed(*dtypes):
    """C's common type of integer ``dtypes`` where a signed value converts to it and it is
    unsigned (C's result then differs from numpy's), else None."""
    if not dtypes or not all(_is_int(d) for d in dtypes):
        return None
    common = functools.reduce(_c_common, dtypes)
    if common in _UNSIGNED and any(d in _SIGNED for d in dtypes):
        return common
    return None


def _c_chain_mixed(dtypes):
    """Whether C's left-to-right ``x0 op x1 op ...`` meets a mixed step (``_c_mixed``)."""
    if len(dtypes) < 2 or not all(_is_int(d) for d in dtypes):
        return False
    acc = dtypes[0]
    for k in range(1, len(dtypes)):
        acc = _c_common(acc, dtypes[k])
        if acc in _UNSIGNED and any(d in _SIGNED for d in dtypes[:k + 1]):
            return True
    return False


def _c_in(c, k, dtype):
    """Input ``k`` converted to the integer ``dtype`` as C converts it (modulo 2**n)."""
    return _convert(c.gen, c.ins[k], c.in_dtypes[k], dtype)


def _wrapping(gen, P, sym, a, b):
    """``a sym b`` in C's type ``P`` (a dtype), computed in unsigned arithmetic (wraps)."""
    U = 'ulong' if P in ('int64', 'uint64') else 'uint'
    expr = '(%s)%s %s (%s)%s' % (U, a, sym, U, b)
    return expr if gen.ct(P) == U else '((%s)(%s))' % (gen.ct(P), expr)


def _c_chain(c, sym):
    """Theano's C ``x0 sym x1 sym ...``, each step in C's common type, then the output dtype."""
    acc, at = _c_in(c, 0, _c_int(c.in_dtypes[0])), _c_int(c.in_dtypes[0])
    for k in range(1, len(c.ins)):
        P = _c_common(at, c.in_dtypes[k])
        acc = '(%s)' % _wrapping(c.gen, P, sym, _convert(c.gen, acc, at, P),
                                 _c_in(c, k, P))
        at = P
    return _convert(c.gen, acc, at, c.od)


@_register(scal.Add, scal.Mul)
def _add_mul(op, c):
    add = isinstance(op, scal.Add)
    if not c.ins:
        return c.set(c.lit(0 if add else 1))
    if c.od == 'bool':
        return c.set(' || '.join(c.xs()) if add else ' && '.join(c.xs()))
    return _arith(c, '+' if add else '*')


@_register(scal.Sub)
def _sub(op, c):
    return _arith(c, '-')


@_register(scal.Neg)
def _neg(op, c):
    if c.od in _INTS:
        return c.set(_int_arith(c, '-', ['0', c.x(0)]))
    return c.set('-' + c.x(0))


@_register(scal.Sqr)
def _sqr(op, c):
    if c.od == 'bool':
        return c.set(c.x(0))
    return c.set(_int_arith(c, '*', [c.x(0)] * 2) if c.od in _INTS
                 else '%s * %s' % (c.x(0), c.x(0)))


@_register(scal.TrueDiv)
def _true_div(op, c):
    if c.od not in _FLOATS:
        raise NoDeviceImplementation("true_div with output dtype %s: expected a float "
                                     "output" % c.od)
    return c.set('%s / %s' % tuple(c.xs()))


@_register(scal.Inv)
def _inv(op, c):
    return c.set('%s / %s' % (c.lit(1), c.x(0)))


_INT_DIV_MOD = string.Template('''
/* Python's floor division and modulo. y == 0 gives 0 as in numpy (Theano's C code raises
   ZeroDivisionError there: checked bodies report it before calling). y == -1 avoids
   INT_MIN / -1, which traps, and wraps as numpy does. */
$T th_floordiv_$T($T x, $T y)
{
    if (y == 0) return 0;
    if (y == -1) return ($T)(0 - ($U)x);
    $T q = x / y;
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
}
$T th_mod_$T($T x, $T y)
{
    if (y == 0 || y == -1) return 0;
    $T r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
''')

_FLOAT_DIV_MOD = string.Template('''
/* Theano's floor division and modulo of floats (its C code, NaN and inf cases included). */
$T th_floordiv_$T($T x, $T y)
{
    if (y == 0) return floor(x / y);
    if (y < 0) {
        if (x < 0) return floor((-x) / (-y));
        return -floor(x / (-y)) - (fmod(x, -y) == 0 ? 0 : 1);
    }
    if (x < 0) return -floor((-x) / y) - (fmod(-x, y) == 0 ? 0 : 1);
    return floor(x / y);
}
$T th_mod_$T($T x, $T y)
{
    if (y == 0) return fmod(x, y);
    if (y < 0) {
        if (x < 0) return -fmod(-x, -y);
        $T r = fmod(x, -y);
        return r + (r != 0 ? y : 0);
    }
    if (x < 0) {
        $T r = fmod(-x, y);
        return -r + (r != 0 ? y : 0);
    }
    return fmod(x, y);
}
''')


_C_DIV_MOD = string.Template('''
/* Theano's C code for // and % of a $X by a $Y: C's common type $P is unsigned, so the
   negative operand's magnitude and the results wrap modulo 2**n there (C's result, not
   Python's). y == 0 gives 0 (the caller reports it). */
$P th_cfloordiv_${X}_$Y($X x, $Y y)
{
    if (y == 0) return 0;
    if ($NEGX) {
        const $P m = ($P)($X)(0 - ($UX)x);
        return 0 - m / ($P)y - ($P)(m % ($P)y != 0);
    }
    if ($NEGY) {
        const $P m = ($P)($Y)(0 - ($UY)y);
        return 0 - ($P)x / m - ($P)(($P)x % m != 0);
    }
    return ($P)x / ($P)y;
}
$P th_cmod_${X}_$Y($X x, $Y y)
{
    if (y == 0) return 0;
    if ($NEGX) {
        const $P r = ($P)($X)(0 - ($UX)x) % ($P)y;
        return 0 - r + (r != 0 ? ($P)y : 0);
    }
    if ($NEGY) {
        const $P r = ($P)x % ($P)($Y)(0 - ($UY)y);
        return r + (r != 0 ? ($P)y : 0);
    }
    return ($P)x % ($P)y;
}
''')


_C_FLOAT_DIV = string.Template('''
/* Theano's C code for // of a $X by a $Y, whose output is float64 (a signed integer with
   uint64): its float formula, in which x / y is C's integer division in ulong and the
   remainder test is fmod in double. y == 0, where that code divides an integer by zero (the
   process gets SIGFPE), gives floor(x / y) in double, Theano's Python result. */
double th_cfdiv_${X}_$Y($X x, $Y y)
{
    if (y == 0) return floor((double)x / (double)y);
    if ($NEGY) {
        const $Y m = ($Y)(0 - ($UY)y);
        return -floor((double)((ulong)x / (ulong)m)) - (fmod((double)x, (double)m) == 0 ? 0 : 1);
    }
    if ($NEGX) {
        const $X m = ($X)(0 - ($UX)x);
        return -floor((double)((ulong)m / (ulong)y)) - (fmod((double)m, (double)y) == 0 ? 0 : 1);
    }
    return floor((double)((ulong)x / (ulong)y));
}
''')


def _zero_divisor_check(c, code):
    """The statement setting th_err to ``code`` for a zero divisor (checked bodies only)."""
    y = c.ins[1]
    if not c.gen.check or y in c.gen.nonzero:
        return ''
    c.gen.codes.add(code)
    return 'if (%s == 0 && !th_err) th_err = %d;\n' % (y, code)


@_register(scal.IntDiv, scal.Mod)
def _int_div_mod(op, c):
    fn = 'floordiv' if isinstance(op, scal.IntDiv) else 'mod'
    P = _c_mixed(*c.in_dtypes)
    floats = [d for d in c.in_dtypes if d in _FLOATS]
    if floats and c.od not in _FLOATS and c.od != 'bool':
        # an integer output of float operands (inplace on an int array): Theano's C code
        # takes the float formula, and the assignment truncates (see _arith)
        ft = 'float64' if 'float64' in floats else 'float32'
        T = c.gen.ct(ft)
        x, y = c.xs(ft)
        c.gen.helper('float_div_mod_' + T, _FLOAT_DIV_MOD, T)
        return c.set(_convert(c.gen, 'th_%s_%s(%s, %s)' % (fn, T, x, y), ft, c.od))
    if c.od in _FLOATS:
        # Theano's float formula (also for a signed integer with uint64: float64 output)
        if P is not None and fn == 'floordiv':
            X, Y = [c.gen.ct(_c_int(d)) for d in c.in_dtypes]
            c.gen.ct(c.od)
            c.gen.helper('c_float_div_%s_%s' % (X, Y), _C_FLOAT_DIV, X=X, Y=Y,
                         UX='u' + X.lstrip('u'), UY='u' + Y.lstrip('u'),
                         NEGX='x < 0' if c.in_dtypes[0] in _SIGNED else '0',
                         NEGY='y < 0' if c.in_dtypes[1] in _SIGNED else '0')
            return c.set('th_cfdiv_%s_%s(%s, %s)' % (X, Y, _c_in(c, 0, _c_int(c.in_dtypes[0])),
                                                     _c_in(c, 1, _c_int(c.in_dtypes[1]))))
        T = c.T
        x, y = c.xs()
        c.gen.helper('float_div_mod_' + T, _FLOAT_DIV_MOD, T)
        return c.set('th_%s_%s(%s, %s)' % (fn, T, x, y))
    # integers (Theano's C code divides integers when neither input is a float)
    check = _zero_divisor_check(c, 1 if fn == 'floordiv' else 2)
    if P is not None:
        X, Y = [c.gen.ct(_c_int(d)) for d in c.in_dtypes]
        signed = [d in _SIGNED for d in c.in_dtypes]
        c.gen.helper('c_div_mod_%s_%s' % (X, Y), _C_DIV_MOD, X=X, Y=Y, P=c.gen.ct(P),
                     UX='u' + X.lstrip('u'), UY='u' + Y.lstrip('u'),
                     NEGX='x < 0' if signed[0] else '0', NEGY='y < 0' if signed[1] else '0')
        call = 'th_c%s_%s_%s(%s, %s)' % (fn, X, Y, _c_in(c, 0, _c_int(c.in_dtypes[0])),
                                         _c_in(c, 1, _c_int(c.in_dtypes[1])))
        return check + c.set(_convert(c.gen, call, P, c.od))
    x, y = c.xs()
    if c.od in _SIGNED:
        T = 'long' if c.od == 'int64' else 'int'
        c.gen.helper('int_div_mod_' + T, _INT_DIV_MOD, T=T, U='u' + T)
        return check + c.set('th_%s_%s(%s, %s)' % (fn, T, x, y))
    # unsigned and bool: only the zero divisor needs care
    return check + c.set('%s == 0 ? 0 : %s %s %s' % (y, x, '/' if fn == 'floordiv' else '%', y))


_INT_POW = string.Template('''
/* Theano raises integers to integer powers in double and converts the result as x86 does
   (th_f2i32): exact results wrap into the output type, results beyond the conversion's range
   give the integer indefinite value, and |x ** y| < 1 truncates to 0. */
$T th_ipow_$T($A x, $A y)
{
    ulong m = $ABS, r = 1;
    int neg = $NEG, ovf = 0;
$NEGATIVE_EXPONENT
    if (m > 1) {
        ovf = y >= 64;
        for (long i = 0; i < y && !ovf; ++i) {
            if (r > ULONG_MAX / m) ovf = 1;
            else r *= m;
        }
    } else if (m == 0 && y != 0) {
        r = 0;
    }
$RESULT
}
''')


def _int_pow_helper(gen, od):
    T = gen.ct(od)
    if od in _SIGNED:
        subs = dict(A='long', ABS='x < 0 ? 0 - (ulong)x : (ulong)x', NEG='x < 0 && (y & 1)')
    else:
        subs = dict(A='ulong', ABS='x', NEG='0', NEGATIVE_EXPONENT='')
    if od == 'uint64':
        indefinite = '0'
        subs['RESULT'] = '    return ovf ? 0 : r;'
    else:
        wide = od in ('int64', 'uint32')
        indefinite = '(%s)%s' % (T, 'LONG_MIN' if wide else 'INT_MIN')
        limit = (('0x8000000000000000UL', '0x7fffffffffffffffUL') if wide
                 else ('0x80000000UL', '0x7fffffffUL'))
        subs['RESULT'] = ('    if (ovf || r > (neg ? %s : %s)) return %s;\n'
                          '    return (%s)(neg ? 0 - r : r);' % (limit + (indefinite, T)))
    if od in _SIGNED:
        subs['NEGATIVE_EXPONENT'] = (
            '    if (y < 0) {  /* 0 ** -n is inf */\n'
            '        if (m == 1) return neg ? -1 : 1;\n'
            '        return m == 0 ? %s : 0;\n'
            '    }' % indefinite)
    return gen.helper('ipow_' + T, _INT_POW, T=T, **subs)


@_register(scal.Pow)
def _pow(op, c):
    x, y = c.xs()
    if c.od in _FLOATS:
        return c.set('pow(%s, %s)' % (x, y))
    return c.set('th_%s(%s, %s)' % (_int_pow_helper(c.gen, c.od), x, y))


@_register(scal.Maximum, scal.Minimum)
def _max_min(op, c):
    sym = '>' if isinstance(op, scal.Maximum) else '<'
    P = _c_mixed(*c.in_dtypes)
    if P is not None:  # compared in C's common type, the chosen input then converted
        return c.set('(%s %s %s) ? %s : %s' % (_c_in(c, 1, P), sym, _c_in(c, 0, P),
                                               c.x(1), c.x(0)))
    x, y = c.xs()
    if c.od in _FLOATS:  # NaN in either input gives NaN, as in Theano
        return c.set('(%s %s %s) ? %s : ((%s %s= %s) ? %s : NAN)' % (
            y, sym, x, y, x, sym, y, x))
    return c.set('(%s %s %s) ? %s : %s' % (y, sym, x, y, x))


@_register(scal.Clip)
def _clip(op, c):
    dx, dlo, dhi = c.in_dtypes
    if _c_mixed(dx, dlo) or _c_mixed(dx, dhi) or _c_mixed(dx, dlo, dhi):
        # x < lo ? lo : x > hi ? hi : x, with C's conversions of each comparison and of the
        # conditional operators' operands
        P = functools.reduce(_c_common, (dlo, dhi, dx))
        return c.set(_convert(c.gen, '(%s ? %s : (%s ? %s : %s))' % (
            _compare(c, 0, '<', 1), _c_in(c, 1, P), _compare(c, 0, '>', 2), _c_in(c, 2, P),
            _c_in(c, 0, P)), P, c.od))
    x, lo, hi = c.xs()
    return c.set('%s < %s ? %s : (%s > %s ? %s : %s)' % (x, lo, lo, x, hi, hi, x))


@_register(scal.Abs)
def _abs(op, c):
    d = c.in_dtypes[0]
    if d in _SIGNED:
        return c.set('abs(%s)' % c.x(0))  # abs(INT_MIN) wraps back to INT_MIN, as in numpy
    if d in _FLOATS:
        return c.set('fabs(%s)' % c.x(0))
    return c.set(c.x(0))


@_register(scal.Sgn)
def _sgn(op, c):
    x = c.x(0)
    if c.od in _FLOATS:
        return c.set('%s > 0 ? %s : (%s < 0 ? %s : (isnan(%s) ? NAN : %s))' % (
            x, c.lit(1), x, c.lit(-1), x, c.lit(0)))
    if c.od in _SIGNED:
        return c.set('(%s > 0) - (%s < 0)' % (x, x))
    return c.set('%s != 0' % x)  # Theano's C code has none for unsigned; numpy's sign


# ---------------------------------------------------------------------------------------------
# Comparisons, logic and bits

_COMPARISONS = {scal.LT: '<', scal.GT: '>', scal.LE: '<=', scal.GE: '>=', scal.EQ: '==',
                scal.NEQ: '!='}
_MIRRORED = {'<': '>', '>': '<', '<=': '>=', '>=': '<=', '==': '==', '!=': '!='}


def _compare(c, i, sym, j):
    """Inputs ``i`` and ``j`` compared as Theano's C code compares them: integers of mixed
    signedness in C's common type (a signed value converts to an unsigned common type modulo
    2**n), an integer and a float32 or float16 in the float's precision; otherwise in numpy's
    common dtype (the same values)."""
    di, dj = c.in_dtypes[i], c.in_dtypes[j]
    P = _c_mixed(di, dj)
    if P is not None:
        return '(%s %s %s)' % (_c_in(c, i, P), sym, _c_in(c, j, P))
    common = str(np.promote_types(di, dj))
    floats = [d for d in (di, dj) if d in _FLOATS]
    if floats and common not in floats:
        common = max(floats, key=lambda d: np.dtype(d).itemsize)
    if common == 'float16':
        common = 'float32'  # compare values, do not round them to half
    return '(%s %s %s)' % (c.x(i, common), sym, c.x(j, common))


@_register(*_COMPARISONS)
def _comparison(op, c):
    sym = next(s for cls, s in _COMPARISONS.items() if isinstance(op, cls))
    return c.set(_compare(c, 0, sym, 1))


@_register(scal.InRange)
def _in_range(op, c):
    return c.set('%s && %s' % (_compare(c, 0, '>' if op.openlow else '>=', 1),
                               _compare(c, 0, '<' if op.openhi else '<=', 2)))


@_register(scal.IsNan, scal.IsInf)
def _isnan_isinf(op, c):
    if c.in_dtypes[0] not in _FLOATS:
        return c.set('0')
    return c.set('%s(%s)' % ('isnan' if isinstance(op, scal.IsNan) else 'isinf', c.ins[0]))


@_register(scal.Switch)
def _switch(op, c):
    P = _c_mixed(*c.in_dtypes[1:])
    if P is not None:  # C's conditional converts both branches to their common type
        return c.set(_convert(c.gen, '(%s ? %s : %s)' % (c.x(0, 'bool'), _c_in(c, 1, P),
                                                         _c_in(c, 2, P)), P, c.od))
    return c.set('%s ? %s : %s' % (c.x(0, 'bool'), c.x(1), c.x(2)))  # NaN is true, as in C


_BITWISE = {scal.OR: '|', scal.XOR: '^', scal.AND: '&'}


@_register(*_BITWISE)
def _bitwise(op, c):
    sym = ' %s ' % next(s for cls, s in _BITWISE.items() if isinstance(op, cls))
    P = _c_mixed(*c.in_dtypes)
    if P is not None:  # in C's common type, then converted
        return c.set(_convert(c.gen, '(%s)' % sym.join(_c_in(c, k, P) for k in range(len(c.ins))),
                              P, c.od))
    if c.od in _FLOATS:
        # a signed integer with uint64 gives float64, which numpy has no bitwise op for;
        # Theano's C code computes in uint64, C's common type
        return c.set(sym.join(c.xs('uint64')))
    return c.set(sym.join(c.xs()))


@_register(scal.Invert)
def _invert(op, c):
    return c.set(('!' if c.od == 'bool' else '~') + c.x(0))


# ---------------------------------------------------------------------------------------------
# Copies and conversions

@_register(scal.Identity, scal.Cast, scal.Conj, scal.Real)
def _copy(op, c):
    return c.set(c.x(0))


@_register(scal.Second)
def _second(op, c):
    return c.set(c.x(1))


@_register(scal.Imag)
def _imag(op, c):
    return c.set(c.lit(0))


@_register(scal.Angle)
def _angle(op, c):
    return c.set('atan2(%s, %s)' % (c.lit(0), c.x(0)))  # numpy's angle of a real: 0 or pi


# ---------------------------------------------------------------------------------------------
# Rounding and elementary functions (OpenCL builtins)

_FUNCTIONS = {
    scal.Ceil: 'ceil', scal.Floor: 'floor', scal.Trunc: 'trunc',
    scal.RoundHalfToEven: 'rint', scal.RoundHalfAwayFromZero: 'round',
    scal.Exp: 'exp', scal.Exp2: 'exp2', scal.Expm1: 'expm1', scal.Log: 'log',
    scal.Log2: 'log2', scal.Log10: 'log10', scal.Log1p: 'log1p', scal.Sqrt: 'sqrt',
    scal.Cos: 'cos', scal.ArcCos: 'acos', scal.Sin: 'sin', scal.ArcSin: 'asin',
    scal.Tan: 'tan', scal.ArcTan: 'atan', scal.Cosh: 'cosh', scal.ArcCosh: 'acosh',
    scal.Sinh: 'sinh', scal.ArcSinh: 'asinh', scal.Tanh: 'tanh', scal.ArcTanh: 'atanh',
    basic_scipy.Erf: 'erf', basic_scipy.Erfc: 'erfc', basic_scipy.Gamma: 'tgamma',
    basic_scipy.GammaLn: 'lgamma'}


def _function(name):
    def code(op, c):
        if c.od not in _FLOATS:
            raise NoDeviceImplementation("%s with output dtype %s: expected a float "
                                         "output" % (op, c.od))
        return c.set('%s(%s)' % (name, c.x(0)))
    return code


for _cls, _name in _FUNCTIONS.items():
    _op_code.register(_cls, _function(_name))


@_register(scal.ArcTan2)
def _arctan2(op, c):
    return c.set('atan2(%s, %s)' % tuple(c.xs()))


@_register(scal.Deg2Rad, scal.Rad2Deg)
def _deg_rad(op, c):
    factor = math.pi / 180 if isinstance(op, scal.Deg2Rad) else 180 / math.pi
    return c.set('%s * %s' % (c.x(0), c.lit(factor)))


# ---------------------------------------------------------------------------------------------
# Special functions (theano.scalar.basic_scipy)

_ERFCX = string.Template('''
/* exp(x*x) * erfc(x): the product while erfc is normal (x*x's rounding error folded back into
   the exponential), then the asymptotic series 1/(x sqrt(pi)) sum (-1)^k (2k-1)!! / (2x^2)^k. */
$T th_erfcx_$T($T x)
{
    if (x < $OVERFLOW) return INFINITY;
    if (x < $LARGE) {
        $T x2 = x * x;
        return exp(x2) * (1 + fma(x, x, -x2)) * erfc(x);
    }
    $T r = 1 / (2 * x * x), t = 1, s = 1;
    for (int k = 1; k <= $TERMS; ++k) {
        t *= -(2 * k - 1) * r;
        s += t;
    }
    return s / (x * 1.7724538509055160273$F);
}
''')

_ERFINV = string.Template('''
/* x >= 0 with erf(x) = a, erfc(x) = c (= 1 - a; a is exact below 0.5, c above). Initial guess:
   M. Giles, "Approximating the erfinv function" (2011), single precision, for
   w = -log(c (1 + a)) < 16; beyond, the asymptotic erfc(x) ~ exp(-x*x) / (x sqrt(pi)).
   Then Halley steps on whichever residual is accurate: erf(x) - a near 0, c - erfc(x) in the
   tail, and with erfcx where erfc underflows. */
$T th_erfinv_solve_$T($T a, $T c)
{
    $T x, p, w = -log(c * (1 + a));
    if (w < 5) {
        w = w - 2.5$F;
        p = 2.81022636e-08$F;
        p = 3.43273939e-07$F + p * w;
        p = -3.5233877e-06$F + p * w;
        p = -4.39150654e-06$F + p * w;
        p = 0.00021858087$F + p * w;
        p = -0.00125372503$F + p * w;
        p = -0.00417768164$F + p * w;
        p = 0.246640727$F + p * w;
        p = 1.50140941$F + p * w;
        x = p * a;
    } else if (w < 16) {
        w = sqrt(w) - 3;
        p = -0.000200214257$F;
        p = 0.000100950558$F + p * w;
        p = 0.00134934322$F + p * w;
        p = -0.00367342844$F + p * w;
        p = 0.00573950773$F + p * w;
        p = -0.0076224613$F + p * w;
        p = 0.00943887047$F + p * w;
        p = 1.00167406$F + p * w;
        p = 2.83297682$F + p * w;
        x = p * a;
    } else {
        $T t = -log(c), x2 = t;
        for (int i = 0; i < 3; ++i)
            x2 = t - 0.5$F * log(3.1415926535897932385$F * x2) + log(1 - 1 / (2 * x2));
        x = sqrt(x2);
    }
    for (int i = 0; i < $STEPS; ++i) {
        $T v;  /* (erf(x) - a) / erf'(x) */
        if (a < 0.5$F)
            v = (erf(x) - a) * exp(x * x) * 0.88622692545275801365$F;
        else if (x < $LARGE)
            v = (c - erfc(x)) * exp(x * x) * 0.88622692545275801365$F;
        else
            v = (exp(log(c) + x * x) - th_erfcx_$T(x)) * 0.88622692545275801365$F;
        x -= v / (1 + x * v);
    }
    return x;
}
$T th_erfinv_$T($T y)
{
    $T a = fabs(y);
    if (!(a < 1)) return a == 1 ? copysign(($T)INFINITY, y) : NAN;
    return copysign(th_erfinv_solve_$T(a, 1 - a), y);
}
$T th_erfcinv_$T($T y)
{
    if (!(y > 0 && y < 2)) return y == 0 ? INFINITY : (y == 2 ? -INFINITY : NAN);
    if (y > 1) return -th_erfinv_solve_$T(y - 1, 2 - y);  /* both exact */
    return th_erfinv_solve_$T(1 - y, y);
}
''')


def _erfcx_helper(gen, T):
    # where erfc(x) stops being normal and the series converges in a few terms
    return gen.helper('erfcx_' + T, _ERFCX, T, LARGE='9.0f' if T == 'float' else '26.0',
                      OVERFLOW='-9.4f' if T == 'float' else '-26.7',
                      TERMS=6 if T == 'float' else 10)


@_register(basic_scipy.Erfcx, basic_scipy.Erfinv, basic_scipy.Erfcinv)
@_float_valued
def _erf_family(op, c):
    T = c.T
    _erfcx_helper(c.gen, T)
    if not isinstance(op, basic_scipy.Erfcx):
        c.gen.helper('erfinv_' + T, _ERFINV, T, LARGE='9.0f' if T == 'float' else '25.0',
                     STEPS=2 if T == 'float' else 3)
    name = {basic_scipy.Erfcx: 'erfcx', basic_scipy.Erfinv: 'erfinv',
            basic_scipy.Erfcinv: 'erfcinv'}[type(op)]
    return c.set('th_%s_%s(%s)' % (name, T, c.x(0)))


_PSI = string.Template('''
/* Theano's psi (digamma): Bernardo, Algorithm AS 103 (1976), with its constants and its 0 for
   x <= 0. */
$T th_psi_$T($T x)
{
    $T y = x, R, psi_ = 0;
    if (y <= 0) return psi_;
    if (y <= 1.0e-5$F) return -0.5772156649$F - 1 / y;
    while (y < 8.5$F) {
        psi_ = psi_ - 1 / y;
        y = y + 1;
    }
    R = 1 / y;
    psi_ = psi_ + log(y) - 0.5$F * R;
    R = R * R;
    return psi_ - R * (8.333333333e-2$F - R * (8.333333333e-3$F - R * 3.968253968e-3$F));
}
''')

_TRIGAMMA = string.Template('''
/* Theano's tri_gamma: Algorithm AS 121, with its constants and its 0 for x <= 0. */
$T th_trigamma_$T($T x)
{
    $T value = 0, y, z = x;
    if (x <= 0) return 0;
    if (x <= 0.0001$F) return 1 / x / x;
    while (z < 5) {
        value += 1 / z / z;
        z += 1;
    }
    y = 1 / z / z;
    return value + 0.5$F * y + (1 + y * (0.1666666667$F + y * (-0.03333333333$F
        + y * (0.02380952381$F + y * -0.03333333333$F)))) / z;
}
''')


@_register(basic_scipy.Psi, basic_scipy.TriGamma)
def _psi_trigamma(op, c):
    # an integer output (psi_inplace of an int array): Theano's C code computes in double
    # and the assignment truncates
    ft = c.od if c.od in _FLOATS else 'float64'
    T = c.gen.ct(ft) if ft != 'float16' else c.T
    if isinstance(op, basic_scipy.Psi):
        name = c.gen.helper('psi_' + T, _PSI, T)
    else:
        name = c.gen.helper('trigamma_' + T, _TRIGAMMA, T)
    x = c.x(0, ft)
    expr = 'th_%s(%s)' % (name, x)
    if _is_int(c.in_dtypes[0]):
        # Theano's C code is for float inputs only: an integer input takes its Python code,
        # scipy's, whose poles give psi(0) = -inf, psi(-n) = nan, trigamma(-n) = inf
        inf = '(%s)INFINITY' % T
        expr = ('(%s == 0 ? -%s : %s < 0 ? (%s)NAN : %s)' % (x, inf, x, T, expr)
                if isinstance(op, basic_scipy.Psi) else '(%s <= 0 ? %s : %s)' % (x, inf, expr))
    return c.set(expr if ft == c.od else _convert(c.gen, expr, ft, c.od))


_GAMMA_INC = string.Template('''
/* Theano's incomplete gamma functions (theano/scalar/c_code/gamma.c, C. Borgelt, MIT) in the
   argument's precision, with the library lgamma for its table and Lanczos sum. Arguments
   outside the domain, where Theano's C code asserts, give NaN. Theano's unregularized
   lower/upper functions use the series / continued fraction for all x, which do not converge
   (or overflow) for x >= n + 1 / x < n + 1: there they are Gamma(n) P and Gamma(n) Q, as in
   scipy (Theano's Python code), to relative accuracy eps / Q (eps / P): ~1e-5 in float for
   n = 0.01, x < 1. Factors are combined in the exponent so that float does not overflow where
   double would not. */
$T th_gamma_series_$T($T n, $T x)
{
    $T t, sum;
    sum = t = 1 / n;
    for (int i = 1024; --i >= 0; ) {
        n += 1;
        t *= x / n;
        sum += t;
        if (fabs(t) < fabs(sum) * $EPS) break;
    }
    return sum;
}
$T th_gamma_cfrac_$T($T n, $T x)
{
    const $T tiny = $EPS * $EPS * $EPS;
    $T a, b = x + 1 - n, c = 1 / tiny, d, e, f;
    f = d = 1 / b;
    for (int i = 1; i < 1024; i++) {
        a = i * (n - i);
        b += 2;
        d = a * d + b;
        if (fabs(d) < tiny) d = tiny;
        c = b + a / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        e = d * c;
        f *= e;
        if (fabs(e - 1) < $EPS) break;
    }
    return f;
}
$T th_gammap_$T($T n, $T x)
{
    if (!(n > 0 && x >= 0)) return NAN;
    if (x <= 0) return 0;
    if (x < n + 1) return th_gamma_series_$T(n, x) * exp(n * log(x) - x - lgamma(n));
    return 1 - th_gamma_cfrac_$T(n, x) * exp(n * log(x) - x - lgamma(n));
}
$T th_gammaq_$T($T n, $T x)
{
    if (!(n > 0 && x >= 0)) return NAN;
    if (x <= 0) return 1;
    if (x < n + 1) return 1 - th_gamma_series_$T(n, x) * exp(n * log(x) - x - lgamma(n));
    return th_gamma_cfrac_$T(n, x) * exp(n * log(x) - x - lgamma(n));
}
$T th_gammal_$T($T n, $T x)
{
    if (!(n > 0 && x >= 0)) return NAN;
    if (x < n + 1) return exp(n * log(x) - x + log(th_gamma_series_$T(n, x)));
    return tgamma(n) * th_gammap_$T(n, x);
}
$T th_gammau_$T($T n, $T x)
{
    if (!(n > 0 && x >= 0)) return NAN;
    if (x >= n + 1) return exp(n * log(x) - x + log(th_gamma_cfrac_$T(n, x)));
    return tgamma(n) * th_gammaq_$T(n, x);
}
''')

_GAMMA_INC_OPS = {basic_scipy.GammaInc: 'gammap', basic_scipy.GammaIncC: 'gammaq',
                  basic_scipy.GammaL: 'gammal', basic_scipy.GammaU: 'gammau'}


@_register(*_GAMMA_INC_OPS)
@_float_valued
def _gamma_inc(op, c):
    c.gen.helper('gamma_inc_' + c.T, _GAMMA_INC, c.T)
    return c.set('th_%s_%s(%s, %s)' % ((_GAMMA_INC_OPS[type(op)], c.T) + tuple(c.xs())))


@_register(basic_scipy.Chi2SF)
@_float_valued
def _chi2sf(op, c):
    c.gen.helper('gamma_inc_' + c.T, _GAMMA_INC, c.T)
    x, k = c.xs()
    # scipy's chi2.sf is 1 for x < 0, where Theano's C code asserts
    return c.set('%s < 0 ? %s : %s - th_gammap_%s(%s / 2, %s / 2)' % (
        x, c.lit(1), c.lit(1), c.T, k, x))


@_register(basic_scipy.J0, basic_scipy.J1, basic_scipy.Jv, basic_scipy.I0, basic_scipy.I1,
           basic_scipy.Iv)
def _bessel(op, c):
    raise NoDeviceImplementation("Bessel function %s: OpenCL has no builtin and theano_ocl "
                                 "no implementation" % op)


# ---------------------------------------------------------------------------------------------
# theano.tensor's scalar ops

def _cut_offs(c, for_float, for_double):
    """Where Theano's sigmoid and softplus stop computing: its C code's per precision (float16
    computes in float); integer inputs, which its C code does not take, its Python code's."""
    if c.in_dtypes[0] not in _FLOATS:
        return -30.0, 30.0
    return for_float if c.T == 'float' else for_double


@_register(ScalarSigmoid)
def _sigmoid(op, c):
    x = c.x(0)
    low, high = _cut_offs(c, (-88.0, 15.0), (-709.0, 19.0))
    return c.set('%s < %s ? %s : (%s > %s ? %s : %s / (%s + exp(-%s)))' % (
        x, c.lit(low), c.lit(0), x, c.lit(high), c.lit(1), c.lit(1), c.lit(1), x))


@_register(UltraFastScalarSigmoid)
def _ultra_fast_sigmoid(op, c):
    T, lit = c.T, c.lit
    half_x = c.gen.temp()
    z = c.gen.temp()

    def tanh_approx(v):
        return '(%s < %s ? %s * %s / (%s + %s) : (%s < %s ? %s + %s * (%s - %s) : %s))' % (
            v, lit(1.7), lit(1.5), v, lit(1), v, v, lit(3), lit(0.935409070603099),
            lit(0.0458812946797165), v, lit(1.7), lit(0.99505475368673))
    return '\n'.join([
        '{',
        '%s %s = %s * %s;' % (T, half_x, lit(0.5), c.x(0)),
        '%s %s = %s >= 0 ? %s : -%s;' % (T, z, half_x, tanh_approx(half_x),
                                          tanh_approx('(-%s)' % half_x)),
        c.set('%s * (%s + %s)' % (lit(0.5), z, lit(1))),
        '}'])


@_register(ScalarSoftplus)
def _softplus(op, c):
    x = c.x(0)
    low, high = _cut_offs(c, (-103.0, 14.0), (-745.0, 16.0))
    return c.set('%s < %s ? %s : (%s > %s ? %s : log1p(exp(%s)))' % (
        x, c.lit(low), c.lit(0), x, c.lit(high), x, x))


@_register(ScalarSoftsign)
def _softsign(op, c):
    x = c.x(0)
    return c.set('%s / (%s + fabs(%s))' % (x, c.lit(1), x))


@_register(XlogX)
def _xlogx(op, c):
    x = c.x(0)
    return c.set('%s == 0 ? %s : %s * log(%s)' % (x, c.lit(0), x, x))


@_register(XlogY0)
def _xlogy0(op, c):
    x, y = c.xs()
    return c.set('%s == 0 ? %s : %s * log(%s)' % (x, c.lit(0), x, y))


@_register(MulWithoutZeros)
def _mul_without_zeros(op, c):
    P = _c_mixed(*c.in_dtypes)
    if P is not None:  # C's conditional converts y, x and y * x to their common type
        x, y = _c_in(c, 0, P), _c_in(c, 1, P)
        return c.set(_convert(c.gen, '(%s == 0 ? %s : (%s == 0 ? %s : %s))' % (
            c.ins[0], y, c.ins[1], x, _wrapping(c.gen, P, '*', y, x)), P, c.od))
    x, y = c.xs()
    product = _int_arith(c, '*', [y, x]) if c.od in _INTS else '%s * %s' % (y, x)
    return c.set('%s == 0 ? %s : (%s == 0 ? %s : %s)' % (x, y, y, x, product))
