## Rows copied between buffers in one launch (ops/scan_rows.py RowCopies): entry e copies
## n<e> units of type units[e] from s<e> + so<e> + sr<e> * ss<e> to d<e> + do<e> + dr<e> * ds<e>
## (offsets, strides and counts in units; the rows sr/dr are set before each launch).
## Work-item (u, e) copies unit u of entry e. The entries' destinations never overlap
## their sources (checked by RowCopies), so their order does not matter.
__kernel void ${name}(
% for e in range(len(units)):
    __global const ${units[e]} *s${e}, const long so${e}, const long ss${e}, const long sr${e},
    __global ${units[e]} *d${e}, const long do${e}, const long ds${e}, const long dr${e},
    const long n${e}${'' if e == len(units) - 1 else ','}
% endfor
)
{
    const long u = get_global_id(0);
    switch (get_global_id(1)) {
% for e in range(len(units)):
    case ${e}:
        if (u < n${e})
            d${e}[do${e} + dr${e} * ds${e} + u] = s${e}[so${e} + sr${e} * ss${e} + u];
        break;
% endfor
    }
}
