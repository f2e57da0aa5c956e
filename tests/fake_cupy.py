"""A test double for CuPy, for machines without a GPU: NumPy arrays that live "on" a device.

It checks tracegrad's device bookkeeping, not CuPy: which arrays go to which device, that
ops keep their results there, that host and device arrays are never mixed silently, that
gradients travel back through ``ToCopyBackward0``, and what the profiler and
``tracegrad.cuda`` read from CuPy. Numbers are computed by NumPy, so nothing here says
that a CuPy kernel computes the right thing; the real-GPU tests do.

What it copies from CuPy is the part tracegrad relies on:

- ``FakeArray`` holds a NumPy array and a device ordinal (``a.device.id``). It has
  ``__cuda_array_interface__``, is not an ``np.ndarray``, and refuses implicit conversion
  (``np.asarray(a)`` raises ``TypeError``, as CuPy's does). NumPy functions and ufuncs
  called on it dispatch to the double (NEP 13/18), as they dispatch to CuPy; ufuncs that
  are not NumPy's own (``scipy.special.erf``) are refused, as CuPy refuses them, and so is a
  host ``np.ndarray`` operand next to a device one (CuPy's ``TypeError``).
- The module: ``asarray``/``asnumpy``, every NumPy function (``lib.stride_tricks``,
  ``linalg`` and ``random.default_rng`` too) computing on the device of its first array
  argument (or the current device), ``cuda.runtime`` (device count, current device,
  properties, pointer attributes), ``cuda.Device``, ``cuda.Event`` with host clocks
  (``get_elapsed_time`` returns real host milliseconds), ``cuda.Stream``, ``cuda.nvtx``
  (ranges are recorded in ``nvtx_log``), ``cuda.set_allocator``, and the default memory
  pool (``used_bytes`` counts the live device arrays).
- ``cupyx``: ``scatter_add``, ``scipy.special.erf``, ``empty_like_pinned``.

``install(monkeypatch, n_devices)`` puts the double in ``sys.modules`` and resets what
tracegrad cached about CuPy; ``monkeypatch`` undoes it all after the test.
"""
import functools
import sys
import time
import types
import weakref

import numpy as np


class _DeviceId:
    __slots__ = ("id",)

    def __init__(self, idx):
        self.id = idx

    def __repr__(self):
        return f"<CUDA Device {self.id}>"


def _unwrap(value, allow_host=False):
    """The NumPy value under ``value`` (recursively in lists and tuples); a host array next
    to device ones is CuPy's TypeError."""
    if type(value) is FakeArray:
        return value._a
    if type(value) is np.ndarray and not allow_host:
        raise TypeError(f"Unsupported type {type(value)}")
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_unwrap(v, allow_host) for v in value)
    return value


def _device_in(values, default):
    for v in values:
        if type(v) is FakeArray:
            return v._dev
        if isinstance(v, (list, tuple)):
            d = _device_in(v, None)
            if d is not None:
                return d
    return default


def _wrap(value, dev):
    """NumPy results as device arrays on ``dev`` (CuPy gives 0-d arrays, not scalars)."""
    if isinstance(value, np.ndarray):
        return FakeArray(value, dev)
    if isinstance(value, np.generic):
        return FakeArray(np.asarray(value), dev)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_wrap(v, dev) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_wrap(v, dev) for v in value)
    return value


class FakeArray:
    """A NumPy array on fake device ``_dev``."""
    __slots__ = ("_a", "_dev", "__weakref__")
    __array_priority__ = 100
    __hash__ = None

    def __init__(self, a, dev):
        self._a = a
        self._dev = dev
        STATE.pool.track(a, dev)

    # what CuPy arrays have and tracegrad reads ------------------------------------------
    @property
    def device(self):
        return _DeviceId(self._dev)

    @property
    def __cuda_array_interface__(self):
        return {"shape": self._a.shape, "typestr": self._a.dtype.str,
                "data": (self._a.ctypes.data, False), "version": 3, "strides": None}

    @property
    def data(self):
        return types.SimpleNamespace(ptr=self._a.ctypes.data, device_id=self._dev)

    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)

    def get(self):
        return self._a.copy()

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if getattr(np, ufunc.__name__, None) is not ufunc:
            return NotImplemented       # CuPy has no kernel for a foreign ufunc
        dev = _device_in(inputs, self._dev)
        ins = _unwrap(inputs)
        if "out" in kwargs:
            kwargs["out"] = _unwrap(kwargs["out"])
        return _wrap(getattr(ufunc, method)(*ins, **kwargs), dev)

    def __array_function__(self, func, types_, args, kwargs):
        dev = _device_in(args, self._dev)
        return _wrap(func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}), dev)

    def __getattr__(self, name):
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr, self._dev)

        @functools.wraps(attr)
        def method(*args, **kwargs):
            return _wrap(attr(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}),
                         self._dev)
        return method

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key, allow_host=True)], self._dev)

    def __setitem__(self, key, value):
        self._a[_unwrap(key, allow_host=True)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return self._a.__index__()

    def __repr__(self):
        return f"fake_cupy.array({self._a.tolist()!r}, device={self._dev})"


def _operator(name):
    def op(self, *args):
        ufunc_result = getattr(self._a, name)(*_unwrap(args))
        return _wrap(ufunc_result, _device_in(args, self._dev))
    op.__name__ = name
    return op


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv",
              "rfloordiv", "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand",
              "or", "ror", "xor", "rxor", "lshift", "rshift", "neg", "pos", "abs", "invert",
              "lt", "le", "gt", "ge", "eq", "ne", "iadd", "isub", "imul", "itruediv", "ipow",
              "iand", "ior", "ixor"):
    setattr(FakeArray, f"__{_name}__", _operator(f"__{_name}__"))


