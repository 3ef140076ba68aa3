"""Complex scalar ops as OpenCL C: the complex half of ``scalar.elemwise_code``.

complex64 / complex128 values are (re, im) vectors, ``float2`` / ``double2`` (numpy's memory
layout, so buffers need no conversion). ``codegen.Gen.code`` sends every op application that
has a complex input or output here; an op without an entry below raises
``NoDeviceImplementation`` and its node runs on the host, as before.

What is computed, for the dtypes Theano gives these ops:

* ``+ - *``, unary ``-``, ``sqr``, ``/`` and ``inv`` (Smith's division, no overflow of
  |b|^2), ``==`` / ``!=`` (both parts), ``< <= > >=`` (numpy's lexicographic order), ``conj``, ``real``, ``imag``, ``abs`` (hypot),
  ``angle`` (atan2), ``complex(re, im)``, ``complex_from_polar(r, theta)``;
* ``exp``, ``log``, ``log2``, ``log10``, ``sqrt`` (principal branch, the sign of a zero
  imaginary part kept), ``pow`` as numpy computes it (``0 ** b`` is 0 for real b > 0, else
  NaN; integral real exponents of magnitude below 100 by repeated squaring, as numpy does;
  else ``exp(b log a)``), ``sin``/``cos``/``tan``/``sinh``/``cosh``/``tanh``;
* casts between complex dtypes, from real and integer dtypes (imaginary part 0) and from
  complex to real dtypes (the real part, as ``numpy.astype`` keeps it; to bool: either part
  nonzero); ``identity``, ``second``, ``switch``.

Results agree with numpy's (which Theano's Python implementations call for complex inputs)
to rounding, except on the special values numpy's C99 functions treat one by one (infinite
or NaN parts).
"""
import string

import numpy as np
import theano.scalar as scal

from ..errors import NoDeviceImplementation

COMPLEX = ('complex64', 'complex128')
_REAL = {'complex64': 'float32', 'complex128': 'float64'}


def is_complex(dtype):
    return str(dtype) in COMPLEX


def real_dtype(dtype):
    return _REAL[str(dtype)]


def vector_type(dtype):
    return 'float2' if str(dtype) == 'complex64' else 'double2'


def convert(gen, expr, src, dst, real_convert):
    """``expr`` of dtype ``src`` as a ``dst`` value, one of them complex.
    ``real_convert(gen, expr, src, dst)`` converts between real dtypes."""
    src, dst = str(src), str(dst)
    if src == dst:
        return expr
    if is_complex(src) and is_complex(dst):
        return 'convert_%s(%s)' % (vector_type(dst), expr)
    if is_complex(dst):
        R = real_dtype(dst)
        return '((%s)(%s, 0))' % (vector_type(dst), real_convert(gen, expr, src, R))
    if dst == 'bool':          # numpy: true where either part is nonzero
        return '((%s).x != 0 || (%s).y != 0)' % (expr, expr)
    # complex -> real: the real part (numpy's astype), then the real conversion
    return real_convert(gen, '(%s).x' % expr, real_dtype(src), dst)


def literal(value, dtype, real_literal):
    v = complex(np.asarray(value).astype(dtype))
    R = real_dtype(dtype)
    return '((%s)(%s, %s))' % (vector_type(dtype), real_literal(v.real, R),
                              real_literal(v.imag, R))


# --------------------------------------------------------------------------- helpers
# $T is float or double, $V the vector type, $F the literal suffix.
_CMUL = string.Template('''
$V th_cmul_$T($V a, $V b)
{
    return ($V)(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
''')

_CDIV = string.Template('''
/* a / b by Smith's method: the larger part of b divides, so |b|^2 never overflows */
$V th_cdiv_$T($V a, $V b)
{
    const $T abr = fabs(b.x), abi = fabs(b.y);
    if (abr >= abi) {
        if (abr == 0 && abi == 0)
            return ($V)(a.x / abr, a.y / abi);
        const $T rat = b.y / b.x, scl = 1.0$F / (b.x + b.y * rat);
        return ($V)((a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl);
    }
    const $T rat = b.x / b.y, scl = 1.0$F / (b.y + b.x * rat);
    return ($V)((a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl);
}
''')

_CEXP_LOG = string.Template('''
$V th_cexp_$T($V z)
{
    const $T r = exp(z.x);
    if (z.y == 0)
        return ($V)(r, z.y);
    return ($V)(r * cos(z.y), r * sin(z.y));
}
$V th_clog_$T($V z)
{
    return ($V)(log(hypot(z.x, z.y)), atan2(z.y, z.x));
}
''')

_CSQRT = string.Template('''
/* principal square root; the sign of a zero imaginary part is kept */
$V th_csqrt_$T($V z)
{
    if (z.x == 0 && z.y == 0)
        return ($V)(0, z.y);
    if (isinf(z.y))
        return ($V)(INFINITY, z.y);
    const $T t = sqrt((fabs(z.x) + hypot(z.x, z.y)) * 0.5$F);
    if (z.x >= 0)
        return ($V)(t, z.y / (2 * t));
    return ($V)(fabs(z.y) / (2 * t), copysign(t, z.y));
}
''')

