## SearchsortedOp: one work-item per value, a binary search of the sorted vector x (any
## element stride), numpy's comparison: in the common type of x and v (ct), NaN after every
## number (numpy sorts NaNs last); side 'left' gives the first i with v <= x[i], 'right' the
## first with v < x[i]. With a sorter, x[sorter[mid]] is compared; a sorter index outside
## [0, n) met by the search sets the error flag (numpy: "Sorter index out of range.").
${support}

inline int th_lt(const ${ct} a, const ${ct} b)
{
% if is_float:
    return a < b || (b != b && a == a);
% else:
    return a < b;
% endif
}

__kernel void ${name}(
    const long m, const long n,
    __global const ${xt} *x, const long x_off, const long x_st,
    __global const ${vt} *v, const long v_off,
    __global long *z, const long z_off
% if sorter:
    , __global const ${st} *srt, const long s_off, const long s_st
    , __global int *err, const long err_off
% endif
)
{
    const long g = get_global_id(0);
    if (g >= m)
        return;
    const ${ct} key = (${ct})v[v_off + g];
    long lo = 0, hi = n;
    while (lo < hi) {
        const long mid = lo + (hi - lo) / 2;
% if sorter:
        const long k = (long)srt[s_off + mid * s_st];
        if (k < 0 || k >= n) {
            err[err_off] = 1;
            lo = hi = 0;
            break;
        }
        const ${ct} a = (${ct})x[x_off + k * x_st];
% else:
        const ${ct} a = (${ct})x[x_off + mid * x_st];
% endif
% if right:
        if (th_lt(key, a)) hi = mid; else lo = mid + 1;
% else:
        if (th_lt(a, key)) lo = mid + 1; else hi = mid;
% endif
    }
    z[z_off + g] = lo;
}
