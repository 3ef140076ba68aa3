"""The host BLAS as a command of a CPU device's queue: ``clEnqueueNativeKernel``.

On a CPU device the host BLAS (``blas_host.py``) maps its operands, which waits for the
queue to drain, and computes in the calling thread: every product of a small model costs a
round trip through PoCL's queue (about 90 us on the 2-core Xeon, 2026-11-29), far more than
its arithmetic. A device that can run native kernels (``CL_EXEC_NATIVE_KERNEL``: PoCL's
CPU devices) takes the same ?gemm call as a command of its in-order queue instead: the
launches around it go on being queued, nothing waits, and the product runs on one of the
device's threads when its turn comes, reading and writing the buffers in place.

The command is a small C function (:data:`SOURCE`), compiled once per machine into
Theano's compiledir with Theano's own C++ compiler, that takes one struct: the ?gemm
function pointer (scipy's, as ``blas_host`` uses it), the Fortran call's sizes, flags and
alpha/beta, and per operand a buffer and a byte offset. The OpenCL implementation writes
each buffer's address into the struct when the command runs. PoCL 3.1 pairs the buffers
it was given with the places to write them in its own order (sorted by an internal
creation id, duplicates removed), not the order given, so the struct also carries each
buffer's address as this module knows it (mapped once per buffer, :class:`Addresses`):
the command computes only when the two sets agree, and otherwise sets a status word that
the call's checks read (a call that finds it set fails before its updates commit).

Products of more than ``blas_host.ONE_THREAD_MACS`` multiply-adds stay mapped: their
arithmetic outweighs the queue's round trip, and OpenBLAS's threads started from a PoCL
thread fight PoCL's own for the cores (LeNet's step at batch 20 on 2 cores of the H200's
host, 2026-11-29: 23.4 ms queued against 18.9 ms mapped). Where the command cannot be had
(no native kernels, no compiler, an operand that is not a pool buffer, alpha or beta read
on the device, a layout the BLAS cannot take) ``blas_host``'s mapped path runs as well;
the ``host_blas`` setting ('queued', the default, or 'mapped') chooses between them.
"""
import ctypes
import hashlib
import os
import subprocess
import tempfile
import threading
import weakref

import numpy as np

from ..runtime.host_views import (  # noqa: F401 (the ops' names)
    Addresses, addresses, mapped_address, owned)

SOURCE = r'''
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef void (*gemm_fn)(const char *, const char *, const int *, const int *, const int *,
                        const void *, const void *, const int *, const void *, const int *,
                        const void *, void *, const int *);
typedef int (*threads_fn)(int);
#define NBUF 4
struct tocl_gemm {
    char *seen[NBUF];         /* written by the OpenCL implementation, in its order */
    char *want[NBUF];         /* the same buffers' addresses as the caller knows them */
    int32_t *status;          /* set to 1 when the two disagree (nothing is computed) */
    gemm_fn gemm;
    threads_fn one;           /* openblas_set_num_threads_local, or 0 */
    int64_t off[3], step[3];  /* per operand (first, second, C): bytes from its buffer */
    int32_t buf[3];           /* per operand: its index in want */
    int32_t nbuf, m, n, k, lda, ldb, ldc, nb, one_thread;
    char ta, tb, pad[6];
    unsigned char alpha[16], beta[16];
};
void tocl_gemm_run(void *p)
{
    struct tocl_gemm *g = (struct tocl_gemm *)p;
    int i, j, prev = 0;
    for (i = 0; i < g->nbuf; i++) {
        for (j = 0; j < g->nbuf && g->seen[j] != g->want[i]; j++)
            ;
        if (j == g->nbuf) {
            *g->status = 1;
            return;
        }
    }
    if (g->one_thread && g->one)
        prev = g->one(1);
    for (i = 0; i < g->nb; i++)
        g->gemm(&g->ta, &g->tb, &g->m, &g->n, &g->k, g->alpha,
                g->want[g->buf[0]] + g->off[0] + i * g->step[0], &g->lda,
                g->want[g->buf[1]] + g->off[1] + i * g->step[1], &g->ldb, g->beta,
                g->want[g->buf[2]] + g->off[2] + i * g->step[2], &g->ldc);
    if (g->one_thread && g->one)
        g->one(prev);
}
#ifdef __cplusplus
}
#endif
'''
NBUF = 4


