"""The two-step API: take any compiled Theano function and run it on an OpenCL device.

    f = theano.function([x], y, updates=upd)          # any mode; pickles anywhere
    sim = theano_ocl.SimulatorOCL(f)                  # re-link f's optimized graph on a device
    sim(xv)                                           # one step, f's calling protocol
    probes = sim.run_steps(1000, inputs={'x': xs}, probes=['y'], probe_every=10)
    sim.add_method('g', g); sim.g(...)                # more functions, same device state

Re-linking takes the route of Theano's ``Function.copy``: a copy of ``f.maker.fgraph``
(already optimized; nothing is re-optimized) goes through ``FunctionMaker`` with an
:class:`~theano_ocl.mode.OCLMode`, and the new function's input containers are ``f``'s,
so shared variables are the same cells and their device copies (``shared.Resident``) are
shared with ``f`` and with every method. ``f`` itself is not touched.

``run_steps`` is the re-linked function's ``OCLFunction.run(n, ...)``, the one executor
(:mod:`theano_ocl.runtime.executor`): the device frame of one call replayed ``n`` times with
no host round trip, per-step inputs uploaded once (leading axis ``n``) and sliced per step,
probes gathered on the device and downloaded once. This module only turns names into
indices and checks the per-step arrays. See docs/simulator.md for when each view of the
state is current.
"""
import copy

import numpy as np
from theano import gof
from theano.compile import function_module as fm
from theano.compile.sharedvalue import SharedVariable

from .device import get_device, NoOpenCLPlatform
from .runtime import uploads
from .runtime.executor import RunStepsError


class SimulatorError(RunStepsError):
    """A request the simulator cannot honour (input, shape, method or probe mismatch)."""


def _relink(f, device):
    """A new Function computing ``f``'s optimized graph with the OCL linker, sharing
    ``f``'s input containers (shared variables) -- ``Function.copy``'s route."""
    from .mode import OCLMode
    maker = f.maker
    if not isinstance(maker, fm.FunctionMaker):
        raise TypeError('SimulatorOCL needs a compiled theano.function, got %r' % (f,))
    # an OCL function's settings go with it (the arguments its mode was given)
    from .linker import OCLLinker
    given = dict(maker.linker.settings) if isinstance(maker.linker, OCLLinker) else {}
    mode = OCLMode(device=device, **given)
    ins = [copy.copy(i) for i in maker.inputs]
    memo = gof.graph.clone_get_equiv(maker.fgraph.inputs, maker.fgraph.outputs)
    fg = gof.fg.FunctionGraph([memo[i] for i in maker.fgraph.inputs],
                              [memo[o] for o in maker.fgraph.outputs], clone=False)
    # the optimized graph may hold inplace ops: the DestroyHandler orders them after
    # every other reader of the value they overwrite (as std_fgraph does)
    fg.attach_feature(gof.destroyhandler.DestroyHandler())
    outs = [fm.SymbolicOutput(o) for o in fg.outputs[:len(maker.outputs)]]
    for o_ori, o_cpy in zip(maker.outputs, outs):
        o_cpy.borrow = o_ori.borrow
    update_i = len(outs)
    for i, var in zip(ins, fg.inputs):
        i.variable = var
        if i.update is not None:
            i.update = fg.outputs[update_i]
            update_i += 1
    if maker.return_none:
        outs = None
    elif maker.unpack_single:
        outs = outs[0]
    g = maker.__class__(inputs=ins, outputs=outs, fgraph=fg, mode=mode,
                        on_unused_input='ignore', function_builder=maker.function_builder,
                        accept_inplace=True, output_keys=maker.output_keys,
                        name=maker.name).create([i.value for i in ins])
    for in_ori, in_cpy, ori, cpy in zip(maker.inputs, g.maker.inputs, f.input_storage,
                                        g.input_storage):
        if not in_ori.mutable:
            cpy.data = ori.data
            in_cpy.value = in_ori.value
        container = g.finder.pop(in_cpy.variable, None)
        if container is not None:
            g.finder[in_ori.variable] = container
    g.trust_input = f.trust_input
    return g


def _shared_inputs(f):
    """(SharedVariable, Container) of every shared variable ``f`` reads or updates."""
    return [(i.variable, c) for i, c in zip(f.maker.inputs, f.input_storage)
            if isinstance(i.variable, SharedVariable)]