# the module ---------------------------------------------------------------------------------

class _Pool:
    """CuPy's default pool, as far as tracegrad reads it: bytes of the live device arrays."""

    def __init__(self):
        self.live = {}          # id of an owning NumPy array -> (device, nbytes)
        self.freed = 0

    def track(self, a, dev):
        owner = a
        while isinstance(owner.base, np.ndarray):
            owner = owner.base
        if id(owner) not in self.live and owner.base is None:
            self.live[id(owner)] = (dev, owner.nbytes)
            weakref.finalize(owner, self.live.pop, id(owner), None)

    def used_bytes(self):
        return sum(n for d, n in self.live.values() if d == STATE.current)

    def total_bytes(self):
        return self.used_bytes()

    def free_all_blocks(self):
        self.freed += 1

    def malloc(self, nbytes):
        raise AssertionError("the double allocates through NumPy")


class _State:
    def __init__(self, n_devices=1):
        self.n = n_devices
        self.current = 0
        self.pool = _Pool()
        self.nvtx_log = []
        self.allocator = None
        self.pinned = set()
        self.synchronized = 0


STATE = _State()


class _Device:
    def __init__(self, idx=None):
        self.id = STATE.current if idx is None else int(idx)
        self._prev = []

    def __enter__(self):
        if not 0 <= self.id < STATE.n:
            raise RuntimeError(f"cudaErrorInvalidDevice: invalid device ordinal ({self.id})")
        self._prev.append(STATE.current)
        STATE.current = self.id
        return self

    def __exit__(self, *exc):
        STATE.current = self._prev.pop()
        return False

    def use(self):
        STATE.current = self.id

    def synchronize(self):
        STATE.synchronized += 1


class _Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.t = None
        self.ptr = id(self)
        self.done = True

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass


def _elapsed(start, end):
    if start.t is None or end.t is None:
        raise RuntimeError("cudaErrorInvalidResourceHandle: an event was not recorded")
    return (end.t - start.t) * 1000.0


class _Stream:
    def __init__(self, null=False, non_blocking=False, priority=0):
        self.ptr = 0 if null else id(self)
        self.done = True

    def synchronize(self):
        pass

    def wait_event(self, event):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_Stream.null = _Stream(null=True)


class _Runtime:
    memoryTypeHost = 1

    @staticmethod
    def getDeviceCount():
        return STATE.n

    @staticmethod
    def getDevice():
        return STATE.current

    @staticmethod
    def setDevice(idx):
        STATE.current = idx

    @staticmethod
    def getDeviceProperties(idx):
        return {"name": b"Fake GPU (tests/fake_cupy.py)", "totalGlobalMem": 1 << 30,
                "major": 9, "minor": 0, "multiProcessorCount": 4}

    @staticmethod
    def pointerGetAttributes(ptr):
        return types.SimpleNamespace(type=1 if ptr in STATE.pinned else 0)


class _Nvtx:
    @staticmethod
    def RangePush(name, id_color=-1):
        STATE.nvtx_log.append(("push", name))

    @staticmethod
    def RangePop():
        STATE.nvtx_log.append(("pop", None))


def _set_allocator(fn=None):
    STATE.allocator = fn


class _BitGenerator:
    """``bit_generator._state``: a copy restores the NumPy stream under it."""

    def __init__(self, rng):
        self._rng = rng

    @property
    def _state(self):
        rng = self._rng

        class _Saved:
            def __init__(self, state):
                self.state = state

            def copy(self):
                return _Saved(dict(rng.bit_generator.state))

            def __setitem__(self, key, saved):
                rng.bit_generator.state = saved.state
        return _Saved(rng.bit_generator.state)


