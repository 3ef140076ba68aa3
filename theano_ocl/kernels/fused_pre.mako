## Shared by the kernels that take a fused elementwise producer (reduce.cl.mako,
## gemm_small.cl.mako; ops/elemwise.py Fused): th_pre computes, from the producer's input
## values (``fused``: their traits, ``ct`` the compute type of each), the value the
## producer's own kernel would have stored: its body in the output's compute type ``ct``,
## converted to the storage type ``t``.
<%def name="th_pre(fused, t, ct, body)">\
inline ${t} th_pre(${', '.join('%s i%d' % (f['ct'], q) for q, f in enumerate(fused))})
{
    ${ct} o0;
    {
${body}
    }
    return (${t})o0;
}
</%def>
