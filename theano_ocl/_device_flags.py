"""Theano's device flags, taken over from its gpuarray back-end.

Theano 1.0.5 imports ``theano.gpuarray`` (and logs "pygpu was configured but could not be
imported") whenever its ``device``, ``init_gpu_device`` or ``contexts`` flag names an
``opencl*`` or ``cuda*`` device. Scripts written for gpuarray carry
``THEANO_FLAGS=device=opencl0:0``; with theano_ocl that device is theano_ocl's:

* :func:`claim` wraps a flag's filter (the start-up hook calls it while Theano defines the
  flag): an OpenCL device, and a CUDA one when pygpu is not installed, is recorded here
  and reads ``cpu`` / ``''`` to Theano, so Theano never imports gpuarray for it; a CUDA
  one warns how to pick an NVIDIA GPU through OpenCL;
* :func:`moves_computation` tells the hook to make ``'ocl'`` the default linker, since
  ``device=`` and ``contexts=`` moved computations to the device with gpuarray;
* :func:`theano_device_flags` is what :mod:`theano_ocl.device` reads.

Like ``_startup.py`` this module runs during Theano's import, loaded by file before the
package may be importable: standard library only.
"""
import importlib.util
import os
import sys
import warnings

#: the Theano flags that name a device, in the order theano_ocl takes them
DEVICE_FLAGS = ('device', 'init_gpu_device', 'contexts')

#: flag -> the value Theano read, for the flags theano_ocl took over (their config value
#: became 'cpu' or '', so that Theano does not import its gpuarray back-end for them)
_taken = {}

CUDA_HINT = ("Theano flag %s=%r names Theano's CUDA back-end (pygpu), which is not "
             "installed. theano_ocl reaches NVIDIA GPUs through NVIDIA's OpenCL driver: "
             "pick one with device=openclP:D, THEANO_OCL_DEVICE=P:D (or =gpu) or "
             "OCLMode(device='P:D'); python -m theano_ocl info lists P:D. Theano goes on "
             "with device=cpu")


def context_devices(value):
    """The device names of a ``contexts`` map (``'a->opencl0:0;b->cuda1'``)."""
    return [part.split('->', 1)[1].strip() for part in value.split(';') if '->' in part]


def _flag_devices(name, value):
    return context_devices(value) if name == 'contexts' else [value.strip()]


def _pygpu_findable():
    try:
        return importlib.util.find_spec('pygpu') is not None
    except (ImportError, ValueError):
        return False


def claim(name, param):
    """Wrap the filter of flag ``name`` so that an OpenCL device (``openclP:D``) becomes
    theano_ocl's and, without pygpu, a CUDA one a warning that says how to pick an NVIDIA
    GPU; both read as ``cpu`` / ``''`` to Theano (no gpuarray import, no pygpu error)."""
    orig_filter = param.filter

    def filter_device(val):
        val = orig_filter(val) if orig_filter is not None else val
        if not isinstance(val, str):
            return val
        devs = _flag_devices(name, val)
        cuda = [d for d in devs if d.startswith('cuda')]
        if not devs or not all(d.startswith('opencl') or d.startswith('cuda') for d in devs) \
                or (cuda and _pygpu_findable()):
            return val
        _taken[name] = val
        if cuda:
            # located at the flag: a line of this file would say nothing
            warnings.warn_explicit('theano_ocl: ' + CUDA_HINT % (name, val), RuntimeWarning,
                                   'THEANO_FLAGS', 0)
        return 'cpu' if name == 'device' else ''
    filter_device.__wrapped__ = orig_filter
    param.filter = filter_device


def moves_computation():
    # Theano's device=opencl* and contexts= move computations to the device (its
    # init_gpu_device does not): with theano_ocl that is linker 'ocl'
    return any(d.startswith('opencl') for name, value in _taken.items()
               if name != 'init_gpu_device' for d in _flag_devices(name, value))


def theano_device_flags():
    """``[(flag, value)]``: the Theano flags naming an OpenCL device, in the order of
    ``DEVICE_FLAGS``: what the hook took over; else, when Theano was imported before it,
    what the live config holds; else, Theano not imported (``python -m theano_ocl info``),
    what ``$THEANO_FLAGS`` says (``.theanorc`` is read by Theano's import only)."""
    values = dict(_taken)
    theano = sys.modules.get('theano')
    config = getattr(theano, 'config', None)
    if theano is None:
        for item in os.environ.get('THEANO_FLAGS', '').split(','):
            name, _, value = item.partition('=')
            values.setdefault(name.strip(), value)
    for name in DEVICE_FLAGS:
        if name not in values and config is not None:
            values[name] = getattr(config, name, '')
    out = []
    for name in DEVICE_FLAGS:
        value = values.get(name) or ''
        if any(d.startswith('opencl') for d in _flag_devices(name, value)):
            out.append((name, value))
    return out
