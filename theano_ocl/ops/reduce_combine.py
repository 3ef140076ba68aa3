"""What a reduction combines (:class:`Combine`: the scalar op's absorb and combine code, the
dtypes, the identity, argmax's pairs, a fused producer) and the kernel source it renders
from ``kernels/reduce.cl.mako`` for a geometry (``reduce_geometry.py``); planning and
launching are ``reduce.py``'s."""
import numpy as np
import theano.scalar as ts

from .. import kernels
from .. import scalar as oscalar


class Combine(object):
    """What one reduction kernel computes: dtypes and the OpenCL code of each stage.

    ``argmax``: (value, index) pairs instead of a scalar op; ``identity``: the OpenCL
    literal the accumulator starts from. Two combines computing the same are equal (the
    key of :meth:`source`'s memo).
    """

    def __init__(self, scalar_op, in_dtype, acc_dtype, out_dtype, identity, argmax=False,
                 pairs_in=False, pre=None):
        self.scalar_op = scalar_op
        # a fused elementwise producer (Fused.spec(): support, body, input dtypes): the
        # reduced values are computed from its inputs (generic kernel only)
        self.pre = pre
        self.in_dtype = in_dtype
        self.acc_dtype = acc_dtype
        self.out_dtype = out_dtype
        self.identity = identity
        self.argmax = argmax
        self.pairs_in = pairs_in
        supports = []
        self.absorb_body = self.combine_body = ''
        if not argmax:
            s, self.absorb_body = oscalar.elemwise_code(scalar_op, [acc_dtype, in_dtype], [acc_dtype])
            supports.append(s)
            s, self.combine_body = oscalar.elemwise_code(scalar_op, [acc_dtype, acc_dtype], [acc_dtype])
            supports.append(s)
        s, self.finish_body = oscalar.elemwise_code(ts.Cast(ts.get_scalar_type(out_dtype)),
                                                    [acc_dtype], [out_dtype])
        supports.append(s)
        if pre is not None:
            supports.append(pre[0])
        self.support = '\n'.join(s for s in supports if s)
        self._facts = (type(scalar_op), self.support, self.absorb_body, self.combine_body,
                       self.finish_body, in_dtype, acc_dtype, out_dtype, identity, argmax,
                       pairs_in, pre)

    def __eq__(self, other):
        return isinstance(other, Combine) and self._facts == other._facts

    def __hash__(self):
        return hash(self._facts)

    @property
    def partial_dtype(self):
        """Partials are stored in the accumulator's compute type (float16 accumulates in float)."""
        return 'float32' if self.acc_dtype == 'float16' else self.acc_dtype

    def with_pre(self, pre):
        """The same reduction of values computed by a fused producer (``Fused.spec()``)."""
        return Combine(self.scalar_op, self.in_dtype, self.acc_dtype, self.out_dtype,
                       self.identity, self.argmax, self.pairs_in, pre)

    def staged(self):
        """(first stage: input -> partials, second stage: partials -> output)."""
        d = self.partial_dtype
        return (Combine(self.scalar_op, self.in_dtype, self.acc_dtype, d, self.identity,
                        self.argmax, self.pairs_in, self.pre),
                Combine(self.scalar_op, d, d, self.out_dtype, self.identity, self.argmax,
                        pairs_in=self.argmax))

    def vector_kind(self):
        """How V-wide vectors of this reduction are absorbed, or None (scalar code only).

        'argmax', 'add', 'mul', 'max', 'min', 'and', 'or': OpenCL vector code that computes
        per lane what ``th_absorb`` computes (integer arithmetic wraps, NaN propagates), with
        the input converted to the accumulator type as the scalar code converts it.
        """
        if self.pairs_in or self.pre is not None or self.acc_dtype.startswith('complex'):
            return None
        ind, acc = self.in_dtype, self.acc_dtype
        same = oscalar.compute_ctype(ind) == oscalar.compute_ctype(acc)
        if self.argmax:
            return 'argmax' if same else None
        op = self.scalar_op
        if isinstance(op, (ts.Add, ts.Mul)) and acc != 'bool':
            if acc.startswith('float') or not ind.startswith('float'):
                return 'add' if isinstance(op, ts.Add) else 'mul'
        elif isinstance(op, (ts.Maximum, ts.Minimum)) and same:
            return 'max' if isinstance(op, ts.Maximum) else 'min'
        elif isinstance(op, (ts.AND, ts.OR)) and same and not acc.startswith('float'):
            return 'and' if isinstance(op, ts.AND) else 'or'
        return None

    def any_order(self):
        """Whether this reduction's vector code gives the same result whatever the order in
        which it combines elements: argmax (ties to the smaller index), max, min (but the
        sign of a zero among equal zeros, which the vector lanes already take in their own
        order), and, or, and integer sums and products (they wrap); not float sums and
        products (rounding)."""
        kind = self.vector_kind()
        return kind in ('argmax', 'max', 'min', 'and', 'or') or \
            (kind in ('add', 'mul') and not self.acc_dtype.startswith('float'))

    @kernels.memoize
    def source(self, mode='generic', kd=0, rd=0, r_contig=True, L=1, V=1, U=1, T=1, NB=1,
               CX=1, RY=1, aligned=False, idx32=True, sync=None, epi=None, K=1):
        """Render (memoized) the kernel; returns (source, kernel name). ``sync`` ('ptx',
        'atomics'; ``reduce_geometry.cross_group_sync``): a rows or cols kernel with parts
        whose last work-group reduces the partials, with that handshake. ``epi``: an
        elementwise consumer of the result computed in its place (generic mode, one part:
        :func:`plan_reduce_epilogue`), as (support, body, input index of the result, input
        dtypes, output dtype). ``K``: rows mode's independent vector accumulators (T = 1,
        a combine that gives the same result in any order: :meth:`any_order`)."""
        vkind = self.vector_kind() if V > 1 else None
        if K > 1 and (mode != 'rows' or T != 1 or not self.any_order()):
            raise ValueError('K = %d accumulators need rows mode, T = 1 and a combine exact in '
                             'any order' % K)
        if V > 1 and vkind is None:
            raise ValueError('no vector code for %s' % (self.scalar_op,))
        pre_ins = list(self.pre[2]) if self.pre is not None else []
        fp64 = any(d in ('float64', 'complex128') for d in
                   [self.in_dtype, self.acc_dtype, self.out_dtype] + pre_ins)
        pragma = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' if fp64 else ''
        # complex sums and products: (re, im) vectors, scalar code only (no vector loads)
        in_t = oscalar.ctype(self.in_dtype, complex_ok=True)
        acc_t = oscalar.compute_ctype(self.acc_dtype, complex_ok=True)
        acc_size = 4 if acc_t == 'float' else min(np.dtype(self.acc_dtype).itemsize, 8)
        uacc_t = acc_t if acc_t.startswith('u') or acc_t in ('float', 'double') else 'u' + acc_t
        load_t = 'float' if self.in_dtype == 'float16' else in_t
        support = pragma + self.support
        if epi is not None:
            if 'float64' in list(epi[3]) + [epi[4]] and not fp64:
                support = '#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n' + support
            if epi[0] and epi[0] not in support:
                support += '\n' + epi[0]
        return kernels.render(
            'reduce.cl.mako', 'reduce', support=support,
            absorb_body=self.absorb_body, combine_body=self.combine_body,
            finish_body=self.finish_body,
            in_t=in_t, in_ct=oscalar.compute_ctype(self.in_dtype, True), acc_t=acc_t,
            out_t=oscalar.ctype(self.out_dtype, True),
            out_ct=oscalar.compute_ctype(self.out_dtype, True),
            half_in=self.in_dtype == 'float16', half_out=self.out_dtype == 'float16',
            is_float=self.acc_dtype.startswith('float'), identity=self.identity,
            argmax=self.argmax, pairs_in=self.pairs_in, mode=mode, kd=kd, rd=rd,
            r_contig=r_contig, L=L, V=V, U=U, T=T, NB=NB, CX=CX, RY=RY, K=K, aligned=aligned,
            single=sync is not None, sync=sync, vkind=vkind, vec=V > 1, comps=['s%x' % q for q in range(V)],
            acc_vt='%s%d' % (acc_t, V), load_vt='%s%d' % (load_t, V),
            idx_t='int' if idx32 else 'long', idx_vt='%s%d' % ('int' if idx32 else 'long', V),
            mask_vt='%s%d' % ({1: 'char', 2: 'short', 4: 'int', 8: 'long'}[acc_size], V),
            uacc_vt='%s%d' % (uacc_t, V),
            fused=[dict(t=oscalar.ctype(d), ct=oscalar.compute_ctype(d), half=d == 'float16')
                   for d in pre_ins],
            pre_body=self.pre[1] if self.pre is not None else '',
            epi=epi is not None, epi_body=epi[1] if epi else '', epi_j=epi[2] if epi else 0,
            epi_cts=[oscalar.compute_ctype(d) for d in epi[3]] if epi else [],
            epi_ops=[(q, oscalar.ctype(d)) for q, d in enumerate(epi[3]) if q != epi[2]]
            if epi else [],
            epi_cs=dict(ct=oscalar.compute_ctype(epi[4])) if epi else None,
            epi_out_t=oscalar.ctype(epi[4]) if epi else None)


def sum_combine(in_dtype, acc_dtype, out_dtype):
    """The Combine of a sum of ``in_dtype`` values accumulated in ``acc_dtype``."""
    zero = oscalar.literal(np.asarray(0).astype(acc_dtype), acc_dtype)
    return Combine(ts.add, in_dtype, acc_dtype, out_dtype, zero)


def max_identity(dtype, maximum=True):
    """The value max (min) starts from: -inf (+inf) for floats, the dtype's bound for ints."""
    if dtype.startswith('float'):
        value = -np.inf if maximum else np.inf
    elif dtype == 'bool':
        value = not maximum
    else:
        info = np.iinfo(dtype)
        value = info.min if maximum else info.max
    return oscalar.literal(value, dtype)
