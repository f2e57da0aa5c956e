"""The one thread setting: ``set_num_threads``/``get_num_threads`` (PyTorch's names).

It governs every thread tracegrad's work runs on: the C tier's OpenMP kernels and the
NumPy tier's chunk threads (both read ``get_num_threads()`` at each call), and the BLAS
behind NumPy's matmul, bounded through threadpoolctl (the ``threads`` extra). Without
threadpoolctl, BLAS keeps its own setting and ``set_num_threads`` says so once.

The default is PyTorch's: $OMP_NUM_THREADS when set, else one thread per physical core
this process may use (its CPU affinity, and its cgroup's CPU quota in a container), so
that a job on a shared machine does not start more threads than it has cores. At import
BLAS is bounded to that default too, unless the user chose its threads ($OMP_NUM_THREADS,
$OPENBLAS_NUM_THREADS, $MKL_NUM_THREADS): hyperthreads and a quota's missing cores only
add contention to small matmuls (4,101 matmuls of 64x64 on a busy 2-core machine: 7.7 s
on BLAS's default threads, 0.04 s on one).
"""
import math
import os
import warnings

_BLAS_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _allowed_cpus():
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:      # not on Linux
        return list(range(os.cpu_count() or 1))


def _cores():
    """The CPUs this process may run on."""
    return len(_allowed_cpus())


def _physical_cores(cpus):
    """How many distinct physical cores `cpus` are on (Linux sysfs), else len(cpus)."""
    cores = set()
    for cpu in cpus:
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology/"
        try:
            with open(topology + "core_id") as f, \
                    open(topology + "physical_package_id") as g:
                cores.add((g.read().strip(), f.read().strip()))
        except OSError:
            return len(cpus)
    return len(cores) or len(cpus)


def _quota():
    """The cgroup's CPU quota in whole CPUs (rounded up), or None where there is none."""
    for path, read in (("/sys/fs/cgroup/cpu.max", lambda t: t.split()),
                       ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", None)):
        try:
            with open(path) as f:
                text = f.read()
            if read is not None:
                quota, period = read(text)
            else:
                with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
                    quota, period = text.strip(), f.read().strip()
            if quota in ("max", "-1"):
                return None
            return max(1, math.ceil(int(quota) / int(period)))
        except (OSError, ValueError):
            continue
    return None


def default_threads():
    """$OMP_NUM_THREADS if it is a positive integer, else the physical cores this process may
    use, capped by its CPU quota."""
    text = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if text.isdigit() and int(text) > 0:
        return int(text)
    n = _physical_cores(_allowed_cpus())
    quota = _quota()
    return max(1, min(n, quota) if quota else n)


_threads = default_threads()
_blas_limits = None     # threadpoolctl's limiter while tracegrad bounds BLAS
_noted = False


def set_num_threads(n):
    """Use at most ``n`` threads in compiled kernels and in NumPy's BLAS (n >= 1)."""
    global _threads
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n!r}")
    _threads = n
    _bound_blas(n, explicit=True)


def get_num_threads():
    """The number of threads compiled kernels and BLAS use."""
    return _threads


def max_threads():
    """The cores there are: how many threads' worth of buffers a kernel keeps."""
    return _cores()


def _bound_blas(n, explicit):
    """Limit the BLAS libraries loaded in this process to `n` threads (threadpoolctl)."""
    global _blas_limits, _noted
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        if explicit and not _noted:
            _noted = True
            warnings.warn("tracegrad.set_num_threads: threadpoolctl is not installed, so "
                          "NumPy's BLAS (matmul) keeps its own thread count; install it "
                          "with `pip install tracegrad[threads]`, or set OMP_NUM_THREADS "
                          "before starting Python.", RuntimeWarning, stacklevel=3)
        return
    # threadpool_limits applies at once and stays applied while its object lives
    _blas_limits = threadpool_limits(limits=n, user_api="blas")


if not any(os.environ.get(name) for name in _BLAS_ENV):
    try:
        _bound_blas(_threads, explicit=False)
    except Exception as e:  # noqa: BLE001 - a BLAS threadpoolctl cannot drive: left alone
        warnings.warn(f"tracegrad: could not bound BLAS threads ({type(e).__name__}: {e})",
                      RuntimeWarning, stacklevel=2)
