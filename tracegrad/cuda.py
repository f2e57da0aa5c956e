"""``tracegrad.cuda``: PyTorch's ``torch.cuda`` over CuPy.

Without CuPy or a GPU, the functions behave as in a CPU build of PyTorch:
``is_available()`` is False and ``device_count()`` 0, quietly; the memory
statistics read 0 and ``empty_cache()`` does nothing; ``manual_seed`` and
``manual_seed_all`` keep the seed for the generators made when a GPU is first
used; everything else (``current_device``, ``synchronize``, ``Event``,
``Stream``, ...) raises the clear error that asking for a cuda tensor raises.

Memory figures are those of CuPy's default memory pool, which holds every
array tracegrad puts on a GPU: ``memory_allocated`` is the bytes in use,
``memory_reserved`` the bytes the pool holds, and ``max_memory_allocated`` the
peak in use since the pool was first used (or since ``reset_peak_memory_stats``),
counted at each allocation.
"""
import contextlib

from . import dtypes
from .device import as_device, cupy, device_count, is_available, loaded_cupy, on_cupy_load

__all__ = ["is_available", "device_count", "current_device", "set_device", "device",
           "synchronize", "get_device_name", "get_device_capability", "get_device_properties",
           "memory_allocated", "max_memory_allocated", "memory_reserved",
           "max_memory_reserved", "reset_peak_memory_stats", "empty_cache", "manual_seed",
           "manual_seed_all", "seed", "seed_all", "initial_seed", "is_initialized", "Event",
           "Stream", "current_stream", "default_stream", "stream"]


def is_initialized():
    """Whether a GPU has been used through CuPy in this process."""
    return loaded_cupy() is not None


def _index(dev):
    """The device ordinal that ``dev`` (None: the current one, an int, "cuda:N", a device)
    names."""
    if dev is None:
        return cupy().cuda.runtime.getDevice()
    if isinstance(dev, int):
        return dev
    d = as_device(dev)
    if d.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {d}")
    return d.index


def current_device():
    return cupy().cuda.runtime.getDevice()


def set_device(dev):
    """Make ``dev`` the current device (a negative index is a no-op, as in PyTorch)."""
    idx = _index(dev)
    if idx >= 0:
        cupy().cuda.Device(idx).use()


class device:
    """``with tracegrad.cuda.device(i):`` makes ``i`` the current device inside the block."""

    def __init__(self, dev):
        self.idx = -1 if dev is None else _index(dev)
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            cp = cupy()
            self.prev = cp.cuda.runtime.getDevice()
            if self.prev != self.idx:
                cp.cuda.Device(self.idx).use()
        return self

    def __exit__(self, *exc):
        if self.prev >= 0 and self.prev != self.idx:
            cupy().cuda.Device(self.prev).use()
        return False


def synchronize(device=None):
    """Wait for every kernel queued on ``device`` (default: the current one)."""
    cp = cupy()
    with cp.cuda.Device(_index(device)):
        cp.cuda.Device().synchronize()


def get_device_properties(device=None):
    """The device's properties (CUDA's ``cudaDeviceProp`` names, as CuPy returns them),
    with PyTorch's ``name``, ``total_memory``, ``major``, ``minor`` and
    ``multi_processor_count`` attributes."""
    import types
    props = cupy().cuda.runtime.getDeviceProperties(_index(device))
    name = props["name"]
    return types.SimpleNamespace(
        name=name.decode() if isinstance(name, bytes) else name,
        total_memory=props["totalGlobalMem"], major=props["major"], minor=props["minor"],
        multi_processor_count=props["multiProcessorCount"], raw=props)


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    p = get_device_properties(device)
    return p.major, p.minor


# memory -------------------------------------------------------------------------------------

_peak = {}      # device ordinal -> the most bytes in use at once, counted at each allocation


def _track_peak(cp):
    """Count the peak in use at each allocation from CuPy's default pool (installed once,
    when tracegrad first loads CuPy; the pool stays CuPy's own)."""
    pool = cp.get_default_memory_pool()

    def malloc(nbytes):
        mem = pool.malloc(nbytes)
        dev = mem.device_id
        used = pool.used_bytes()
        if used > _peak.get(dev, 0):
            _peak[dev] = used
        return mem
    cp.cuda.set_allocator(malloc)


on_cupy_load(_track_peak)      # installed once, when tracegrad first loads CuPy


def _pool_stat(device, stat):
    if not is_available():
        return 0
    cp = cupy()
    with cp.cuda.Device(_index(device)):
        return stat(cp, cp.get_default_memory_pool())


def memory_allocated(device=None):
    """Bytes of GPU memory held by tensors (and other CuPy arrays) now; 0 without a GPU."""
    return _pool_stat(device, lambda cp, pool: pool.used_bytes())


def memory_reserved(device=None):
    """Bytes CuPy's pool holds from the driver, in use or cached; 0 without a GPU."""
    return _pool_stat(device, lambda cp, pool: pool.total_bytes())