class Args(ctypes.Structure):
    """:data:`SOURCE`'s ``struct tocl_gemm``."""
    _fields_ = [('seen', ctypes.c_void_p * NBUF), ('want', ctypes.c_void_p * NBUF),
                ('status', ctypes.c_void_p), ('gemm', ctypes.c_void_p), ('one', ctypes.c_void_p),
                ('off', ctypes.c_int64 * 3), ('step', ctypes.c_int64 * 3),
                ('buf', ctypes.c_int32 * 3)] + \
               [(n, ctypes.c_int32) for n in ('nbuf', 'm', 'n', 'k', 'lda', 'ldb', 'ldc', 'nb',
                                              'one_thread')] + \
               [('ta', ctypes.c_char), ('tb', ctypes.c_char), ('pad', ctypes.c_char * 6),
                ('alpha', ctypes.c_ubyte * 16), ('beta', ctypes.c_ubyte * 16)]


_LOCK = threading.Lock()
_STATE = {}          # 'run': address of tocl_gemm_run, 'enqueue': clEnqueueNativeKernel


def _compile():
    """The address of ``tocl_gemm_run`` (compiled into the compiledir the first time), or
    None where no compiler or OpenCL loader could be had."""
    import theano
    tag = hashlib.sha1(SOURCE.encode()).hexdigest()[:16]
    directory = os.path.join(theano.config.compiledir, 'theano_ocl_native')
    lib = os.path.join(directory, 'gemm_%s.so' % tag)
    if not os.path.exists(lib):
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            src = os.path.join(tmp, 'gemm.c')
            with open(src, 'w') as fh:
                fh.write(SOURCE)
            out = os.path.join(tmp, 'gemm.so')
            cxx = theano.config.cxx or 'g++'
            subprocess.run([cxx, '-O2', '-shared', '-fPIC', '-x', 'c++', src, '-o', out],
                           check=True, capture_output=True)
            os.replace(out, lib)            # atomic: concurrent processes agree
    so = ctypes.CDLL(lib)
    return ctypes.cast(so.tocl_gemm_run, ctypes.c_void_p).value, so


def _load():
    with _LOCK:
        if 'run' not in _STATE:
            try:
                from ..runtime.native import opencl_library
                run, so = _compile()
                fn = opencl_library().clEnqueueNativeKernel
                fn.restype = ctypes.c_int32
                fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                               ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p]
                _STATE.update(run=run, so=so, enqueue=fn)
            except Exception as e:          # no compiler, no loader: the mapped path
                _STATE.update(run=None, error=e)
    return _STATE['run']


def available(dev):
    """Whether products on ``dev`` can be queued as native commands (a CPU device with
    native kernels, where the command compiles and passed :func:`self_check`)."""
    ok = getattr(dev, 'queued_blas', None)
    if ok is None:
        cl = dev.cl
        ok = bool(dev.is_cpu and dev.device.execution_capabilities
                  & cl.device_exec_capabilities.NATIVE_KERNEL) and _load() is not None
        if ok:
            try:
                ok = self_check(dev)
            except Exception:
                ok = False
        dev.queued_blas = ok
    return ok


class Status(object):
    """The status word every queued product of a device writes on a disagreement."""

    def __init__(self, dev):
        self.word = ctypes.c_int32(0)
        self.dev = dev

    def check(self):
        if self.word.value:
            self.word.value = 0
            addresses(self.dev).forget()
            raise RuntimeError(
                'theano_ocl: a host BLAS product queued on %s found its buffers elsewhere '
                'than where they were mapped; the call failed before committing anything and '
                'the next one maps them again (THEANO_OCL_HOST_BLAS=mapped avoids queued '
                'products)' % self.dev.name)


