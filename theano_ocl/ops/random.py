"""Random family: ``theano.sandbox.rng_mrg.mrg_uniform`` (what ``MRG_RandomStreams``
draws everything from) on the device, and ``theano.sandbox.multinomial``'s
``MultinomialFromUniform`` / ``ChoiceFromUniform`` (what ``multinomial`` and ``choice``
lower to).

The kernel (``kernels/random.cl.mako``) runs Theano's MRG31k3p generator with one
work-item per stream, so for the same rstate the samples and the updated rstate equal
Theano's CPU implementation bit for bit: its C code for float32/float64, its Python code
for float16. ``binomial``, ``uniform`` with bounds and ``normal``'s arithmetic are
Elemwise ops on the sample and run on the device through the elementwise family.
"""
import numpy as np
from theano.sandbox.multinomial import ChoiceFromUniform, MultinomialFromUniform
from theano.sandbox.rng_mrg import mrg_uniform

from .. import kernels
from .. import scalar as oscalar
from ..errors import NoDeviceImplementation
from .base import DeviceImpl, FLOAT_DTYPES, INT_DTYPES
from .registry import implemented_by, ocl_impl

_M1 = 2147483647

# The constant each output dtype multiplies by, as Theano's C (float32, float64) and Python
# (float16) code write it.
_NORM = {'float32': '4.6566126e-10f', 'float64': '4.656612873077392578125e-10',
         'float16': repr(float(np.float16(3.0458e-05)))}


def kernel_source(dtype, fp64):
    """(source, kernel name) of the generator writing ``dtype`` samples."""
    norm_t = 'double' if dtype == 'float64' or (dtype == 'float16' and fp64) else 'float'
    norm = _NORM[dtype] if norm_t == 'double' or dtype == 'float32' else _NORM[dtype] + 'f'
    support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable' if norm_t == 'double' else ''
    out_t = {'float16': 'half', 'float32': 'float', 'float64': 'double'}[dtype]
    return kernels.render('random.cl.mako', 'mrg_uniform', support=support, dtype=dtype,
                          out_t=out_t, norm=norm, norm_t=norm_t)


