"""The MPI world of one process: rank, size, local rank, the device a rank takes, and the
rule that an exception on one rank ends the whole job.

MPI comes through mpi4py (``mpirun -n K python train.py``). Without mpi4py, or in a process
not started by a launcher, the world is one rank (``size() == 1``) and every collective is
the identity, so a script written for K ranks also runs alone.

:func:`init` (called by every public function of :mod:`theano_ocl.distributed` before it
does anything) decides the device before theano_ocl creates one:

- ``$THEANO_OCL_DEVICE`` (or ``OCLMode(device=...)``) wins, as everywhere in theano_ocl;
- else where the host has GPUs, local rank k takes GPU k (modulo their number);
- else the CPU device (PoCL).

With n ranks on a host, rank k is bound to its share of the host's cores
(``os.sched_setaffinity``: on a CPU device, the cores its kernels run on; with GPUs, the
cores feeding its GPU), and PoCL starts as many threads as that share
(``POCL_MAX_PTHREAD_COUNT``), as does OpenBLAS (``OPENBLAS_NUM_THREADS``, where numpy has
not loaded it yet; the affinity bounds its threads otherwise).

With more than one rank, an uncaught exception on any rank calls ``MPI.COMM_WORLD.Abort``
(``sys.excepthook``): the launcher then ends every rank within seconds, where the others
would wait forever in their next collective. A rank that dies without finalizing MPI
(killed, ``os._exit``) makes the launcher end the job too (Open MPI and MPICH both do).
"""
import os
import sys
import threading

#: environment variables a launcher sets to a process's local rank and the host's rank count
#: (Open MPI, MPICH/Hydra, Slurm); read only where mpi4py's shared-memory split cannot be had
LOCAL_RANK_VARS = ('OMPI_COMM_WORLD_LOCAL_RANK', 'MPI_LOCALRANKID', 'SLURM_LOCALID')
LOCAL_SIZE_VARS = ('OMPI_COMM_WORLD_LOCAL_SIZE', 'MPI_LOCALNRANKS', 'SLURM_NTASKS_PER_NODE')


class _World(object):
    """What :func:`init` found: the communicator (None: one process, no MPI) and ranks."""

    def __init__(self, comm, rank, size, local_rank, local_size):
        self.comm = comm
        self.rank, self.size = rank, size
        self.local_rank, self.local_size = local_rank, local_size
        self.device_note = ''          # how init() chose the device, for info()


_world = None
_lock = threading.Lock()


def mpi():
    """mpi4py's ``MPI`` module, or None where mpi4py is not installed."""
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    return MPI


def _env_int(names, default):
    for n in names:
        v = os.environ.get(n)
        if v is not None and v.strip().isdigit():
            return int(v)
    return default


def _make_world():
    MPI = mpi()
    if MPI is None:
        return _World(None, 0, 1, 0, 1)
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    try:
        local = comm.Split_type(MPI.COMM_TYPE_SHARED, key=rank)
        local_rank, local_size = local.Get_rank(), local.Get_size()
        local.Free()
    except (NotImplementedError, AttributeError, MPI.Exception):
        local_rank = _env_int(LOCAL_RANK_VARS, 0)
        local_size = _env_int(LOCAL_SIZE_VARS, 1)
    return _World(comm, rank, size, local_rank, local_size)


def init(choose_device=True):
    """Set up this process's world once (later calls return it): ranks from MPI, the
    device by local rank (unless ``choose_device`` is False or ``$THEANO_OCL_DEVICE`` is
    set) and, with more than one rank, the abort-on-exception hook."""
    global _world
    with _lock:
        if _world is not None:
            return _world
        w = _make_world()
        if choose_device:
            w.device_note = _choose_device(w)
        if w.size > 1:
            _install_abort_hook(w.comm)
        _world = w
        return w


def rank():
    """This process's rank in ``MPI.COMM_WORLD`` (0 without MPI)."""
    return init().rank


def size():
    """The number of ranks (1 without MPI)."""
    return init().size


def local_rank():
    """This process's rank among the ranks of its host."""
    return init().local_rank


def local_size():
    """The number of ranks on this process's host."""
    return init().local_size


def comm():
    """``MPI.COMM_WORLD`` (None without mpi4py)."""
    return init().comm


def core_share(local_rank, local_size, cores):
    """The cores (a sorted list of ids from ``cores``) that local rank ``local_rank`` of
    ``local_size`` takes: consecutive blocks, the first ``len(cores) % local_size`` ranks one
    core more; every rank at least one core (ranks share cores when there are fewer)."""
    cores = sorted(cores)
    n = len(cores)
    if local_size <= 1 or n == 0:
        return cores
    if local_size >= n:
        return [cores[local_rank % n]]
    base, extra = divmod(n, local_size)
    start = local_rank * base + min(local_rank, extra)
    return cores[start:start + base + (1 if local_rank < extra else 0)]


