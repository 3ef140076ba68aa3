## One reduction kernel per (combine code, dtypes, collapsed kept/reduced ndim, contiguity,
## local size L, argmax). The input is seen as (kept dims) x (reduced dims), each collapsed
## (see ops/reduce.py); any strides, negative included.
##
## Item g of the grid (a work-group when L > 1, else a work-item) owns output o = g % n_out
## and part p = g / n_out of the reduced range: lane l visits r = p*a_step + l + k*k_step
## for r < min(n_red, p*a_step + span). Parts > 1 write partials [p][o] (acc dtype) that a
## second launch of this template reduces over p; with L > 1 the lanes combine in a
## local-memory tree. Argmax carries (value, index) pairs: a NaN beats any number, then the
## larger value, ties going to the smaller index (numpy's first occurrence).
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
%   if L > 1:
inline ${acc_t} th_combine(${acc_t} i0, ${acc_t} i1)
{
    ${acc_t} o0;
    {
${combine_body}
    }
    return o0;
}
%   endif
% endif
inline ${out_ct} th_finish(${acc_t} i0)
{
    ${out_ct} o0;
    {
${finish_body}
    }
    return o0;
}

__kernel void ${name}(
    const long n_items, const long n_out, const long n_red,
    const long a_step, const long span, const long k_step
% for d in range(kd):
    , const long kdim${d}
% endfor
% for d in range(rd):
    , const long rdim${d}
% endfor
    , __global const ${in_t} *x_p, const long x_off
% for d in range(kd):
    , const long ks${d}
% endfor
% if not r_contig:
%   for d in range(rd):
    , const long rs${d}
%   endfor
% endif
% if pairs_in:
    , __global const long *xi_p, const long xi_off
% endif
    , __global ${out_t} *o_p, const long o_off
% if argmax:
    , __global long *oi_p, const long oi_off
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
    const long o = g % n_out;
    const long p = g / n_out;
    long base = x_off;
% if kd:
    {
        long q = o;
%   for d in reversed(range(kd)):
%     if d > 0:
        base += (q % kdim${d}) * ks${d};
        q /= kdim${d};
%     else:
        base += q * ks${d};
%     endif
%   endfor
    }
% endif
    ${acc_t} acc = ${identity};
% if argmax:
    long acc_i = LONG_MAX;
% endif
    long stop = p * a_step + span;
    if (stop > n_red)
        stop = n_red;
    for (long r = p * a_step + l; r < stop; r += k_step) {
% if r_contig:
        const long off = base + r;
% else:
        long off = base;
        {
            long q = r;
%   for d in reversed(range(rd)):
%     if d > 0:
            off += (q % rdim${d}) * rs${d};
            q /= rdim${d};
%     else:
            off += q * rs${d};
%     endif
%   endfor
        }
% endif
% if half_in:
        const float v = vload_half(off, x_p);
% else:
        const ${in_ct} v = x_p[off];
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
    for (int s = ${L // 2}; s > 0; s >>= 1) {
        if (l < s) {
%   if argmax:
            if (th_better(s_acc[l + s], s_idx[l + s], s_acc[l], s_idx[l])) {
                s_acc[l] = s_acc[l + s];
                s_idx[l] = s_idx[l + s];
            }
%   else:
            s_acc[l] = th_combine(s_acc[l], s_acc[l + s]);
%   endif
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (l != 0)
        return;
    acc = s_acc[0];
%   if argmax:
    acc_i = s_idx[0];
%   endif
% endif
% if half_out:
    vstore_half_rte(th_finish(acc), o_off + g, o_p);
% else:
    o_p[o_off + g] = th_finish(acc);
% endif
% if argmax:
    oi_p[oi_off + g] = acc_i;
% endif
}
