"""What Theano's own code sees of a device Scan: ``op.fn``.

Theano's ``Scan.make_thunk`` sets ``op.fn`` to the inner function it compiles, and code that
inspects what the optimizer did inside a scan reads ``op.fn.maker.fgraph``; a device Scan
(``ops/scan.py``) sets it to its own inner function. Theano's ``make_thunk`` would reuse
that function for its Python loop, which it cannot serve (outputs on the device, no output
preallocation): it is made to compile its own instead.
"""
import functools

from theano.scan_module.scan_op import Scan


def expose_inner_function(op, fn):
    """``op.fn = fn``, as Theano's ``Scan.make_thunk`` sets it (code reads what the optimizer
    did inside a scan off ``op.fn.maker.fgraph``), unless Theano's own is there: a Theano
    thunk of this op (the plain function ``SimulatorOCL`` re-links) reads it at every call.
    Theano's ``make_thunk`` reuses whatever ``op.fn`` holds; this one cannot serve its loop
    (outputs on the device, no output preallocation): ``_theano_builds_its_own``."""
    _theano_builds_its_own()
    current = getattr(op, 'fn', None)
    if not current or _device_loop_function(current):
        op.fn = fn


def _device_loop_function(fn):
    """Whether ``fn`` is a device loop's inner function (its outputs stay on the device)."""
    linker = getattr(getattr(fn, 'maker', None), 'linker', None)
    return getattr(linker, 'output_mode', None) == 'device'


def _theano_builds_its_own():
    """Wrap ``Scan.make_thunk`` (once) so that it never reuses a device loop's inner
    function: it then compiles its own, as when ``op.fn`` is not set."""
    theano_make_thunk = Scan.make_thunk
    if getattr(theano_make_thunk, 'skips_device_loops', False):
        return

    @functools.wraps(theano_make_thunk)
    def make_thunk(self, node, *args, **kwargs):
        if _device_loop_function(self.__dict__.get('fn')):
            del self.fn
        return theano_make_thunk(self, node, *args, **kwargs)
    make_thunk.skips_device_loops = True
    Scan.make_thunk = make_thunk
