## Small products, one work-item per element of C:
##     C[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n] (+ beta * Z[b, m, n])
## for the many tiny matrix-vector products of a Nengo-style step (encoders, decoders),
## where a tiled GEMM, a CLBlast call or a host BLAS step costs far more than the work.
##
## batched == False: one product; its sizes, element strides and alpha/beta are arguments.
## batched == True : K products in one launch (theano_ocl.planner): work-item gi belongs to
##   the product whose start (prefix sum of the sizes of C) is the largest one <= gi;
##   group > 0 (CPU devices): starts count work-groups of ``group`` outputs, and a map
##   after the records gives each work-group its product.
##   tab holds one record of ${rec} longs per product:
##     start, nb, M, N, K, then A: off sb sm sk, B: off sb sk sn, C: off sb sm sn
##     [, Z: off sb sm sn]
##   coef holds alpha, beta per product; operand pointers are arguments (OpenCL 1.2 has no
##   pointers in buffers), one set per product -- or, slab == True, one per operand when
##   every product's operand lies in one buffer (the table's offsets count from its start).
## fused (a list of P operand traits, else empty): B is not stored; an elementwise producer
##   folded into the product (ops/elemwise.py Fused) computes it: th_pre of P inputs, each
##   an operand of B's shape with its own pointer and "off sb sk sn" -- B's place in the
##   arguments, the records and the pointer sets holds those P operands, in order.
## epi: an elementwise consumer of C folded in (ops/elemwise.py Epilogue): C is not stored;
##   th_epi computes the consumer's output from the product's value (its input epi_j, as
##   C's type would hold it) and its other inputs (eops: operands of C's geometry, each
##   "off sb sm sn", after Z in the arguments, the records and the pointer sets), and the
##   result goes to C's place, which holds the consumer's output (traits cs).
## acc_t: float for half/float storage, double for double, the unsigned type for signed
## integers (wrapping sums, as numpy's integer dot).
<%namespace file="batch_locate.mako" import="locate"/>
<%namespace file="fused_pre.mako" import="th_pre"/>
<%namespace file="epilogue.mako" import="th_epi, epi_call, raw"/>
${support}
## bops: the operands that stand for B, (pointer name, stride-name stem, traits) each
% if fused:
${th_pre(fused, b['t'], b['ct'], pre_body)}
% endif
% if epi:
${th_epi(cs, epi_cts, epi_body)}
% endif
<%def name="load(o, ptr, idx)">(${acc_t})${raw(o, ptr, idx)}</%def>
<%def name="store(o, ptr, idx, val)">\
% if o['half']:
vstore_half_rte(${val}, ${idx}, ${ptr});
% elif o['signed_int']:
${ptr}[${idx}] = as_${o['t']}((${o['ut']})(${val}));
% else:
${ptr}[${idx}] = (${o['t']})(${val});
% endif
</%def>
<%def name="product(Ap, Bp, Cp, Zp, Ep)">\
        /* int index arithmetic: a small product has at most 65536 outputs (64-bit
           division costs several times more on CPUs) */
        const int mn = (int)li % (int)(M * N);
        const int bi = (int)li / (int)(M * N);
        const int m = mn / (int)N;
        const int n = mn % (int)N;
        const long a0 = a_off + bi * a_sb + m * a_sm;
% for P, s, o in bops:
        const long ${s}0 = ${s}_off + bi * ${s}_sb + n * ${s}_sn;
% endfor
        ${acc_t} acc = 0;
        for (long k = 0; k < Kd; ++k)
% if fused:
            acc += ${load(a, Ap, 'a0 + k * a_sk')} * (${acc_t})th_pre(${', '.join(capture(raw, o, Bp % P, '%s0 + k * %s_sk' % (s, s)) for P, s, o in bops)});
% else:
            acc += ${load(a, Ap, 'a0 + k * a_sk')} * ${load(b, Bp % 'B', 'b0 + k * b_sk')};
% endif
        ${acc_t} res = alpha * acc;
% if has_z:
        if (beta != 0)
            res += beta * ${load(c, Zp, 'z_off + bi * z_sb + m * z_sm + n * z_sn')};
% endif
% if epi:
        ${store(cs, Cp, 'c_off + bi * c_sb + m * c_sm + n * c_sn', capture(epi_call, c, eops, epi_cts, epi_j, 'res', Ep))}
% else:
        ${store(c, Cp, 'c_off + bi * c_sb + m * c_sm + n * c_sn', 'res')}
% endif
</%def>

