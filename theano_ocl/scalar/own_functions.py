"""float32 ``log``, ``log1p``, ``expm1`` and ``tanh``, and float64 ``tanh``, written as
arithmetic and selects, for the kernels of devices whose OpenCL builtins run them one
element at a time.

PoCL 3.1 vectorizes a kernel across its work-items, but calls its builtin ``log``,
``log1p`` and ``expm1`` once per element: on the 2-core EPYC, a million float32 took 7.5-8.8
ms (log), 10-12 ms (log1p) and 13-19 ms (expm1), against 1 ms for ``exp`` (2026-11-30).
These versions use nothing but arithmetic, integer bit moves and ``exp`` (which PoCL does
vectorize), so that the kernel's loop over work-items vectorizes: 0.45-0.55 ms, 0.6-0.65
ms and 1.6-2.1 ms. Errors against the correctly rounded value, over random bit patterns,
[-20, 20] and [-1, 1] times 1e-10..1, and the special values (``tests/test_own_functions.py``):
at most 1 ulp (log), 1.5 ulp (log1p), 2.5 ulp (expm1, with PoCL's exp; it inherits the
device's exp error, plus at most 2: 3.7 ulp with NVIDIA's on the H200, which is why 'auto'
keeps the builtins on GPUs); OpenCL's full profile allows 3, 2 and 3.

- ``log(x)``: ``x = 2^k m`` with ``m`` in [sqrt(1/2), sqrt(2)) (subnormals scaled first);
  ``log m = 2 atanh(s)``, ``s = (m - 1) / (m + 1)``, ``|s| < 0.172``, summed as its Taylor
  series to ``s^11`` (the rest is below 2^-30 of it) in the form ``f - (f^2/2 - s (f^2/2 +
  p(s^2)))``, ``f = m - 1`` exact, so that the large term is not rounded; ``k log 2`` in two
  parts (the high one exact in float).
- ``log1p(x) = log(u) + (x - (u - 1)) / u``, ``u = 1 + x`` rounded: the second term is
  ``u``'s rounding error to first order.
- ``expm1(x) = (u - 1) x / log(u)``, ``u = exp(x)`` rounded (W. Kahan's way: the quotient
  cancels ``u``'s rounding).
- ``tanh(x)`` (float32 and float64): for ``|x| < 0.55`` its odd Taylor series (to ``x^19``
  in float, ``x^37`` in double: the rest is below 1/16 ulp there), ``|x| + |x| z p(z)``,
  ``z = x^2``, the large term exact; beyond, ``1 - 2 / (exp(2|x|) + 1)`` (the quotient is
  at most half the result, so ``exp``'s error is not magnified; an overflowing ``exp``
  gives 1); either with ``x``'s sign (so that -0 stays -0). Its error: within 1.43 ulp
  (float32) and 1.44 (float64) with PoCL's exp, 1.62 and 1.52 with NVIDIA's (the H200);
  above 0.55 at most 1.25 ulp plus 0.65 times the device's exp error.
  PoCL's builtin ``tanh`` is slower everywhere it was measured (the same calls, one
  process, 2026-12-02): on an AVX2 host (PoCL 3.1 ``pthread-haswell``, the 2-core EPYC)
  it ran one element at a time, 368,640 float32 in 3.8-4.5 ms against the own 0.8-1.0 ms
  (float64: 5.2 against 1.9-3.0 ms); on the H200's 16-core AVX-512 Xeon (PoCL 5.0) it is
  vectorized, and a million float32 took 1.22 ms against the own 0.98 (float64 1.65
  against 1.32; there the own log, log1p and expm1 were 2.4x, 1.7x and 1.1x faster too).

The ``functions`` setting chooses: ``'own'``, ``'builtin'``, or ``'auto'`` (own on PoCL's
CPU devices). A kernel's source carries both; the device's build defines ``MACRO`` where
the own ones are chosen (``OCLDevice.build``).
"""

#: defined (-D) by the build where a kernel uses the own versions
MACRO = 'THEANO_OCL_OWN_FLOAT_FUNCTIONS'

#: builtin name -> the function a float32 kernel calls
NAMES = {'log': 'th_log_f', 'log1p': 'th_log1p_f', 'expm1': 'th_expm1_f', 'tanh': 'th_tanh_f'}
#: ... and a float64 kernel (:data:`DOUBLE_SOURCE`)
DOUBLE_NAMES = {'tanh': 'th_tanh_d'}

