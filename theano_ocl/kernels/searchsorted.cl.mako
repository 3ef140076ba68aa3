## SearchsortedOp, numpy's comparison in the common type of x and v (ct): NaN after every
## number (numpy sorts NaNs last). side 'left': the first i with v <= x[i]; 'right': the
## first with v < x[i]. With a sorter, x[sorter[i]] stands for x[i]; a sorter index outside
## [0, n) met by a search sets the error flag (numpy: "Sorter index out of range.").
## Three kernels, launched in this order:
##   check  - one work-item per neighbour pair: flags x (through the sorter) as unsorted;
##   search - one work-item per value: a binary search (exact for a sorted x);
##   serial - one work-item; when the flag is set, redoes every value in order as numpy's
##            binsearch does (it narrows the range from the previous value's result, so
##            on an unsorted x, where the answer is numpy's and not a sorted one, only the
##            same sequence of probes gives the same indices); clears the flag.
${support}

inline int th_lt(const ${ct} a, const ${ct} b)
{
% if is_float:
    return a < b || (b != b && a == a);
% else:
    return a < b;
% endif
}
## cmp(a, key) of numpy's binsearch: 'left' a < key, 'right' a <= key
<%def name="cmp(a, key)">${'!th_lt(%s, %s)' % (key, a) if right else 'th_lt(%s, %s)' % (a, key)}</%def>
## the value x[idx] compared at probe position ${mid} (through the sorter), or a break
<%def name="probe(var, mid, fail)">\
% if sorter:
            const long k_ = (long)srt[s_off + (${mid}) * s_st];
            if (k_ < 0 || k_ >= n) {
                err[err_off] = 1;
                ${fail}
            }
            const ${ct} ${var} = (${ct})x[x_off + k_ * x_st];
% else:
            const ${ct} ${var} = (${ct})x[x_off + (${mid}) * x_st];
% endif
</%def>

__kernel void ${name}(
    const long m, const long n,
    __global const ${xt} *x, const long x_off, const long x_st,
    __global const ${vt} *v, const long v_off,
    __global long *z, const long z_off,
    __global int *unsorted, const long u_off
% if sorter:
    , __global const ${st} *srt, const long s_off, const long s_st
    , __global int *err, const long err_off
% endif
)
{
% if mode == 'check':
    const long i = get_global_id(0);
    if (i + 1 >= n)
        return;
%   if sorter:
    const long k0 = (long)srt[s_off + i * s_st], k1 = (long)srt[s_off + (i + 1) * s_st];
    if (k0 < 0 || k0 >= n || k1 < 0 || k1 >= n) {
        unsorted[u_off] = 1;       /* numpy's own order of probes decides the error */
        return;
    }
%   else:
    const long k0 = i, k1 = i + 1;
%   endif
    if (th_lt((${ct})x[x_off + k1 * x_st], (${ct})x[x_off + k0 * x_st]))
        unsorted[u_off] = 1;
% elif mode == 'search':
    const long g = get_global_id(0);
    if (g >= m)
        return;
    const ${ct} key = (${ct})v[v_off + g];
    long lo = 0, hi = n;
    while (lo < hi) {
        const long mid = lo + (hi - lo) / 2;
${probe('a', 'mid', 'lo = 0; break;')}
        if (${cmp('a', 'key')}) lo = mid + 1; else hi = mid;
    }
    z[z_off + g] = lo;
% else:
    if (get_global_id(0) != 0 || !unsorted[u_off])
        return;
    unsorted[u_off] = 0;
%   if sorter:
    err[err_off] = 0;
%   endif
    long lo = 0, hi = n;
    ${ct} last = (${ct})v[v_off];
    for (long g = 0; g < m; ++g) {
        const ${ct} key = (${ct})v[v_off + g];
        if (${cmp('last', 'key')}) {
            hi = n;
        } else {
            lo = 0;
            hi = hi < n ? hi + 1 : n;
        }
        last = key;
        while (lo < hi) {
            const long mid = lo + ((hi - lo) >> 1);
${probe('a', 'mid', 'return;')}
            if (${cmp('a', 'key')}) lo = mid + 1; else hi = mid;
        }
        z[z_off + g] = lo;
    }
% endif
}
