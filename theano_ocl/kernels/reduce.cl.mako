## One reduction kernel per (combine code, dtypes, mode, collapsed kept/reduced ndim and the
## compile-time geometry: local size L, vector width V, unroll U, lanes T, band NB, tile CX x RY,
## independent accumulators K).
## The input is seen as (kept dims) x (reduced dims), each collapsed (see ops/reduce.py); any
## strides, negative included. Three modes:
##
## generic: item g of the grid (a work-group when L > 1, else a work-item) owns output
##   o = g % n_out and part p = g / n_out of the reduced range: lane l visits
##   r = p*a_step + l + k*k_step for r < min(n_red, p*a_step + span). Any layout.
## rows (the reduced elements of an output are contiguous: one reduced dim of stride 1):
##   item = (output o, part p) owns [p*chunk, (p+1)*chunk) of its row; T lanes of a work-group
##   share an item (L/T items per group), reading V-element vectors at V-aligned addresses
##   (a scalar head and tail around them), U vectors in flight per lane, then a local-memory
##   tree over the T lanes. CPUs: T = 1, one work-item walks its chunk with V-wide vectors,
##   K of them at a time into K accumulators where the combine is exact (K > 1 needs T = 1).
## cols (the kept elements are contiguous: one kept dim of stride 1):
##   a work-item owns NB*V adjacent columns (NB vectors of V) and walks rows
##   [p*chunk, (p+1)*chunk) of the reduced range; CX work-items side by side in a group read
##   adjacent vectors of a row (coalesced), RY row-lanes split the rows and combine in local
##   memory. CPUs: CX = RY = 1 and a wide band (NB*V columns) per work-item.
##
## Parts > 1 write partials [p][o] (acc dtype) that a second launch reduces over p; or, with
## ``single`` (GPUs whose memory model allows it: ``sync``, reduce_geometry.cross_group_sync),
## the same launch does: each group counts itself done on a device counter (rows: one for the
## launch; cols: one per column tile) with a device-scope release-acquire increment, and the
## last group to finish reduces the partials, writes the outputs and resets its counter to 0
## for the next launch (a frame replays the same counters).
## Argmax carries (value, index) pairs: a NaN beats any number, then the larger value, ties
## going to the smaller index (numpy's first occurrence). Vector lanes see increasing
## indices, kept as int (long past 2**31) offsets from the lane's start: a lane starts at its
## first element and only takes a strictly larger value, so ties keep the first. rows mode
## tracks NaNs apart (a NaN anywhere: the lane's first NaN is looked up again, off the hot
## loop); cols mode compares them in place.
## Vector type names (acc_vt, load_vt, idx_vt, mask_vt, uacc_vt), idx_t, vec (V > 1) and
## comps (the lane names s0..sf) come from ops/reduce.py.
<%namespace file="fused_pre.mako" import="th_pre"/>
<%namespace file="epilogue.mako" import="th_epi"/>
${support}

% if argmax:
inline int th_better(${acc_t} av, long ai, ${acc_t} bv, long bi)
{
%   if is_float:
    if (isnan(av)) return !isnan(bv) || ai < bi;
    if (isnan(bv)) return 0;
%   endif
    return av > bv || (av == bv && ai < bi);
}
% else:
inline ${acc_t} th_absorb(${acc_t} i0, ${in_ct} i1)
{
    ${acc_t} o0;
    {
${absorb_body}
    }
    return o0;
}
inline ${acc_t} th_combine(${acc_t} i0, ${acc_t} i1)
{
    ${acc_t} o0;
    {
${combine_body}
    }
    return o0;
}
% endif
% if fused:
${th_pre(fused, in_t, in_ct, pre_body)}
% endif
% if epi:
## the result's elementwise consumer (generic mode, one part: ops/reduce.plan_reduce_epilogue)
${th_epi(epi_cs, epi_cts, epi_body)}
% endif
inline ${out_ct} th_finish(${acc_t} i0)
{
    ${out_ct} o0;
    {
${finish_body}
    }
    return o0;
}

## -------------------------------------------------------------------------------- helpers
<%def name="load1(a)">\
% if half_in:
vload_half(${a}, x_p)\
% else:
x_p[${a}]\
% endif
</%def>
## scalar absorb of element at absolute index ${a} with reduced index ${ri}
<%def name="absorb1(acc, acci, a, ri)">\
${absorbv(acc, acci, capture(load1, a), ri)}\
</%def>
## scalar absorb of the value ${val} (``combine``: a value of the accumulator's type)
<%def name="absorbv(acc, acci, val, ri, combine=False)">\
% if argmax:
        {
            const ${acc_t} v_ = ${val};
            const long vi_ = ${ri};
            if (th_better(v_, vi_, ${acc}, ${acci})) {
                ${acc} = v_;
                ${acci} = vi_;
            }
        }
