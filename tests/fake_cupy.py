"""A test double for CuPy, for machines without a GPU: NumPy arrays that live "on" a device.

It checks tracegrad's device bookkeeping, not CuPy: which arrays go to which device, that
ops keep their results there, that host and device arrays are never mixed silently, that
gradients travel back through ``ToCopyBackward0``, and what the profiler and
``tracegrad.cuda`` read from CuPy. Numbers are computed by NumPy, so nothing here says
that a CuPy kernel computes the right thing; the real-GPU tests do.

What it copies from CuPy is the part tracegrad relies on:

- ``FakeArray`` holds a NumPy array and a device ordinal (``a.device.id``; ``a.device`` is a
  ``cuda.Device``, a context manager as CuPy's is). It has
  ``__cuda_array_interface__``, is not an ``np.ndarray``, and refuses implicit conversion
  (``np.asarray(a)`` raises ``TypeError``, as CuPy's does). NumPy functions and ufuncs
  called on it dispatch to the double (NEP 13/18), as they dispatch to CuPy; ufuncs that
  are not NumPy's own (``scipy.special.erf``) are refused, as CuPy refuses them, and so is a
  host ``np.ndarray`` operand next to a device one (CuPy's ``TypeError``).
- Ops run on the current device, as CuPy's do: a function, ufunc, operator or method whose
  device arrays live on another device raises CuPy's error for devices without peer access
  (the double assumes none, so code that forgets to make a tensor's device current fails
  here; with peer access a real GPU would only be slow). ``a.copy()`` copies onto the
  current device, as CuPy's does. A generator draws on its own device, which must be the
  current one (its state lives there).
- The module: ``asarray``/``asnumpy``, every NumPy function (``lib.stride_tricks``,
  ``linalg`` and ``random.default_rng`` too), ``cuda.runtime`` (device count, current device,
  properties, pointer attributes), ``cuda.Device``, ``cuda.Event`` with host clocks
  (``get_elapsed_time`` returns real host milliseconds), ``cuda.Stream``, ``cuda.nvtx``
  (ranges are recorded in ``nvtx_log``), ``cuda.set_allocator``, and the default memory
  pool (``used_bytes`` counts the live device arrays).
- ``RawModule(code=...)``, for the compiled CUDA tier: the source is built for the CPU by
  ``cuda_emulation/emulator.py`` (each CUDA thread an OS thread), loaded once per device
  (CuPy compiles a module for each device it is used on), and its kernels
  (``get_function``, called as ``kernel(grid, block, args)``) take device arrays on the
  current device and NumPy scalars. A host ``np.ndarray`` argument is CuPy's ``TypeError``;
  an array of another device, which a GPU without peer access would fault on, is a
  ``RuntimeError`` here. ``STATE.launches`` records ``(kernel, device)`` per launch.
- ``cupyx``: ``scatter_add``, ``scatter_max``, ``scatter_min``, ``scipy.special`` and
  ``scipy.linalg`` (SciPy's, on device arrays), ``empty_like_pinned``.
- Where CuPy 14 differs from NumPy in what tracegrad called, as a real GPU showed
  (``_cupy_refuses``): no ``indices(sparse=)``, no ``linalg.matrix_rank(hermitian=)``,
  ``argmax``/``argmin`` with an axis on a 0-d array, ``min(out=)`` (CuPy hands ``out`` to
  CUB as the dtype); float ``floor_divide`` and ``remainder`` through floor(a / b), inexact
  for large quotients, as CuPy's are; ``clip`` by comparisons (a NaN bound ignored);
  ``scatter_max``/``scatter_min`` on float64 rounding the result through float32.

``install(monkeypatch, n_devices)`` puts the double in ``sys.modules`` and resets what
tracegrad cached about CuPy; ``monkeypatch`` undoes it all after the test.
"""
import contextlib
import functools
import sys
import time
import types
import weakref

import numpy as np


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


