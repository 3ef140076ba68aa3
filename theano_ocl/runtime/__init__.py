"""The runtime: what runs a linked function on a device.

``plans``: the typed plans a frame is made of (``Launch`` with its declared ``Batch``,
``Enqueue``, ``Copy``, ``Upload``, ``Download``, ``HostStep``, ``Guard``, ``Check``);
``context``: what op families record into (``Frame``, ``PlanContext``) and the
capabilities families provide to it; ``memory``: transfers, the live functions and
``memory_info``; ``settings``: the settings of a function (arguments of ``OCLMode``);
``commit``: all-or-nothing updates (a call commits every update or none, Ctrl-C
included); ``host_tier``: Theano's own VM over a function's host values (tiny hot calls,
frames too big for the device); ``kernel_cache``: compiled programs on disk;
``faults``: the test hook that interrupts a call at each of its step boundaries;
``run_context``: what the runtime knows of one linked function (``RunContext``: device,
queue, settings, program, profiler, counters); ``frames``: frame keys, steady-state guards
and a function's ``FrameCache``; ``build``: a frame recorded from the program;
``executor``: the one executor (a pass, the checks, the commit, ``run(n)``); ``planner``:
batched plans.

``theano_ocl.vm.OCLFunction`` (Theano's ``Function.fn``) makes a function's ``RunContext``
and ``FrameCache`` and calls into the runtime; no module here imports it or calls it back.
"""