% else:
        ${acc} = ${'th_combine' if combine else 'th_absorb'}(${acc}, ${val});
% endif
</%def>
## fold vector accumulator lanes into a scalar accumulator
<%def name="fold(acc, acci, va, vb, vb_off)">\
% for c in comps:
%   if argmax:
        if (th_better(${va}.${c}, (long)${vb}.${c} + ${vb_off}, ${acc}, ${acci})) {
            ${acc} = ${va}.${c};
            ${acci} = (long)${vb}.${c} + ${vb_off};
        }
%   else:
        ${acc} = th_combine(${acc}, ${va}.${c});
%   endif
% endfor
</%def>
## argmax, lane by lane: ${a}, ${ai} := the better of (${xa}, ${xi}) and (${ya}, ${yi}): the
## larger value, ties to the smaller index (no NaN among them); ${m} the mask, of ${mt}
<%def name="take_better(a, ai, xa, xi, ya, yi, m, mt, it)">\
        const ${mt} ${m} = (${ya} > ${xa}) | ((${ya} == ${xa}) & convert_${mt}(${yi} < ${xi}));
        ${a} = select(${xa}, ${ya}, ${m});
        ${ai} = select(${xi}, ${yi}, convert_${it}(${m}));
</%def>
## argmax: fold the lanes of ${va} (values, no NaN) and ${vb} (their offsets) by halves,
## lane by lane the larger value, ties to the smaller index (the first occurrence, as the
## scalar fold finds it), then absorb the winner into acc
<%def name="vfold_argmax(va, vb, vb_off)">\
<%
    mask_t = mask_vt.rstrip('0123456789')
    steps, prev, w = [], (va, vb), V // 2
    while w >= 1:
        steps.append((w, prev, ('fa%d' % w, 'fb%d' % w)))
        prev, w = ('fa%d' % w, 'fb%d' % w), w // 2
    n = lambda t, w: t + (str(w) if w > 1 else '')
%>\
% for w, (pa, pb), (na, nb) in steps:
        const ${n(acc_t, w)} ${na}l = ${pa}.lo, ${na}h = ${pa}.hi;
        const ${n(idx_t, w)} ${nb}l = ${pb}.lo, ${nb}h = ${pb}.hi;
%   if w > 1:
${take_better('const %s %s' % (n(acc_t, w), na), 'const %s %s' % (n(idx_t, w), nb), na + 'l', nb + 'l', na + 'h', nb + 'h', na + 'm', n(mask_t, w), n(idx_t, w))}\
%   else:
        const int ${na}m = ${na}h > ${na}l || (${na}h == ${na}l && ${nb}h < ${nb}l);
        const ${acc_t} ${na} = ${na}m ? ${na}h : ${na}l;
        const ${idx_t} ${nb} = ${na}m ? ${nb}h : ${nb}l;
%   endif
% endfor
        if (th_better(fa1, (long)fb1 + ${vb_off}, acc, acc_i)) {
            acc = fa1;
            acc_i = (long)fb1 + ${vb_off};
        }
</%def>
## absorb a loaded vector ${v} (acc type) whose lanes have reduced indices ${vi}
<%def name="vabsorb(va, vb, v, vi, nan_apart=False)">\
% if argmax:
        {
            ${mask_vt} m_ = ${v} > ${va};
%   if is_float and nan_apart:
            nm |= isnan(${v});
%   elif is_float:
            m_ |= isnan(${v}) & ~isnan(${va});
%   endif
            ${va} = select(${va}, ${v}, m_);
            ${vb} = select(${vb}, ${vi}, convert_${idx_vt}(m_));
        }
% else:
        ${va} = th_vabsorb(${va}, ${v});