def status(dev):
    s = getattr(dev, 'queued_status', None)
    if s is None:
        s = dev.queued_status = Status(dev)
    return s


_CHECKED = weakref.WeakSet()         # frames whose checks read the status word


class Product(object):
    """One queued ?gemm of fixed sizes, flags, alpha and beta over DArrays ``ops``
    (first operand, second operand, C in the Fortran call's order): ``run()`` enqueues it
    where the operands' roots are now. It is its plan's ``session`` (``report.py`` names
    the node's products ``HOST_BLAS_QUEUED``)."""
    host_blas = True

    def __init__(self, dev, queue, gemm, call, ops, nb, steps, alpha, beta, one, timed=False):
        self.dev = dev
        self.queue_ptr = queue.int_ptr
        # a profiled function's queue times its commands by their events (profiling.py)
        self.event = ctypes.c_void_p() if timed else None
        self.event_ptr = ctypes.byref(self.event) if timed else None
        self.ops = ops
        self.addresses = addresses(dev)
        self.enqueue = _STATE['enqueue']
        self.run_ptr = _STATE['run']
        a = self.args = Args()
        a.status = ctypes.addressof(status(dev).word)
        a.gemm = gemm
        a.one = one or 0
        a.one_thread = int(bool(one))
        (ta, tb), (m, n, k), (lda, ldb), ldc = call
        a.ta, a.tb = (b'T' if ta else b'N'), (b'T' if tb else b'N')
        a.m, a.n, a.k, a.lda, a.ldb, a.ldc, a.nb = m, n, k, lda, ldb, ldc, nb
        for i, s in enumerate(steps):
            a.step[i] = s
        ctypes.memmove(a.alpha, alpha, len(alpha))
        ctypes.memmove(a.beta, beta, len(beta))
        self.size = ctypes.sizeof(Args)
        self.args_ptr = ctypes.addressof(a)
        self.bound = None               # the buffers the struct was filled for
        self.mems = (ctypes.c_void_p * NBUF)()
        self.locs = (ctypes.c_void_p * NBUF)(*[self.args_ptr + Args.seen.offset
                                               + i * ctypes.sizeof(ctypes.c_void_p)
                                               for i in range(NBUF)])

    def bind(self):
        """Fill the struct for the buffers the operands' roots are in now."""
        a = self.args
        bufs = []
        for i, d in enumerate(self.ops):
            root = d.root
            for j, b in enumerate(bufs):
                if b.int_ptr == root.buf.int_ptr:
                    break
            else:
                j = len(bufs)
                bufs.append(root.buf)
            a.buf[i] = j
            a.off[i] = root.origin + d.offset
        for j, b in enumerate(bufs):
            self.mems[j] = b.int_ptr
            # (a buffer the pool did not make, or made before it last gave buffers back: a
            # call's device-array input of the caller's, its address looked up now and
            # kept while the product stays bound to this buffer, never kept by handle)
            a.want[j] = (self.addresses.of(b) if owned(b, self.dev)
                         else mapped_address(self.dev, b))
        a.nbuf = len(bufs)
        self.bound = tuple(d.root.buf for d in self.ops) + (self.addresses.current(),)

    def run(self):
        o = self.ops
        b = self.bound
        if b is None or b[0] is not o[0].root.buf or b[1] is not o[1].root.buf or \
                b[2] is not o[2].root.buf or b[3] != self.addresses.current():
            self.bind()
        elif any(d.root.origin + d.offset != self.args.off[i] for i, d in enumerate(o)):
            self.bind()
        err = self.enqueue(self.queue_ptr, self.run_ptr, self.args_ptr, self.size,
                           self.args.nbuf, self.mems, self.locs, 0, None, self.event_ptr)
        if err:
            raise RuntimeError('clEnqueueNativeKernel failed with OpenCL error %d' % err)
        if self.event_ptr is not None:
            return self.dev.cl.Event.from_int_ptr(self.event.value, retain=False)


