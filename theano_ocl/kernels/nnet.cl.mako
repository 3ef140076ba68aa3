## Softmax family: one kernel per (kind, dtypes, local size L).
##
## Row kinds ('softmax', 'log_softmax', 'softmax_grad', 'xent_softmax_1hot') run one
## work-group of L lanes per row: lanes stride over the row, partial results are combined
## by a local-memory tree (max, then sum of exp(x - max): numerically stable). Element
## kinds ('xent_dx', 'xent_1hot', 'xent_1hot_grad') run one work-item per output element.
## Every operand has its own element strides (any view); float16 is stored as half and
## computed in float (acc_t), float64 in double.
## Formulas follow the ops' C code (softmax multiplies by 1/sum; the NLL is
## -(x[y] + b[y]) + max + log(sum); argmax is the first maximum).
## Kinds that read a class index per row ('xent_softmax_1hot', 'xent_dx', 'xent_1hot',
## 'xent_1hot_grad') take one more argument, an int error flag: an index outside the row
## sets it to 1 (and gives NaN there) and ops/nnet.py raises Theano's error after the launch.
## CrossentropyCategorical1Hot[Grad] index as numpy does (Theano runs their perform): a
## negative index counts from the end of the row.
${support}
<%
def ld(o, idx):
    if ops[o]['half']:
        return 'vload_half(%s, %s_p)' % (idx, o)
    return '(%s)%s_p[%s]' % (acc_t, o, idx)

def st(o, idx, val):
    if ops[o]['half']:
        return 'vstore_half_rte(%s, %s, %s_p)' % (val, idx, o)
    return '%s_p[%s] = (%s)(%s)' % (o, idx, ops[o]['t'], val)
%>\
<%def name="args()">\
% for o in order:
    , __global ${'' if ops[o]['out'] else 'const '}${ops[o]['t']} *${o}_p, const long ${o}_off\
%   for d in range(ops[o]['nd']):
, const long ${o}_s${d}\
%   endfor

% endfor
% if check:
    , __global int *err_p, const long err_off