def max_memory_allocated(device=None):
    """The most bytes in use at once since the first allocation or the last
    ``reset_peak_memory_stats``; 0 without a GPU."""
    return _pool_stat(device, lambda cp, pool: max(_peak.get(cp.cuda.runtime.getDevice(), 0),
                                                   pool.used_bytes()))


def max_memory_reserved(device=None):
    return memory_reserved(device)


def reset_peak_memory_stats(device=None):
    def reset(cp, pool):
        _peak[cp.cuda.runtime.getDevice()] = pool.used_bytes()
    _pool_stat(device, reset)


reset_max_memory_allocated = reset_peak_memory_stats


def empty_cache():
    """Give the cached, unused blocks of CuPy's pool back to the driver (nothing without a
    GPU, as in PyTorch)."""
    cp = loaded_cupy()
    if cp is not None:
        cp.get_default_memory_pool().free_all_blocks()


# random numbers -----------------------------------------------------------------------------

def _generators():
    from . import creation
    return creation


def manual_seed(seed):
    """Seed the current device's generator (kept until a GPU is first used, quietly without
    one, as PyTorch does)."""
    _generators().cuda_manual_seed(int(seed), all_devices=False)


def manual_seed_all(seed):
    _generators().cuda_manual_seed(int(seed), all_devices=True)


def seed():
    """Seed the current device's generator from fresh entropy."""
    _generators().cuda_manual_seed(None, all_devices=False)


def seed_all():
    _generators().cuda_manual_seed(None, all_devices=True)


def initial_seed():
    return _generators().cuda_generator(current_device()).initial_seed()


# events and streams -------------------------------------------------------------------------

class Event:
    """A CUDA event (``cupy.cuda.Event``): ``record()``, ``synchronize()``, ``query()``,
    ``wait()`` and ``elapsed_time(end)`` in milliseconds, as ``torch.cuda.Event``."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._event = cupy().cuda.Event(block=blocking, disable_timing=not enable_timing,
                                        interprocess=interprocess)

    def record(self, stream=None):
        self._event.record(None if stream is None else stream._stream)

    def wait(self, stream=None):
        (current_stream() if stream is None else stream).wait_event(self)

    def query(self):
        return self._event.done

    def synchronize(self):
        self._event.synchronize()

    def elapsed_time(self, end_event):
        return cupy().cuda.get_elapsed_time(self._event, end_event._event)

    @property
    def cuda_event(self):
        return self._event.ptr


class Stream:
    """A CUDA stream (``cupy.cuda.Stream``); ``with tracegrad.cuda.stream(s):`` makes kernels
    launch on it."""

    def __init__(self, device=None, priority=0, *, _stream=None):
        cp = cupy()
        if _stream is not None:
            self._stream = _stream
        else:
            with cp.cuda.Device(_index(device)):
                self._stream = cp.cuda.Stream(non_blocking=True, priority=priority)

    def synchronize(self):
        self._stream.synchronize()

    def query(self):
        return self._stream.done

    def wait_event(self, event):
        self._stream.wait_event(event._event)

    def wait_stream(self, stream):
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    @property
    def cuda_stream(self):
        return self._stream.ptr

    def __eq__(self, other):
        return isinstance(other, Stream) and self.cuda_stream == other.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)

    def __enter__(self):
        self._stream.__enter__()
        return self

    def __exit__(self, *exc):
        return self._stream.__exit__(*exc)


def current_stream(device=None):
    cp = cupy()
    with cp.cuda.Device(_index(device)):
        return Stream(_stream=cp.cuda.get_current_stream())


def default_stream(device=None):
    cp = cupy()
    with cp.cuda.Device(_index(device)):
        return Stream(_stream=cp.cuda.Stream.null)


@contextlib.contextmanager
def stream(s):
    """Kernels in the block launch on ``s`` (None: nothing changes)."""
    if s is None:
        yield
        return
    with s:
        yield


def is_bf16_supported(including_emulation=True):
    """False: tracegrad has no bfloat16 dtype, on a GPU or off one."""
    return False


def _amp_module():
    """``tracegrad.cuda.amp``: PyTorch's older spelling of ``tracegrad.amp`` for cuda
    (``GradScaler`` defaults to "cuda"; ``autocast(enabled, dtype, cache_enabled)``)."""
    import sys
    import types

    from . import amp as _amp

    class autocast(_amp.autocast):
        def __init__(self, enabled=True, dtype=dtypes.float16, cache_enabled=True):
            super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    class GradScaler(_amp.GradScaler):
        def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                     growth_interval=2000, enabled=True):
            super().__init__("cuda", init_scale, growth_factor, backoff_factor,
                             growth_interval, enabled)

    module = types.ModuleType(__name__ + ".amp", _amp_module.__doc__)
    module.autocast, module.GradScaler = autocast, GradScaler
    module.__all__ = ["autocast", "GradScaler"]
    sys.modules[module.__name__] = module
    return module


amp = _amp_module()