def _choose_device(w):
    from .. import device
    if os.environ.get(device.ENV_VAR):
        return '%s=%r (set by the user)' % (device.ENV_VAR, os.environ[device.ENV_VAR])
    if device.opened_devices:
        return 'a device existed before theano_ocl.distributed.init(): left as chosen'
    share = None
    if w.local_size > 1 and hasattr(os, 'sched_getaffinity'):
        # before the OpenCL platform starts: PoCL sizes its thread pool when it loads, and
        # every thread started from now on (PoCL's, OpenBLAS's) inherits the affinity
        share = core_share(w.local_rank, w.local_size, os.sched_getaffinity(0))
        os.environ.setdefault('POCL_MAX_PTHREAD_COUNT', str(len(share)))
        os.environ.setdefault('OPENBLAS_NUM_THREADS', str(len(share)))
        os.sched_setaffinity(0, share)
        limit_blas_threads(len(share))
    try:
        devs = device.list_devices()
    except device.NoOpenCLPlatform:
        return 'no OpenCL platform'
    gpus = [(pi, di) for pi, di, _, d in devs if device.is_gpu_device(d)]
    if gpus:
        pi, di = gpus[w.local_rank % len(gpus)]
        os.environ[device.ENV_VAR] = '%d:%d' % (pi, di)
        return 'GPU %d:%d (local rank %d of %d GPUs%s)' % (
            pi, di, w.local_rank, len(gpus), '' if share is None else ', cores %s' % share)
    if share is not None:
        return 'CPU cores %s (local rank %d of %d)' % (share, w.local_rank, w.local_size)
    return 'the default device (one rank on this host)'


def limit_blas_threads(n):
    """Make every OpenBLAS already loaded (numpy's, scipy's wheels) use ``n`` threads: its
    threads started before the affinity was set may run on any core. Returns how many
    libraries were set."""
    import ctypes
    import glob
    import importlib.util
    done = 0
    for pkg in ('numpy', 'scipy'):
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            continue
        libs = os.path.join(os.path.dirname(list(spec.submodule_search_locations)[0]),
                            pkg + '.libs')
        for path in sorted(glob.glob(os.path.join(libs, '*openblas*.so*'))):
            try:
                lib = ctypes.CDLL(path, mode=getattr(os, 'RTLD_NOLOAD', 0) | ctypes.RTLD_GLOBAL)
            except OSError:
                continue          # not loaded yet: it reads OPENBLAS_NUM_THREADS when it is
            for name in ('openblas_set_num_threads', 'openblas_set_num_threads64_',
                         'scipy_openblas_set_num_threads'):
                fn = getattr(lib, name, None)
                if fn is not None:
                    fn.argtypes = [ctypes.c_int]
                    fn(int(n))
                    done += 1
                    break
    return done


def _install_abort_hook(comm):
    previous = sys.excepthook

    def abort_on_exception(etype, value, tb):
        try:
            previous(etype, value, tb)
            sys.stderr.write('[theano_ocl.distributed] rank %d raised %s: aborting every '
                             'rank (MPI.COMM_WORLD.Abort)\n' % (comm.Get_rank(), etype.__name__))
            sys.stderr.flush()
        finally:
            comm.Abort(1)
    sys.excepthook = abort_on_exception
    # an exception in another thread ends the job as well
    previous_thread = threading.excepthook

    def abort_on_thread_exception(args):
        try:
            previous_thread(args)
        finally:
            comm.Abort(1)
    threading.excepthook = abort_on_thread_exception


def abort(why):
    """End the job on every rank, saying ``why`` on this rank's standard error (an error no
    caller can be handed any more: MPI's own errors end the job the same way)."""
    w = init()
    sys.stderr.write('[theano_ocl.distributed] rank %d: %s: aborting every rank '
                     '(MPI.COMM_WORLD.Abort)\n' % (w.rank, why))
    sys.stderr.flush()
    if w.comm is None:          # one process: nothing to end but the caller's thread
        raise RuntimeError(why)
    w.comm.Abort(1)


def info():
    """One line saying this process's place: rank, size, local rank and the device note."""
    w = init()
    return 'rank %d of %d (local %d of %d): %s' % (w.rank, w.size, w.local_rank,
                                                   w.local_size, w.device_note or '-')
