"""Creation functions and the default random generators (``manual_seed``; the ``Generator``
class is in ``generator.py``)."""
import numbers

import numpy as np

from . import _hooks, dtypes
from .device import (cupy, device_of, device_or_default, loaded_cupy, on_device,
                     to_device, xp_for)
from .generator import Generator, _fresh_seed  # noqa: F401 - creation.Generator, as before
from .layouts import check_layout
from .ops.elementwise import where
from .symbolic import SymInt
from .tensor import Tensor


default_generator = Generator()
_cuda_generators = {}   # device ordinal -> its default Generator, made at first use
_cuda_seed = None       # the last seed for all cuda devices, for generators made later


def cuda_generator(index):
    """The default generator of ``cuda:index`` (``tracegrad.cuda.default_generators[i]``)."""
    gen = _cuda_generators.get(index)
    if gen is None:
        gen = _cuda_generators[index] = Generator(f"cuda:{index}")
        if _cuda_seed is not None:
            gen.manual_seed(_cuda_seed)
    return gen


def cuda_manual_seed(seed, all_devices):
    """``tracegrad.cuda.manual_seed(_all)``: no GPU is needed, the generator draws later.
    ``seed`` None: fresh entropy. One device: the current one (0 before CuPy is loaded)."""
    global _cuda_seed
    seed = _fresh_seed() if seed is None else seed
    if all_devices:
        _cuda_seed = seed
        for gen in _cuda_generators.values():
            gen.manual_seed(seed)
    else:
        cp = loaded_cupy()
        cuda_generator(cp.cuda.runtime.getDevice() if cp is not None else 0).manual_seed(seed)


def manual_seed(seed):
    """Seed the CPU generator and every cuda device's, as ``torch.manual_seed`` does."""
    cuda_manual_seed(int(seed), all_devices=True)
    return default_generator.manual_seed(seed)


def seed():
    s = default_generator.seed()
    cuda_manual_seed(s, all_devices=True)
    return s


def initial_seed():
    return default_generator.initial_seed()


def _generator_for(generator, dev):
    """``generator``, or the default one of device ``dev``; PyTorch's error where they
    differ in kind."""
    if generator is None:
        return default_generator if dev.type == "cpu" else cuda_generator(dev.index)
    if generator.device.type != dev.type:
        raise RuntimeError(f"Expected a '{dev.type}' device type for generator but found "
                           f"'{generator.device.type}'")
    return generator


def _finish(array, dtype, device, requires_grad, traced=True, shape=None, fill=None):
    dev = device_or_default(device)
    if dtype is not None:
        dt = dtypes.as_dtype(dtype)
        if array.dtype != dt.np:
            array = array.astype(dt.np)
    if dev.type != "cpu":
        array = to_device(array, dev)
    t = Tensor._make(array)
    if requires_grad:
        t.requires_grad_(True)
    if traced and _hooks.tracer is not None:     # inside tracegrad.compile: a constant
        _hooks.tracer.created(t, shape, fill)
    return t


def _drawn(generator, draw, dist, size, dtype, device, requires_grad, **params):
    """A random tensor; inside tracegrad.compile it stays a random op (fresh every call)."""
    hook = _hooks.state.draw_hook
    if hook is not None:    # inside vmap: its randomness mode decides
        return hook(generator, draw, dist, size, dtype, device, requires_grad, **params)
    dev = device_or_default(device)
    gen = _generator_for(generator, dev)
    tracer = _hooks.tracer
    state = gen.get_state() if tracer is not None else None
    with on_device(dev):    # a generator's state lives on its device: it draws (and casts) there
        t = _finish(draw(gen.rng), dtype, device, requires_grad, traced=False)
    if tracer is not None:
        shape = tuple(size) if len(size) == t.ndim else tuple(t.shape)     # sizes asked for
        tracer.drawn(t, gen, state, dist=dist, shape=shape, dtype=t.dtype, **params)
    return t


def _flatten_data(data):
    """Nested lists that may hold tensors or NumPy scalars, as plain Python values."""
    if isinstance(data, Tensor):
        return data.tolist()
    if isinstance(data, (list, tuple)):
        return [_flatten_data(d) for d in data]
    if isinstance(data, np.generic):
        return data.item()
    return data


