"""Functions as OpenCL C: rounding and elementary functions (OpenCL builtins), the special
functions of ``theano.scalar.basic_scipy`` (erfcx, erfinv, erfcinv, psi, tri_gamma, the
incomplete gamma functions, chi2sf; Bessel functions stay on the host) and the scalar ops
``theano.tensor`` defines (sigmoid, ultra_fast_sigmoid, softplus, softsign, xlogx, xlogy0).
Each generator registers itself on ``codegen.op_code``.
"""
import math
import string

import theano.scalar as scal
from theano.scalar import basic_scipy
from theano.tensor.nnet.nnet import ScalarSoftsign
from theano.tensor.nnet.sigm import ScalarSigmoid, ScalarSoftplus, UltraFastScalarSigmoid
from theano.tensor.xlogx import XlogX, XlogY0

from ..errors import NoDeviceImplementation
from . import own_functions
from .codegen import FLOATS, convert, float_valued, is_int, op_code, register

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


def builtin_name(op):
    """The OpenCL builtin a scalar op of ``_FUNCTIONS`` computes with, else None (the CPU
    cost model measures what each costs the device, ``runtime/cost.py``)."""
    return _FUNCTIONS.get(type(op))


def builtin_names():
    """Every builtin name of ``_FUNCTIONS``, sorted."""
    return sorted(set(_FUNCTIONS.values()))


def _function(name):
    def code(op, c):
        if c.od not in FLOATS:
            raise NoDeviceImplementation("%s with output dtype %s: expected a float "
                                         "output" % (op, c.od))
        # (the device's build picks the own or the builtin version: own_functions.py)
        helper, source, calls = own_functions.BY_TYPE.get(c.T, (None, None, {}))
        if name in calls:
            c.gen.helper(helper, string.Template(source), c.T)
            return c.set('%s(%s)' % (calls[name], c.x(0)))
        return c.set('%s(%s)' % (name, c.x(0)))
    return code


for _cls, _name in _FUNCTIONS.items():
    op_code.register(_cls, _function(_name))


@register(scal.ArcTan2)
def _arctan2(op, c):
    return c.set('atan2(%s, %s)' % tuple(c.xs()))


@register(scal.Deg2Rad, scal.Rad2Deg)
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


@register(basic_scipy.Erfcx, basic_scipy.Erfinv, basic_scipy.Erfcinv)
@float_valued
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


@register(basic_scipy.Psi, basic_scipy.TriGamma)
def _psi_trigamma(op, c):
    # an integer output (psi_inplace of an int array): Theano's C code computes in double
    # and the assignment truncates
    ft = c.od if c.od in FLOATS else 'float64'
    T = c.gen.ct(ft) if ft != 'float16' else c.T
    if isinstance(op, basic_scipy.Psi):
        name = c.gen.helper('psi_' + T, _PSI, T)
    else:
        name = c.gen.helper('trigamma_' + T, _TRIGAMMA, T)
    x = c.x(0, ft)
    expr = 'th_%s(%s)' % (name, x)
    if is_int(c.in_dtypes[0]):
        # Theano's C code is for float inputs only: an integer input takes its Python code,
        # scipy's, whose poles give psi(0) = -inf, psi(-n) = nan, trigamma(-n) = inf
        inf = '(%s)INFINITY' % T
        expr = ('(%s == 0 ? -%s : %s < 0 ? (%s)NAN : %s)' % (x, inf, x, T, expr)
                if isinstance(op, basic_scipy.Psi) else '(%s <= 0 ? %s : %s)' % (x, inf, expr))
    return c.set(expr if ft == c.od else convert(c.gen, expr, ft, c.od))


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


@register(*_GAMMA_INC_OPS)
@float_valued
def _gamma_inc(op, c):
    c.gen.helper('gamma_inc_' + c.T, _GAMMA_INC, c.T)
    return c.set('th_%s_%s(%s, %s)' % ((_GAMMA_INC_OPS[type(op)], c.T) + tuple(c.xs())))


@register(basic_scipy.Chi2SF)
@float_valued
def _chi2sf(op, c):
    c.gen.helper('gamma_inc_' + c.T, _GAMMA_INC, c.T)
    x, k = c.xs()
    # scipy's chi2.sf is 1 for x < 0, where Theano's C code asserts
    return c.set('%s < 0 ? %s : %s - th_gammap_%s(%s / 2, %s / 2)' % (
        x, c.lit(1), c.lit(1), c.T, k, x))


@register(basic_scipy.J0, basic_scipy.J1, basic_scipy.Jv, basic_scipy.I0, basic_scipy.I1,
           basic_scipy.Iv)
def _bessel(op, c):
    raise NoDeviceImplementation("Bessel function %s: OpenCL has no builtin and theano_ocl "
                                 "no implementation" % op)


# ---------------------------------------------------------------------------------------------
# theano.tensor's scalar ops

def _cut_offs(c, for_float, for_double):
    """Where Theano's sigmoid and softplus stop computing: its C code's per precision (float16
    computes in float); integer inputs, which its C code does not take, its Python code's."""
    if c.in_dtypes[0] not in FLOATS:
        return -30.0, 30.0
    return for_float if c.T == 'float' else for_double


@register(ScalarSigmoid)
def _sigmoid(op, c):
    x = c.x(0)
    low, high = _cut_offs(c, (-88.0, 15.0), (-709.0, 19.0))
    return c.set('%s < %s ? %s : (%s > %s ? %s : %s / (%s + exp(-%s)))' % (
        x, c.lit(low), c.lit(0), x, c.lit(high), c.lit(1), c.lit(1), c.lit(1), x))


@register(UltraFastScalarSigmoid)
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


@register(ScalarSoftplus)
def _softplus(op, c):
    x = c.x(0)
    low, high = _cut_offs(c, (-103.0, 14.0), (-745.0, 16.0))
    return c.set('%s < %s ? %s : (%s > %s ? %s : log1p(exp(%s)))' % (
        x, c.lit(low), c.lit(0), x, c.lit(high), x, x))


@register(ScalarSoftsign)
def _softsign(op, c):
    x = c.x(0)
    return c.set('%s / (%s + fabs(%s))' % (x, c.lit(1), x))


@register(XlogX)
def _xlogx(op, c):
    x = c.x(0)
    return c.set('%s == 0 ? %s : %s * log(%s)' % (x, c.lit(0), x, x))


@register(XlogY0)
def _xlogy0(op, c):
    x, y = c.xs()
    return c.set('%s == 0 ? %s : %s * log(%s)' % (x, c.lit(0), x, y))