class Method(object):
    """One function re-linked on the simulator's device: callable like the original,
    and ``run_steps`` to run it many times with no host round trip."""

    def __init__(self, sim, name, f):
        self.sim = sim
        self.name = name
        self.original = f
        self.function = _relink(f, sim.device_spec)
        self.vm = self.function.fn   # the OCLFunction: run_steps is its run(n, ...)
        self.stats = {}
        self._fed = None             # [(index, In)] of the inputs fed per step

    def __call__(self, *args, **kwargs):
        return self.function(*args, **kwargs)

    # ----------------------------------------------------------------- names
    def _input_index(self, key):
        inputs = self.function.maker.inputs
        if isinstance(key, (int, np.integer)):
            if not 0 <= key < len(inputs) or isinstance(inputs[key].variable, SharedVariable):
                raise SimulatorError('%s: no input number %d (inputs: %s)' % (
                    self._what(), key, self._input_names()))
            return int(key)
        for i, inp in enumerate(inputs):
            if isinstance(inp.variable, SharedVariable):
                continue
            if key is inp.variable or (isinstance(key, str) and key == inp.name):
                return i
        orig = self.original.maker.inputs
        for i, inp in enumerate(orig):
            if key is inp.variable and not isinstance(inp.variable, SharedVariable):
                return i
        raise SimulatorError('%s: no input named %r (inputs: %s)' % (
            self._what(), key, self._input_names()))

    def _input_names(self):
        return ', '.join(repr(i.name) for i in self.function.maker.inputs
                         if not isinstance(i.variable, SharedVariable)) or 'none'

    def _what(self):
        return 'run_steps' if self.name is None else 'run_steps of method %r' % self.name

    def _output_index(self, key):
        maker = self.function.maker
        n = len(maker.outputs)
        if isinstance(key, (int, np.integer)):
            if not 0 <= key < n:
                raise SimulatorError('%s: probe %d: the function has %d outputs' % (
                    self._what(), key, n))
            return int(key)
        if maker.output_keys is not None and key in maker.output_keys:
            return list(maker.output_keys).index(key)
        for j, o in enumerate(self.original.maker.outputs):
            if key is o.variable or (isinstance(key, str) and o.variable.name == key):
                return j
        names = [o.variable.name for o in self.original.maker.outputs]
        raise SimulatorError('%s: no output %r to probe (outputs: %s)' % (
            self._what(), key, names))

    # ----------------------------------------------------------------- run_steps
    def run_steps(self, n, inputs=None, probes=None, probe_every=1, batch='auto', feed='copy'):
        """Run the function ``n`` times; updates apply every step; see SimulatorOCL.run_steps."""
        for name, value, low in (('n', n, 0), ('probe_every', probe_every, 1)):
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
                    or value < low:
                raise SimulatorError('%s: %s must be an integer >= %d, got %r' % (
                    self._what(), name, low, value))
        n, k = int(n), int(probe_every)
        if batch not in (True, False, 'auto'):
            raise SimulatorError("%s: batch must be True, False or 'auto', got %r" % (
                self._what(), batch))
        if feed not in ('copy', 'rebind', 'auto'):
            raise SimulatorError("%s: feed must be 'copy', 'rebind' or 'auto', got %r" % (
                self._what(), feed))
        maker = self.function.maker
        single = probes is not None and not isinstance(probes, (list, tuple))
        if probes is None:
            probe_idx = list(range(len(maker.outputs)))
        else:
            probe_idx = [self._output_index(p) for p in ([probes] if single else probes)]
        feeds = self._per_step_inputs(n, inputs)
        self.stats = {}
        results = self.function.fn.run(n, feeds=feeds, probes=probe_idx, probe_every=k,
                                       batch=batch, feed=feed, stats=self.stats,
                                       what=self._what(), error=SimulatorError,
                                       stacklevel=3)
        return results[0] if single else results

    def _per_step_inputs(self, n, inputs):
        """{input index: host array with leading axis n}, checked against the input types."""
        maker = self.function.maker
        given = {}
        if inputs is None:
            inputs = {}
        if isinstance(inputs, (list, tuple)):
            explicit = [i for i, inp in enumerate(maker.inputs)
                        if not isinstance(inp.variable, SharedVariable)]
            if len(inputs) > len(explicit):
                raise SimulatorError('%s: %d per-step inputs given, the function takes %d (%s)' % (
                    self._what(), len(inputs), len(explicit), self._input_names()))
            inputs = dict(zip(explicit, inputs))
        for key, value in inputs.items():
            i = self._input_index(key)
            given[i] = value
        out = {}
        prog = self.vm.program
        fed = self._fed
        if fed is None:       # (a simulator of thousands of shared variables: once)
            fed = self._fed = [(i, inp) for i, inp in enumerate(maker.inputs)
                               if not isinstance(inp.variable, SharedVariable)]
        for i, inp in fed:
            name = inp.name or 'input %d' % i
            if i not in given:
                cell = prog.input_cells[i]
                if inp.value is None or cell[0] is None:
                    raise SimulatorError('%s: input %r needs a value per step (an array with '
                                         'leading axis n=%d)' % (self._what(), name, n))
                given[i] = np.repeat(np.asarray(cell[0])[None], n, axis=0)
            t = inp.variable.type
            if not hasattr(t, 'ndim') or not hasattr(t, 'dtype'):
                raise SimulatorError('%s: input %r is a %s; run_steps feeds tensors only' % (
                    self._what(), name, type(t).__name__))
            arr = np.asarray(given[i])
            if arr.ndim != t.ndim + 1 or arr.shape[0] != n:
                raise SimulatorError(
                    '%s: input %r: expected an array of shape (n=%d, ...) with %d dimensions '
                    '(%d per step), got shape %s' % (self._what(), name, n, t.ndim + 1, t.ndim,
                                                      arr.shape))
            for d, b in enumerate(t.broadcastable):
                if b and arr.shape[d + 1] != 1:
                    raise SimulatorError('%s: input %r: dimension %d of each step is broadcastable '
                                         '(must be 1), got per-step shape %s' % (
                                             self._what(), name, d, arr.shape[1:]))
            if arr.dtype != np.dtype(t.dtype):
                if n:
                    try:
                        t.filter(arr[0], strict=False, allow_downcast=inp.allow_downcast)
                    except TypeError as e:
                        raise SimulatorError('%s: input %r: per-step values of dtype %s do not fit '
                                             'the input type %s (%s)' % (
                                                 self._what(), name, arr.dtype, t, e)) from None
                arr = arr.astype(t.dtype)
            if prog.input_kinds[i] != 'dev' and any(k == i for k, kind in prog.input_plan
                                                    if kind == 'meta'):
                if n and not all(np.array_equal(arr[0], a) for a in arr[1:]):
                    raise SimulatorError('%s: input %r decides shapes in the graph; its per-step '
                                         'values must not change between steps' % (self._what(), name))
            out[i] = arr
        return out