_CPOW = string.Template('''
/* a ** b as numpy computes it: 0 ** b is 0 for a real b > 0 (else NaN); an integral real
   b of magnitude < 100 by repeated squaring; otherwise exp(b * log(a)) */
$V th_cpow_$T($V a, $V b)
{
    if (b.x == 0 && b.y == 0)
        return ($V)(1, 0);
    if (a.x == 0 && a.y == 0)
        return (b.x > 0 && b.y == 0) ? ($V)(0, 0) : ($V)(NAN, NAN);
    if (b.y == 0 && b.x == floor(b.x) && fabs(b.x) < 100) {
        long n = (long)b.x;
        const int neg = n < 0;
        if (neg) n = -n;
        $V r = ($V)(1, 0), p = a;
        while (n) {
            if (n & 1) r = th_cmul_$T(r, p);
            n >>= 1;
            if (n) p = th_cmul_$T(p, p);
        }
        return neg ? th_cdiv_$T(($V)(1, 0), r) : r;
    }
    return th_cexp_$T(th_cmul_$T(b, th_clog_$T(a)));
}
''')

_CTRIG = string.Template('''
$V th_csinh_$T($V z)
{
    return ($V)(sinh(z.x) * cos(z.y), cosh(z.x) * sin(z.y));
}
$V th_ccosh_$T($V z)
{
    return ($V)(cosh(z.x) * cos(z.y), sinh(z.x) * sin(z.y));
}
/* tanh(x + iy) = (sinh 2x + i sin 2y) / (cosh 2x + cos 2y), and its limit for large |x| */
$V th_ctanh_$T($V z)
{
    if (fabs(z.x) > 20)
        return ($V)(copysign(($T)1, z.x), 4 * sin(z.y) * cos(z.y) * exp(-2 * fabs(z.x)));
    const $T d = cosh(2 * z.x) + cos(2 * z.y);
    return ($V)(sinh(2 * z.x) / d, sin(2 * z.y) / d);
}
/* sin z = -i sinh(iz), cos z = cosh(iz), tan z = -i tanh(iz) */
$V th_csin_$T($V z)
{
    const $V s = th_csinh_$T(($V)(-z.y, z.x));
    return ($V)(s.y, -s.x);
}
$V th_ccos_$T($V z)
{
    return th_ccosh_$T(($V)(-z.y, z.x));
}
$V th_ctan_$T($V z)
{
    const $V t = th_ctanh_$T(($V)(-z.y, z.x));
    return ($V)(t.y, -t.x);
}
''')

_HELPERS = {'cmul': (_CMUL, ()), 'cdiv': (_CDIV, ()), 'cexp': (_CEXP_LOG, ()),
            'csqrt': (_CSQRT, ()), 'cpow': (_CPOW, ('cmul', 'cdiv', 'cexp')),
            'ctrig': (_CTRIG, ())}


def _helper(c, name, dtype):
    """Define helper ``name`` for complex ``dtype`` (and those it calls); returns the suffix."""
    T = 'float' if str(dtype) == 'complex64' else 'double'
    template, deps = _HELPERS[name]
    for d in deps:
        _helper(c, d, dtype)
    c.gen.helper('%s_%s' % (name, T), template, T, V=T + '2')
    return T


# --------------------------------------------------------------------------- op code
def _cx(c, k, dtype=None):
    """Input ``k`` as a complex value of ``dtype`` (default: the output dtype)."""
    return c.x(k, dtype or c.od)


def _complex_in(c):
    """The complex dtype the inputs are combined in (the output's if complex)."""
    if is_complex(c.od):
        return c.od
    return max((d for d in c.in_dtypes if is_complex(d)), key=lambda d: np.dtype(d).itemsize)


def _fold(c, name, args):
    T = _helper(c, name, c.od)
    acc = args[0]
    for a in args[1:]:
        acc = 'th_%s_%s(%s, %s)' % (name, T, acc, a)
    return acc


def _add(op, c):
    return c.set(' + '.join('(%s)' % _cx(c, k) for k in range(len(c.ins))) or c.lit(0))


def _mul(op, c):
    if not c.ins:
        return c.set(c.lit(1))
    return c.set(_fold(c, 'cmul', [_cx(c, k) for k in range(len(c.ins))]))


def _sub(op, c):
    return c.set('%s - %s' % (_cx(c, 0), _cx(c, 1)))


def _neg(op, c):
    return c.set('-%s' % _cx(c, 0))


def _sqr(op, c):
    x = _cx(c, 0)
    return c.set(_fold(c, 'cmul', [x, x]))


def _true_div(op, c):
    return c.set(_fold(c, 'cdiv', [_cx(c, 0), _cx(c, 1)]))


def _inv(op, c):
    return c.set(_fold(c, 'cdiv', [c.lit(1), _cx(c, 0)]))


def _copy(op, c):
    return c.set(c.x(0))


