## theano.sandbox.multinomial: MultinomialFromUniform (choice == False) and
## ChoiceFromUniform (choice == True), one work-item per row of pvals, in the order of
## Theano's C code: sample c of row n reads unis[c * nb_multi + n]; the running sum of the
## row is a double; the first outcome whose running sum exceeds the uniform is taken.
## Multinomial: z (nb_multi, nb_outcomes) counts. Choice: z (nb_multi, n_samples) indices;
## without replacement the chosen probability is zeroed and the row renormalized in the
## pvals type (w: a scratch copy of pvals, as the C code's pvals_copy).
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
<%def name="loadp(ptr, idx)">\
% if p_half:
vload_half(${idx}, ${ptr})\
% else:
${ptr}[${idx}]\
% endif
</%def>
<%def name="loadu(idx)">\
% if u_half:
vload_half(${idx}, un)\
% else:
un[${idx}]\
% endif
</%def>

__kernel void ${name}(
    const long nb_multi, const long nb_outcomes, const long n_samples,
    __global const ${p_t} *pv, const long pv_off, const long pv_s0, const long pv_s1,
    __global const ${u_t} *un, const long un_off, const long un_s0,
    __global ${o_t} *z, const long z_off
% if choice:
    , __global ${pc_t} *w, const long w_off
% endif
)
{
    const long n = get_global_id(0);
    if (n >= nb_multi)
        return;
% if not choice:
    __global ${o_t} *zr = z + z_off + n * nb_outcomes;
    for (long m = 0; m < nb_outcomes; ++m)
        zr[m] = (${o_t})0;
    for (long c = 0; c < n_samples; ++c) {
        const double u = (double)${loadu('un_off + (c * nb_multi + n) * un_s0')};
        double cum = 0.;
        for (long m = 0; m < nb_outcomes; ++m) {
            cum += (double)${loadp('pv', 'pv_off + n * pv_s0 + m * pv_s1')};
            if (cum > u) {
                zr[m] = zr[m] + (${o_t})1;
                break;
            }
        }
    }
% else:
    __global ${o_t} *zr = z + z_off + n * n_samples;
    __global ${pc_t} *wr = w + w_off + n * nb_outcomes;
    for (long m = 0; m < nb_outcomes; ++m)
        wr[m] = ${loadp('pv', 'pv_off + n * pv_s0 + m * pv_s1')};
    for (long c = 0; c < n_samples; ++c)
        zr[c] = (${o_t})-1;
    for (long c = 0; c < n_samples; ++c) {
        const double u = (double)${loadu('un_off + (c * nb_multi + n) * un_s0')};
        double cum = 0.;
        for (long m = 0; m < nb_outcomes; ++m) {
            cum += (double)wr[m];
            if (cum > u) {
                zr[c] = (${o_t})m;
                if (c == n_samples - 1)
                    break;
%   if not replace:
                ${pc_t} sum = (${pc_t})(cum - (double)wr[m]);
                wr[m] = (${pc_t})0;
                for (long k = m; k < nb_outcomes; ++k)
                    sum = sum + wr[k];
                for (long k = 0; k < nb_outcomes; ++k)
                    wr[k] = wr[k] / sum;
%   endif
                break;
            }
        }
    }
% endif
}
