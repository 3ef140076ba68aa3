"""What the runtime knows of one linked function: :class:`RunContext`.

The frame builder, the executor, the planners and the frame cache receive this, never the
``OCLFunction`` (``theano_ocl/vm.py``), which makes one and calls into them: the device and
its queue, the settings, the linked program, the profiler, the knobs derived from the
settings once, the constants and the counters the runtime updates (``theano_ocl.stats``
reads them through the function).
"""
from . import host_tier


class RunContext(object):
    """One linked function as the runtime sees it.

    ``queue``: the device's profiling queue when the function is profiled, else its queue;
    ``profiler``: the profile hook (``profiling.Profiler``) or None.
    """
    __slots__ = ('program', 'dev', 'queue', 'settings', 'profile', 'profiler', 'output_mode',
                 'const_dvals', 'retired', 'position_of_error', 'replans', 'last_call',
                 'tier_probes', 'host_tier_after', 'tiny_size', 'reuse_min_bytes',
                 'batch_after', 'batch_min_launches', 'loop_step', 'run_steps')

    def __init__(self, program, dev, settings, profile=None, output_mode='host'):
        self.program = program
        self.dev = dev
        self.settings = settings
        self.profile = profile
        self.profiler = None                 # set by the function when profiled
        self.output_mode = output_mode
        self.queue = dev.profiling_queue if profile else dev.queue
        self.const_dvals = {}                # Constant -> DArray, uploaded once
        self.retired = []          # buffers kept alive for kernels still bound to them
        # -- what the runtime counts (theano_ocl.stats, Theano's error report)
        self.position_of_error = -1
        self.replans = 0
        self.last_call = None      # (steady state, values, bytes, transfers uploaded)
        # -- knobs, from the settings once
        # A launch + finish costs ~40 us on PoCL, and an upload, a launch and a download
        # ~60 us on a GPU: far more than a tiny node's work. Once a frame of tiny values
        # (every value at most tiny_size elements, inputs and outputs on the host) is
        # hot, Theano's own thunks run it in this thread (runtime/host_tier.py); shared
        # variables then live on the host until a device frame needs them (where the
        # host_tier setting lets it, after tier_probes calls run both ways agreed)
        self.tier_probes = host_tier.probes(settings.host_tier, program.fgraph)
        self.host_tier_after = None if self.tier_probes is None else settings.host_tier_after
        self.tiny_size = 4096
        # buffers of dead intermediates smaller than this are not reused: they cost little
        # memory, and reusing them would chain independent small ops through false
        # (write-after-read) dependencies that stop the planner from batching them
        self.reuse_min_bytes = settings.reuse_min_bytes
        # one-step calls replay a batched plan (runtime/planner.py) once a frame has been
        # replayed batch_after times, when it has batch_min_launches launches and batching
        # removes at least a quarter of them; None turns this off
        self.batch_after = settings.batch_after
        self.batch_min_launches = settings.batch_min_launches
        # a device Scan's inner function (set by ops/scan.py when it links the node): its
        # frames replay once a step, so a batched plan pays for any launch it saves
        self.loop_step = False
        # the steps of the run (``Executor.run``) whose step 0 the call now is, else 1:
        # the cost model (runtime/cost.py) weighs a step of a run, not a call
        self.run_steps = 1