def _infer_dtype(data):
    kinds = set()

    def walk(d):
        if isinstance(d, (list, tuple)):
            for x in d:
                walk(x)
        elif isinstance(d, bool):
            kinds.add("b")
        elif isinstance(d, numbers.Integral):
            kinds.add("i")
        elif isinstance(d, numbers.Real):
            kinds.add("f")
        else:
            raise TypeError(f"tensor(): could not infer dtype of {type(d).__name__}")
    walk(data)
    if "f" in kinds:
        return dtypes.get_default_dtype()
    if "i" in kinds:
        return dtypes.int64
    if "b" in kinds:
        return dtypes.bool
    return dtypes.get_default_dtype()     # empty list


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new leaf tensor holding a copy of ``data`` (PyTorch's dtype inference)."""
    if isinstance(data, Tensor):
        array = to_device(data._data, device_of(data)).copy()
        return _finish(array, dtype, device if device is not None else data.device, requires_grad)
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        array = np.array(data)
        if array.dtype.kind == "f" and dtype is None and array.dtype not in (
                np.float16, np.float32, np.float64):
            array = array.astype(np.float64)
    elif hasattr(data, "__cuda_array_interface__"):
        array = data.copy()
    else:
        data = _flatten_data(data)
        dt = dtypes.as_dtype(dtype) if dtype is not None else _infer_dtype(data)
        try:
            array = np.array(data, dtype=dt.np)
        except ValueError as e:
            raise ValueError(f"tensor(): {e}") from None
    return _finish(array, dtype, device, requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like ``tensor`` but shares memory with a NumPy array or tensor where it can."""
    if isinstance(data, Tensor):
        return data.to(dtype=dtype, device=device) if (dtype or device) else data
    if isinstance(data, np.ndarray) and (dtype is None or dtypes.as_dtype(dtype).np == data.dtype) \
            and (device is None or device_or_default(device).type == "cpu"):
        return Tensor._make(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(ndarray):
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    dtypes.from_numpy(ndarray.dtype)
    return Tensor._make(ndarray)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    size = tuple(s if type(s) is SymInt else int(s) for s in size)     # a traced size stays
    for s in size:
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return size


def _filled(fill, size, dtype, device, requires_grad, default=None):
    dt = dtypes.as_dtype(dtype) if dtype is not None else (default or dtypes.get_default_dtype())
    dev = device_or_default(device)
    size = _size(size)
    with on_device(dev):        # a GPU's arrays are made on the current one
        xp = xp_for(dev)
        array = xp.full(size, fill, dtype=dt.np) if fill is not None else \
            xp.empty(size, dtype=dt.np)
    return _finish(array, None, device, requires_grad, shape=size,
                   fill=0 if fill is None else fill)


def zeros(*size, dtype=None, layout=None, device=None, requires_grad=False, out=None):
    check_layout("zeros", layout)
    return _filled(0, size, dtype, device, requires_grad)


def ones(*size, dtype=None, layout=None, device=None, requires_grad=False, out=None):
    check_layout("ones", layout)
    return _filled(1, size, dtype, device, requires_grad)


def empty(*size, dtype=None, layout=None, device=None, requires_grad=False, out=None,
          memory_format=None):
    check_layout("empty", layout)
    return _filled(0, size, dtype, device, requires_grad)


def empty_strided(size, stride, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False):
    """An (initialised to zero) tensor of ``size`` whose ``stride()`` is ``stride`` where that
    is a dense layout (a permutation of the dims); tracegrad's arrays are NumPy's, which cannot
    leave gaps or overlap, so any other ``stride`` gives a contiguous tensor."""
    check_layout("empty_strided", layout)
    size, stride = _size(size), tuple(int(s) for s in stride)
    if len(size) != len(stride):
        raise RuntimeError(f"empty_strided: dimensionality of sizes ({len(size)}) must match "
                           f"dimensionality of strides ({len(stride)})")
    order = sorted(range(len(size)), key=lambda d: -stride[d])     # outermost dim first
    dense, step = [0] * len(size), 1
    for d in reversed(order):
        dense[d] = step
        step *= size[d]
    if tuple(dense) != stride or _hooks.tracer is not None:
        return empty(size, dtype=dtype, device=device, requires_grad=requires_grad)
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    dev = device_or_default(device)
    with on_device(dev):
        array = xp_for(dev).zeros([size[d] for d in order], dtype=dt.np)
    array = array.transpose([order.index(d) for d in range(len(size))])
    return _finish(array, None, device, requires_grad)


def full(size, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("full", layout)
    if dtype is None:
        dtype = dtypes.result_type(fill_value)
    return _filled(fill_value, (size,) if isinstance(size, int) else size, dtype, device,
                   requires_grad)


def _like(input, dtype, device):
    return (dtype if dtype is not None else input.dtype,
            device if device is not None else input.device)


def zeros_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    check_layout("zeros_like", layout)
    dt, dev = _like(input, dtype, device)
    return zeros(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def ones_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    check_layout("ones_like", layout)
    dt, dev = _like(input, dtype, device)
    return ones(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def empty_like(input, *, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None):
    check_layout("empty_like", layout)
    dt, dev = _like(input, dtype, device)
    return empty(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None):
    check_layout("full_like", layout)
    dt, dev = _like(input, dtype, device)
    return full(input.shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


def eye(n, m=None, *, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("eye", layout)
    for name, k in (("n", n), ("m", m)):
        if k is not None and k < 0:
            raise RuntimeError(f"eye: {name} must be greater or equal to 0, got {k}")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    return _finish(np.eye(n, m if m is not None else n, dtype=dt.np), None, device, requires_grad)


def arange(start, end=None, step=1, *, dtype=None, layout=None, device=None,
           requires_grad=False):
    check_layout("arange", layout)
    if end is None:
        start, end = 0, start
    vals = [v.item() if isinstance(v, Tensor) else v for v in (start, end, step)]
    if step == 0:
        raise RuntimeError("arange: step must be nonzero")
    if all(type(v) in (int, float) for v in vals) and (vals[1] - vals[0]) * vals[2] < 0:
        raise RuntimeError("arange: upper bound and lower bound inconsistent with step sign")
    if dtype is None:
        dtype = dtypes.result_type(*vals)
    dt = dtypes.as_dtype(dtype)
    return _finish(np.arange(*vals, dtype=np.float64 if dt.is_floating_point else np.int64),
                   dt, device, requires_grad)


def linspace(start, end, steps, *, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("linspace", layout)
    if steps < 0:
        raise RuntimeError("linspace: number of steps must be non-negative")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    if isinstance(start, Tensor) or isinstance(end, Tensor):
        return _linspace_of_tensors(start, end, steps, dt, device, requires_grad)
    return _finish(np.linspace(start, end, steps), dt, device, requires_grad)


def _linspace_of_tensors(start, end, steps, dt, device, requires_grad):
    """``linspace`` from 0-dim tensor ends, in tensor ops (compile traces them; the ends get
    no gradient, as in PyTorch): PyTorch's kernel, the ends in ``dt``, the step in ``dt``
    (float64 for an integer dtype), each half of the points stepped from its nearer end in
    one rounding (its fused multiply-add, emulated in float64), then cast to ``dt``."""
    for name, end_ in (("start", start), ("end", end)):
        if isinstance(end_, Tensor) and end_.ndim:
            raise RuntimeError(f"linspace only supports 0-dimensional start and end tensors, "
                               f"but got {name} with {end_.ndim} dimension(s).")
    like = start if isinstance(start, Tensor) else end
    dev = device if device is not None else like.device
    wide = dtypes.float64
    step_dt = dt if dt.is_floating_point else wide
    lo, hi = (v.detach() if isinstance(v, Tensor) else tensor(v, device=dev)
              for v in (start, end))
    lo, hi = lo.to(device=dev, dtype=dt).to(step_dt), hi.to(device=dev, dtype=dt).to(step_dt)
    i = arange(steps, dtype=wide, device=dev)
    if steps == 1:
        out = i + lo.to(wide)
    else:
        step = ((hi - lo) / (steps - 1)).to(wide)
        out = where(i < steps // 2, lo.to(wide) + step * i,
                    hi.to(wide) - step * (steps - 1 - i))
    out = out.to(device=dev, dtype=dt)
    return out.requires_grad_(True) if requires_grad else out


def rand(*size, generator=None, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("rand", layout)
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    shape = _size(size)
    return _drawn(generator, lambda rng: rng.random(shape), "uniform", shape, dt, device,
                  requires_grad)


def randn(*size, generator=None, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("randn", layout)
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.get_default_dtype()
    shape = _size(size)
    return _drawn(generator, lambda rng: rng.standard_normal(shape), "normal", shape, dt,
                  device, requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, layout=None,
            device=None, requires_grad=False):
    check_layout("randint", layout)
    if size is None and isinstance(high, (tuple, list)):
        high, size = None, high         # randint(high, size), PyTorch's other overload
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint() missing required argument 'size'")
    shape = _size((size,))
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    return _drawn(generator, lambda rng: rng.integers(low, high, shape), "integers", shape,
                  dtype or dtypes.int64, device, requires_grad, low=int(low), high=int(high))


def randperm(n, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("randperm", layout)
    dev = device_or_default(device)
    rng = _generator_for(generator, dev).rng
    with on_device(dev):    # drawn and sorted where the generator lives
        perm = rng.permutation(n) if dev.type == "cpu" else cupy().argsort(rng.random(n))
        return _finish(perm, dtype or dtypes.int64, device, requires_grad)


def rand_like(input, *, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("rand_like", layout)
    dt, dev = _like(input, dtype, device)
    return rand(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def randn_like(input, *, dtype=None, layout=None, device=None, requires_grad=False):
    check_layout("randn_like", layout)
    dt, dev = _like(input, dtype, device)
    return randn(input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, dtype=None, layout=None, device=None,
                 requires_grad=False):
    check_layout("randint_like", layout)
    dt, dev = _like(input, dtype, device)
    return randint(low, high, input.shape, dtype=dt, device=dev, requires_grad=requires_grad)


def _legacy_new(cls, *args, **kwargs):
    """``Tensor(...)``: ``Tensor([1., 2.])`` holds the data, ``Tensor(2, 3)`` is uninitialised."""
    if len(args) == 1 and not isinstance(args[0], int):
        src = args[0]
        if isinstance(src, Tensor):
            return src
        t = tensor(src, dtype=dtypes.get_default_dtype() if not isinstance(src, np.ndarray) else None)
    else:
        t = empty(*args, device=kwargs.get("device"))
    if cls is not Tensor:
        t = cls._make(t._data)
    return t


# Installed from here: ``tensor`` sits below the creation functions the constructor calls.
Tensor.__new__ = staticmethod(_legacy_new)