% endif
</%def>
% if vec:
inline ${acc_vt} th_vload(const long a, __global const ${in_t} *x_p)
{
%   if half_in:
    const ${load_vt} v = vload_half${V}(0, x_p + a);
%   elif aligned:
    const ${load_vt} v = *((__global const ${load_vt} *)(x_p + a));
%   else:
    const ${load_vt} v = vload${V}(0, x_p + a);
%   endif
%   if load_vt == acc_vt:
    return v;
%   else:
    return convert_${acc_vt}(v);
%   endif
}
## a vector of which only the first rem (>= 1) lanes are real: the others repeat the last
inline ${acc_vt} th_vload_part(const long a, const long rem, __global const ${in_t} *x_p)
{
    const ${load_vt} v = (${load_vt})(
%   for q in range(V):
        ${load1('a + (%d < rem ? %d : rem - 1)' % (q, q))}${',' if q < V - 1 else ''}
%   endfor
    );
%   if load_vt == acc_vt:
    return v;
%   else:
    return convert_${acc_vt}(v);
%   endif
}
%   if not argmax:
inline ${acc_vt} th_vabsorb(const ${acc_vt} a, const ${acc_vt} v)
{
%     if vkind == 'add' and is_float:
    return a + v;
%     elif vkind == 'add':
    return as_${acc_vt}(as_${uacc_vt}(a) + as_${uacc_vt}(v));
%     elif vkind == 'mul' and is_float:
    return a * v;
%     elif vkind == 'mul':
    return as_${acc_vt}(as_${uacc_vt}(a) * as_${uacc_vt}(v));
%     elif vkind in ('max', 'min') and is_float:
<%      sym = '>' if vkind == 'max' else '<' %>
    /* as th_absorb: (v ${sym} a) ? v : ((a ${sym}= v) ? a : NAN) */
    return select(select((${acc_vt})(NAN), a, a ${sym}= v), v, v ${sym} a);
%     elif vkind in ('max', 'min'):
    return select(a, v, v ${'>' if vkind == 'max' else '<'} a);
%     elif vkind == 'and':
    return a & v;
%     elif vkind == 'or':
    return a | v;
%     endif
}
%   endif
% endif
<%def name="store(idx, val, vali)">\
% if half_out:
        vstore_half_rte(th_finish(${val}), o_off + ${idx}, o_p);
% else:
        o_p[o_off + ${idx}] = th_finish(${val});
% endif
% if argmax:
        oi_p[oi_off + ${idx}] = ${vali};
% endif
</%def>
## the argmax index of a cols lane: vector lanes hold offsets from lo (LONG_MAX: no rows)
<%def name="cols_idx(vb, c)">\
% if vec:
(lo + ry < hi ? (long)${vb}.${c} + lo : LONG_MAX)\
% else:
${vb}\
% endif
</%def>
<%def name="out_args()">\
    , __global ${out_t} *o_p, const long o_off
% if argmax:
    , __global long *oi_p, const long oi_off
% endif
% if single:
    , __global ${acc_t} *pp_p, const long pp_off
%   if argmax:
    , __global long *ppi_p, const long ppi_off
%   endif
%   if sync == 'atomics':
    , __global atomic_int *ctr_p, const long ctr_off, const long parts
%   else:
    , __global volatile int *ctr_p, const long ctr_off, const long parts
%   endif
% endif
</%def>
## a first-stage result: the output, or with ``single`` the partial in the accumulator type
<%def name="store1(idx, val, vali)">\
% if single:
        pp_p[pp_off + ${idx}] = ${val};
%   if argmax:
        ppi_p[ppi_off + ${idx}] = ${vali};
%   endif
% else:
${store(idx, val, vali)}\
% endif
</%def>
## absorb partial ${idx}, written by other groups of this launch and acquired by last_group
## (PTX: volatile loads besides, no stale L1 line)
<%def name="absorb_partial(acc, acci, idx)">\
<%
    pp, ppi = ('((volatile __global %s *)pp_p)' % acc_t, '((volatile __global long *)ppi_p)') \
        if sync == 'ptx' else ('pp_p', 'ppi_p')
%>\
${absorbv(acc, acci, '%s[pp_off + %s]' % (pp, idx), '%s[ppi_off + %s]' % (ppi, idx), combine=True)}\
</%def>
## slot ${b} of s_acc (s_idx) combined into slot ${a}
<%def name="combine_slots(a, b)">\
% if argmax:
            if (th_better(s_acc[${b}], s_idx[${b}], s_acc[${a}], s_idx[${a}])) {
                s_acc[${a}] = s_acc[${b}];
                s_idx[${a}] = s_idx[${b}];
            }
% else:
            s_acc[${a}] = th_combine(s_acc[${a}], s_acc[${b}]);