def _index(key):
    """An index key's NumPy value; a host array or list in it is copied to the device by
    CuPy (a host-to-device transfer, refused while a stream records)."""
    parts = key if type(key) is tuple else (key,)
    if any(type(k) in (np.ndarray, list) for k in parts):
        _no_transfer("H2D")
    return _unwrap(key, allow_host=True)


def _computing_device(values):
    """The current device, where CuPy runs an op; a device array of another device among
    ``values`` (recursively in lists and tuples) is CuPy's error where the devices have no
    peer access, which the double assumes."""
    for v in values:
        if type(v) is FakeArray:
            if v._dev != STATE.current:
                raise ValueError(f"The device where the array resides ({v._dev}) is different "
                                 f"from the current device ({STATE.current}). Peer access is "
                                 "unavailable between these devices.")
        elif isinstance(v, (list, tuple)):
            _computing_device(v)
    return STATE.current


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
        return _Device(self._dev)

    def copy(self, order="C"):
        """CuPy's ``copy``: a copy on the current device, from any device."""
        return FakeArray(self._a.copy(order), STATE.current)

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

    def get(self, stream=None):
        _no_transfer("D2H")
        return self._a.copy()

    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use "
                        "`.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if getattr(np, ufunc.__name__, None) is not ufunc:
            return NotImplemented       # CuPy has no kernel for a foreign ufunc
        dev = _computing_device(inputs + tuple(kwargs.values()))
        ins = _unwrap(inputs)
        if "out" in kwargs:
            kwargs["out"] = _unwrap(kwargs["out"])
        return _wrap(getattr(ufunc, method)(*ins, **kwargs), dev)

    def __array_function__(self, func, types_, args, kwargs):
        dev = _computing_device((self, args, tuple(kwargs.values())))
        return _wrap(func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}), dev)

    def __getattr__(self, name):
        if name.startswith("__array_"):     # NumPy would read the host memory through these
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr, self._dev)

        @functools.wraps(attr)
        def method(*args, **kwargs):
            _cupy_refuses(name, (self,) + args, kwargs)
            dev = _computing_device((self, args, tuple(kwargs.values())))
            return _wrap(attr(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}),
                         dev)
        return method

    def __getitem__(self, key):
        return _wrap(self._a[_index(key)], self._dev)

    def __setitem__(self, key, value):
        self._a[_index(key)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __bool__(self):
        _no_transfer("D2H")
        return bool(self._a)

    def __float__(self):
        _no_transfer("D2H")
        return float(self._a)

    def __int__(self):
        _no_transfer("D2H")
        return int(self._a)

    def __index__(self):
        return self._a.__index__()

    def __repr__(self):
        return f"fake_cupy.array({self._a.tolist()!r}, device={self._dev})"


def _operator(name):
    def op(self, *args):
        dev = _computing_device((self,) + args)
        return _wrap(getattr(self._a, name)(*_unwrap(args)), dev)
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

    def malloc(self, nbytes):   # (a graph's own pool: the double's arrays are NumPy's)
        return None

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
        self.launches = []      # (kernel name, device) of each RawModule kernel launch
        self.capturing = False  # a stream records a CUDA graph: no host transfers
        self.record_eagerly = False     # see _Stream.begin_capture


def _no_transfer(kind):
    """CuPy's refusal of a host transfer while a stream records a graph."""
    if STATE.capturing:
        raise RuntimeError(f"the current stream is capturing, so {kind} transfers are "
                           "disallowed")


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

    def __repr__(self):
        return f"<CUDA Device {self.id}>"

    def synchronize(self):
        STATE.synchronized += 1


class _Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.t = None
        self.ptr = id(self)
        self.done = True

    def record(self, stream=None):
        self.t = time.perf_counter()
        self.device = STATE.current     # an event belongs to the current device's stream

    def synchronize(self):
        pass


def _elapsed(start, end):
    if start.t is None or end.t is None or start.device != end.device:
        raise RuntimeError("cudaErrorInvalidResourceHandle: an event was not recorded, or "
                           "the two were recorded on different devices")
    return (end.t - start.t) * 1000.0


class _Stream:
    def __init__(self, null=False, non_blocking=False, priority=0):
        self.ptr = 0 if null else id(self)
        self.done = True

    def synchronize(self):
        pass

    def begin_capture(self):
        """Recording a graph: the double has none to replay, so it refuses at once; with
        ``STATE.record_eagerly`` (a test that looks for host transfers) it runs the recorded
        work eagerly, refusing host transfers as CuPy does, until ``end_capture`` refuses."""
        if not STATE.record_eagerly:
            raise RuntimeError("the CuPy double records no graph to replay")
        STATE.capturing = True

    def end_capture(self):
        STATE.capturing = False
        raise RuntimeError("the CuPy double records no graph to replay")

    def is_capturing(self):
        return STATE.capturing

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

    def _drawn(self, a):
        """``a`` on the generator's device, which must be the current one (its state is
        there, and its kernels run on the current device)."""
        _computing_device([FakeArray(np.empty(0), self._dev)])
        return FakeArray(np.asarray(a), self._dev)

    def random(self, size=None, dtype=np.float64):
        return self._drawn(self._rng.random(size, dtype=dtype))

    def standard_normal(self, size=None, dtype=np.float64):
        return self._drawn(self._rng.standard_normal(size, dtype=dtype))

    def integers(self, low, high=None, size=None, dtype=np.int64):
        return self._drawn(self._rng.integers(low, high, size, dtype=dtype))


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
        return _function(attr, f"{self.__name__}.{name}")


def _function(fn, name=None):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        _cupy_refuses(name or fn.__name__, args, kwargs)
        dev = _computing_device((args, tuple(kwargs.values())))
        return _wrap(fn(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}), dev)
    return call