class SimulatorOCL(object):
    """Run a compiled Theano function (any mode) on an OpenCL device.

    ``SimulatorOCL(f, device=None)``: re-links ``f``'s optimized graph with the OCL linker
    (nothing is re-optimized); ``f`` keeps working, and both see the same shared
    variables. ``sim(*args, **kwargs)`` calls it like ``f``; ``sim.run_steps`` runs it many
    times on the device; ``sim.add_method(name, g)`` adds functions sharing the state.
    """

    def __init__(self, f, device=None, batch='auto'):
        if batch not in (True, False, 'auto'):
            raise SimulatorError("SimulatorOCL: batch must be True, False or 'auto', got %r"
                                 % (batch,))
        self.device_spec = device
        self.device = get_device(device)     # NoOpenCLPlatform when there is no OpenCL
        self.batch = batch
        self._methods = {}
        self._main = Method(self, None, f)
        self._shared = {}                    # name -> SharedVariable, for conflict checks
        self._objects = {}                   # id(container) -> SharedVariable
        self._register_shared(f, None)

    # ----------------------------------------------------------------- calls
    def __call__(self, *args, **kwargs):
        return self._main(*args, **kwargs)

    @property
    def function(self):
        """The re-linked Theano Function (OCL linker)."""
        return self._main.function

    @property
    def stats(self):
        """Facts about the last ``run_steps``: launches per step (batched and not), host steps."""
        return self._main.stats

    def run_steps(self, n, inputs=None, probes=None, probe_every=1, batch=None, feed='copy'):
        """Run the function ``n`` times on the device, updates applied every step.

        ``inputs``: per-step values, a dict (input name, index or variable -> array) or a
        list in the order of the function's inputs; each array has leading axis ``n`` and
        step ``i`` gets ``array[i]``. Inputs with a default value may be left out.
        ``probes``: output indices or names (default: every output); each is sampled after
        steps ``k-1, 2k-1, ...`` (``k = probe_every``) and returned as a host array with
        leading axis ``n // k``; a list for a list, one array for one probe.
        ``batch``: True / False / 'auto' (merge independent same-kernel launches where that
        lowers the launch count). ``feed``: 'copy' (a device copy of each step's slice into
        the frame's input buffer), 'rebind' (re-point the kernels at the slice) or 'auto'.
        After the call the shared variables hold the state after ``n`` steps (on the
        device; the host view is refreshed when read).
        """
        return self._main.run_steps(n, inputs=inputs, probes=probes, probe_every=probe_every,
                                    batch=self.batch if batch is None else batch, feed=feed)

    # ----------------------------------------------------------------- methods
    def add_method(self, name, g):
        """Add ``g`` (a compiled theano.function) as ``sim.<name>``, sharing device state.

        Shared variables are shared by object (the same container). A shared variable of
        ``g`` that has the name of one of the simulator's but is another object must agree
        with it in dtype and shape (it then stays a separate variable); else SimulatorError.
        """
        if not isinstance(name, str) or not name.isidentifier() or name.startswith('_'):
            raise SimulatorError('add_method: %r is not a usable method name' % (name,))
        if name in self._methods or hasattr(type(self), name) or name in self.__dict__:
            raise SimulatorError('add_method: the simulator already has an attribute %r' % name)
        self._check_shared(g, name)
        method = Method(self, name, g)
        self._methods[name] = method
        self._register_shared(g, name)
        return method

    def __getattr__(self, name):
        methods = self.__dict__.get('_methods')
        if methods is not None and name in methods:
            return methods[name]
        raise AttributeError('%r object has no attribute %r' % (type(self).__name__, name))

    def _register_shared(self, f, owner):
        for var, container in _shared_inputs(f):
            self._objects[id(container)] = var
            if var.name is not None:
                self._shared.setdefault(var.name, (var, container, owner))

    def _check_shared(self, g, method):
        for var, container in _shared_inputs(g):
            if id(container) in self._objects:
                continue             # the same variable: shared
            known = self._shared.get(var.name) if var.name is not None else None
            if known is None:
                continue
            other, ocont, owner = known
            mine = np.asarray(container.storage[0]) if container.storage[0] is not None else None
            theirs = _host_value(ocont)
            problems = []
            if var.type.dtype != other.type.dtype:
                problems.append('dtype %s, the simulator has %s' % (var.type.dtype, other.type.dtype))
            if mine is not None and theirs is not None and mine.shape != theirs.shape:
                problems.append('shape %s, the simulator has %s' % (mine.shape, theirs.shape))
            elif var.type.ndim != other.type.ndim:
                problems.append('%d dimensions, the simulator has %d' % (var.type.ndim, other.type.ndim))
            if problems:
                raise SimulatorError(
                    'add_method(%r): shared variable %r conflicts with the simulator\'s shared '
                    'variable of that name (%s, from %s): %s. Use the same shared variable object '
                    'to share state, or give it another name' % (
                        method, var.name, 'another object', 'the main function' if owner is None
                        else 'method %r' % owner, '; '.join(problems)))

    def methods(self):
        return dict(self._methods)

    def _all(self):
        return [self._main] + list(self._methods.values())

    # ----------------------------------------------------------------- coherence
    def _residents(self):
        seen = {}
        for m in self._all():
            for res in m.vm.program.residents.values():
                seen[id(res)] = res
        return list(seen.values())

    def sync_to_theano(self):
        """Download every device-newer shared value into its host cell (``get_value`` is then
        current without a transfer)."""
        self.device.queue.finish()
        for res in self._residents():
            res.sync_to_host()

    def sync_from_theano(self):
        """Upload every shared variable's host value now, discarding device-side values not
        yet synced (use after changing a host array in place, which the lazy coherence cannot
        see)."""
        dev = self.device
        batch = uploads.UploadBatch(dev, dev.queue)
        for res in self._residents():
            if res.dev is None:
                continue
            res.device_newer = False
            res.host_dirty = True
            res.ensure_device(res.dev, res.dev.queue, batch if res.dev is dev else None)
        batch.flush()
        dev.settle_uploads()

    # ----------------------------------------------------------------- pickling
    def __getstate__(self):
        self.sync_to_theano()
        return dict(version=1, device=self.device_spec, batch=self.batch,
                    main=self._main.original,
                    methods=[(name, m.original) for name, m in self._methods.items()])

    def __setstate__(self, state):
        try:
            self.__init__(state['main'], device=state['device'], batch=state['batch'])
        except NoOpenCLPlatform as e:
            raise NoOpenCLPlatform('a pickled SimulatorOCL needs an OpenCL device to be '
                                   'unpickled (its graph and state are in the pickle: the plain '
                                   'Theano functions). %s' % e) from None
        for name, g in state['methods']:
            self.add_method(name, g)


def _host_value(container):
    v = container.storage[0]
    from . import shared as shared_mod
    shared_mod.sync_cell(container.storage)
    v = container.storage[0]
    return None if v is None else np.asarray(v)


def optimize(f, device=None, **kwargs):
    """Functional alias: ``SimulatorOCL(f, device=device)``."""
    return SimulatorOCL(f, device=device, **kwargs)
