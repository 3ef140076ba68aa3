## Pooling family: one kernel per (kind, dtype, ndim, pooled ndim, window, stride, padding).
##
## Every kind runs one work-item per element of its output and follows Theano 1.0.5's C code
## of the op (tensor/signal/pool.py) step for step -- the same window bounds, the same
## accumulator type (the input's dtype) and the same order of accumulation -- so results are
## Theano C's, bit for bit where the arithmetic is exact:
##
##   'pool'      Pool: z[.., o] = max / sum / average over the window of o, padding skipped;
##               average_inc_pad with ignore_border divides by the full window size,
##               the other averages by the number of elements the window covers.
##   'gradgrad'  DownsampleFactorMaxGradGrad: z[.., o] = sum of ggx over the window of o
##               where x equals maxout[.., o].
##   'max_grad'  MaxPoolGrad, gathered: gx[.., p] = sum, over the windows holding p in
##               row-major order (the order C adds them in), of gz where x[p] == maxout.
##   'max_grad_tiles'  MaxPoolGrad where windows do not overlap (stride >= window, no
##               padding; CPU devices, ``flat``): one work-item per window, storing its tile of
##               the input (its window and the gap after it): no element is in two windows.
##   'avg_grad'  AveragePoolGrad, gathered: gx[.., p] = sum over the windows holding p of
##               gz / window size (sum mode: gz), the window size clipped as C clips it.
##
## Window size, stride and padding are compile-time constants (WS<k>, ST<k>, PD<k>): they are
## the op's host inputs, and constant loop bounds let the compiler unroll the small windows.
## Shapes and element strides are arguments. ``lead`` = ndim - nd leading (non-pooled) axes.
## ``flat`` (CPU devices, the leading axes collapsed into one by the host): a 1-d range, one
## work-item per output element, the pooled axes' sizes (X<lead + k>, Z<k>) compile-time
## constants, so that the index's division into axes is by constants (PoCL vectorizes it
## across work-items; a division by a runtime size it runs lane by lane).
${support}
<%
lead = ndim - nd
pooled = range(nd)

def xoff(arr, prefix):
    terms = ['%s_off' % arr] + ['i%d * %s_s%d' % (d, arr, d) for d in range(lead)]
    terms += ['%s%d * %s_s%d' % (prefix, k, arr, lead + k) for k in pooled]
    return ' + '.join(terms)
%>\
% for k in pooled:
#define WS${k} ${ws[k]}L
#define ST${k} ${st[k]}L
#define PD${k} ${pd[k]}L
%   if flat:
#define X${lead + k} ${xs[k]}L
#define Z${k} ${zs[k]}L
%   endif
% endfor

<%def name="strided(arr)">\
__global const ${t} *${arr}_p, const long ${arr}_off\
% for d in range(ndim):
, const long ${arr}_s${d}\
% endfor
</%def>

