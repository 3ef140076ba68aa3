## Shared by the batched kernels (batched.cl.mako, gemm_small.cl.mako): find the operation
## (record r of the table, K records of rec longs, starts first) and the element li of it
## that this work-item computes. Opens one block that the caller closes with "}".
##   group > 0 (CPU devices): record starts count work-groups of ``group`` elements, and a
##     map after the records gives each work-group its operation (uniform in the group, so
##     PoCL vectorizes the element loop); n_op: the C expression of the operation's size;
##     ``whole``: every operation is whole groups (no work-item past its size to stop);
##   chunk > 1 (CPU devices, small operations): a work-item walks ``chunk`` consecutive
##     elements with one binary search;
##   else (GPUs): each element binary-searches the starts.
<%def name="locate(K, rec, group, chunk, n_op, whole=False)">\
% if group:
    __global const long *gop = tab + ${K * rec};
    {
        const int op = (int)gop[get_group_id(0)];
        __global const long *r = tab + op * ${rec};
        const long li = (get_group_id(0) - r[0]) * ${group} + get_local_id(0);
%   if not whole:
        if (li >= ${n_op})
            return;
%   endif
% else:
%   if chunk > 1:
    const long ch_lo = get_global_id(0) * ${chunk};
    const long ch_end = ch_lo + ${chunk} < total ? ch_lo + ${chunk} : total;
    int op = 0;
    {
        int hi = ${K} - 1;
        while (op < hi) {
            const int mid = (op + hi + 1) >> 1;
            if (tab[mid * ${rec}] <= ch_lo) op = mid; else hi = mid - 1;
        }
    }
    for (long gi = ch_lo; gi < ch_end; ++gi) {
        while (op + 1 < ${K} && tab[(op + 1) * ${rec}] <= gi)
            op++;
%   else:
    for (long gi = get_global_id(0); gi < total; gi += get_global_size(0)) {
        int op = 0, hi = ${K} - 1;
        while (op < hi) {
            const int mid = (op + hi + 1) >> 1;
            if (tab[mid * ${rec}] <= gi) op = mid; else hi = mid - 1;
        }
%   endif
        __global const long *r = tab + op * ${rec};
        const long li = gi - r[0];
% endif
</%def>
