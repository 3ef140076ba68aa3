## K independent elementwise launches of one size n as one launch (ops/elemwise_merge.py).
## Work-item gi computes element gi of every one of them: launch k's operands are indexed
## as its own kernel (kernels/elemwise.cl.mako, nd == 1) indexes them, with its own
## collapsed dimensions and strides (an input broadcast over the whole range, ``uniform``,
## read at its offset). An array several of them read (one buffer, offset
## and dtype) is one pointer argument (``views``); NVIDIA's driver charges each argument.
## Every load of a work-item comes before any of its
## stores, so a launch reading an element another one writes at the same place reads the
## value from before the launch (runtime/plans.Launch.pointwise), as when they ran apart in
## their order (the planner merges only launches that touch no common memory as planned,
## but for such pointwise writes after reads, and reads after writes element for element:
## the reader takes the writer's value, ``forward``, as a store and a load would give it,
## floating point values through ``opq`` (0: no compiler contracts across it);
## runtime/planner._pointwise_after).
${support}

__kernel void ${name}(
    const long n
% for k, op in enumerate(ops):
%   for d in range(op['ndim']):
    , const long k${k}_dim${d}
%   endfor
% endfor
% for j, v in enumerate(views):
    , __global ${'const ' if v['const'] else ''}${v['ctype']} *v${j}_p, const long v${j}_off
% endfor
% for k, op in enumerate(ops):
%   for o in op['operands']:
%     if not o['contig'] and not o['uniform']:
%       for d in range(op['ndim']):
    , const long k${k}_${o['name']}_s${d}
%       endfor
%     endif
%   endfor
% endfor
% if opaque:
    , const uint opq
% endif
)
{
    const long gi = get_global_id(0);
% if guard:
    if (gi >= n)
        return;
% endif
% for k, op in enumerate(ops):
%   for o in op['operands']:
%     if o['contig']:
    const long k${k}_${o['name']}_i = v${o['view']}_off + gi;
%     elif o['uniform']:
    const long k${k}_${o['name']}_i = v${o['view']}_off;
%     else:
    long k${k}_${o['name']}_i = v${o['view']}_off;
%     endif
%     if o['is_out']:
    ${o['cctype']} k${k}_${o['name']};
%     endif
%   endfor
% endfor
% for k, op in enumerate(ops):
    {   /* launch ${k} */
%   if any(not o['contig'] and not o['uniform'] for o in op['operands']):
        long r = gi;
%     for d in reversed(range(op['ndim'])):
%       if d > 0:
        const long c${d} = r % k${k}_dim${d};
        r /= k${k}_dim${d};
%       else:
        const long c${d} = r;
%       endif
%       for o in op['operands']:
%         if not o['contig'] and not o['uniform']:
        k${k}_${o['name']}_i += c${d} * k${k}_${o['name']}_s${d};
%         endif
%       endfor
%     endfor
%   endif
%   for o in op['operands']:
%     if not o['is_out']:
%       if o['forward'] and o['ctype'] == 'float':
        const float ${o['name']} = as_float(as_uint((float)k${o['forward'][0]}_${o['forward'][1]}) ^ opq);
%       elif o['forward'] and o['ctype'] == 'double':
        const double ${o['name']} = as_double(as_ulong((double)k${o['forward'][0]}_${o['forward'][1]}) ^ (ulong)opq);
%       elif o['forward']:
        const ${o['cctype']} ${o['name']} = (${o['ctype']})k${o['forward'][0]}_${o['forward'][1]};
%       elif o['half']:
        const float ${o['name']} = vload_half(k${k}_${o['name']}_i, v${o['view']}_p);
%       else:
        const ${o['cctype']} ${o['name']} = v${o['view']}_p[k${k}_${o['name']}_i];
%       endif
%     else:
        ${o['cctype']} ${o['name']};
%     endif
%   endfor
        {
${op['body']}
        }
%   for o in op['operands']:
%     if o['is_out']:
        k${k}_${o['name']} = ${o['name']};
%     endif
%   endfor
    }
% endfor
% for k, op in enumerate(ops):
%   for o in op['operands']:
%     if o['is_out']:
%       if o['half']:
    vstore_half_rte(k${k}_${o['name']}, k${k}_${o['name']}_i, v${o['view']}_p);
%       else:
    v${o['view']}_p[k${k}_${o['name']}_i] = k${k}_${o['name']};
%       endif
%     endif
%   endfor
% endfor
}