% endif
</%def>
## a local-memory tree: for s = ${half}, ${half}/2, ... 1 the lanes with ${lane} < s combine
## slot l + s into slot l (every lane of the group reaches each barrier)
<%def name="tree(half, lane)">\
    for (int s = ${half}; s > 0; s >>= 1) {
        if (${lane} < s) {
${combine_slots('l', 'l + s')}
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
</%def>
## single pass: every lane reaches this (no early return) after its partial stores; the
## barrier orders them (work-group scope) before lane 0's count on counter ${ci} of
## ${expected}, a device-scope release-acquire read-modify-write: it releases this group's
## partials and, in the last group, acquires every group's that counted before it (each
## count is in the release sequence of the counter). The second barrier orders that acquire
## before the other lanes' loads; all but the last group leave. ``sync``:
## - 'atomics' (OpenCL C 2.0 / 3.0 with device-scope acq_rel): atomic_fetch_add_explicit;
##   the last group resets the counter with an atomic store (no other group touches it
##   again this launch; the kernel's end orders it before the next launch).
## - 'ptx' (NVIDIA, Volta on): atom.acq_rel.gpu.inc, which also wraps the last group's count
##   back to 0 (0.4 us less per launch on the H100: bench/reduce_ceiling.py).
<%def name="last_group(ci, expected)">\
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0) {
% if sync == 'ptx':
        const unsigned int bound = (unsigned int)(${expected}) - 1u;
        unsigned int seen;
        asm volatile("atom.acq_rel.gpu.global.inc.u32 %0, [%1], %2;"
                     : "=r"(seen) : "l"(ctr_p + ctr_off + ${ci}), "r"(bound) : "memory");
        s_last = seen == bound;
% else:
        const int last = atomic_fetch_add_explicit(ctr_p + ctr_off + ${ci}, 1,
                                                   memory_order_acq_rel,
                                                   memory_scope_device) == (int)(${expected}) - 1;
        if (last)
            atomic_store_explicit(ctr_p + ctr_off + ${ci}, 0, memory_order_relaxed,
                                  memory_scope_device);
        s_last = last;
% endif
    }
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (!s_last)
        return;
</%def>
## base += offset of kept index o
<%def name="kept_offset(o, bases=('base',), ks=('ks',))">\
% if kd:
    {
        long q = ${o};
%   for d in reversed(range(kd)):
%     for b, k in zip(bases, ks):
%       if d > 0:
        ${b} += (q % kdim${d}) * ${k}${d};
%       else:
        ${b} += q * ${k}${d};
%       endif
%     endfor
%     if d > 0:
        q /= kdim${d};
%     endif
%   endfor
    }
% endif
</%def>
## each of ``offs`` += the offset of reduced index r (strided reduced dims) by its ``rs`` strides
<%def name="red_offset(r, offs=('off',), rs=('rs',))">\
        {
            long q = ${r};
% for d in reversed(range(rd)):
%   for o, k in zip(offs, rs):
%     if d > 0:
            ${o} += (q % rdim${d}) * ${k}${d};
%     else:
            ${o} += q * ${k}${d};
%     endif
%   endfor
%   if d > 0:
            q /= rdim${d};
%   endif
% endfor
        }
</%def>

% if mode == 'generic':
__kernel void ${name}(
    const long n_items, const long n_out, const long n_red,
    const long a_step, const long span, const long k_step
% for d in range(kd):
    , const long kdim${d}
% endfor
% for d in range(rd):
    , const long rdim${d}
% endfor
% if fused:
## a fused elementwise producer: its inputs, each with its own kept / reduced strides
%   for p, f in enumerate(fused):
    , __global const ${f['t']} *x${p}_p, const long x${p}_off
%     for d in range(kd):
    , const long x${p}_ks${d}
%     endfor
%     if not r_contig:
%       for d in range(rd):
    , const long x${p}_rs${d}
%       endfor
%     endif
%   endfor
% else:
    , __global const ${in_t} *x_p, const long x_off
% for d in range(kd):
    , const long ks${d}
% endfor
% if not r_contig:
%   for d in range(rd):
    , const long rs${d}
%   endfor
% endif
% endif
% if pairs_in:
    , __global const long *xi_p, const long xi_off
% endif
${out_args()}
% for q, t in epi_ops:
    , __global const ${t} *e${q}_p, const long e${q}_off
%   for d in range(kd):
    , const long e${q}_ks${d}
%   endfor
% endfor
% if epi:
    , __global ${epi_out_t} *eo_p, const long eo_off
% endif
)
{
% if L > 1:
    const long g = get_group_id(0);
    const long l = get_local_id(0);
    __local ${acc_t} s_acc[${L}];
%   if argmax:
    __local long s_idx[${L}];
%   endif
% else:
    const long g = get_global_id(0);
    const long l = 0;
    if (g >= n_items)
        return;
% endif
    /* (one part: no 64-bit division, ~40 cycles on a CPU, per item) */
    const long o = n_items == n_out ? g : g % n_out;
    const long p = n_items == n_out ? 0 : g / n_out;
% if fused:
<% fn = range(len(fused)) %>\
%   for q in fn:
    long base${q} = x${q}_off;
%   endfor
${kept_offset('o', ['base%d' % q for q in fn], ['x%d_ks' % q for q in fn])}
% else:
    long base = x_off;
${kept_offset('o')}
% endif
    ${acc_t} acc = ${identity};
% if argmax:
    long acc_i = LONG_MAX;
% endif
    long stop = p * a_step + span;
    if (stop > n_red)
        stop = n_red;
    for (long r = p * a_step + l; r < stop; r += k_step) {
% if fused:
%   for q in fn:
%     if r_contig:
        const long off${q} = base${q} + r;
%     else:
        long off${q} = base${q};
%     endif
%   endfor
%   if not r_contig:
${red_offset('r', ['off%d' % q for q in fn], ['x%d_rs' % q for q in fn])}
%   endif
        const ${in_ct} v = th_pre(${', '.join(('vload_half(off%d, x%d_p)' if fused[q]['half'] else 'x%d_p[off%d]') % (q, q) for q in fn)});
% else:
% if r_contig:
        const long off = base + r;
% else:
        long off = base;
${red_offset('r')}
% endif
% if half_in:
        const float v = vload_half(off, x_p);
% else:
        const ${in_ct} v = x_p[off];
% endif
% endif
% if argmax:
%   if pairs_in:
        const long vi = xi_p[xi_off + off - x_off];
%   else:
        const long vi = r;
%   endif
        if (th_better(v, vi, acc, acc_i)) {
            acc = v;
            acc_i = vi;
        }
% else:
        acc = th_absorb(acc, v);
% endif
    }
% if L > 1:
    s_acc[l] = acc;
%   if argmax:
    s_idx[l] = acc_i;
%   endif
    barrier(CLK_LOCAL_MEM_FENCE);
${tree(L // 2, 'l')}
    if (l != 0)
        return;
    acc = s_acc[0];
%   if argmax:
    acc_i = s_idx[0];
%   endif
% endif
% if epi:
    {
%   for q, t in epi_ops:
        long eb${q} = e${q}_off;
%   endfor
${kept_offset('o', ['eb%d' % q for q, t in epi_ops], ['e%d_ks' % q for q, t in epi_ops])}
<%
    vals = ['(%s)th_finish(acc)' % out_t if q == epi_j else 'e%d_p[eb%d]' % (q, q)
            for q in range(len(epi_cts))]
%>        eo_p[eo_off + o] = th_epi(${', '.join(vals)});
    }
% else:
${store('g', 'acc', 'acc_i')}
% endif
}

% elif mode == 'rows':
__kernel void ${name}(
    const long n_items, const long n_out, const long n_red, const long chunk
% for d in range(kd):
    , const long kdim${d}
% endfor
    , __global const ${in_t} *x_p, const long x_off
% for d in range(kd):
    , const long ks${d}
% endfor
${out_args()}
% if single:
    , const int fin_t
% endif
)
{
% if T > 1:
    const int l = get_local_id(0);
    const int t = l & ${T - 1};
    const long item = (long)get_group_id(0) * ${L // T} + (l >> ${T.bit_length() - 1});
% else:
%   if single:
    const int l = get_local_id(0);
%   endif
    const int t = 0;
    const long item = get_global_id(0);
% endif
    ${acc_t} acc = ${identity};
% if argmax:
    long acc_i = LONG_MAX;
% endif
    if (item < n_items) {
        /* (one part: no 64-bit division, ~40 cycles on a CPU, per row) */
        const long o = n_items == n_out ? item : item % n_out;
        const long p = n_items == n_out ? 0 : item / n_out;
        long base = x_off;
${kept_offset('o')}
        const long lo = p * chunk;
        const long a_lo = base + lo;
        const long a_hi = base + (lo + chunk < n_red ? lo + chunk : n_red);
% if vec:
        /* vectors at V-aligned absolute indices (the buffer is aligned) */
        long v_lo = (a_lo + ${V - 1}) / ${V} * ${V};
        if (v_lo > a_hi)
            v_lo = a_hi;
        long v_hi = a_hi / ${V} * ${V};
        if (v_hi < v_lo)
            v_hi = v_lo;
        for (long a = a_lo + t; a < v_lo; a += ${T}) {
${absorb1('acc', 'acc_i', 'a', 'a - base')}
        }
        for (long a = v_hi + t; a < a_hi; a += ${T}) {
${absorb1('acc', 'acc_i', 'a', 'a - base')}
        }
        ${acc_vt} va = (${acc_vt})(${identity});
%   if argmax:
        const ${idx_vt} iota = (${idx_vt})(${', '.join(str(q) for q in range(V))});
        ${idx_vt} vb = iota + (${idx_t})(t * ${V});
%     if is_float:
        ${mask_vt} nm = (${mask_vt})(0);
%     endif
%   endif
        long a = v_lo + t * ${V};
%   if K > 1:
        /* K independent accumulators (an exact combine: the same result in any order), so
           that consecutive vectors do not wait for each other's compare-and-select */
%     for k in range(1, K):
        ${acc_vt} va${k} = va;
%       if argmax:
        ${idx_vt} vb${k} = vb;
%       endif
%     endfor
        for (; a + ${(K - 1) * V} < v_hi; a += ${K * V}) {
%     for k in range(K):
            const ${acc_vt} v${k} = th_vload(a + ${k * V}, x_p);
%     endfor
%     for k in range(K):
${vabsorb('va' if k == 0 else 'va%d' % k, 'vb' if k == 0 else 'vb%d' % k, 'v%d' % k, 'iota + (%s)(a + %d - v_lo)' % (idx_t, k * V), True)}
%     endfor
        }
%     for k in range(1, K):
%       if argmax:
        {
            /* (NaNs: tracked apart) */
${take_better('va', 'vb', 'va', 'vb', 'va%d' % k, 'vb%d' % k, 'm_', mask_vt, idx_vt)}\
        }
%       else:
        va = th_vabsorb(va, va${k});
%       endif
%     endfor
%   endif
%   if U > 1:
        for (; a + ${(U - 1) * T * V} < v_hi; a += ${U * T * V}) {
%     for u in range(U):
            const ${acc_vt} v${u} = th_vload(a + ${u * T * V}, x_p);
%     endfor
%     for u in range(U):
${vabsorb('va', 'vb', 'v%d' % u, 'iota + (%s)(a + %d - v_lo)' % (idx_t, u * T * V), True)}
%     endfor
        }
%   endif
        for (; a < v_hi; a += ${T * V}) {
            const ${acc_vt} v = th_vload(a, x_p);
${vabsorb('va', 'vb', 'v', 'iota + (%s)(a - v_lo)' % idx_t, True)}
        }
%   if argmax:
        if (v_lo + t * ${V} < v_hi) {
%     if is_float:
            if (any(nm)) {
                /* the lane's first NaN */
                long b = v_lo + t * ${V};
                while (!any(isnan(th_vload(b, x_p))))
                    b += ${T * V};
                while (!isnan(${load1('b')}))
                    b++;
${absorbv('acc', 'acc_i', 'NAN', 'b - base')}
            } else {
%     endif
%     if T == 1:
${vfold_argmax('va', 'vb', '(v_lo - base)')}
%     else:
${fold('acc', 'acc_i', 'va', 'vb', '(v_lo - base)')}
%     endif
%     if is_float:
            }
%     endif
        }
%   else:
${fold('acc', 'acc_i', 'va', 'vb', '')}
%   endif
% else:
        long a = a_lo + t;
%   if U > 1 and not argmax:
        for (; a + ${(U - 1) * T} < a_hi; a += ${U * T}) {
%     for u in range(U):
            const ${in_ct} v${u} = ${load1('a + %d' % (u * T))};
%     endfor
%     for u in range(U):
            acc = th_absorb(acc, v${u});
%     endfor
        }
%   endif
        for (; a < a_hi; a += ${T}) {
${absorb1('acc', 'acc_i', 'a', 'a - base')}
        }
% endif
    }
% if T > 1 or single:
    __local ${acc_t} s_acc[${L}];
%   if argmax:
    __local long s_idx[${L}];
%   endif
% endif
% if single:
    __local int s_last;
% endif
% if T > 1:
    s_acc[l] = acc;
%   if argmax:
    s_idx[l] = acc_i;
%   endif
    barrier(CLK_LOCAL_MEM_FENCE);
${tree(T // 2, 't')}
%   if not single:
    if (t != 0)
        return;
%   endif
    acc = s_acc[l];
%   if argmax:
    acc_i = s_idx[l];
%   endif
% endif
% if single:
    if (t == 0 && item < n_items) {
${store1('item', 'acc', 'acc_i')}
    }
${last_group('0', 'get_num_groups(0)')}
    /* the last group: fin_t lanes per output walk its partials [q][o], then a tree */
    {
        const int tt = l & (fin_t - 1);
        for (long o0 = 0; o0 < n_out; o0 += ${L} / fin_t) {
            const long o = o0 + l / fin_t;
            ${acc_t} f = ${identity};
%   if argmax:
            long fi = LONG_MAX;
%   endif
            if (o < n_out) {
                for (long q = tt; q < parts; q += fin_t) {
${absorb_partial('f', 'fi', 'q * n_out + o')}
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE);
            s_acc[l] = f;
%   if argmax:
            s_idx[l] = fi;
%   endif
            barrier(CLK_LOCAL_MEM_FENCE);
${tree('fin_t / 2', 'tt')}
            if (tt == 0 && o < n_out) {
${store('o', 's_acc[l]', 's_idx[l]')}
            }
        }
    }
% else:
    if (item < n_items) {
${store('item', 'acc', 'acc_i')}
    }
% endif
}

% elif mode == 'cols':
__kernel void ${name}(
    const long n_out, const long n_red, const long chunk, const long n_cg
% for d in range(rd):
    , const long rdim${d}
% endfor
    , __global const ${in_t} *x_p, const long x_off
% for d in range(rd):
    , const long rs${d}
% endfor
${out_args()}
)
{
<% W = NB * V %>
% if single:
    __local int s_last;
% endif
% if L > 1:
    const int l = get_local_id(0);
    const int cx = l % ${CX};
    const int ry = l / ${CX};
% else:
    const int cx = 0;
    const int ry = 0;
% endif
    const long g = get_group_id(0);
    const long one_part = get_num_groups(0) == n_cg;     /* (then no 64-bit division) */
    const long cg = one_part ? g : g % n_cg;
    const long p = one_part ? 0 : g / n_cg;
    const long c0 = (cg * ${CX} + cx) * ${W};
    /* nfull whole vectors from c0, then a partial one of rem lanes */
    long nfull = 0, rem = 0;
    if (c0 < n_out) {
        nfull = (n_out - c0) / ${V};
        if (nfull >= ${NB}) {
            nfull = ${NB};
        } else {
            rem = n_out - c0 - nfull * ${V};
        }
    }
    const long lo = p * chunk;
    const long hi = lo + chunk < n_red ? lo + chunk : n_red;
% if vec:
    ${acc_vt} va[${NB}];
%   if argmax:
    /* row offsets from lo; a lane starts at its first row */
    ${idx_vt} vb[${NB}];
%   endif
    for (int j = 0; j < ${NB}; j++) {
        va[j] = (${acc_vt})(${identity});
%   if argmax:
        vb[j] = (${idx_vt})(ry);
%   endif
    }
% else:
    ${acc_t} va[${NB}];
%   if argmax:
    long vb[${NB}];
%   endif
    for (int j = 0; j < ${NB}; j++) {
        va[j] = ${identity};
%   if argmax:
        vb[j] = LONG_MAX;
%   endif
    }
% endif
    long r = lo + ry;
% if U > 1:
    if (nfull == ${NB}) {
        for (; r + ${(U - 1) * RY} < hi; r += ${U * RY}) {
%   for u in range(U):
            long off${u} = x_off + c0;
${red_offset('r + %d' % (u * RY), ['off%d' % u])}
%   endfor
            for (int j = 0; j < ${NB}; j++) {
%   for u in range(U):
%     if vec:
                const ${acc_vt} v${u} = th_vload(off${u} + j * ${V}, x_p);
%     else:
                const ${in_ct} v${u} = ${load1('off%d + j' % u)};
%     endif
%   endfor
%   for u in range(U):
%     if vec:
%       if argmax:
                const ${idx_vt} vi${u} = (${idx_vt})((${idx_t})(r + ${u * RY} - lo));
%       endif
${vabsorb('va[j]', 'vb[j]', 'v%d' % u, 'vi%d' % u)}
%     else:
${absorbv('va[j]', 'vb[j]', 'v%d' % u, 'r + %d' % (u * RY))}
%     endif
%   endfor
            }
        }
    }
% endif
    for (; r < hi; r += ${RY}) {
        long off = x_off + c0;
${red_offset('r')}
% if vec:
%   if argmax:
        const ${idx_vt} vi = (${idx_vt})((${idx_t})(r - lo));
%   endif
%   if NB == 1:
        /* (no runtime index into va: it stays in registers) */
        if (nfull) {
            const ${acc_vt} v = th_vload(off, x_p);
${vabsorb('va[0]', 'vb[0]', 'v', 'vi')}
        } else if (rem) {
            const ${acc_vt} v = th_vload_part(off, rem, x_p);
${vabsorb('va[0]', 'vb[0]', 'v', 'vi')}
        }
%   else:
        for (int j = 0; j < nfull; j++) {
            const ${acc_vt} v = th_vload(off + j * ${V}, x_p);
${vabsorb('va[j]', 'vb[j]', 'v', 'vi')}
        }
        if (rem) {
            const ${acc_vt} v = th_vload_part(off + nfull * ${V}, rem, x_p);
${vabsorb('va[nfull]', 'vb[nfull]', 'v', 'vi')}
        }
%   endif
% elif NB == 1:
        if (nfull) {
${absorb1('va[0]', 'vb[0]', 'off', 'r')}
        }
% else:
        for (int j = 0; j < nfull; j++) {
${absorb1('va[j]', 'vb[j]', 'off + j', 'r')}
        }
% endif
    }
% if RY > 1:
    /* combine the RY row-lanes of each column in local memory */
    __local ${acc_t} s_acc[${L * W}];
%   if argmax:
    __local long s_idx[${L * W}];
%   endif
    {
        const int s0 = (ry * ${CX} + cx) * ${W};
%   for j in range(NB):
%     for q, c in enumerate(comps):
        s_acc[s0 + ${j * V + q}] = va[${j}]${'.' + c if vec else ''};
%       if argmax:
        s_idx[s0 + ${j * V + q}] = ${cols_idx('vb[%d]' % j, c)};
%       endif
%     endfor
%   endfor
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = ${RY // 2}; s > 0; s >>= 1) {
        if (ry < s) {
            const int s0 = (ry * ${CX} + cx) * ${W};
            const int s1 = ((ry + s) * ${CX} + cx) * ${W};
            for (int q = 0; q < ${W}; q++) {
${combine_slots('s0 + q', 's1 + q')}
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
%   if single:
    if (ry == 0) {
%   else:
    if (ry != 0)
        return;
    {
%   endif
        const int s0 = cx * ${W};
        const long w = nfull * ${V} + rem;
        for (int q = 0; q < w; q++) {
${store1('p * n_out + c0 + q', 's_acc[s0 + q]', 's_idx[s0 + q]')}
        }
    }
% else:
<%
    jv = '0' if NB == 1 else 'j'
    jr = '0' if NB == 1 else 'nfull'
%>
%   if NB == 1:
    if (nfull) {
        const int j = 0;
%   else:
    for (int j = 0; j < nfull; j++) {
%   endif
        const long c = p * n_out + c0 + j * ${V};
%   for q, c in enumerate(comps):
${store1('c + %d' % q, 'va[%s]' % jv + ('.' + c if vec else ''), capture(cols_idx, 'vb[%s]' % jv, c))}
%   endfor
    }
%   if vec:
    if (rem) {
        const long c = p * n_out + c0 + nfull * ${V};
%     for q, c in enumerate(comps):
        if (${q} < rem) {
${store1('c + %d' % q, 'va[%s].' % jr + c, capture(cols_idx, 'vb[%s]' % jr, c))}
        }
%     endfor
    }
%   endif
% endif
% if single:
${last_group('cg', 'parts')}
    /* the last group of this column tile: each lane walks a column's partials [q][c] */
    {
        const long c_lo = cg * ${CX * W};
        const long c_hi = c_lo + ${CX * W} < n_out ? c_lo + ${CX * W} : n_out;
        for (long c = c_lo + get_local_id(0); c < c_hi; c += ${L}) {
            ${acc_t} f = ${identity};
%   if argmax:
            long fi = LONG_MAX;
%   endif
            for (long q = 0; q < parts; q++) {
${absorb_partial('f', 'fi', 'q * n_out + c')}
            }
${store('c', 'f', 'fi')}
        }
    }
% endif
}
% endif
