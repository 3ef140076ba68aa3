## MRG31k3p (theano.sandbox.rng_mrg.mrg_uniform): one work-item per stream. Sample i comes
## from stream i % n_streams, so stream s produces samples s, s + n_streams, ... in order
## and its state ends where Theano's sequential loop leaves it. Arithmetic is the C code's,
## done in uint so the wrap-arounds its overflow checks rely on are defined.
${support}

__kernel void ${name}(
    const long n_elements, const long n_streams,
    __global const int *s_p, const long s_off, const long s_row, const long s_col,
    __global int *ns_p, const long ns_off,
    __global ${out_t} *o_p, const long o_off)
{
    const long s = get_global_id(0);
    if (s >= n_streams)
        return;
    const int M1 = 2147483647;      /* 2^31 - 1 */
    const int M2 = 2147462579;      /* 2^31 - 21069 */
    const uint MASK12 = 511u, MASK13 = 16777215u, MASK2 = 65535u, MULT2 = 21069u;
    __global const int *st = s_p + s_off + s * s_row;
    int x11 = st[0], x12 = st[s_col], x13 = st[2 * s_col];
    int x21 = st[3 * s_col], x22 = st[4 * s_col], x23 = st[5 * s_col];
    for (long i = s; i < n_elements; i += n_streams) {
        int y1, y2;
        y1 = as_int(((as_uint(x12) & MASK12) << 22) + (as_uint(x12 >> 9))
                    + ((as_uint(x13) & MASK13) << 7) + as_uint(x13 >> 24));
        if (y1 < 0 || y1 >= M1)
            y1 = as_int(as_uint(y1) - (uint)M1);
        y1 = as_int(as_uint(y1) + as_uint(x13));
        if (y1 < 0 || y1 >= M1)
            y1 = as_int(as_uint(y1) - (uint)M1);
        x13 = x12;
        x12 = x11;
        x11 = y1;

        y1 = as_int(((as_uint(x21) & MASK2) << 15) + MULT2 * as_uint(x21 >> 16));
        if (y1 < 0 || y1 >= M2)
            y1 = as_int(as_uint(y1) - (uint)M2);
        y2 = as_int(((as_uint(x23) & MASK2) << 15) + MULT2 * as_uint(x23 >> 16));
        if (y2 < 0 || y2 >= M2)
            y2 = as_int(as_uint(y2) - (uint)M2);
        y2 = as_int(as_uint(y2) + as_uint(x23));
        if (y2 < 0 || y2 >= M2)
            y2 = as_int(as_uint(y2) - (uint)M2);
        y2 = as_int(as_uint(y2) + as_uint(y1));
        if (y2 < 0 || y2 >= M2)
            y2 = as_int(as_uint(y2) - (uint)M2);
        x23 = x22;
        x22 = x21;
        x21 = y2;

        const int k = (x11 <= x21) ? (x11 - x21 + M1) : (x11 - x21);
% if dtype == 'float16':
        /* Theano's Python code: ((k & 0x7fff) + 1) * float16(3.0458e-05) in float64, stored
           as float16 */
        vstore_half_rte((${norm_t})((k & 0x7fff) + 1) * ${norm}, o_off + i, o_p);
% else:
        o_p[o_off + i] = (${out_t})k * ${norm};
% endif
    }
    __global int *nst = ns_p + ns_off + s * 6;
    nst[0] = x11; nst[1] = x12; nst[2] = x13;
    nst[3] = x21; nst[4] = x22; nst[5] = x23;
}
