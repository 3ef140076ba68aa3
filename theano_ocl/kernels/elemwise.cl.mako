## One elementwise kernel per (scalar expression, dtypes, collapsed ndim, contiguity).
## Operands are outputs then inputs; each is (pointer, element offset[, element strides]).
## Contiguous operands index with the flat id; the others with strides over the
## collapsed shape (broadcast dimensions have stride 0, negative strides are fine).
## ``nd`` > 1 (CPU devices, strided operands, ndim >= 2): the launch is a 2-d or 3-d range
## whose first dimensions are the last array dimensions, so no division per element.
## A ``uniform`` input (every stride 0: broadcast over the launch) is read at its offset.
## ``check`` (integer // and % by a divisor that may be zero): one more argument, an int
## error flag, where an element whose body set th_err stores it (ops/elemwise.py checks it).
## ``guard``: the 1-d range may hold more work-items than elements (``gi < n`` tested).
## An operand's ``inner`` (nd > 1): its stride over the last dimension where that is 1 or
## 0, written into the code (the argument is still passed), else None.
<%
any_strided = any(not o['contig'] for o in operands)

def term(o, d):
    # (the last dimension's stride written in where it is 1 or 0: a load through a
    # runtime stride is a gather to PoCL's vectorizer)
    if d == ndim - 1 and o.get('inner') is not None:
        return ' + c%d' % d if o['inner'] == 1 else ''
    return ' + c%d * %s_s%d' % (d, o['name'], d)
%>
${support}

__kernel void ${name}(
    const long n
% for d in range(ndim):
    , const long dim${d}
% endfor
% for o in operands:
    , __global ${'const ' if not o['is_out'] else ''}${o['ctype']} *${o['name']}_p, const long ${o['name']}_off
%   if not o['contig']:
%     for d in range(ndim):
    , const long ${o['name']}_s${d}
%     endfor
%   endif
% endfor
% if check:
    , __global int *err_p, const long err_off
% endif
)
{
% if nd > 1:
    /* CPU devices, strided operands: a ${nd}-d range over the last dimensions (exact
       global sizes), so only the outer dimensions cost a division */
    const long c${ndim - 1} = get_global_id(0);
    const long c${ndim - 2} = get_global_id(1);
%   if nd == 3:
    long r = get_global_id(2);
%     for d in reversed(range(ndim - 2)):
%       if d > 0:
    const long c${d} = r % dim${d};
    r /= dim${d};
%       else:
    const long c${d} = r;
%       endif
%     endfor
%   endif
    {
        long gi = c0;
%   for d in range(1, ndim):
        gi = gi * dim${d} + c${d};
%   endfor
% for o in operands:
%   if o['contig']:
        const long ${o['name']}_i = ${o['name']}_off + gi;
%   else:
        const long ${o['name']}_i = ${o['name']}_off${''.join(term(o, d) for d in range(ndim))};
%   endif
% endfor
% else:
    /* one element per work-item: PoCL vectorizes across work-items, and a
       grid-stride loop measured 5x slower there; a range of exactly n work-items needs
       no bounds test (around a call of exp or tanh, PoCL 3.1 does not vectorize one) */
    const long gi = get_global_id(0);
%   if guard:
    if (gi < n) {
%   else:
    {
%   endif
% for o in operands:
%   if o['contig']:
        const long ${o['name']}_i = ${o['name']}_off + gi;
%   else:
        long ${o['name']}_i = ${o['name']}_off;
%   endif
% endfor
% endif
% if any_strided and nd == 1:
        {
            long r = gi;
%   for d in reversed(range(ndim)):
%     if d > 0:
            const long c${d} = r % dim${d};
            r /= dim${d};
%     else:
            const long c${d} = r;
%     endif
%     for o in operands:
%       if not o['contig']:
            ${o['name']}_i += c${d} * ${o['name']}_s${d};
%       endif
%     endfor
%   endfor
        }
% endif
% for o in operands:
%   if not o['is_out']:
<%    at = o['name'] + ('_off' if o['uniform'] else '_i') %>\
%     if o['half']:
        const float ${o['name']} = vload_half(${at}, ${o['name']}_p);
%     else:
        const ${o['cctype']} ${o['name']} = ${o['name']}_p[${at}];
%     endif
%   else:
        ${o['cctype']} ${o['name']};
%   endif
% endfor
% if check:
        int th_err = 0;
% endif
        {
${body}
        }
% if check:
        if (th_err)
            err_p[err_off] = th_err;
% endif
% for o in operands:
%   if o['is_out']:
%     if o['half']:
        vstore_half_rte(${o['name']}, ${o['name']}_i, ${o['name']}_p);
%     else:
        ${o['name']}_p[${o['name']}_i] = ${o['name']};
%     endif
%   endif
% endfor
    }
}