% endif
</%def>
<%def name="tree(op)">
    /* combine the L lanes' partials in red[] (L a power of two) */
    for (int w = L / 2; w > 0; w >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (l < w) {
% if op == 'max':
            red[l] = fmax(red[l], red[l + w]);
% elif op == 'argmax':
            const ${acc_t} a = red[l], b = red[l + w];
            const long ia = ired[l], ib = ired[l + w];
            if (b > a || (b == a && ib < ia) || (ia < 0)) {
                if (ib >= 0) { red[l] = b; ired[l] = ib; }
            }
% else:
            red[l] = red[l] + red[l + w];
% endif
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
</%def>

#define L ${L}

% if kind in ('softmax', 'log_softmax', 'softmax_grad', 'xent_softmax_1hot'):
__kernel __attribute__((reqd_work_group_size(L, 1, 1)))
void ${name}(const long N, const long D
${args()}
)
{
    __local ${acc_t} red[L];
%   if kind == 'xent_softmax_1hot':
    __local long ired[L];
%   endif
    const long r = get_group_id(0);
    const int l = get_local_id(0);
%   if kind == 'softmax_grad':
    ${acc_t} s = 0;
    for (long j = l; j < D; j += L)
        s += ${ld('dy', 'dy_off + r * dy_s0 + j * dy_s1')} * ${ld('sm', 'sm_off + r * sm_s0 + j * sm_s1')};
    red[l] = s;
    ${tree('sum')}
    s = red[0];
    for (long j = l; j < D; j += L) {
        const ${acc_t} smj = ${ld('sm', 'sm_off + r * sm_s0 + j * sm_s1')};
        ${st('dx', 'dx_off + r * dx_s0 + j * dx_s1', ld('dy', 'dy_off + r * dy_s0 + j * dy_s1') + ' * smj - s * smj')};
    }
%   else:
<%
    xv = ld('x', 'x_off + r * x_s0 + j * x_s1') + ((' + ' + ld('b', 'b_off + j * b_s0')) if 'b' in ops else '')
%>
    /* the row maximum (and, for the NLL, its first index) */
    ${acc_t} m = -INFINITY;
%     if kind == 'xent_softmax_1hot':
    long im = -1;
    for (long j = l; j < D; j += L) {
        const ${acc_t} v = ${xv};
        if (im < 0 || v > m) { m = v; im = j; }
    }
    red[l] = m;
    ired[l] = im;
    ${tree('argmax')}
    m = red[0];
    im = ired[0];
%     else:
    for (long j = l; j < D; j += L)
        m = fmax(m, ${xv});
    red[l] = m;
    ${tree('max')}
    m = red[0];
%     endif
    barrier(CLK_LOCAL_MEM_FENCE);
    ${acc_t} s = 0;
    for (long j = l; j < D; j += L)
        s += exp(${xv} - m);
    red[l] = s;
    ${tree('sum')}
    s = red[0];
%     if kind == 'log_softmax':
    const ${acc_t} ls = log(s);
    for (long j = l; j < D; j += L)
        ${st('y', 'y_off + r * y_s0 + j * y_s1', '(' + xv + ' - m) - ls')};
%     else:
    const ${acc_t} inv = (${acc_t})1 / s;
    for (long j = l; j < D; j += L)
        ${st('y', 'y_off + r * y_s0 + j * y_s1', 'exp(' + xv + ' - m) * inv')};
%     endif
%     if kind == 'xent_softmax_1hot':
    if (l == 0) {
        const long yi = (long)yidx_p[yidx_off + r * yidx_s0];
        ${acc_t} nll = NAN;
        if (yi >= 0 && yi < D) {
            nll = -(${xv.replace('j *', 'yi *')}) + m + log(s);
        } else {
            err_p[err_off] = 1;
        }
        ${st('nll', 'nll_off + r * nll_s0', 'nll')};
        am_p[am_off + r * am_s0] = (${ops['am']['t']})im;
    }
%     endif
%   endif
}
% else:
__kernel void ${name}(const long N, const long D
${args()}
)
{
    const long gi = get_global_id(0);
%   if kind == 'xent_1hot':
    /* one work-item per row: -log(coding[i, t[i]]) */
    if (gi >= N) return;
    long t = (long)tidx_p[tidx_off + gi * tidx_s0];
%   if ops['tidx']['signed']:
    if (t < 0) t += D;
%   endif
    ${acc_t} v = NAN;
    if (t >= 0 && t < D)
        v = -log(${ld('x', 'x_off + gi * x_s0 + t * x_s1')});
    else
        err_p[err_off] = 1;
    ${st('y', 'y_off + gi * y_s0', 'v')};
%   else:
    /* one work-item per element; per row when D == 0 (the index is still checked) */
    if (gi >= (D ? N * D : N)) return;
    const long i = D ? gi / D : gi, j = gi - i * D;
    long t = (long)tidx_p[tidx_off + i * tidx_s0];
%     if kind == 'xent_1hot_grad' and ops['tidx']['signed']:
    if (t < 0) t += D;
%     endif
    if (t < 0 || t >= D) {
        err_p[err_off] = 1;
        if (D == 0) return;
    }
%     if kind == 'xent_dx':
    /* dx = dy[i] * sm[i, j], minus dy[i] where j == y[i] */
    const ${acc_t} g = ${ld('dy', 'dy_off + i * dy_s0')};
    ${acc_t} v = g * ${ld('sm', 'sm_off + i * sm_s0 + j * sm_s1')};
    if (j == t)
        v = v - g;
    if (t < 0 || t >= D)
        v = NAN;
%     else:
    /* the gradient of -log(coding[i, t[i]]): -g[i] / coding[i, t[i]] there, else 0 */
    ${acc_t} v = 0;
    if (j == t)
        v = -${ld('dy', 'dy_off + i * dy_s0')} / ${ld('x', 'x_off + i * x_s0 + j * x_s1')};
    if (t < 0 || t >= D)
        v = NAN;
%     endif
    ${st('y', 'y_off + i * y_s0 + j * y_s1', 'v')};
%   endif
}
% endif
