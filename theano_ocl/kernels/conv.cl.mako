## Convolution family (CorrMM, CorrMM_gradWeights, CorrMM_gradInputs): one kernel per
## (kind, dtype, groups, kernel size, stride, dilation, top/left padding).
##
## Shapes are (N, C, H, W) bottom, (F, C / G, KH, KW) weights, (N, F, OH, OW) top; a top
## element (n, f, oh, ow) reads bottom rows oh * DH - PT + kh * DILH and columns
## ow * DW - PL + kw * DILW (zero outside the image). Inputs are any strided views (a flipped
## kernel arrives as a negative-stride view), outputs C-contiguous; one work-item per output
## element, accumulated in the element type (as Theano's BLAS-based C code does).
##
##   'fwd'     top[n, f, oh, ow]     = sum over c, kh, kw of bottom * weights
##   'gradW'   weights[f, c, kh, kw] = sum over n, oh, ow of top * bottom
##   'gradI'   bottom[n, c, h, w]    = sum over f, kh, kw of top * weights
##   'im2col'  col[(c, kh, kw), (n, oh, ow)] = bottom at that tap (0 in the padding)
##   'col2im'  bottom[n, c, h, w]    = sum over kh, kw of col at the taps reading (h, w)
##   'col2im_rows' the same, one work-item per WT consecutive elements of a row (CPUs)
## (the last three bracket a GEMM: ops/conv.py)
${support}
#define G ${G}L
#define KH ${kH}L
#define KW ${kW}L
#define DH ${dH}L
#define DW ${dW}L
#define DILH ${dilH}L
#define DILW ${dilW}L
#define PT ${padT}L
#define PL ${padL}L
<%def name="strided(arr)">\
__global const ${t} *${arr}_p, const long ${arr}_off, const long ${arr}_s0, const long ${arr}_s1, \
const long ${arr}_s2, const long ${arr}_s3\
</%def>
<%!
def at(arr, a, b, c, d):
    return '%s_p[%s_off + (%s) * %s_s0 + (%s) * %s_s1 + (%s) * %s_s2 + (%s) * %s_s3]' % (
        arr, arr, a, arr, b, arr, c, arr, d, arr)
%>\
<%def name="gradi_taps(tap)">
## the (kh, oh) pairs with oh * DH - PT + kh * DILH == h and 0 <= oh < OH (columns alike)
    for (long kh = 0; kh < KH; kh++) {
        const long th = h + PT - kh * DILH;
        if (th < 0 || th % DH) continue;
        const long oh = th / DH;
        if (oh >= OH) continue;
        for (long kw = 0; kw < KW; kw++) {
            const long tw = w + PL - kw * DILW;
            if (tw < 0 || tw % DW) continue;
            const long ow = tw / DW;
            if (ow >= OW) continue;
            ${tap}
        }
    }
</%def>

