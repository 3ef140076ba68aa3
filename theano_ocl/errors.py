"""The error types theano_ocl raises beyond Python's own (MemoryError, TypeError, ...)."""


class KernelBuildError(RuntimeError):
    """An OpenCL program failed to build: carries the numbered source and the build log."""

    def __init__(self, source, log, device=None):
        self.source = source
        self.log = log
        self.device = device
        numbered = '\n'.join('%4d | %s' % (i + 1, line)
                             for i, line in enumerate(source.splitlines()))
        where = (' for %s' % device.name) if device is not None else ''
        super(KernelBuildError, self).__init__(
            "OpenCL kernel failed to build%s.\n--- generated source ---\n%s\n"
            "--- build log ---\n%s" % (where, numbered, log))


class NoDeviceImplementation(NotImplementedError):
    """An op family cannot run this node on this device; the linker falls back to the host.

    The message is the reason shown by ``theano_ocl.report``.
    """


class SettingError(ValueError):
    """A setting's value is not one it takes (``runtime.settings``): the message names the
    mode's argument or the environment variable, the value and the values it takes."""