def _cupy_refuses(name, args, kwargs):
    """Where CuPy 14 differs from NumPy, as a real GPU showed: raise as CuPy does."""
    if name in ("item", "tolist"):
        _no_transfer("D2H")
    def refuse(kw):
        raise TypeError(f"{name.rsplit('.', 1)[-1]}() got an unexpected keyword argument {kw!r}")
    if name in ("indices", "cupy.indices") and "sparse" in kwargs:
        refuse("sparse")
    if name in ("matrix_rank", "cupy.linalg.matrix_rank") and "hermitian" in kwargs:
        refuse("hermitian")
    if name in ("min", "amin", "cupy.min", "cupy.amin") and kwargs.get("out") is not None:
        # CuPy passes out= on to its CUB reduction as the dtype, and fails comparing it
        raise TypeError("operand type(s) all returned NotImplemented from __array_ufunc__"
                        "(<ufunc 'equal'>, ...): min(out=) on CuPy")
    if name.rsplit(".", 1)[-1] == "astype" and len(args) > 1 and np.dtype(args[1]) == np.longdouble:
        raise ValueError(f"Unsupported dtype {np.dtype(np.longdouble).name}")
    if name == "cupyx.scipy.special.polygamma" and args and type(args[0]) is not FakeArray:
        # CuPy's polygamma computes where(n == 0, ...), which needs an array n
        raise AttributeError("'bool' object has no attribute 'astype'")
    if name.rsplit(".", 1)[-1] in ("argmax", "argmin") and args:
        a, axis = args[0], kwargs.get("axis", args[1] if len(args) > 1 else None)
        if getattr(a, "ndim", None) == 0 and axis is not None:
            raise RuntimeError(f"axis {axis} is out of bounds for array of dimension 0")


class _UFunc:
    def __init__(self, ufunc):
        self._u = ufunc
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return _function(self._u)(*args, **kwargs)

    def __getattr__(self, name):
        attr = getattr(self._u, name)
        if name == "accumulate" and self.__name__ not in ("add", "multiply"):
            def refused(*args, **kwargs):
                raise NotImplementedError(f"`cupy_{self.__name__}.accumulate` is not "
                                          "supported yet")
            return refused
        return _function(attr) if callable(attr) else attr