class _Generator:
    """``cupy.random.default_rng(seed)``: a NumPy stream apart from the CPU one's."""

    def __init__(self, seed):
        self._rng = np.random.default_rng([int(seed), 0xC0DA])
        self._dev = STATE.current
        self.bit_generator = _BitGenerator(self._rng)

    def random(self, size=None, dtype=np.float64):
        return FakeArray(np.asarray(self._rng.random(size, dtype=dtype)), self._dev)

    def standard_normal(self, size=None, dtype=np.float64):
        return FakeArray(np.asarray(self._rng.standard_normal(size, dtype=dtype)), self._dev)

    def integers(self, low, high=None, size=None, dtype=np.int64):
        return FakeArray(np.asarray(self._rng.integers(low, high, size, dtype=dtype)), self._dev)


class _Namespace(types.ModuleType):
    """A NumPy namespace whose functions take and give device arrays."""

    def __init__(self, name, np_module, extra=None):
        super().__init__(name)
        self._np = np_module
        for k, v in (extra or {}).items():
            setattr(self, k, v)

    def __getattr__(self, name):
        attr = getattr(self._np, name)
        if isinstance(attr, types.ModuleType):
            sub = _Namespace(f"{self.__name__}.{name}", attr)
            setattr(self, name, sub)
            return sub
        if isinstance(attr, type) or not callable(attr):
            return attr
        if isinstance(attr, np.ufunc):
            return _UFunc(attr)
        return _function(attr)


def _function(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        dev = _device_in(list(args) + list(kwargs.values()), STATE.current)
        return _wrap(fn(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}), dev)
    return call


class _UFunc:
    def __init__(self, ufunc):
        self._u = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return _function(self._u)(*args, **kwargs)

    def __getattr__(self, name):
        attr = getattr(self._u, name)
        return _function(attr) if callable(attr) else attr


def _asarray(a, dtype=None, order=None):
    if type(a) is FakeArray:
        if a._dev == STATE.current:
            return a if dtype is None or a.dtype == dtype else a.astype(dtype)
        return FakeArray(np.array(a._a, dtype=dtype), STATE.current)     # peer copy
    return FakeArray(np.array(a, dtype=dtype), STATE.current)


def _asnumpy(a, stream=None):
    return a._a.copy() if type(a) is FakeArray else np.asarray(a)


def _empty_like_pinned(a, dtype=None):
    out = np.empty_like(a, dtype=dtype)
    STATE.pinned.add(out.ctypes.data)
    return out


def _scatter_add(out, key, values):
    np.add.at(_unwrap(out), _unwrap(key, allow_host=True), _unwrap(values))


def make_modules():
    """Fresh ``cupy``, ``cupyx`` and their submodules, as ``sys.modules`` entries."""
    cuda = types.ModuleType("cupy.cuda")
    cuda.runtime = _Runtime()
    cuda.Device = _Device
    cuda.Event = _Event
    cuda.Stream = _Stream
    cuda.get_elapsed_time = _elapsed
    cuda.get_current_stream = lambda: _Stream.null
    cuda.set_allocator = _set_allocator
    cuda.get_device_id = lambda: STATE.current
    cuda.nvtx = _Nvtx()
    random = types.ModuleType("cupy.random")
    random.default_rng = _Generator
    cp = _Namespace("cupy", np, {
        "ndarray": FakeArray, "asarray": _asarray, "array": _asarray, "asnumpy": _asnumpy,
        "cuda": cuda, "random": random, "get_default_memory_pool": lambda: STATE.pool,
        "__fake__": True})
    cupyx = types.ModuleType("cupyx")
    cupyx.scatter_add = _scatter_add
    cupyx.empty_like_pinned = _empty_like_pinned
    cupyx.empty_pinned = lambda shape, dtype=np.float64: _empty_like_pinned(
        np.empty(shape, dtype))
    special = types.ModuleType("cupyx.scipy.special")
    from scipy import special as sp
    special.erf = _function(sp.erf)
    scipy = types.ModuleType("cupyx.scipy")
    scipy.special = special
    cupyx.scipy = scipy
    return {"cupy": cp, "cupy.cuda": cuda, "cupy.random": random, "cupyx": cupyx,
            "cupyx.scipy": scipy, "cupyx.scipy.special": special}


def install(monkeypatch, n_devices=1):
    """Use the double as CuPy for one test; returns its state (``nvtx_log``, ``pool``...)."""
    import tracegrad.creation as creation
    import tracegrad.cuda as tcuda
    device = sys.modules["tracegrad.device"]    # tracegrad.device is the device class
    state = _State(n_devices)
    monkeypatch.setattr(sys.modules[__name__], "STATE", state)
    for name, mod in make_modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(device, "_cupy", None)
    monkeypatch.setattr(creation, "_cuda_generators", {})
    monkeypatch.setattr(creation, "_cuda_seed", None)
    monkeypatch.setattr(tcuda, "_peak", {})
    return state
