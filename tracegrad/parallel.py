"""The one thread setting: ``set_num_threads``/``get_num_threads`` (PyTorch's names).

It governs every thread tracegrad starts itself: the C tier's OpenMP kernels and the
NumPy tier's chunk threads (BLAS inside NumPy keeps its own setting). The default is
the number of cores this process may run on.
"""
import os


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # not on Linux
        return os.cpu_count() or 1


_threads = _cores()


def set_num_threads(n):
    """Use at most ``n`` threads in compiled kernels (n >= 1)."""
    global _threads
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n!r}")
    _threads = n


def get_num_threads():
    """The number of threads compiled kernels use."""
    return _threads


def max_threads():
    """The cores there are: how many threads' worth of buffers a kernel keeps."""
    return _cores()
