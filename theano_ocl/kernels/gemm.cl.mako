## One GEMM kernel per (operand dtypes, alpha/beta kind, tile size):
##     C[b] = alpha * A[b] @ B[b] (+ beta * Z[b])
## over (batch, M, N) with any element strides (transposes, reversed and stepped views,
## vectors seen as 1-column matrices), so every BLAS op of the family is one launch of it.
## Two shapes of the same kernel:
## - ts (rb None): work-group (TS, TS), one element of C per work-item, a TS x TS block of C;
## - rb = (TX, TY, RM, RN, BK, a_kfast, b_nfast), register-blocked: work-group (TX, TY), each
##   work-item RM x RN elements of C (rows ly*RM + i, columns lx*RN + j), a (TY*RM) x
##   (TX*RN) block; BK-deep tiles of A and B go through local memory, loaded by all
##   work-items with the operand's shorter stride fastest (a_kfast: A's k; b_nfast: B's n)
##   so that the loads coalesce. A work-item's RM rows of the A tile (RN columns of the B
##   tile) are consecutive in local memory and read as one vector per k (float4: one
##   local load for four products' operands, where reading them one by one made the loop
##   bound by local loads); the next tile is loaded into registers (pa, pb) while this one
##   is computed. The tile's corners in A and B are computed once per work-group (64-bit);
##   offsets within a tile in `it` (int where the planner found they fit: NVIDIA's 64-bit
##   multiplies are several instructions).
## - fast (with rb: (db, full, va, vb); ops/blas.py fast_variant, real float32/float64
##   only): the register-blocked kernel for NVIDIA-like GPUs. A work-item's RM rows
##   (RN columns) are RM/4 (RN/4) groups of 4, groups 4*TY rows (4*TX columns) apart
##   (row (i/4)*4*TY + ly*4 + i%4), so that a warp's float4 reads of the local tiles are
##   conflict-free (consecutive work-items, consecutive float4s) where RM consecutive rows
##   are 2-way conflicting; local tiles [k][m] and [k][n], rows padded by 4 elements; db:
##   two local buffers, the next tile stored into the other one, one barrier per k-tile
##   (else one buffer, two barriers); full (the planner found M, N, K multiples of the
##   tile and K > 0): no bounds checks at all; va / vb: the operand's fast stride is 1,
##   its other stride and the size along it multiples of 4: loads of 4 elements,
##   aligned float4 loads where the work-group's tile corner is aligned (checked at run
##   time: a root's origin can move, runtime/slab.py, scan rows), vload4 otherwise.
## Either way A and B go through local-memory tiles.
## split (either shape): the sum over k cut into S chunks of KC, the third grid dimension
## (batch, chunk); each work-group writes its partial product into P (S x M x N per batch,
## acc_t), and the second kernel ${name}_sum adds the S partials in order and stores C
## (for products with few elements of C and a long sum: LeNet's filter gradient).
## acc_t is the accumulator: float for half storage, the unsigned type for signed
## integers (wrapping sums, numpy's integer dot, with no undefined overflow).
## alpha, beta: 'one' (absent), 'ptr' (a 0-d device array); beta 'none' means no Z.
## epi: an elementwise consumer of C folded in (ops/fusion.py Epilogue), as in
##   gemm_small.cl.mako: C is not stored; th_epi computes the consumer's output from the
##   product's value (its input epi_j, as C's type would hold it) and its other inputs
##   (eops: operands of C's geometry, "off sb sm sn" each, after alpha/Z/beta in the
##   arguments), and C's place holds the consumer's output (traits cs). Where the sum is
##   split, the second launch computes it.
## beta == 0 at run time ignores Z, as BLAS does (Z may be uninitialised).
## cplx: complex values, (re, im) vectors (float2 / double2, numpy's layout); products
## through CMUL, real operands (and alpha/beta) widened to (x, 0).
<%namespace file="epilogue.mako" import="th_epi, epi_call"/>
${support}
% if cplx:
#define CMUL(a, b) ((${acc_t})((a).x * (b).x - (a).y * (b).y, (a).x * (b).y + (a).y * (b).x))
% else:
#define CMUL(a, b) ((a) * (b))
% endif
% if epi:
${th_epi(cs, epi_cts, epi_body)}
% endif

