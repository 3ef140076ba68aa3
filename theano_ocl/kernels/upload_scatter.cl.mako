## Small host values uploaded together (runtime/uploads.py UploadBatch): the host packed
## them into one staging buffer `src`, whose head is a table of n rows (src offset, dst
## offset, bytes), all in bytes; work-group g copies value g into `dst`. Values whose
## offsets and size are multiples of 4 move as uints, others as bytes.
__kernel void ${name}(__global uchar *dst, __global const uchar *src, const int n)
{
    const int g = get_group_id(0);
    if (g >= n)
        return;
    __global const long *row = (__global const long *)src + 3 * g;
    const long so = row[0], dof = row[1], nb = row[2];
    const long l = get_local_id(0), step = get_local_size(0);
    if (((so | dof | nb) & 3) == 0) {
        __global uint *d = (__global uint *)(dst + dof);
        __global const uint *s = (__global const uint *)(src + so);
        for (long i = l; i < (nb >> 2); i += step)
            d[i] = s[i];
    } else {
        for (long i = l; i < nb; i += step)
            dst[dof + i] = src[so + i];
    }
}
