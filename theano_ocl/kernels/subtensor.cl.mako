## Integer-array indexing: one template for gathers (AdvancedSubtensor[1]) and for
## scatters (AdvancedIncSubtensor[1], set or inc).
##
## Both walk an index space split in two groups of dimensions:
##   * "x" dimensions: those of x that no index array selects (each has a stride in x);
##   * "b" dimensions: the broadcast shape of the index arrays (each index array has a
##     stride there, 0 where it is broadcast).
## gather: one work-item per output element; output dimensions are listed in output
##   order (``dims``), each with an x stride and per-index strides (0 where unused).
## scatter: one work-item per x-dimension point, looping serially over the b points in
##   C order, so duplicate indices accumulate (inc) or the last one wins (set), exactly
##   as numpy's add.at / assignment do, without atomics.
## An index out of [-n, n) sets err = {1, the index, which index array}; the host checks
## it after the launch (concurrent offenders may mix their reports, never hide them).
${support}

<%def name="resolve(k, idx, ipos)">
        {
% if idx['unsigned']:
            const ulong u = (ulong)idx${k}_p[${ipos}];
            if (u >= (ulong)an${k}) { err[1] = (long)u; err[2] = ${k}; err[0] = 1; return; }
            xi += (long)u * as${k};
% else:
            long v = (long)idx${k}_p[${ipos}];
            if (v < 0) v += an${k};
            if (v < 0 || v >= an${k}) { err[1] = (long)idx${k}_p[${ipos}]; err[2] = ${k}; err[0] = 1; return; }
            xi += v * as${k};
% endif
        }
</%def>

% if mode == 'gather':
__kernel void ${name}(
    const long n
% for d in range(ndim):
    , const long dim${d}, const long xs${d}
% endfor
    , __global ${store} *out_p, const long out_off
    , __global const ${store} *x_p, const long x_off
% for k, idx in enumerate(idxs):
    , __global const ${idx['ctype']} *idx${k}_p, const long idx${k}_off, const long an${k}, const long as${k}
%   for d in range(ndim):
    , const long is${k}_${d}
%   endfor
% endfor
    , __global long *err_p, const long err_off)
{
    __global long *err = err_p + err_off;
    const long gi = get_global_id(0);
    if (gi >= n) return;
    long xi = x_off;
% for k in range(len(idxs)):
    long ii${k} = idx${k}_off;
% endfor
    {
        long r = gi;
% for d in reversed(range(ndim)):
%   if d > 0:
        const long c${d} = r % dim${d};
        r /= dim${d};
%   else:
        const long c${d} = r;
%   endif
        xi += c${d} * xs${d};
%   for k in range(len(idxs)):
        ii${k} += c${d} * is${k}_${d};
%   endfor
% endfor
    }
% for k, idx in enumerate(idxs):
${resolve(k, idx, 'ii%d' % k)}
% endfor
    out_p[out_off + gi] = x_p[xi];
}
% else:
__kernel void ${name}(
    const long npar, const long nser
% for d in range(npd):
    , const long pdim${d}, const long pxs${d}, const long pys${d}
% endfor
% for d in range(nsd):
    , const long sdim${d}, const long sys${d}
% endfor
    , __global ${x['ctype']} *x_p, const long x_off
    , __global const ${y['ctype']} *y_p, const long y_off
% for k, idx in enumerate(idxs):
    , __global const ${idx['ctype']} *idx${k}_p, const long idx${k}_off, const long an${k}, const long as${k}
%   for d in range(nsd):
    , const long is${k}_${d}
%   endfor
% endfor
    , __global long *err_p, const long err_off)
{
    __global long *err = err_p + err_off;
    const long gi = get_global_id(0);
    if (gi >= npar) return;
    long xb = x_off, yb = y_off;
    {
        long r = gi;
% for d in reversed(range(npd)):
%   if d > 0:
        const long c${d} = r % pdim${d};
        r /= pdim${d};
%   else:
        const long c${d} = r;
%   endif
        xb += c${d} * pxs${d};
        yb += c${d} * pys${d};
% endfor
    }
    for (long s = 0; s < nser; s++) {
        long xi = xb, yi = yb;
% for k in range(len(idxs)):
        long ii${k} = idx${k}_off;
% endfor
        {
            long r = s;
% for d in reversed(range(nsd)):
%   if d > 0:
            const long c${d} = r % sdim${d};
            r /= sdim${d};
%   else:
            const long c${d} = r;
%   endif
            yi += c${d} * sys${d};
%   for k in range(len(idxs)):
            ii${k} += c${d} * is${k}_${d};
%   endfor
% endfor
        }
% for k, idx in enumerate(idxs):
${resolve(k, idx, 'ii%d' % k)}
% endfor
% if x['half']:
        const float i0 = vload_half(xi, x_p);
% else:
        const ${x['cctype']} i0 = x_p[xi];
% endif
% if y['half']:
        const float i1 = vload_half(yi, y_p);
% else:
        const ${y['cctype']} i1 = y_p[yi];
% endif
        ${x['cctype']} o0;
        {
${body}
        }
% if x['half']:
        vstore_half_rte(o0, xi, x_p);
% else:
        x_p[xi] = o0;
% endif
    }
}
% endif
