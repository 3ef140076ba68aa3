## Small host values uploaded together (runtime/uploads.py send): the host packed them
## into one staging buffer `src`, whose head is a table of n rows (src offset, dst
## offset, bytes), all in bytes; work-group g copies values g, g + groups, ... into `dst`
## (one value per group on a GPU; a CPU launches a few groups). Values whose offsets and
## size are multiples of 4 move as uints, others as bytes.
__kernel void ${name}(__global uchar *dst, __global const uchar *src, const int n)
{
    const long l = get_local_id(0), step = get_local_size(0);
    for (int g = get_group_id(0); g < n; g += get_num_groups(0)) {
        __global const long *row = (__global const long *)src + 3 * g;
        const long so = row[0], dof = row[1], nb = row[2];
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
}