def _inexact(name, exact):
    """CuPy's float ``floor_divide`` and ``remainder``, through floor(a / b) (not exact where
    the quotient is large: 1.0 // 0.001 is 1000 there, -1e20 % 501 is -6400)."""
    def call(a, b, **kwargs):
        if np.result_type(a, b).kind != "f":
            return exact(a, b, **kwargs)
        with np.errstate(all="ignore"):
            q = np.floor(np.true_divide(a, b))
            return q if name == "floor_divide" else np.subtract(a, np.multiply(b, q))
    call.__name__ = name
    return _function(call)


def _clip(a, a_min=None, a_max=None, out=None):
    """CuPy's clip: comparisons, so a NaN bound is ignored (NumPy's makes NaN)."""
    r = a if a_min is None else np.where(a < a_min, a_min, a)
    r = r if a_max is None else np.where(r > a_max, a_max, r)
    if out is None:
        return r.astype(np.result_type(a, *(b for b in (a_min, a_max) if b is not None)))
    np.copyto(out, r, casting="unsafe")
    return out


def _asarray(a, dtype=None, order=None):
    # CuPy's asarray hands back a device array as it is, on whatever device holds it: only
    # ndarray.copy() (and cupy.array) copy onto the current device
    if type(a) is FakeArray:
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    _no_transfer("H2D")
    return FakeArray(np.array(a, dtype=dtype), STATE.current)


def _array(a, dtype=None, copy=True, order=None):
    if type(a) is FakeArray and copy:
        return FakeArray(np.array(a._a, dtype=dtype), STATE.current)     # onto the current one
    return _asarray(a, dtype)


def _asnumpy(a, stream=None):
    if type(a) is FakeArray:
        _no_transfer("D2H")
    return a._a.copy() if type(a) is FakeArray else np.asarray(a)


