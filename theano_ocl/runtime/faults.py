"""A test hook called at every step boundary of every executor.

Tests set ``hook`` (``with injected(fn): ...``) to a callable taking a short description of
the boundary (``'plan task 3'``, ``'step 5'``, ``'task 3 once'``, ``'commit 2'``,
``'run_steps step 4 commit'``); raising from it (a KeyboardInterrupt, say) stands for an
interrupt or a failure arriving exactly there. With no hook set the executors take their plain paths: they test ``hook``
once per call, never per step.
"""
import contextlib

hook = None


@contextlib.contextmanager
def injected(fn):
    """Call ``fn(where)`` at every boundary while the block runs."""
    global hook
    previous = hook
    hook = fn
    try:
        yield
    finally:
        hook = previous


def at(where):
    """A boundary: calls the hook when one is set (executors call this on their hooked path)."""
    h = hook
    if h is not None:
        h(where)
