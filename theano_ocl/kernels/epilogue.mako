## Shared by the product kernels that compute an elementwise consumer of their product in
## place of storing it (gemm_small.cl.mako, gemm.cl.mako; ops/fusion.py Epilogue; the
## parameters come from ops/gemm_small.epilogue_params):
## th_epi computes the consumer's output (compute type of traits cs) from its inputs
## (compute types epi_cts): the product's value at input epi_j, and the other inputs
## (eops: (pointer name, stride stem, traits, input index), each "off sb sm sn" in C's
## geometry). epi_call is the call of th_epi at element (bi, m, n) of C, with the product's
## value ``res`` as C's type (traits c) would hold it; ``ptr`` % pointer name gives each
## operand's pointer expression. raw: an operand's element as stored (half: vload_half).
<%def name="th_epi(cs, epi_cts, epi_body)">\
inline ${cs['ct']} th_epi(${', '.join('%s i%d' % (t, q) for q, t in enumerate(epi_cts))})
{
    ${cs['ct']} o0;
    {
${epi_body}
    }
    return o0;
}
</%def>
<%def name="raw(o, ptr, idx)">\
% if o['half']:
vload_half(${idx}, ${ptr})\
% else:
${ptr}[${idx}]\
% endif
</%def>
<%def name="epi_call(c, eops, epi_cts, epi_j, res, ptr)">\
<%
    vals = []
    for q in range(len(epi_cts)):
        if q == epi_j:
            vals.append(('as_%s((%s)(%s))' % (c['t'], c['ut'], res)) if c['signed_int']
                        else '(%s)(%s)' % (c['t'], res))
        else:
            P, st, o, _ = [e for e in eops if e[3] == q][0]
            vals.append(capture(raw, o, ptr % P,
                                '%s_off + bi * %s_sb + m * %s_sm + n * %s_sn' % (st, st, st, st)))
%>th_epi(${', '.join(vals)})</%def>