__kernel void ${name}(const long total, const long N, const long C, const long H, const long W,
                      const long F, const long OH, const long OW
% if kind == 'fwd':
                      , ${strided('b')}, ${strided('w')}
% elif kind == 'gradW':
                      , ${strided('b')}, ${strided('t')}
% elif kind == 'gradI':
                      , ${strided('w')}, ${strided('t')}
% elif kind == 'im2col':
                      , ${strided('b')}
% else:
                      , __global const ${t} *col_p, const long col_off
% endif
                      , __global ${t} *out_p, const long out_off)
{
% if kind in ('im2col', 'col2im', 'col2im_rows'):
    /* a 3-d range: (column, row, the rest) -- one division per work-item */
    const long x0 = get_global_id(0), x1 = get_global_id(1), x2 = get_global_id(2);
% else:
    const long gi = get_global_id(0);
    if (gi >= total) return;
% endif
    const long CG = C / G, FG = F / G;
    ${t} acc = 0;
% if kind == 'fwd':
    const long ow = gi % OW, oh = (gi / OW) % OH, f = (gi / (OW * OH)) % F, n = gi / (OW * OH * F);
    const long c0 = (f / FG) * CG;
    for (long c = 0; c < CG; c++) {
        for (long kh = 0; kh < KH; kh++) {
            const long h = oh * DH - PT + kh * DILH;
            if (h < 0 || h >= H) continue;
            for (long kw = 0; kw < KW; kw++) {
                const long w = ow * DW - PL + kw * DILW;
                if (w < 0 || w >= W) continue;
                acc += ${at('b', 'n', 'c0 + c', 'h', 'w')} * ${at('w', 'f', 'c', 'kh', 'kw')};
            }
        }
    }
% elif kind == 'gradW':
    const long kw = gi % KW, kh = (gi / KW) % KH, c = (gi / (KW * KH)) % CG, f = gi / (KW * KH * CG);
    const long cb = (f / FG) * CG + c;
    /* the output positions whose tap (kh, kw) falls inside the image */
    const long ohlo = max(0L, (PT - kh * DILH + DH - 1) / DH);
    const long owlo = max(0L, (PL - kw * DILW + DW - 1) / DW);
    for (long n = 0; n < N; n++) {
        for (long oh = ohlo; oh < OH; oh++) {
            const long h = oh * DH - PT + kh * DILH;
            if (h >= H) break;
            for (long ow = owlo; ow < OW; ow++) {
                const long w = ow * DW - PL + kw * DILW;
                if (w >= W) break;
                acc += ${at('t', 'n', 'f', 'oh', 'ow')} * ${at('b', 'n', 'cb', 'h', 'w')};
            }
        }
    }
% elif kind == 'gradI':
    const long w = gi % W, h = (gi / W) % H, cb = (gi / (W * H)) % C, n = gi / (W * H * C);
    const long g = cb / CG, c = cb - g * CG;
    for (long f = g * FG; f < (g + 1) * FG; f++) {
        ${gradi_taps('acc += ' + at('t', 'n', 'f', 'oh', 'ow') + ' * ' + at('w', 'f', 'c', 'kh', 'kw') + ';')}
    }
% elif kind == 'im2col':
    /* x0: ow, x1: oh, x2: n + N * (tap (c, kh, kw)) */
    const long ow = x0, oh = x1, n = x2 % N, r = x2 / N;
    const long kw = r % KW, kh = (r / KW) % KH, c = r / (KW * KH);
    const long h = oh * DH - PT + kh * DILH, w = ow * DW - PL + kw * DILW;
    if (h >= 0 && h < H && w >= 0 && w < W)
        acc = ${at('b', 'n', 'c', 'h', 'w')};
    out_p[out_off + (x2 * OH + oh) * OW + ow] = acc;
% elif kind == 'col2im_rows':
    /* x0: a tile of WT columns, x1: h, x2: c + C * n. Each tap (kh, kw) adds a run of
       consecutive col elements (the row's ow) into the tile's partial sums; an output
       element sums its taps in the order 'col2im' does, kh then kw */
    const long w0 = x0 * ${WT}L, h = x1, c = x2 % C, n = x2 / C;
    const long NP = N * OH * OW, wn = min(${WT}L, W - w0);
    ${t} part[${WT}];
    for (long j = 0; j < ${WT}L; j++)
        part[j] = 0;
    for (long kh = 0; kh < KH; kh++) {
        const long th = h + PT - kh * DILH;
        if (th < 0 || th % DH) continue;
        const long oh = th / DH;
        if (oh >= OH) continue;
        __global const ${t} *row = col_p + col_off + (c * KH + kh) * KW * NP + (n * OH + oh) * OW;
        for (long kw = 0; kw < KW; kw++, row += NP) {
            /* the ow with w0 <= ow * DW - PL + kw * DILW < w0 + wn */
            const long lo = w0 + PL - kw * DILW, hi = lo + wn - 1;
            const long olo = lo <= 0 ? 0 : (lo + DW - 1) / DW;
            const long ohi = hi < 0 ? 0 : min(OW, hi / DW + 1);
            for (long ow = olo; ow < ohi; ow++)
                part[ow * DW - lo] += row[ow];
        }
    }
    __global ${t} *dst = out_p + out_off + (x2 * H + h) * W + w0;
    for (long j = 0; j < wn; j++)
        dst[j] = part[j];
% else:
    /* x0: w, x1: h, x2: c + C * n */
    const long w = x0, h = x1, c = x2 % C, n = x2 / C;
    const long NP = N * OH * OW;
    ${gradi_taps('acc += col_p[col_off + ((c * KH + kh) * KW + kw) * NP + (n * OH + oh) * OW + ow];')}
    out_p[out_off + (x2 * H + h) * W + w] = acc;
% endif
% if kind not in ('im2col', 'col2im', 'col2im_rows'):
    out_p[out_off + gi] = acc;
% endif
}