SOURCE = r'''
#ifdef THEANO_OCL_OWN_FLOAT_FUNCTIONS
static inline __attribute__((always_inline)) float th_log_f(float x)
{
    const int sub = as_int(x) < 0x00800000;        /* subnormal, zero or negative */
    const int ix = as_int(sub ? x * 0x1p25f : x);
    /* the exponent of x / sqrt(1/2): the mantissa then lies in [sqrt(1/2), sqrt(2)) */
    const int e = (ix - 0x3f3504f3) >> 23;
    const float f = as_float(ix - (e << 23)) - 1.0f;
    const float s = f / (2.0f + f);
    const float z = s * s;
    const float p = z * (0.6666666666666667f + z * (0.4f + z * (0.2857142857142857f +
                    z * (0.2222222222222222f + z * 0.18181818181818182f))));
    const float hf = 0.5f * f * f;
    const float k = (float)(e - (sub ? 25 : 0));
    /* log 2 = 0.693145751953125 (exact in float) + 1.428606765330187e-06 */
    float r = k * 0.693145751953125f +
              (f - (hf - (s * (hf + p) + k * 1.428606765330187e-06f)));
    r = x == 0.0f ? -INFINITY : r;
    r = (x < 0.0f || isnan(x)) ? NAN : r;
    return x == INFINITY ? INFINITY : r;
}

static inline __attribute__((always_inline)) float th_log1p_f(float x)
{
    const float u = 1.0f + x;
    const float c = u == 0.0f ? 0.0f : (x - (u - 1.0f)) / u;   /* u's rounding error */
    const float r = th_log_f(u) + c;
    return (u - 1.0f == 0.0f || x == INFINITY) ? x : r;
}

static inline __attribute__((always_inline)) float th_expm1_f(float x)
{
    const float u = exp(x);
    const float d = u - 1.0f;
    const float l = th_log_f(u);
    float r = d * (x / (l == 0.0f ? 1.0f : l));
    r = u == 1.0f ? x : r;
    r = d == -1.0f ? -1.0f : r;
    r = u == INFINITY ? INFINITY : r;
    return isnan(x) ? x : r;
}

static inline __attribute__((always_inline)) float th_tanh_f(float x)
{
    const float a = fabs(x);
    const float z = x * x;
    /* |x| < 0.55: |x| + |x| z p(z), the odd Taylor series to x^19 */
    const float p = -3.333333433e-01f + z * (1.333333403e-01f + z * (-5.396825448e-02f +
                    z * (2.186948806e-02f + z * (-8.863235824e-03f + z * (3.592127934e-03f +
                    z * (-1.455834368e-03f + z * (5.900274264e-04f + z * -2.391291200e-04f)))))));
    /* beyond: 1 - 2 / (exp(2|x|) + 1), x's sign (an overflowing exp gives 1; NaN stays) */
    const float q = copysign(1.0f - 2.0f / (exp(2.0f * a) + 1.0f), x);
    return a < 0.55f ? copysign(a + a * z * p, x) : q;      /* (copysign: -0 stays -0) */
}
#else
#define th_log_f(x) log(x)
#define th_log1p_f(x) log1p(x)
#define th_expm1_f(x) expm1(x)
#define th_tanh_f(x) tanh(x)
#endif
'''

#: the float64 functions (a kernel that uses one has cl_khr_fp64 enabled)
DOUBLE_SOURCE = r'''
#ifdef THEANO_OCL_OWN_FLOAT_FUNCTIONS
static inline __attribute__((always_inline)) double th_tanh_d(double x)
{
    const double a = fabs(x);
    const double z = x * x;
    /* |x| < 0.55: |x| + |x| z p(z), the odd Taylor series to x^37 */
    const double p = -3.33333333333333315e-01 + z * (1.33333333333333331e-01 + z * (
        -5.39682539682539708e-02 + z * (2.18694885361552030e-02 + z * (
        -8.86323552990219733e-03 + z * (3.59212803657248114e-03 + z * (
        -1.45583438705131833e-03 + z * (5.90027440945585947e-04 + z * (
        -2.39129114243552478e-04 + z * (9.69153795692945095e-05 + z * (
        -3.92783238833168327e-05 + z * (1.59189050693289637e-05 + z * (
        -6.45168921565543065e-06 + z * (2.61477115129075465e-06 + z * (
        -1.05972683201046543e-06 + z * (4.29491107827380574e-07 + z * (
        -1.74066189635716480e-07 + z * 7.05463694640096814e-08))))))))))))))));
    const double q = copysign(1.0 - 2.0 / (exp(2.0 * a) + 1.0), x);
    return a < 0.55 ? copysign(a + a * z * p, x) : q;
}
#else
#define th_tanh_d(x) tanh(x)
#endif
'''

#: C type -> (the kernel helper's name, its source, builtin name -> the function called)
BY_TYPE = {'float': ('th_float_functions', SOURCE, NAMES),
           'double': ('th_double_functions', DOUBLE_SOURCE, DOUBLE_NAMES)}


def used(settings, dev):
    """Whether kernels built for ``dev`` under ``settings`` use the own versions."""
    choice = settings.functions
    if choice == 'auto':
        return bool(dev.is_cpu and 'Portable Computing Language' in dev.platform_name)
    return choice == 'own'
