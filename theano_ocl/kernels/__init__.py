"""The kernel templates (one ``<family>.cl.mako`` per op family) and the one way to load them.

    src, name = kernels.render('elemwise.cl.mako', 'elemwise', ndim=2, ...)
    prg = dev.build(src)             # memoized per device and source
    ctx.launch(prg, name, gsize, lsize, args)

A kernel's name comes from its source: ``render`` renders the template with the
placeholder name, hashes the text and substitutes ``<prefix>_<digest>``, so the same
source gets the same name in every process (profiles, build logs and the on-disk program
cache agree) and two sources never share a name. Templates that define several kernels
derive them from ``${name}`` (``${name}_part``): each gets the same digest.

Rendered sources are memoized (bounded: a long-running process compiling thousands of
distinct functions must not keep every source it ever rendered). A family whose template
parameters cost more to build than its own arguments (dicts of operand facts, built per
launch while planning) memoizes its source function with ``@kernels.memoize`` on those
arguments, bounded the same way (pyopencl's ``context_dependent_memoize`` is the model; the
device memoizes programs per source, ``device.build``):

    @kernels.memoize
    def kernel_source(dtypes, ndim):            # hashable arguments
        return kernels.render('family.cl.mako', 'family', operands=[...], ndim=ndim)
"""
import collections
import functools
import hashlib
import os
import threading

from mako.lookup import TemplateLookup

DIR = os.path.dirname(os.path.abspath(__file__))
_LOOKUP = TemplateLookup([DIR])
_PLACEHOLDER = '__theano_ocl_kernel__'

#: rendered sources kept (least recently used dropped first)
MAX_RENDERED = 2048

_rendered = collections.OrderedDict()
_lock = threading.Lock()
_memoized = []


def template(filename):
    """The Mako template ``kernels/<filename>`` (compiled once per process by Mako)."""
    return _LOOKUP.get_template(filename)


def digest(text, n=12):
    return hashlib.sha1(text.encode('utf-8')).hexdigest()[:n]


def _freeze(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, set):
        return tuple(sorted(_freeze(v) for v in value))
    return value


def render(filename, prefix, **params):
    """(source, kernel name) of template ``filename`` rendered with ``params``; the template
    names its kernel(s) from ``${name}``. Memoized on (filename, prefix, params)."""
    key = (filename, prefix, _freeze(params))
    with _lock:
        hit = _rendered.get(key)
        if hit is not None:
            _rendered.move_to_end(key)
            return hit
    text = template(filename).render(name=_PLACEHOLDER, **params)
    name = '%s_%s' % (prefix, digest(text))
    hit = (text.replace(_PLACEHOLDER, name), name)
    with _lock:
        _rendered[key] = hit
        while len(_rendered) > MAX_RENDERED:
            _rendered.popitem(last=False)
    return hit


def memoize(fn):
    """``fn`` memoized on its (hashable) arguments, least recently used dropped past
    ``MAX_RENDERED``: for a family's source function, so that planning a launch of a kernel
    already rendered costs a dictionary look-up, not the building of its template
    parameters."""
    cached = functools.lru_cache(maxsize=MAX_RENDERED)(fn)
    _memoized.append(cached)
    return cached


def cache_info():
    return dict(rendered=len(_rendered), max_rendered=MAX_RENDERED,
                memoized=sum(f.cache_info().currsize for f in _memoized))