def _concatenate(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    """CuPy's concatenate: more than 8 arrays of one dtype, under 2 MiB each on average, are
    joined by one kernel that reads a table of their addresses, made on the host and copied
    over (a host-to-device transfer, refused while a stream records)."""
    arrays = list(arrays)
    if len(arrays) > 8 and dtype is None:
        kind = {a.dtype for a in arrays}
        if len(kind) == 1 and sum(a.nbytes for a in arrays) < 2 * 1024 * 1024 * len(arrays):
            _no_transfer("H2D")
    _computing_device(arrays)
    got = np.concatenate(_unwrap(arrays), axis=axis, dtype=dtype, casting=casting)
    if out is None:
        return FakeArray(got, STATE.current)
    out._a[...] = got
    return out


def _stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    """CuPy's stack: concatenate of the arrays given an axis (so the same table)."""
    arrays = [a[(slice(None),) * (axis % (a.ndim + 1)) + (None,)] for a in arrays]
    return _concatenate(arrays, axis=axis, out=out, dtype=dtype, casting=casting)


def _empty_like_pinned(a, dtype=None):
    out = np.empty_like(a, dtype=dtype)
    STATE.pinned.add(out.ctypes.data)
    return out


def _scatter_add(out, key, values):
    np.add.at(_unwrap(out), _index(key), _unwrap(values))


def _scatter_extreme(ufunc, out, key, values):
    """As CuPy 14's ``scatter_max``/``scatter_min`` were seen to do on an H200: float64
    values come back rounded through float32."""
    target = _unwrap(out)
    ufunc.at(target, _index(key), _unwrap(values))
    if target.dtype == np.float64:
        target[...] = target.astype(np.float32)


def _scatter_max(out, key, values):
    _scatter_extreme(np.maximum, out, key, values)


def _scatter_min(out, key, values):
    _scatter_extreme(np.minimum, out, key, values)


class _RawModule:
    """``cupy.RawModule(code=...)`` on the emulation: built by g++ for each device it is
    used on, as CuPy compiles and loads a module per device (see the module docstring)."""

    def __init__(self, *, code, options=(), **_):
        self.code, self.options = code, options
        self.loaded = {}        # device -> emulator.EmuRawModule

    def on_current_device(self):
        from cuda_emulation import emulator
        module = self.loaded.get(STATE.current)
        if module is None:
            module = self.loaded[STATE.current] = emulator.EmuRawModule(self.code, self.options)
        return module

    def get_function(self, name):
        self.on_current_device().get_function(name)     # CuPy loads the kernel here
        return _RawKernel(self, name)


class _RawKernel:
    """A kernel of a ``_RawModule``: it runs on the current device, as CuPy's does."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, grid, block, args, shared_mem=0):
        arrays = []
        for a in args:
            if type(a) is FakeArray:
                if a._dev != STATE.current:
                    raise RuntimeError(f"cudaErrorIllegalAddress: kernel {self.name} launched on "
                                       f"device {STATE.current} was given an array of device "
                                       f"{a._dev}")
                a = a._a
            elif not isinstance(a, (np.generic, int, float, bool)):
                raise TypeError(f"Unsupported type {type(a)}")
            arrays.append(a)
        STATE.launches.append((self.name, STATE.current))
        self.module.on_current_device().get_function(self.name)(grid, block, arrays, shared_mem)


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
    cuda.MemoryPool = _Pool
    cuda.using_allocator = lambda allocator=None: contextlib.nullcontext()
    cuda.get_device_id = lambda: STATE.current
    cuda.nvtx = _Nvtx()
    random = types.ModuleType("cupy.random")
    random.default_rng = _Generator
    cp = _Namespace("cupy", np, {
        "ndarray": FakeArray, "asarray": _asarray, "array": _array, "asnumpy": _asnumpy,
        "cuda": cuda, "random": random, "get_default_memory_pool": lambda: STATE.pool,
        "RawModule": _RawModule,
        "floor_divide": _inexact("floor_divide", np.floor_divide),
        "remainder": _inexact("remainder", np.remainder), "clip": _function(_clip),
        "concatenate": _concatenate, "stack": _stack,
        "__fake__": True})
    cupyx = types.ModuleType("cupyx")
    cupyx.scatter_add, cupyx.scatter_max, cupyx.scatter_min = (_scatter_add, _scatter_max,
                                                                 _scatter_min)
    cupyx.empty_like_pinned = _empty_like_pinned
    cupyx.empty_pinned = lambda shape, dtype=np.float64: _empty_like_pinned(
        np.empty(shape, dtype))
    from scipy import linalg as sl, special as sp
    special = _Namespace("cupyx.scipy.special", sp)     # SciPy's functions on device arrays
    linalg = _Namespace("cupyx.scipy.linalg", sl)
    scipy = types.ModuleType("cupyx.scipy")
    scipy.special, scipy.linalg = special, linalg
    cupyx.scipy = scipy
    return {"cupy": cp, "cupy.cuda": cuda, "cupy.random": random, "cupyx": cupyx,
            "cupyx.scipy": scipy, "cupyx.scipy.special": special,
            "cupyx.scipy.linalg": linalg}


def install(monkeypatch, n_devices=1):
    """Use the double as CuPy for one test; returns its state (``nvtx_log``, ``pool``...)."""
    import tracegrad.creation as creation
    import tracegrad.cuda as tcuda
    device = sys.modules["tracegrad.device"]    # tracegrad.device is the device class
    state = _State(n_devices)
    monkeypatch.setattr(sys.modules[__name__], "STATE", state)
    for name, mod in make_modules().items():
        monkeypatch.setitem(sys.modules, name, mod)
    # CuPy's own cuBLAS bindings would take the double's stream handles for real ones (on a
    # machine with a GPU, a crash): with the double they are not there
    for name in [m for m in sys.modules if m == "cupy_backends"
                 or m.startswith("cupy_backends.")] + ["cupy_backends"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(device, "_cupy", None)
    monkeypatch.setattr(creation, "_cuda_generators", {})
    monkeypatch.setattr(creation, "_cuda_seed", None)
    monkeypatch.setattr(tcuda, "_peak", {})
    return state
