"""Arithmetic, comparisons, logic, bits and copies of ``theano.scalar.basic`` (and
``mul_without_zeros``) as OpenCL C, with Theano's C semantics for integers: C's common type for
operands of mixed signedness (``_c_mixed``), wrapping signed arithmetic, Python's floor
division and modulo with zero divisors reported in checked bodies, exact integer ``pow``.
Each generator registers itself on ``codegen.op_code``.
"""
import functools
import string

import numpy as np

import theano.scalar as scal
from theano.tensor.elemwise import MulWithoutZeros

from ..errors import NoDeviceImplementation
from .codegen import FLOATS, INTS, SIGNED, UNSIGNED, convert, is_int, register

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
    floats = [d for d in c.in_dtypes if d in FLOATS]
    if floats and c.od not in FLOATS and c.od != 'bool':
        # an integer output of float operands (an inplace op on an int array, Theano's
        # transfer_type): Theano's C code computes in C's common type (the float) and the
        # assignment truncates toward zero
        ft = 'float64' if 'float64' in floats else 'float32'
        return c.set(convert(c.gen, '(%s)' % (' %s ' % sym).join(c.xs(ft)), ft, c.od))
    if c.od in INTS:
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
    if (a in SIGNED) == (b in SIGNED):
        return max(a, b, key=lambda d: np.dtype(d).itemsize)
    s, u = (a, b) if a in SIGNED else (b, a)
    return u if np.dtype(u).itemsize >= np.dtype(s).itemsize else s


def _c_mixed(*dtypes):
    """C's common type of integer ``dtypes`` where a signed value converts to it and it is
    unsigned (C's result then differs from numpy's), else None."""
    if not dtypes or not all(is_int(d) for d in dtypes):
        return None
    common = functools.reduce(_c_common, dtypes)
    if common in UNSIGNED and any(d in SIGNED for d in dtypes):
        return common
    return None


def _c_chain_mixed(dtypes):
    """Whether C's left-to-right ``x0 op x1 op ...`` meets a mixed step (``_c_mixed``)."""
    if len(dtypes) < 2 or not all(is_int(d) for d in dtypes):
        return False
    acc = dtypes[0]
    for k in range(1, len(dtypes)):
        acc = _c_common(acc, dtypes[k])
        if acc in UNSIGNED and any(d in SIGNED for d in dtypes[:k + 1]):
            return True
    return False


def _c_in(c, k, dtype):
    """Input ``k`` converted to the integer ``dtype`` as C converts it (modulo 2**n)."""
    return convert(c.gen, c.ins[k], c.in_dtypes[k], dtype)


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
        acc = '(%s)' % _wrapping(c.gen, P, sym, convert(c.gen, acc, at, P),
                                 _c_in(c, k, P))
        at = P
    return convert(c.gen, acc, at, c.od)


@register(scal.Add, scal.Mul)
def _add_mul(op, c):
    add = isinstance(op, scal.Add)
    if not c.ins:
        return c.set(c.lit(0 if add else 1))
    if c.od == 'bool':
        return c.set(' || '.join(c.xs()) if add else ' && '.join(c.xs()))
    return _arith(c, '+' if add else '*')


@register(scal.Sub)
def _sub(op, c):
    return _arith(c, '-')


@register(scal.Neg)
def _neg(op, c):
    if c.od in INTS:
        return c.set(_int_arith(c, '-', ['0', c.x(0)]))
    return c.set('-' + c.x(0))


@register(scal.Sqr)
def _sqr(op, c):
    if c.od == 'bool':
        return c.set(c.x(0))
    return c.set(_int_arith(c, '*', [c.x(0)] * 2) if c.od in INTS
                 else '%s * %s' % (c.x(0), c.x(0)))


@register(scal.TrueDiv)
def _true_div(op, c):
    if c.od not in FLOATS:
        raise NoDeviceImplementation("true_div with output dtype %s: expected a float "
                                     "output" % c.od)
    return c.set('%s / %s' % tuple(c.xs()))


@register(scal.Inv)
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