def _second(op, c):
    return c.set(c.x(1))


def _conj(op, c):
    x = _cx(c, 0)
    return c.set('(%s)((%s).x, -(%s).y)' % (vector_type(c.od), x, x))


def _part(expr_fn):
    def gen(op, c):
        D = c.in_dtypes[0]
        if not is_complex(D):
            raise NoDeviceImplementation('%s of a real input here' % op)
        return c.set(c.convert(expr_fn(c.ins[0]), real_dtype(D), c.od))
    return gen


def _switch(op, c):
    D = c.in_dtypes[0]
    cond = ('((%s).x != 0 || (%s).y != 0)' % (c.ins[0], c.ins[0])) if is_complex(D) \
        else '(%s != 0)' % c.ins[0]
    return c.set('%s ? %s : %s' % (cond, _cx(c, 1), _cx(c, 2)))


def _complex(op, c):
    R = real_dtype(c.od)
    return c.set('(%s)(%s, %s)' % (vector_type(c.od), c.x(0, R), c.x(1, R)))


def _polar(op, c):
    R = real_dtype(c.od)
    r, t = c.x(0, R), c.x(1, R)
    return c.set('(%s)(%s * cos(%s), %s * sin(%s))' % (vector_type(c.od), r, t, r, t))


def _compare(sym):
    def gen(op, c):
        D = _complex_in(c)
        a, b = _cx(c, 0, D), _cx(c, 1, D)
        if sym == '==':
            return c.set('((%s).x == (%s).x && (%s).y == (%s).y)' % (a, b, a, b))
        if sym == '!=':
            return c.set('((%s).x != (%s).x || (%s).y != (%s).y)' % (a, b, a, b))
        # numpy orders complex values lexicographically: real parts, then imaginary parts
        strict = sym[0]
        return c.set('((%s).x %s (%s).x || ((%s).x == (%s).x && (%s).y %s (%s).y))'
                     % (a, strict, b, a, b, a, sym, b))
    return gen


def _unary(helper, fn, scale=None):
    def gen(op, c):
        if not is_complex(c.od):
            raise NoDeviceImplementation('%s with output dtype %s' % (op, c.od))
        T = _helper(c, helper, c.od)
        expr = 'th_%s_%s(%s)' % (fn, T, _cx(c, 0))
        if scale is not None:
            expr = '(%s) * %s' % (expr, c.lit(scale, real_dtype(c.od)))
        return c.set(expr)
    return gen


def _pow(op, c):
    if not is_complex(c.od):
        raise NoDeviceImplementation('pow with output dtype %s' % c.od)
    return c.set(_fold(c, 'cpow', [_cx(c, 0), _cx(c, 1)]))


_CODE = {
    scal.Add: _add, scal.Mul: _mul, scal.Sub: _sub, scal.Neg: _neg, scal.Sqr: _sqr,
    scal.TrueDiv: _true_div, scal.Inv: _inv,
    scal.Identity: _copy, scal.Cast: _copy, scal.Second: _second, scal.Conj: _conj,
    scal.Real: _part(lambda x: '(%s).x' % x), scal.Imag: _part(lambda x: '(%s).y' % x),
    scal.Abs: _part(lambda x: 'hypot((%s).x, (%s).y)' % (x, x)),
    scal.Angle: _part(lambda x: 'atan2((%s).y, (%s).x)' % (x, x)),
    scal.Complex: _complex, scal.ComplexFromPolar: _polar, scal.Switch: _switch,
    scal.EQ: _compare('=='), scal.NEQ: _compare('!='), scal.LT: _compare('<'),
    scal.LE: _compare('<='), scal.GT: _compare('>'), scal.GE: _compare('>='),
    scal.Exp: _unary('cexp', 'cexp'), scal.Log: _unary('cexp', 'clog'),
    scal.Log2: _unary('cexp', 'clog', 1 / np.log(2)),
    scal.Log10: _unary('cexp', 'clog', 1 / np.log(10)),
    scal.Sqrt: _unary('csqrt', 'csqrt'), scal.Pow: _pow,
    scal.Sin: _unary('ctrig', 'csin'), scal.Cos: _unary('ctrig', 'ccos'),
    scal.Tan: _unary('ctrig', 'ctan'), scal.Sinh: _unary('ctrig', 'csinh'),
    scal.Cosh: _unary('ctrig', 'ccosh'), scal.Tanh: _unary('ctrig', 'ctanh'),
}


def op_code(op, c):
    """The statements computing ``op`` on the values of ``c`` (a ``codegen.Call``) where a
    dtype is complex; NoDeviceImplementation for ops without complex code here."""
    fn = None
    for cls in type(op).__mro__:
        fn = _CODE.get(cls)
        if fn is not None:
            break
    if fn is None:
        raise NoDeviceImplementation('scalar op %s has no OpenCL code for complex dtypes '
                                     '(%s -> %s)' % (op, ', '.join(c.in_dtypes),
                                                     ', '.join(c.out_dtypes)))
    return fn(op, c)
