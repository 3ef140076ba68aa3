## CumOp (cumsum / cumprod): one work-item per line along the axis, accumulating in the
## input's type in order, as numpy's add/multiply.accumulate (which Theano's C code calls);
## x and z are C-contiguous, a line is (outer o, inner i): base o * n * inner + i.
${support}

__kernel void ${name}(
    const long n_lines, const long n, const long inner,
    __global const ${t} *x, const long x_off,
    __global ${t} *z, const long z_off)
{
    const long l = get_global_id(0);
    if (l >= n_lines)
        return;
    const long base = (l / inner) * n * inner + l % inner;
    ${ct} acc = ${'0' if add else '1'};
    for (long k = 0; k < n; ++k) {
        const long a = base + k * inner;
% if add:
        acc = (${ct})(acc + (${ct})x[x_off + a]);
% else:
        acc = (${ct})(acc * (${ct})x[x_off + a]);
% endif
        z[z_off + a] = (${t})acc;
    }
}
