"""cl_khr_command_buffer against plain enqueues for a SimulatorOCL step (Nengo-like model).

Records the batched step plan of ``bench/nengo_like.py`` (its kernel launches and the
update commits) once into an OpenCL command buffer (cl_khr_command_buffer, called through
ctypes: pyopencl does not wrap it), then replays N steps both ways from the same saved
state and compares time per step and the final state (must be bit-identical: the same
kernels with the same arguments in the same order). The per-step input feed and probes are
left out of both, so only the step itself is compared.

    python bench/cmdbuf.py [--ensembles 50] [--steps 500] [--device SPEC]

Exits with a message when the device lacks the extension (NVIDIA's driver has none).
"""
import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import theano_ocl  # noqa: E402
from nengo_like import build  # noqa: E402
from theano_ocl.runtime import planner, plans  # noqa: E402

c_void_p, c_uint, c_int, c_size_t = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t


class CommandBuffer(object):
    """The few cl_khr_command_buffer 0.9.0 entry points a recorded step needs."""

    def __init__(self, dev, queue):
        lib = ctypes.CDLL('libOpenCL.so.1')
        get = lib.clGetExtensionFunctionAddressForPlatform
        get.restype = c_void_p
        get.argtypes = [c_void_p, ctypes.c_char_p]
        plat = c_void_p(dev.device.platform.int_ptr)

        def fn(name, restype, *argtypes):
            addr = get(plat, name.encode())
            if not addr:
                raise RuntimeError('%s is not exported by the platform' % name)
            return ctypes.CFUNCTYPE(restype, *argtypes)(addr)
        self.create = fn('clCreateCommandBufferKHR', c_void_p, c_uint, ctypes.POINTER(c_void_p),
                         c_void_p, ctypes.POINTER(c_int))
        self.ndrange = fn('clCommandNDRangeKernelKHR', c_int, c_void_p, c_void_p, c_void_p,
                          c_void_p, c_uint, c_void_p, ctypes.POINTER(c_size_t),
                          ctypes.POINTER(c_size_t), c_uint, c_void_p, c_void_p, c_void_p)
        self.finalize = fn('clFinalizeCommandBufferKHR', c_int, c_void_p)
        self.enqueue_ = fn('clEnqueueCommandBufferKHR', c_int, c_uint, ctypes.POINTER(c_void_p),
                           c_void_p, c_uint, c_void_p, c_void_p)
        self.q = (c_void_p * 1)(queue.int_ptr)
        err = c_int(0)
        # CL_COMMAND_BUFFER_FLAGS_KHR = CL_COMMAND_BUFFER_SIMULTANEOUS_USE_KHR: enqueue again
        # while an earlier enqueue is pending; without it every step would wait for the last
        props = (ctypes.c_uint64 * 3)(0x1293, 1, 0)
        self.simultaneous = True
        self.cb = self.create(1, self.q, ctypes.cast(props, c_void_p), ctypes.byref(err))
        if err.value:
            self.simultaneous = False
            self.cb = self.create(1, self.q, None, ctypes.byref(err))
        if err.value:
            raise RuntimeError('clCreateCommandBufferKHR: error %d' % err.value)

    def add_kernel(self, kernel, gsize, lsize):
        g = (c_size_t * len(gsize))(*gsize)
        loc = (c_size_t * len(lsize))(*lsize) if lsize else None
        e = self.ndrange(self.cb, None, None, c_void_p(kernel.int_ptr), len(gsize), None, g, loc,
                         0, None, None, None)
        if e:
            raise RuntimeError('clCommandNDRangeKernelKHR: error %d' % e)

    def close(self):
        e = self.finalize(self.cb)
        if e:
            raise RuntimeError('clFinalizeCommandBufferKHR: error %d' % e)

    def enqueue(self):
        e = self.enqueue_(1, self.q, self.cb, 0, None, None)
        if e:
            raise RuntimeError('clEnqueueCommandBufferKHR: error %d' % e)


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--ensembles', type=int, default=50)
    p.add_argument('--steps', type=int, default=500)
    p.add_argument('--device', default=None)
    a = p.parse_args()
    dev = theano_ocl.get_device(a.device)
    if 'cl_khr_command_buffer' not in dev.device.extensions:
        sys.exit('%s has no cl_khr_command_buffer' % dev.name)
    f, D = build(a.ensembles)
    sim = theano_ocl.SimulatorOCL(f, device=a.device)
    us = np.zeros((3, D), np.float32)
    sim.run_steps(3, inputs={'u': us}, batch=True)
    main_ = sim._main
    vm = main_.vm
    frame = vm.last_frame
    # the batched step and the batched commit copies, as typed plans (runtime/plans.py)
    p_steps, p_commits = planner.loop_plans(vm.run_context, frame)
    recorded = list(p_steps.plans) + list(p_commits.plan.plans)
    queue = vm.queue
    cb = CommandBuffer(dev, queue)
    for plan in recorded:
        if not isinstance(plan, plans.Launch):
            sys.exit('a step of the plan is a %s, not a kernel launch: not recordable here'
                     % type(plan).__name__)
        cb.add_kernel(plan.kernel, plan.gsize, plan.lsize)
    cb.close()
    state = [(r, np.empty(r.nbytes, np.uint8)) for r in
             [frame.input_roots[i] for i in frame.input_roots
              if vm.program.input_kinds[i] == 'resident']]
    cl = dev.cl
    for r, h in state:
        cl.enqueue_copy(queue, h, r.buf, is_blocking=True)

    def restore():
        for r, h in state:
            cl.enqueue_copy(queue, r.buf, h, is_blocking=True)

    def snapshot():
        out = []
        for r, h in state:
            x = np.empty_like(h)
            cl.enqueue_copy(queue, x, r.buf, is_blocking=True)
            out.append(x)
        return out

    steps = [plan.fn for plan in recorded]
    results = {}
    for rep in range(3):
        for name in ('plain enqueues', 'command buffer'):
            restore()
            t0 = time.perf_counter()
            if name == 'plain enqueues':
                for _ in range(a.steps):
                    for fn in steps:
                        fn()
            elif cb.simultaneous:
                for _ in range(a.steps):
                    cb.enqueue()
            else:   # one pending instance at a time: wait for each step
                for _ in range(a.steps):
                    cb.enqueue()
                    queue.finish()
            queue.finish()
            t = (time.perf_counter() - t0) / a.steps
            results.setdefault(name, []).append(t)
            final = snapshot()
            results.setdefault(name + ' state', final)
    same = all(np.array_equal(x, y) for x, y in zip(results['plain enqueues state'],
                                                    results['command buffer state']))
    print('cl_khr_command_buffer vs plain enqueues: E=%d, %d steps, %d launches/step, device %s'
          % (a.ensembles, a.steps, len(steps), dev.name))
    for name in ('plain enqueues', 'command buffer'):
        ts = sorted(results[name])
        print('  %-16s %8.1f us/step (median of 3; best %.1f)' % (name, ts[1] * 1e6, ts[0] * 1e6))
    print('  final state bit-identical: %s%s' % (same, '' if cb.simultaneous else
          '  (no simultaneous use: a finish after each command-buffer step)'))


if __name__ == '__main__':
    main()