class MRGUniformImpl(DeviceImpl):
    """Inputs: rstate (device int32 matrix, one 6-int state per stream), size (host)."""
    dtypes = ('int32',) + FLOAT_DTYPES    # the int32 stream state, the samples
    host_inputs = (1,)

    def __init__(self, node, dev):
        DeviceImpl.__init__(self, node, dev)
        self.dtype = node.outputs[1].type.dtype
        self.ndim = node.outputs[1].type.ndim
        self.src, self.kname = kernel_source(self.dtype, dev.has_fp64)

    def describe(self):
        return 'MRG31k3p kernel (%s)' % self.node.op

    def plan(self, ctx, ins):
        rstate, size = ins
        size = np.asarray(size)
        if size.ndim != 1 or size.shape[0] != self.ndim:
            raise ValueError('%s: size must be a vector of length %d, got %r'
                             % (self.node.op, self.ndim, size))
        shape = tuple(int(s) for s in size)
        n = 1
        for s in shape:
            n *= s
        if n > _M1:
            raise ValueError('rng_mrg does not support more than (2**31 -1) samples (%s asks %d)'
                             % (self.node.op, n))
        if rstate.ndim != 2 or rstate.shape[1] != 6 or rstate.dtype != np.int32:
            raise ValueError('%s: rstate must be an int32 matrix with 6 columns, got %s %s'
                             % (self.node.op, rstate.dtype, rstate.shape))
        n_streams = rstate.shape[0]
        new_state = ctx.alloc(rstate.shape, 'int32')
        sample = ctx.alloc(shape, self.dtype)
        if n_streams == 0:
            return [new_state, sample]
        prg = ctx.dev.build(self.src)
        args = [np.int64(n), np.int64(n_streams), rstate,
                np.int64(rstate.strides[0] // 4), np.int64(rstate.strides[1] // 4),
                new_state, sample]
        if ctx.dev.is_cpu:
            gsize, lsize = (n_streams,), None
        else:
            gsize, lsize = (-(-n_streams // 64) * 64,), (64,)
        ctx.launch(prg, self.kname, gsize, lsize, args)
        return [new_state, sample]


@ocl_impl.register(mrg_uniform)
@implemented_by(MRGUniformImpl)
def _mrg_uniform(op, node, dev):
    dtype = node.outputs[1].type.dtype
    if dtype not in _NORM:
        raise NoDeviceImplementation('mrg_uniform has no %s samples' % dtype)
    return MRGUniformImpl(node, dev)


class MultinomialImpl(DeviceImpl):
    """``MultinomialFromUniform`` and ``ChoiceFromUniform``: inputs pvals (matrix), unis
    (vector), n (host scalar: samples per row). One work-item per row; the same samples as
    Theano's C code for the same uniforms (running sums in double)."""
    dtypes = INT_DTYPES + FLOAT_DTYPES
    host_when = ('the device has no cl_khr_fp64 (Theano\'s C code sums probabilities in double); '
                 'pvals or unis not floats; a float16 output; ChoiceFromUniform without '
                 'replacement of float16 pvals')
    host_inputs = (2,)

    def __init__(self, node, dev, choice):
        DeviceImpl.__init__(self, node, dev)
        self.choice = choice
        self.replace = bool(getattr(node.op, 'replace', False)) if choice else False
        p, u = node.inputs[0].dtype, node.inputs[1].dtype
        o = node.outputs[0].dtype
        pc = oscalar.compute_ctype(p)
        self.src, self.name = kernels.render(
            'multinomial.cl.mako', 'choice' if choice else 'multinomial', choice=choice,
            replace=self.replace, p_t=oscalar.ctype(p), u_t=oscalar.ctype(u),
            o_t=oscalar.ctype(o), pc_t=pc, p_half=p == 'float16', u_half=u == 'float16')
        self.pc_dtype = 'float32' if p == 'float16' else p

    def describe(self):
        return '%s kernel (%s)' % ('choice' if self.choice else 'multinomial', self.node.op)

    def plan(self, ctx, ins):
        pvals, unis, n = ins
        n = int(n)
        nb_multi, nb_outcomes = pvals.shape
        if self.choice and n > nb_outcomes:
            raise ValueError('Cannot sample without replacement n samples bigger than the '
                             'size of the distribution.')
        if unis.shape[0] != nb_multi * n:
            raise ValueError('unis.shape[0] != pvals.shape[0] * n: %s: pvals has shape %s, '
                             'unis %s, n = %d' % (self.node.op, pvals.shape, unis.shape, n))
        odtype = self.node.outputs[0].dtype
        z = ctx.alloc((nb_multi, n) if self.choice else (nb_multi, nb_outcomes), odtype)
        if nb_multi == 0 or z.size == 0:
            return [z]
        it_p, it_u = pvals.itemsize, unis.itemsize
        args = [np.int64(nb_multi), np.int64(nb_outcomes), np.int64(n),
                pvals, np.int64(pvals.strides[0] // it_p), np.int64(pvals.strides[1] // it_p),
                unis, np.int64(unis.strides[0] // it_u), z]
        if self.choice:
            args.append(ctx.alloc((nb_multi, max(nb_outcomes, 1)), self.pc_dtype))
        options = ()
        if self.choice and not self.replace and _correct_division(ctx.dev):
            options = ('-cl-fp32-correctly-rounded-divide-sqrt',)    # C's float division
        prg = ctx.dev.build(self.src, options)
        if ctx.dev.is_cpu:
            gsize, lsize = (nb_multi,), None
        else:
            gsize, lsize = (-(-nb_multi // 64) * 64,), (64,)
        ctx.launch(prg, self.name, gsize, lsize, args)
        return [z]


def _correct_division(dev):
    try:
        return bool(dev.device.single_fp_config
                    & dev.cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
    except Exception:  # pragma: no cover
        return False


def _multinomial_factory(choice):
    @implemented_by(MultinomialImpl)
    def factory(op, node, dev):
        if not dev.has_fp64:
            raise NoDeviceImplementation('%s sums probabilities in double (Theano\'s C code); '
                                         'the device has no cl_khr_fp64' % type(op).__name__)
        p, u, o = node.inputs[0].dtype, node.inputs[1].dtype, node.outputs[0].dtype
        for what, dt in (('pvals', p), ('unis', u)):
            if dt not in ('float16', 'float32', 'float64'):
                raise NoDeviceImplementation('%s: %s of dtype %s' % (type(op).__name__, what, dt))
        if o in ('bool', 'float16') or o.startswith('complex'):
            raise NoDeviceImplementation('%s: output dtype %s' % (type(op).__name__, o))
        if choice and p == 'float16' and not getattr(op, 'replace', False):
            # Theano's C code renormalizes npy_float16 (integer) storage: not reproduced
            raise NoDeviceImplementation('ChoiceFromUniform without replacement of float16 pvals')
        return MultinomialImpl(node, dev, choice)      # its C types raise for other dtypes
    return factory


ocl_impl.register(MultinomialFromUniform)(_multinomial_factory(False))
ocl_impl.register(ChoiceFromUniform)(_multinomial_factory(True))