@register(scal.IntDiv, scal.Mod)
def _int_div_mod(op, c):
    fn = 'floordiv' if isinstance(op, scal.IntDiv) else 'mod'
    P = _c_mixed(*c.in_dtypes)
    floats = [d for d in c.in_dtypes if d in FLOATS]
    if floats and c.od not in FLOATS and c.od != 'bool':
        # an integer output of float operands (inplace on an int array): Theano's C code
        # takes the float formula, and the assignment truncates (see _arith)
        ft = 'float64' if 'float64' in floats else 'float32'
        T = c.gen.ct(ft)
        x, y = c.xs(ft)
        c.gen.helper('float_div_mod_' + T, _FLOAT_DIV_MOD, T)
        return c.set(convert(c.gen, 'th_%s_%s(%s, %s)' % (fn, T, x, y), ft, c.od))
    if c.od in FLOATS:
        # Theano's float formula (also for a signed integer with uint64: float64 output)
        if P is not None and fn == 'floordiv':
            X, Y = [c.gen.ct(_c_int(d)) for d in c.in_dtypes]
            c.gen.ct(c.od)
            c.gen.helper('c_float_div_%s_%s' % (X, Y), _C_FLOAT_DIV, X=X, Y=Y,
                         UX='u' + X.lstrip('u'), UY='u' + Y.lstrip('u'),
                         NEGX='x < 0' if c.in_dtypes[0] in SIGNED else '0',
                         NEGY='y < 0' if c.in_dtypes[1] in SIGNED else '0')
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
        signed = [d in SIGNED for d in c.in_dtypes]
        c.gen.helper('c_div_mod_%s_%s' % (X, Y), _C_DIV_MOD, X=X, Y=Y, P=c.gen.ct(P),
                     UX='u' + X.lstrip('u'), UY='u' + Y.lstrip('u'),
                     NEGX='x < 0' if signed[0] else '0', NEGY='y < 0' if signed[1] else '0')
        call = 'th_c%s_%s_%s(%s, %s)' % (fn, X, Y, _c_in(c, 0, _c_int(c.in_dtypes[0])),
                                         _c_in(c, 1, _c_int(c.in_dtypes[1])))
        return check + c.set(convert(c.gen, call, P, c.od))
    x, y = c.xs()
    if c.od in SIGNED:
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
    if od in SIGNED:
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
    if od in SIGNED:
        subs['NEGATIVE_EXPONENT'] = (
            '    if (y < 0) {  /* 0 ** -n is inf */\n'
            '        if (m == 1) return neg ? -1 : 1;\n'
            '        return m == 0 ? %s : 0;\n'
            '    }' % indefinite)
    return gen.helper('ipow_' + T, _INT_POW, T=T, **subs)


# float pow as Theano's C code gets it: glibc's powf works in double and rounds once, which
# an OpenCL float pow need not (16 ulp allowed; NVIDIA's differs from it in the last bits,
# and 1 - pow(0.999f, t), Adam's bias correction, turns that into a 1e-4 relative change
# of every step). Where the device has doubles the float pow is one; float code still
# builds without cl_khr_fp64.
_POWF = string.Template('''
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
inline float th_powf(float x, float y) { return (float)pow((double)x, (double)y); }
#else
inline float th_powf(float x, float y) { return pow(x, y); }
#endif
''')


@register(scal.Pow)
def _pow(op, c):
    x, y = c.xs()
    if c.od in FLOATS:
        if c.T == 'float':
            return c.set('%s(%s, %s)' % (c.gen.helper('th_powf', _POWF), x, y))
        return c.set('pow(%s, %s)' % (x, y))
    return c.set('th_%s(%s, %s)' % (_int_pow_helper(c.gen, c.od), x, y))


@register(scal.Maximum, scal.Minimum)
def _max_min(op, c):
    sym = '>' if isinstance(op, scal.Maximum) else '<'
    P = _c_mixed(*c.in_dtypes)
    if P is not None:  # compared in C's common type, the chosen input then converted
        return c.set('(%s %s %s) ? %s : %s' % (_c_in(c, 1, P), sym, _c_in(c, 0, P),
                                               c.x(1), c.x(0)))
    x, y = c.xs()
    if c.od in FLOATS:  # NaN in either input gives NaN, as in Theano
        return c.set('(%s %s %s) ? %s : ((%s %s= %s) ? %s : NAN)' % (
            y, sym, x, y, x, sym, y, x))
    return c.set('(%s %s %s) ? %s : %s' % (y, sym, x, y, x))


@register(scal.Clip)
def _clip(op, c):
    dx, dlo, dhi = c.in_dtypes
    if _c_mixed(dx, dlo) or _c_mixed(dx, dhi) or _c_mixed(dx, dlo, dhi):
        # x < lo ? lo : x > hi ? hi : x, with C's conversions of each comparison and of the
        # conditional operators' operands
        P = functools.reduce(_c_common, (dlo, dhi, dx))
        return c.set(convert(c.gen, '(%s ? %s : (%s ? %s : %s))' % (
            _compare(c, 0, '<', 1), _c_in(c, 1, P), _compare(c, 0, '>', 2), _c_in(c, 2, P),
            _c_in(c, 0, P)), P, c.od))
    x, lo, hi = c.xs()
    return c.set('%s < %s ? %s : (%s > %s ? %s : %s)' % (x, lo, lo, x, hi, hi, x))


