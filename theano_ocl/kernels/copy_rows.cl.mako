## dst[a, b, :] = src[a, b, :] over (A, B, P) views whose runs of P elements are contiguous
## in both (a transposing copy between the convolution's layouts: ops/conv.py), on CPU
## devices: one work-item per run, its elements in order.
${support}
__kernel void ${name}(const long A, const long B, const long P,
                      __global const ${t} *src_p, const long src_off, const long sa,
                      const long sb, __global ${t} *dst_p, const long dst_off, const long da,
                      const long db)
{
    const long b = get_global_id(0), a = get_global_id(1);
    __global const ${t} *from = src_p + src_off + a * sa + b * sb;
    __global ${t} *to = dst_p + dst_off + a * da + b * db;
    for (long p = 0; p < P; p++)
        to[p] = from[p];
}
