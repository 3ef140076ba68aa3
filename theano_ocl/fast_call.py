"""Theano's ``Function.__call__`` for an OCL function, with the work that cannot matter for it
decided once.

Theano's call costs about 3 us of host time per call before and after its VM runs: it
resets a counter on every input container, runs an aliasing check over every pair of
inputs, walks the containers for missing or repeated inputs, and walks the outputs for
garbage collection and updates. For a one-launch function kept on the device (check1)
that is a third of the call. What of it applies to an OCL function is known when it is
first called:

- positional arguments fill the explicit inputs in order, and the shared variables'
  containers are implicit; an argument count other than the explicit inputs' (or any
  keyword argument, ``trust_input``, an explicit input with a default value) takes
  Theano's own call, which then raises or fills defaults as it always does;
- an argument is filtered exactly as Theano filters it; an argument its type refuses is
  passed to Theano's call, which raises Theano's error;
- two inputs can only be aliased (then Theano copies the later one) when their types
  are the same object: where no two inputs share a type, the check finds nothing and is
  skipped; where some do, those are checked as Theano checks them;
- the OCL VM applies updates itself and keeps no garbage to collect
  (``need_update_inputs`` and ``allow_gc`` are False): the call only clears the explicit
  inputs' cells and trims the outputs to the returned ones.

The time Theano accounts (its mode's ``fn_time`` and ``call_time``, the process total)
is accounted the same. A profiled function takes Theano's call (its profile counts
calls there).
"""
import copy
import time

import numpy as np
from numpy import asarray
from theano import gof
from theano.tensor.type import TensorType
from theano.compile import profiling


def fast_call(function, orig_call):
    """``call(args)`` for ``function`` (an OCL Theano Function), or False where Theano's
    own call must run every time."""
    fn = function.fn
    storage = function.input_storage
    if function.profile or function.output_keys is not None or \
            getattr(fn, 'need_update_inputs', True) or getattr(fn, 'allow_gc', True) or \
            any(refeed for _, refeed, _ in function.defaults):
        return False
    k = 0
    while k < len(storage) and storage[k].required:
        k += 1
    explicit = storage[:k]
    if any(c.implicit for c in explicit) or \
            any(c.required or not c.implicit for c in storage[k:]):
        return False
    filters = [(c.storage, c.type.filter, c.strict, c.allow_downcast, _exact_scalar(c))
               for c in explicit]
    cells = [c.storage for c in explicit]
    aliased = _aliasing_candidates(function)
    mode = function.maker.mode
    n_returned = function.n_returned_outputs

    def call(args):
        if len(args) != k:
            return orig_call(function, *args)
        t0 = time.time()
        try:
            for (cell, filt, strict, downcast, exact), arg in zip(filters, args):
                if exact is not None:
                    # a 0-d input given a number its dtype holds exactly: the 0-d array
                    # Theano's filter returns for it, without the filter's test
                    scalar, dtype, lo, hi, floats = exact
                    t = type(arg)
                    if t is scalar:
                        cell[0] = asarray(arg)
                        continue
                    if (t is int and lo <= arg <= hi) or (t is float and floats):
                        cell[0] = asarray(arg, dtype)
                        continue
                cell[0] = arg if arg is None else filt(arg, strict=strict,
                                                       allow_downcast=downcast)
        except Exception:
            return orig_call(function, *args)        # raises Theano's "Bad input ..." error
        if aliased:
            _unalias(storage, aliased)
        t0_fn = time.time()
        try:
            outputs = fn()
        except Exception:
            pos = fn.position_of_error
            gof.link.raise_with_op(node=fn.nodes[pos], thunk=fn.thunks[pos],
                                   storage_map=getattr(fn, 'storage_map', None))
        t1 = time.time()
        mode.fn_time += t1 - t0_fn
        for cell in cells:
            cell[0] = None
        if len(outputs) != n_returned:
            outputs = outputs[:n_returned]
        mode.call_time += t1 - t0
        profiling.total_fct_exec_time += t1 - t0
        if function.return_none:
            return None
        if function.unpack_single and len(outputs) == 1:
            return outputs[0]
        return outputs
    return call


def _exact_scalar(container):
    """For a 0-d TensorType input (not strict, no finiteness check): (the NumPy scalar type
    of its dtype, the dtype, the least and greatest Python int it holds exactly, whether
    it holds every Python float) -- the numbers Theano's filter turns into a 0-d array of
    the dtype with the same value, which its lossless-conversion test then accepts: a
    NumPy scalar of that very type, a Python int in that range, a Python float for a
    float64 input (any other number goes through the filter); else None."""
    t = container.type
    if type(t) is not TensorType or t.ndim != 0 or container.strict or \
            getattr(t, 'filter_checks_isfinite', False):
        return None
    dt = t.numpy_dtype
    if dt.kind in 'iu':
        info = np.iinfo(dt)
        lo, hi = int(info.min), int(info.max)
    elif dt.kind == 'f':
        hi = 2 ** (np.finfo(dt).nmant + 1)      # every int up to it is a value of dt
        lo = -hi
    else:
        lo, hi = 1, 0                           # (no Python int: the filter)
    return dt.type, dt.name, lo, hi, dt.name == 'float64'



def _aliasing_candidates(function):
    """The inputs Theano's aliasing check could find aliased: (index, type) of those whose
    type has ``may_share_memory`` and is the very type object of another such input."""
    if not getattr(function, '_check_for_aliased_inputs', True):
        return []
    typed = [(i, inp.variable.type) for i, inp in enumerate(function.maker.inputs)
             if hasattr(inp.variable.type, 'may_share_memory')]
    return [(i, t) for i, t in typed if sum(t is u for _, u in typed) > 1]


def _unalias(storage, candidates):
    """Theano's aliasing rule: inputs whose values may share memory with an earlier input of
    the same type form a group; every member but the first gets a copy of its value."""
    groups = []
    for i, t in candidates:
        v = storage[i].storage[0]
        for group in groups:
            if any(u is t and t.may_share_memory(storage[j].storage[0], v) for j, u in group):
                group.append((i, t))
                break
        else:
            groups.append([(i, t)])
    for group in groups:
        for j, _ in group[1:]:
            storage[j].storage[0] = copy.copy(storage[j].storage[0])