@register(scal.Abs)
def _abs(op, c):
    d = c.in_dtypes[0]
    if d in SIGNED:
        return c.set('abs(%s)' % c.x(0))  # abs(INT_MIN) wraps back to INT_MIN, as in numpy
    if d in FLOATS:
        return c.set('fabs(%s)' % c.x(0))
    return c.set(c.x(0))


@register(scal.Sgn)
def _sgn(op, c):
    x = c.x(0)
    if c.od in FLOATS:
        return c.set('%s > 0 ? %s : (%s < 0 ? %s : (isnan(%s) ? NAN : %s))' % (
            x, c.lit(1), x, c.lit(-1), x, c.lit(0)))
    if c.od in SIGNED:
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
    floats = [d for d in (di, dj) if d in FLOATS]
    if floats and common not in floats:
        common = max(floats, key=lambda d: np.dtype(d).itemsize)
    if common == 'float16':
        common = 'float32'  # compare values, do not round them to half
    return '(%s %s %s)' % (c.x(i, common), sym, c.x(j, common))


@register(*_COMPARISONS)
def _comparison(op, c):
    sym = next(s for cls, s in _COMPARISONS.items() if isinstance(op, cls))
    return c.set(_compare(c, 0, sym, 1))


@register(scal.InRange)
def _in_range(op, c):
    return c.set('%s && %s' % (_compare(c, 0, '>' if op.openlow else '>=', 1),
                               _compare(c, 0, '<' if op.openhi else '<=', 2)))


@register(scal.IsNan, scal.IsInf)
def _isnan_isinf(op, c):
    if c.in_dtypes[0] not in FLOATS:
        return c.set('0')
    return c.set('%s(%s)' % ('isnan' if isinstance(op, scal.IsNan) else 'isinf', c.ins[0]))


@register(scal.Switch)
def _switch(op, c):
    P = _c_mixed(*c.in_dtypes[1:])
    if P is not None:  # C's conditional converts both branches to their common type
        return c.set(convert(c.gen, '(%s ? %s : %s)' % (c.x(0, 'bool'), _c_in(c, 1, P),
                                                         _c_in(c, 2, P)), P, c.od))
    return c.set('%s ? %s : %s' % (c.x(0, 'bool'), c.x(1), c.x(2)))  # NaN is true, as in C


_BITWISE = {scal.OR: '|', scal.XOR: '^', scal.AND: '&'}


@register(*_BITWISE)
def _bitwise(op, c):
    sym = ' %s ' % next(s for cls, s in _BITWISE.items() if isinstance(op, cls))
    P = _c_mixed(*c.in_dtypes)
    if P is not None:  # in C's common type, then converted
        return c.set(convert(c.gen, '(%s)' % sym.join(_c_in(c, k, P) for k in range(len(c.ins))),
                              P, c.od))
    if c.od in FLOATS:
        # a signed integer with uint64 gives float64, which numpy has no bitwise op for;
        # Theano's C code computes in uint64, C's common type
        return c.set(sym.join(c.xs('uint64')))
    return c.set(sym.join(c.xs()))


@register(scal.Invert)
def _invert(op, c):
    return c.set(('!' if c.od == 'bool' else '~') + c.x(0))


# ---------------------------------------------------------------------------------------------
# Copies and conversions

@register(scal.Identity, scal.Cast, scal.Conj, scal.Real)
def _copy(op, c):
    return c.set(c.x(0))


@register(scal.Second)
def _second(op, c):
    return c.set(c.x(1))


@register(scal.Imag)
def _imag(op, c):
    return c.set(c.lit(0))


@register(scal.Angle)
def _angle(op, c):
    return c.set('atan2(%s, %s)' % (c.lit(0), c.x(0)))  # numpy's angle of a real: 0 or pi


# ---------------------------------------------------------------------------------------------
# theano.tensor's mul_without_zeros (the product of the nonzero values)

@register(MulWithoutZeros)
def _mul_without_zeros(op, c):
    P = _c_mixed(*c.in_dtypes)
    if P is not None:  # C's conditional converts y, x and y * x to their common type
        x, y = _c_in(c, 0, P), _c_in(c, 1, P)
        return c.set(convert(c.gen, '(%s == 0 ? %s : (%s == 0 ? %s : %s))' % (
            c.ins[0], y, c.ins[1], x, _wrapping(c.gen, P, '*', y, x)), P, c.od))
    x, y = c.xs()
    product = _int_arith(c, '*', [y, x]) if c.od in INTS else '%s * %s' % (y, x)
    return c.set('%s == 0 ? %s : (%s == 0 ? %s : %s)' % (x, y, y, x, product))