% if rb:
<%
tx, ty, rm, rn, bk, a_kfast, b_nfast = rb
db, full, va, vb = fast or (False, False, False, False)
wa, wb = (4 if va else 1), (4 if vb else 1)
na, nb_ = ty * rm * bk // (tx * ty * wa), bk * tx * rn // (tx * ty * wb)
%>\
#define TX ${tx}
#define TY ${ty}
#define RM ${rm}
#define RN ${rn}
#define BK ${bk}
#define BM (TY * RM)
#define BN (TX * RN)
% if fast:
#define LDA (BM + 4)
#define LDB (BN + 4)
% endif

__kernel __attribute__((reqd_work_group_size(TX, TY, 1)))
% else:
#define TS ${ts}

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
% endif
void ${name}(${params()})
{
% if rb:
% if fast:
    /* ${2 if db else 1} buffer(s) of the A tile as [k][m] and the B tile as [k][n] (rows of
       LDA, LDB elements), declared as vectors for their alignment */
    __local ${acc_t}4 As4[${2 if db else 1} * BK * LDA / 4];
    __local ${acc_t}4 Bs4[${2 if db else 1} * BK * LDB / 4];
    __local ${acc_t} *As = (__local ${acc_t} *)As4;
    __local ${acc_t} *Bs = (__local ${acc_t} *)Bs4;
% else:
    /* a work-item's RM (RN) consecutive rows (columns) of a tile are read as one vector;
       one vector of padding per row of the tile */
    __local ${acc_t}${rm} As[BK * (BM / RM + 1)];
    __local ${acc_t}${rn} Bs[BK * (BN / RN + 1)];
    __local ${acc_t} *Asf = (__local ${acc_t} *)As;
    __local ${acc_t} *Bsf = (__local ${acc_t} *)Bs;
% endif
    const int lx = get_local_id(0);      /* along N */
    const int ly = get_local_id(1);      /* along M */
    const int tid = ly * TX + lx;
    const long m0 = get_group_id(1) * BM;
    const long n0 = get_group_id(0) * BN;
% if split:
    const long bi = get_global_id(2) / S;
    const long si = get_global_id(2) % S;
    const ${it} kbeg = si * KC;
    const ${it} kend = min(K, (long)kbeg + KC);
% else:
    const long bi = get_global_id(2);
    const ${it} kbeg = 0, kend = K;
% endif
    /* the tile's corner, once; offsets within it in ${it} (the planner checked they fit) */
    __global const ${a['t']} *At = A + (a_off + bi * a_sb + m0 * a_sm);
    __global const ${b['t']} *Bt = B + (b_off + bi * b_sb + n0 * b_sn);
    const ${it} sm = a_sm, sk = a_sk, tk = b_sk, tn = b_sn;
    const ${it} Mr = M - m0, Nr = N - n0;
    ${acc_t} acc[RM][RN];
    #pragma unroll
    for (int i = 0; i < RM; ++i) {
        #pragma unroll
        for (int j = 0; j < RN; ++j)
            acc[i][j] = 0;
    }
% if fast:
${fast_loop(tx, ty, rm, rn, bk, a_kfast, b_nfast, db, full, va, vb, na, nb_)}\
% else:
    /* the next tile's elements are loaded into registers while this one is computed */
    ${acc_t} pa[${na}], pb[${nb_}];
${prefetch('kbeg', na, nb_, a_kfast, b_nfast)}\
    for (${it} k0 = kbeg; k0 < kend; k0 += BK) {
        #pragma unroll
        for (int q = 0; q < ${na}; ++q) {
${a_at(a_kfast)}\
            Asf[kk * (BM + RM) + mm] = pa[q];
        }
        #pragma unroll
        for (int q = 0; q < ${nb_}; ++q) {
${b_at(b_nfast)}\
            Bsf[kk * (BN + RN) + nn] = pb[q];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
${prefetch('k0 + BK', na, nb_, a_kfast, b_nfast)}\
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
            const ${acc_t}${rm} a4 = As[kk * (BM / RM + 1) + ly];
            const ${acc_t}${rn} b4 = Bs[kk * (BN / RN + 1) + lx];
% for i in range(rm):
% for j in range(rn):
            acc[${i}][${j}] += a4.s${i} * b4.s${j};
% endfor
% endfor
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
% endif
    #pragma unroll
    for (int i = 0; i < RM; ++i) {
        const long m = m0 + ${'(i / 4) * (4 * TY) + ly * 4 + i % 4' if fast else 'ly * RM + i'};
        #pragma unroll
        for (int j = 0; j < RN; ++j) {
            const long n = n0 + ${'(j / 4) * (4 * TX) + lx * 4 + j % 4' if fast else 'lx * RN + j'};
            if (${'1' if full else 'm < M && n < N'}) {
% if split:
                P[p_off + ((bi * S + si) * M + m) * N + n] = acc[i][j];
% else:
                const ${acc_t} accv = acc[i][j];
${store_c('accv')}\
% endif
            }
        }
    }
% else:
    __local ${acc_t} As[TS][TS + 1];
    __local ${acc_t} Bs[TS][TS + 1];
    const int lx = get_local_id(0);      /* along N */
    const int ly = get_local_id(1);      /* along M */
    const long n = get_group_id(0) * TS + lx;
    const long m = get_group_id(1) * TS + ly;
% if split:
    const long bi = get_global_id(2) / S;
    const long si = get_global_id(2) % S;
    const long kbeg = si * KC;
    const long kend = min(K, kbeg + KC);
% else:
    const long bi = get_global_id(2);
    const long kbeg = 0, kend = K;
% endif
    const long a0 = a_off + bi * a_sb;
    const long b0 = b_off + bi * b_sb;
    ${acc_t} acc = 0;
    for (long k0 = kbeg; k0 < kend; k0 += TS) {
        const long ka = k0 + lx;
        const long kb = k0 + ly;
        As[ly][lx] = (m < M && ka < kend) ? ${load(a, 'A', 'a0 + m * a_sm + ka * a_sk')} : (${acc_t})0;
        Bs[ly][lx] = (kb < kend && n < N) ? ${load(b, 'B', 'b0 + kb * b_sk + n * b_sn')} : (${acc_t})0;
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TS; ++kk)
            acc += CMUL(As[ly][kk], Bs[kk][lx]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (m < M && n < N) {
% if split:
        P[p_off + ((bi * S + si) * M + m) * N + n] = acc;
% else:
${store_c('acc')}\
% endif
    }
% endif
}
% if split:

/* the split sum's second launch: C = alpha * (the S partial products) (+ beta * Z) */
__kernel void ${name}_sum(${params()})
{
    const long n = get_global_id(0);
    const long m = get_global_id(1);
    const long bi = get_global_id(2);
    if (m >= M || n >= N)
        return;
    ${acc_t} acc = 0;
    for (long si = 0; si < S; ++si)
        acc += P[p_off + ((bi * S + si) * M + m) * N + n];
${store_c('acc')}\
}
% endif
<%def name="a_at(a_kfast)">\
## the element (kk, mm) of the A tile that work-item tid's q-th load takes: loads and local
## stores share it
            const int e = tid + q * TX * TY;
% if a_kfast:
            const int kk = e % BK, mm = e / BK;
% else:
            const int mm = e % BM, kk = e / BM;
% endif
</%def>
<%def name="b_at(b_nfast)">\
            const int e = tid + q * TX * TY;
% if b_nfast:
            const int nn = e % BN, kk = e / BN;
% else:
            const int kk = e % BK, nn = e / BK;
% endif
</%def>
<%def name="prefetch(kstart, na, nb_, a_kfast, b_nfast)">\
        #pragma unroll
        for (int q = 0; q < ${na}; ++q) {
${a_at(a_kfast)}\
            const ${it} k = ${kstart} + kk;
            pa[q] = (mm < Mr && k < kend) ? ${load(a, 'At', 'mm * sm + k * sk')} : (${acc_t})0;
        }
        #pragma unroll
        for (int q = 0; q < ${nb_}; ++q) {
${b_at(b_nfast)}\
            const ${it} k = ${kstart} + kk;
            pb[q] = (k < kend && nn < Nr) ? ${load(b, 'Bt', 'k * tk + nn * tn')} : (${acc_t})0;
        }
</%def>
<%def name="fast_at(op, q, fastw, wg, F, k_fast)">\
## the element of an operand tile that work-item tid's q-th load takes (as a_at / b_at):
## `op` (mm or nn) and kk, the first of `fastw` consecutive elements along the fast axis
## (k where k_fast), F elements long
            const int e = tid + ${q * wg};
% if k_fast:
            const int kk = (e % ${F // fastw}) * ${fastw}, ${op} = e / ${F // fastw};
% else:
            const int ${op} = (e % ${F // fastw}) * ${fastw}, kk = e / ${F // fastw};
% endif
</%def>\
<%def name="fast_load(kstart, tx, ty, rm, rn, bk, a_kfast, b_nfast, full, va, vb, na, nb_)">\
## the tile at k = kstart into registers pa, pb (vectors of 4 where va / vb)
% for q in range(na):
        {
${fast_at('mm', q, 4 if va else 1, tx * ty, bk if a_kfast else ty * rm, a_kfast)}\
            const ${it} k = ${kstart} + kk;
<% idx = ('mm * sm + k' if a_kfast else 'mm + k * sk') if va else 'mm * sm + k * sk' %>\
% if va:
            __global const ${acc_t} *p = At + (${idx});
            pa[${q}] = ${'' if full else '(mm < Mr && k < kend) ? '}(a_al ? *(__global const ${acc_t}4 *)p : vload4(0, p))${'' if full else ' : (%s4)0' % acc_t};
% else:
            pa[${q}] = ${'' if full else '(mm < Mr && k < kend) ? '}At[${idx}]${'' if full else ' : (%s)0' % acc_t};
% endif
        }
% endfor
% for q in range(nb_):
        {
${fast_at('nn', q, 4 if vb else 1, tx * ty, tx * rn if b_nfast else bk, not b_nfast)}\
            const ${it} k = ${kstart} + kk;
<% idx = ('k * tk + nn' if b_nfast else 'k + nn * tn') if vb else 'k * tk + nn * tn' %>\
% if vb:
            __global const ${acc_t} *p = Bt + (${idx});
            pb[${q}] = ${'' if full else '(k < kend && nn < Nr) ? '}(b_al ? *(__global const ${acc_t}4 *)p : vload4(0, p))${'' if full else ' : (%s4)0' % acc_t};
% else:
            pb[${q}] = ${'' if full else '(k < kend && nn < Nr) ? '}Bt[${idx}]${'' if full else ' : (%s)0' % acc_t};
% endif
        }
% endfor
</%def>\
<%def name="fast_stash(buf, tx, ty, rm, rn, bk, a_kfast, b_nfast, va, vb, na, nb_)">\
## registers pa, pb into the local buffer `buf` (0 or 1): A as [k][m], B as [k][n]
% for q in range(na):
        {
${fast_at('mm', q, 4 if va else 1, tx * ty, bk if a_kfast else ty * rm, a_kfast)}\
            __local ${acc_t} *s = As + (${buf}) * (BK * LDA) + kk * LDA + mm;
% if not va:
            *s = pa[${q}];
% elif a_kfast:
% for i in range(4):
            s[${i} * LDA] = pa[${q}].s${i};
% endfor
% else:
            *(__local ${acc_t}4 *)s = pa[${q}];
% endif
        }
% endfor
% for q in range(nb_):
        {
${fast_at('nn', q, 4 if vb else 1, tx * ty, tx * rn if b_nfast else bk, not b_nfast)}\
            __local ${acc_t} *s = Bs + (${buf}) * (BK * LDB) + kk * LDB + nn;
% if not vb:
            *s = pb[${q}];
% elif not b_nfast:
% for i in range(4):
            s[${i} * LDB] = pb[${q}].s${i};
% endfor
% else:
            *(__local ${acc_t}4 *)s = pb[${q}];
% endif
        }
% endfor
</%def>\
<%def name="fast_loop(tx, ty, rm, rn, bk, a_kfast, b_nfast, db, full, va, vb, na, nb_)">\
<% args = (tx, ty, rm, rn, bk, a_kfast, b_nfast) %>\
% if va:
    /* aligned vector loads where this tile's corner allows them (uniform per work-group) */
    const bool a_al = ((ulong)At % sizeof(${acc_t}4)) == 0;
% endif
% if vb:
    const bool b_al = ((ulong)Bt % sizeof(${acc_t}4)) == 0;
% endif
    /* the next tile's elements are loaded into registers while this one is computed */
    ${acc_t}${'4' if va else ''} pa[${na}];
    ${acc_t}${'4' if vb else ''} pb[${nb_}];
${fast_load('kbeg', *(args + (full, va, vb, na, nb_)))}\
${fast_stash('0', *(args + (va, vb, na, nb_)))}\
    barrier(CLK_LOCAL_MEM_FENCE);
% if db:
    int cur = 0;
% endif
    for (${it} k0 = kbeg; k0 < kend; k0 += BK) {
        const bool more = k0 + BK < kend;
        if (more) {
${fast_load('k0 + BK', *(args + (full, va, vb, na, nb_)))}\
        }
        const __local ${acc_t}4 *Ar = (const __local ${acc_t}4 *)(As${' + cur * (BK * LDA)' if db else ''}) + ly;
        const __local ${acc_t}4 *Br = (const __local ${acc_t}4 *)(Bs${' + cur * (BK * LDB)' if db else ''}) + lx;
        #pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
% for c in range(rm // 4):
            const ${acc_t}4 a${c} = Ar[kk * (LDA / 4) + ${c} * TY];
% endfor
% for c in range(rn // 4):
            const ${acc_t}4 b${c} = Br[kk * (LDB / 4) + ${c} * TX];
% endfor
% for i in range(rm):
% for j in range(rn):
            acc[${i}][${j}] += a${i // 4}.s${i % 4} * b${j // 4}.s${j % 4};
% endfor
% endfor
        }
% if db:
        /* the other buffer was last read before the previous barrier */
        if (more) {
${fast_stash('cur ^ 1', *(args + (va, vb, na, nb_)))}\
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        cur ^= 1;
% else:
        barrier(CLK_LOCAL_MEM_FENCE);
        if (more) {
${fast_stash('0', *(args + (va, vb, na, nb_)))}\
        }
        barrier(CLK_LOCAL_MEM_FENCE);
% endif
    }
</%def>\
<%def name="params()">
    const long M, const long N, const long K,
    __global const ${a['t']} *A, const long a_off, const long a_sb, const long a_sm, const long a_sk,
    __global const ${b['t']} *B, const long b_off, const long b_sb, const long b_sk, const long b_sn,
    __global ${cs['t']} *C, const long c_off, const long c_sb, const long c_sm, const long c_sn
% if alpha == 'ptr':
    , __global const ${al['t']} *alpha_p, const long alpha_off
% endif
% if beta != 'none':
    , __global const ${c['t']} *Z, const long z_off, const long z_sb, const long z_sm, const long z_sn
% endif
% if beta == 'ptr':
    , __global const ${be['t']} *beta_p, const long beta_off
% endif
% for P, st, o, q in eops:
    , __global const ${o['t']} *${P}, const long ${st}_off, const long ${st}_sb, const long ${st}_sm, const long ${st}_sn
% endfor
% if split:
    , const long S, const long KC, __global ${acc_t} *P, const long p_off
% endif
</%def>
<%def name="store_c(accv)">\
        const long ci = c_off + bi * c_sb + m * c_sm + n * c_sn;
        ${cc_t} r = (${cc_t})${accv};
% if alpha == 'ptr':
        r = CMUL(${load(al, 'alpha_p', 'alpha_off', cc_t)}, r);
% endif
% if beta == 'one':
        r = r + ${load(c, 'Z', 'z_off + bi * z_sb + m * z_sm + n * z_sn', cc_t)};
% elif beta == 'ptr':
        const ${cc_t} beta = ${load(be, 'beta_p', 'beta_off', cc_t)};
        if (${'any(beta != (%s)0)' % cc_t if cplx else 'beta != 0'})
            r = r + CMUL(beta, ${load(c, 'Z', 'z_off + bi * z_sb + m * z_sm + n * z_sn', cc_t)});
% endif
% if epi:
        const ${cs['ct']} e = ${epi_call(c, eops, epi_cts, epi_j, 'r', '%s')};
% if cs['half']:
        vstore_half_rte(e, ci, C);
% elif cs['signed_int']:
        C[ci] = as_${cs['t']}((${cs['ut']})e);
% else:
        C[ci] = (${cs['t']})e;
% endif
% elif c['half']:
        vstore_half_rte(r, ci, C);
% elif c['signed_int']:
        C[ci] = as_${c['t']}((${c['ut']})r);
% elif cplx:
        C[ci] = r;
% else:
        C[ci] = (${c['t']})r;
% endif
</%def>
<%def name="load(o, ptr, idx, to=None)">\
% if o['half']:
(${to or acc_t})vload_half(${idx}, ${ptr})\
% elif cplx and o['cplx'] and o['t'] != (to or acc_t):
convert_${to or acc_t}(${ptr}[${idx}])\
% elif cplx and o['cplx']:
${ptr}[${idx}]\
% elif cplx:
(${to or acc_t})((${(to or acc_t)[:-1]})${ptr}[${idx}], 0)\
% else:
(${to or acc_t})${ptr}[${idx}]\
% endif
</%def>
