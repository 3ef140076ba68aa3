"""Theano scalar ops as OpenCL C, for the elementwise and reduction kernels.

This package's interface: the dtype -> OpenCL type mapping (``ctype``, ``compute_ctype``),
exact literals (``literal``) and ``elemwise_code``: the OpenCL statements that compute one
element of a scalar op -- every op of ``theano.scalar.basic`` and ``theano.scalar.basic_scipy``,
the scalar ops ``theano.tensor`` defines (sigmoid, ultra_fast_sigmoid, softplus, softsign,
xlogx, xlogy0, mul_without_zeros) and ``Composite`` -- plus the helper functions those
statements call. Code generators are registered per op class on ``codegen.op_code`` (a
``singledispatch``); an op without one raises ``NoDeviceImplementation`` and runs on the host.

==================  ==========================================================================
``codegen.py``      types, ``Gen``/``Call`` (a body under construction), literals, conversions,
                    the registry, ``Composite``
``arith.py``        arithmetic, C's integer conversions, comparisons, logic, bits, copies
``functions.py``    elementary and special functions, theano.tensor's scalar ops
``complex.py``      complex64 / complex128 values: the ops that take them
==================  ==========================================================================

The code computes what each op's ``c_code`` computes in Theano's C backend, except where that
result is undefined, crashes, or comes from C's type promotion instead of the dtypes Theano
declares:

* Integer operands of mixed signedness combine as Theano's C code combines them: in C's
  common type (usual arithmetic conversions, LP64), where a signed value converts to an
  unsigned type modulo 2**n, and the result then converts to the dtype Theano declares.
  int32 + uint32 -> int64 gives 4294967295 for (-1, 0) (numpy: -1), int64 + uint64 ->
  float64 gives 2**64 - 1 for (-1, 0), int32 < uint32 is false for (-1, 0), maximum(int32 -1,
  uint32 7) is -1; likewise ``//``, ``%``, bitwise ops, clip, switch and mul_without_zeros
  (``arith._c_mixed``). Where no signed value meets an unsigned common type (int8 + uint8,
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
  The one exception is float32 ``pow``: computed in double and rounded once where the device
  has doubles (``#ifdef cl_khr_fp64``), as glibc's powf does, so it stays within one ulp of
  Theano C's (an OpenCL float pow may be 16 ulp off, and Adam's ``1 - beta_2 ** t`` magnifies
  that a thousandfold).
* psi and tri_gamma use Theano's C algorithms (~1e-10 accurate, 0 for x <= 0); erfcx, erfinv and
  erfcinv, which Theano computes with scipy, are computed here to full precision.
"""
from .codegen import Gen, compute_ctype, convert, ctype, literal
# the op families register their code generators on codegen.op_code when imported
from . import arith, functions  # noqa: F401

__all__ = ['ctype', 'compute_ctype', 'literal', 'elemwise_code', 'elemwise_code_checked',
           'ZERO_DIVISION_ERRORS', 'complex_convert']


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
    gen = Gen(check)
    ins = ['i%d' % k for k in range(len(in_dtypes))]
    gen.nonzero.update(ins[k] for k in nonzero)
    body = gen.code(scalar_op, ins, in_dtypes,
                    ['o%d' % k for k in range(len(out_dtypes))], out_dtypes)
    return gen.support(), body, gen.codes


def complex_convert(expr, src, dst):
    """``expr`` (dtype ``src``) as a ``dst`` value, where one of them is complex: for copies."""
    return convert(Gen(), expr, str(src), str(dst))
