## A strided view moved into another, where the views' places in their buffers are known
## only at run time (integer indices read on the host at every call: ops/subtensor.py).
## dst and src are (buffer, element offset) with strides in elements over the `nd`
## dimensions n0..; `dyn_dst` and `dyn_src` are added to the offsets, set before each
## launch. Elements move as raw words of their size (`T`), so every dtype moves alike.
__kernel void ${name}(const long n,
% for k in range(nd):
                      const long n${k},
% endfor
                      __global ${T} *dst, const long dst_off,
% for k in range(nd):
                      const long ds${k},
% endfor
                      __global const ${T} *src, const long src_off,
% for k in range(nd):
                      const long ss${k},
% endfor
                      const long dyn_dst, const long dyn_src)
{
    for (long g = get_global_id(0); g < n; g += get_global_size(0)) {
        long r = g, d = dst_off + dyn_dst, s = src_off + dyn_src;
% for k in reversed(range(nd)):
        {
            const long i = r % n${k};
            r /= n${k};
            d += i * ds${k};
            s += i * ss${k};
        }
% endfor
        dst[d] = src[s];
    }
}