def is_pool_buffer(buf):
    """Whether ``buf`` is a pooled buffer: of the device's pool, or of a caller's own (a
    device-array input), whose address :meth:`Product.bind` looks up by a map."""
    import pyopencl.tools as clt
    return isinstance(buf, clt.PooledBuffer)


def plan_queued(ctx, A, B, C, Z, gemm, call, first_is_a, alpha, beta, one):
    """Record ``C[b] = alpha A[b] @ B[b] (+ beta Z[b])`` as one queued command (the
    operands' layouts were checked by the caller: ``call`` is ``blas_host.fortran_call``'s
    (flags, sizes, leading dimensions, ldc)). Returns False (nothing recorded) where the
    mapped path must take it."""
    if not all(is_pool_buffer(d.root.buf) for d in (A, B, C)):
        return False
    if Z is not None and Z is not C:
        ctx.copy(C, Z)                  # beta applies to C, which now holds Z
    first, second = (A, B) if first_is_a else (B, A)
    ops = (first, second, C)
    steps = [d.strides[0] if d.shape[0] > 1 else 0 for d in ops]
    dt = np.dtype(C.dtype)
    prod = Product(ctx.dev, ctx.queue, gemm, call, ops, C.shape[0], steps,
                   np.array([alpha], dt).tobytes(), np.array([beta], dt).tobytes(), one,
                   timed=ctx.queue is not ctx.dev.queue)
    reads = [A, B] + ([C] if beta else [])
    ctx.enqueue(prod.run, session=prod, reads=reads, writes=[C],
                pointwise=[C] if beta else ())
    frame = ctx.frame
    if frame not in _CHECKED:
        _CHECKED.add(frame)
        queue, cl = ctx.queue, ctx.dev.cl
        ctx.deferred_check(status(ctx.dev).check, lambda: cl.enqueue_marker(queue))
    return True


def self_check(dev):
    """One queued product on ``dev`` against numpy (three buffers allocated in an order
    unrelated to their handles' order, every operand at an offset)."""
    from ..darray import DArray, Root
    from ..runtime.memory import download, upload
    from .blas_operands import fortran_call, gemm_pointer
    if _load() is None:
        return False
    rng = np.random.RandomState(0)
    M, N, K = 3, 4, 5
    a, b = rng.rand(M, K), rng.rand(K, N)
    ds = []
    for shape in ((M + 1, N), (K * N + 2,), (M + 1, K)):     # C, B, A: handles unordered
        buf = dev.alloc(int(np.prod(shape)) * 8)
        ds.append(DArray(Root(buf, int(np.prod(shape)) * 8), shape, np.float64))
    Cr, Br, Ar = ds
    A = DArray(Ar.root, (1, M, K), np.float64, offset=K * 8)
    B = DArray(Br.root, (1, K, N), np.float64, offset=16)
    C = DArray(Cr.root, (1, M, N), np.float64, offset=N * 8)
    upload(dev, dev.queue, A, a[None], blocking=True)
    upload(dev, dev.queue, B, b[None], blocking=True)
    call, first_is_a = fortran_call((M, N, K), (False, K), (False, N), (False, N))
    first, second = (A, B) if first_is_a else (B, A)
    prod = Product(dev, dev.queue, gemm_pointer('float64'), call, (first, second, C), 1,
                   [0, 0, 0], np.float64(1.0).tobytes(), np.float64(0.0).tobytes(), None)
    prod.run()
    got = download(dev, dev.queue, C)[0]
    st = status(dev)
    bad = st.word.value
    st.word.value = 0
    for d in ds:
        d.root.buf.release()
    return not bad and np.allclose(got, a.dot(b))