% if not batched:
__kernel void ${name}(
    const long total, const long M, const long N, const long Kd,
    const ${acc_t} alpha, const ${acc_t} beta,
    __global const ${a['t']} *A, const long a_off, const long a_sb, const long a_sm, const long a_sk
% for P, s, o in bops:
    , __global const ${o['t']} *${P}, const long ${s}_off, const long ${s}_sb, const long ${s}_sk, const long ${s}_sn
% endfor
    , __global ${cs['t']} *C, const long c_off, const long c_sb, const long c_sm, const long c_sn
% if has_z:
    , __global const ${c['t']} *Z, const long z_off, const long z_sb, const long z_sm, const long z_sn
% endif
% for P, s, o, q in eops:
    , __global const ${o['t']} *${P}, const long ${s}_off, const long ${s}_sb, const long ${s}_sm, const long ${s}_sn
% endfor
)
{
    for (long li = get_global_id(0); li < total; li += get_global_size(0)) {
${product('A', '%s', 'C', 'Z', '%s')}
    }
}
% else:
__kernel void ${name}(
    const long total, __global const long *tab, __global const ${acc_t} *coef
% if slab:
    , __global const ${a['t']} *As
%   for P, s, o in bops:
    , __global const ${o['t']} *${P}s
%   endfor
    , __global ${cs['t']} *Cs
%   if has_z:
    , __global const ${c['t']} *Zs
%   endif
%   for P, s, o, q in eops:
    , __global const ${o['t']} *${P}s
%   endfor
% else:
% for k in range(K):
    , __global const ${a['t']} *A${k}
%   for P, s, o in bops:
    , __global const ${o['t']} *${P}_${k}
%   endfor
    , __global ${cs['t']} *C${k}
%   if has_z:
    , __global const ${c['t']} *Z${k}
%   endif
%   for P, s, o, q in eops:
    , __global const ${o['t']} *${P}_${k}
%   endfor
% endfor
% endif
)
{
${locate(K, rec, group, chunk, 'r[1] * r[2] * r[3]', whole)}
        const long M = r[2], N = r[3], Kd = r[4];
        const long a_off = r[5], a_sb = r[6], a_sm = r[7], a_sk = r[8];
% for q, (P, s, o) in enumerate(bops):
        const long ${s}_off = r[${9 + 4 * q}], ${s}_sb = r[${10 + 4 * q}], ${s}_sk = r[${11 + 4 * q}], ${s}_sn = r[${12 + 4 * q}];
% endfor
<% cz = 9 + 4 * len(bops) %>\
        const long c_off = r[${cz}], c_sb = r[${cz + 1}], c_sm = r[${cz + 2}], c_sn = r[${cz + 3}];
% if has_z:
        const long z_off = r[${cz + 4}], z_sb = r[${cz + 5}], z_sm = r[${cz + 6}], z_sn = r[${cz + 7}];
% endif
<% ez = cz + (8 if has_z else 4) %>\
% for w, (P, s, o, q) in enumerate(eops):
        const long ${s}_off = r[${ez + 4 * w}], ${s}_sb = r[${ez + 4 * w + 1}], ${s}_sm = r[${ez + 4 * w + 2}], ${s}_sn = r[${ez + 4 * w + 3}];
% endfor
        const ${acc_t} alpha = coef[2 * op], beta = coef[2 * op + 1];
% if slab:
        __global const ${a['t']} *Ap = As;
%   for P, s, o in bops:
        __global const ${o['t']} *${P}p = ${P}s;
%   endfor
        __global ${cs['t']} *Cp = Cs;
%   if has_z:
        __global const ${c['t']} *Zp = Zs;
%   endif
%   for P, s, o, q in eops:
        __global const ${o['t']} *${P}p = ${P}s;
%   endfor
% else:
        __global const ${a['t']} *Ap;
%   for P, s, o in bops:
        __global const ${o['t']} *${P}p;
%   endfor
        __global ${cs['t']} *Cp;
%   if has_z:
        __global const ${c['t']} *Zp;
%   endif
%   for P, s, o, q in eops:
        __global const ${o['t']} *${P}p;
%   endfor
        switch (op) {
%   for k in range(1, K):
        case ${k}: Ap = A${k};${''.join(' %sp = %s_%d;' % (P, P, k) for P, s, o in bops)} Cp = C${k};${' Zp = Z%d;' % k if has_z else ''}${''.join(' %sp = %s_%d;' % (P, P, k) for P, s, o, q in eops)} break;
%   endfor
        default: Ap = A0;${''.join(' %sp = %s_0;' % (P, P) for P, s, o in bops)} Cp = C0;${' Zp = Z0;' if has_z else ''}${''.join(' %sp = %s_0;' % (P, P) for P, s, o, q in eops)}
        }
% endif
${product('Ap', '%sp', 'Cp', 'Zp', '%sp')}
    }
}
% endif
