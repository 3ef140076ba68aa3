## K launches of one elementwise kernel (kernels/elemwise.cl.mako) as one launch.
## Work-item gi belongs to the operation whose start (prefix sum of sizes) is the
## largest one <= gi (a binary search of the table). With ``group`` (CPU devices) the
## start is counted in work-groups instead, and a map after the records gives each
## work-group its operation.
## The table holds one record of ${rec} longs per operation:
##   start, dims[ndim], then per operand: element offset[, element strides[ndim]].
## Operand pointers cannot live in a table (OpenCL 1.2), so each operation has its own;
## slab == True: every operation's operand k lies in one buffer (regions of one slab,
## see SimulatorOCL), bound once, and the table's offsets count from its start -- any K.
<%namespace file="batch_locate.mako" import="locate"/>
${support}

__kernel void ${name}(
    const long total, __global const long *tab
% if slab:
%   for o in operands:
    , __global ${'const ' if not o['is_out'] else ''}${o['ctype']} *${o['name']}_s
%   endfor
% else:
%   for k in range(K):
%     for o in operands:
    , __global ${'const ' if not o['is_out'] else ''}${o['ctype']} *${o['name']}_p${k}
%     endfor
%   endfor
% endif
)
{
${locate(K, rec, group, chunk, ' * '.join('r[%d]' % (1 + d) for d in range(ndim)) or '1', whole)}
% for o in operands:
%   if slab:
        __global ${'const ' if not o['is_out'] else ''}${o['ctype']} *${o['name']}_p = ${o['name']}_s;
%   else:
        __global ${'const ' if not o['is_out'] else ''}${o['ctype']} *${o['name']}_p;
        switch (op) {
%     for k in range(1, K):
        case ${k}: ${o['name']}_p = ${o['name']}_p${k}; break;
%     endfor
        default: ${o['name']}_p = ${o['name']}_p0;
        }
%   endif
%   if o['contig']:
        const long ${o['name']}_i = r[${o['off_at']}] + li;
%   else:
        long ${o['name']}_i = r[${o['off_at']}];
%   endif
% endfor
% if any(not o['contig'] for o in operands):
        {
            long rem = li;
%   for d in reversed(range(ndim)):
%     if d > 0:
            const long c${d} = rem % r[${1 + d}];
            rem /= r[${1 + d}];
%     else:
            const long c${d} = rem;
%     endif
%     for o in operands:
%       if not o['contig']:
            ${o['name']}_i += c${d} * r[${o['st_at'] + d}];
%       endif
%     endfor
%   endfor
        }
% endif
% for o in operands:
%   if not o['is_out']:
%     if o['half']:
        const float ${o['name']} = vload_half(${o['name']}_i, ${o['name']}_p);
%     else:
        const ${o['cctype']} ${o['name']} = ${o['name']}_p[${o['name']}_i];
%     endif
%   else:
        ${o['cctype']} ${o['name']};
%   endif
% endfor
        {
${body}
        }
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