__kernel void ${name}(
    const long total
% for d in range(lead if flat else ndim):
    , const long X${d}
% endfor
% if not flat:
%   for k in pooled:
    , const long Z${k}
%   endfor
% endif
    , ${strided('x')}
% if kind in ('max_grad', 'gradgrad', 'max_grad_tiles'):
    , ${strided('m')}
% endif
% if kind != 'pool':
    , ${strided('g')}
% endif
    , __global ${t} *out_p, const long out_off
% if kind == 'max_grad_tiles':
% for d in range(ndim):
    , const long out_s${d}
% endfor
% endif
    )
{
<%
    # the index space: the output's axes (names, sizes); the last two come from a 3-d range
    # (get_global_id(0), (1)), the others from dividing get_global_id(2) -- few divisions
    if kind in ('pool', 'gradgrad', 'max_grad_tiles'):
        space = [('i%d' % d, 'X%d' % d) for d in range(lead)] + [('o%d' % k, 'Z%d' % k) for k in pooled]
    else:
        space = [('i%d' % d, 'X%d' % d) for d in range(ndim)]
%>\
% if flat:
    const long gi = get_global_id(0);
    if (gi >= total) return;
    long rem = gi;
%   for v, n in reversed(space[1:]):
    const long ${v} = rem % ${n}; rem /= ${n};
%   endfor
    const long ${space[0][0]} = rem;
% elif ndim >= 2:
    const long ${space[-1][0]} = get_global_id(0), ${space[-2][0]} = get_global_id(1);
    long rem = get_global_id(2);
    const long gi = (rem * ${space[-2][1]} + ${space[-2][0]}) * ${space[-1][1]} + ${space[-1][0]};
%   for v, n in reversed(space[:-2]):
    const long ${v} = rem % ${n}; rem /= ${n};
%   endfor
% else:
    const long gi = get_global_id(0);
    if (gi >= total) return;
    const long ${space[0][0]} = gi;
% endif
% if kind == 'max_grad_tiles':
## ------------------------------------------- one work-item per window, windows apart (flat)
    /* window o holds [o * ST, o * ST + WS) (clipped to the image); its tile
       [o * ST, (o + 1) * ST), the last one's to the image's end, holds every element no
       other window holds. The window's elements are stored as C's scatter leaves them
       (0 + gz where x is the max, else 0) by loops of constant bounds; the rest of the
       tile (gaps between windows, the image's end) is 0 */
    const ${t} mo = m_p[${xoff('m', 'o')}];
    const ${t} go = g_p[${xoff('g', 'o')}];
<%
    def oidx(q):
        return 'out_off + ' + ' + '.join(['i0 * out_s0'] + ['%s%d * out_s%d' % (q, k, lead + k) for k in pooled])
%>\
%   for k in pooled:
    const long t${k} = o${k} * ST${k};
    const long e${k} = o${k} == Z${k} - 1 ? X${lead + k} : t${k} + ST${k};
    const long w${k} = min(t${k} + WS${k}, X${lead + k});
%   endfor
%   for k in pooled:
    for (long d${k} = 0; d${k} < WS${k}; d${k}++) {
        const long q${k} = t${k} + d${k};
        if (q${k} >= X${lead + k}) break;
%   endfor
        out_p[${oidx('q')}] = x_p[${xoff('x', 'q')}] == mo ? (${t})0 + go : (${t})0;
%   for k in pooled:
    }
%   endfor
%   for j in pooled:
    /* the rest of the tile along axis ${j}: [w${j}, e${j}) */
%     for k in pooled:
<%      lo, hi = ('t%d' % k, 'w%d' % k) if k < j else (('w%d' % k, 'e%d' % k) if k == j else ('t%d' % k, 'e%d' % k)) %>\
    for (long q${k} = ${lo}; q${k} < ${hi}; q${k}++) {
%     endfor
        out_p[${oidx('q')}] = (${t})0;
%     for k in pooled:
    }
%     endfor
%   endfor
% elif kind in ('pool', 'gradgrad'):
## ---------------------------------------------------------------- one work-item per window
%   for k in pooled:
    /* the window in the padded image, then without the padding, in image coordinates */
    long st${k} = o${k} * ST${k};
    long en${k} = st${k} + WS${k};
    st${k} = (st${k} < PD${k} ? PD${k} : st${k}) - PD${k};
    en${k} = (en${k} > X${lead + k} + PD${k} ? X${lead + k} + PD${k} : en${k}) - PD${k};
%   endfor
%   if kind == 'gradgrad':
    const ${t} maximum = m_p[${xoff('m', 'o')}];
    ${t} acc = 0;
%   elif mode == 'max':
    ${t} acc = x_p[${xoff('x', 'st')}];
%   else:
    ${t} acc = 0;
%   endif
%   for k in pooled:
%     if flat:
    for (long d${k} = 0; d${k} < WS${k}; d${k}++) {      /* constant bounds: unrolled */
        const long q${k} = o${k} * ST${k} - PD${k} + d${k};
        if (q${k} < 0) continue;
        if (q${k} >= X${lead + k}) break;
%     else:
    for (long q${k} = st${k}; q${k} < en${k}; q${k}++) {
%     endif
%   endfor
        const ${t} a = x_p[${xoff('x', 'q')}];
%   if kind == 'gradgrad':
        if (a == maximum)
            acc += g_p[${xoff('g', 'q')}];
%   elif mode == 'max':
        acc = (a > acc) ? a : acc;
%   else:
        acc += a;
%   endif
%   for k in pooled:
    }
%   endfor
%   if kind == 'pool' and mode == 'average_inc_pad' and ignore_border:
    acc = acc / (${' * '.join('WS%d' % k for k in pooled)});
%   elif kind == 'pool' and mode in ('average_inc_pad', 'average_exc_pad'):
    acc = acc / (${' * '.join('(en%d - st%d)' % (k, k) for k in pooled)});
%   endif
    out_p[out_off + gi] = acc;
% else:
## ---------------------------------------------------------------- one work-item per input element
%   for k in pooled:
    const long q${k} = i${lead + k};
%   endfor
    const ${t} a = x_p[${xoff('x', 'q')}];
%   for k in pooled:
    /* the windows j with j * ST <= p < j * ST + WS (p in padded coordinates) */
    const long p${k} = q${k} + PD${k};
    const long lo${k} = p${k} < WS${k} ? 0 : (p${k} - WS${k}) / ST${k} + 1;
    const long hi${k} = min(Z${k} - 1, p${k} / ST${k});
%   endfor
    ${t} acc = 0;
%   for k in pooled:
    for (long o${k} = lo${k}; o${k} <= hi${k}; o${k}++) {
%   endfor
%   if kind == 'max_grad':
        if (a == m_p[${xoff('m', 'o')}])
            acc = acc + g_p[${xoff('g', 'o')}];
%   elif mode == 'sum':
        acc = acc + g_p[${xoff('g', 'o')}];
%   else:
%     for k in pooled:
        long w${k} = o${k} * ST${k};
%       if mode == 'average_exc_pad':
        w${k} = w${k} < PD${k} ? PD${k} : w${k};
%       endif
        w${k} = (w${k} + WS${k} > X${lead + k} + 2 * PD${k} ? X${lead + k} + 2 * PD${k} : w${k} + WS${k}) - w${k};
%     endfor
        const ${t} val = g_p[${xoff('g', 'o')}] / (${' * '.join('w%d' % k for k in pooled)});
        acc = acc + val;
%   endif
%   for k in pooled:
    }
%   endfor
    out_p[out_off + gi] = acc;
% endif
}
