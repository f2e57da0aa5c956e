"""``save`` and ``load``: checkpoints with ``torch.save`` / ``torch.load``'s contract (2.6+).

Format, PyTorch's zip layout: ``archive/data.pkl`` pickles the object; each tensor in it is a
call ``_rebuild_tensor(storage, offset, shape, stride, requires_grad)`` whose storage is a
persistent reference ``("storage", dtype, key, location, numel)`` to the raw little-endian
bytes in ``archive/data/<key>``; ``archive/byteorder`` and ``archive/version`` are small
records. Tensors holding the same array object (a parameter and its ``detach()``, as in
``state_dict()``) share one record and share memory again after loading; other views of one
buffer are saved as separate contiguous copies. ``.grad`` is not saved (nor by PyTorch);
tensor subclasses other than ``nn.Parameter`` load as plain tensors.
CuPy tensors are saved from a host copy with location ``cuda:N``.

``load`` reads these files and also zip checkpoints written by ``torch.save``, by mapping
PyTorch's globals (``torch._utils._rebuild_tensor_v2``, ``torch.FloatStorage``, ...) onto
tracegrad's; bfloat16, complex and quantized storages and the legacy pre-1.6 format are
refused. ``torch.load`` cannot read tracegrad's files: their globals name tracegrad.
``weights_only=True`` (the default) admits only tensors, parameters, containers (dict,
``OrderedDict``, ``Counter``, list, tuple, set), scalars, strings, bytes, dtypes, devices and
sizes, as PyTorch's does; ``weights_only=False`` unpickles anything and must only be used for
trusted files. Without ``map_location`` every tensor loads to the CPU (PyTorch would restore
``cuda`` tensors to the GPU); see ``load`` for the other forms.
"""
import _codecs
import _compat_pickle
import collections
import contextlib
import io
import os
import pickle
import zipfile

import numpy as np

from . import dtypes
from .device import CPU, as_device, device, to_device, xp_of
from .tensor import Size, Tensor

DEFAULT_PROTOCOL = 2   # PyTorch's default; load accepts any protocol
_ARCHIVE = "archive"
_VERSION = "3\n"


# saving --------------------------------------------------------------------------------------
class _Storage:
    """An array's host bytes on their way into the archive under ``key``."""
    __slots__ = ("array", "key", "location")

    def __init__(self, array, key, location):
        self.array, self.key, self.location = array, key, location


class _Pickler(pickle.Pickler):
    def __init__(self, file, protocol):
        super().__init__(file, protocol, fix_imports=False)   # Python 3 names: builtins.set
        self.storages = {}   # id(array) -> (array, _Storage); holding the array keeps ids unique

    def persistent_id(self, obj):
        if type(obj) is _Storage:
            a = obj.array
            return ("storage", dtypes.from_numpy(a.dtype), obj.key, obj.location, int(a.size))
        return None

    def reducer_override(self, obj):
        if isinstance(obj, Tensor):
            return self._reduce_tensor(obj)
        # devices and sizes are rebuilt by calling their class, which the restricted loader allows
        if type(obj) is device:
            return device, (str(obj),)
        if type(obj) is Size:
            return Size, (tuple(obj),)
        return NotImplemented

    def _reduce_tensor(self, t):
        from .nn.parameter import Parameter
        if isinstance(t, Parameter):
            plain = Tensor._make(t._data)
            plain._requires_grad = t._requires_grad
            return _rebuild_parameter, (plain, t._requires_grad)
        a = t._data
        entry = self.storages.get(id(a))
        if entry is None:
            host = np.ascontiguousarray(to_device(a, CPU)).reshape(-1)
            entry = (a, _Storage(host, str(len(self.storages)), str(t.device)))
            self.storages[id(a)] = entry
        shape = tuple(a.shape)
        return _rebuild_tensor, (entry[1], 0, shape, _contiguous_strides(shape), t._requires_grad)


def save(obj, f, pickle_module=None, pickle_protocol=DEFAULT_PROTOCOL,
         _use_new_zipfile_serialization=True):
    """Write ``obj`` (tensors, parameters, state dicts, containers, any picklable object) to
    ``f``, a path (str or ``os.PathLike``) or a writable binary file object."""
    if pickle_module is not None or not _use_new_zipfile_serialization:
        raise NotImplementedError("tracegrad.save writes only the zip format with pickle")
    buf = io.BytesIO()
    pickler = _Pickler(buf, pickle_protocol)
    pickler.dump(obj)
    with _opened(f, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(f"{_ARCHIVE}/data.pkl", buf.getvalue())
        zf.writestr(f"{_ARCHIVE}/byteorder", "little")
        for _, storage in pickler.storages.values():
            a = storage.array
            zf.writestr(f"{_ARCHIVE}/data/{storage.key}", a.astype(a.dtype.newbyteorder("<"),
                                                                   copy=False).tobytes())
        zf.writestr(f"{_ARCHIVE}/version", _VERSION)


def _contiguous_strides(shape):
    strides, n = [], 1
    for s in reversed(shape):
        strides.append(n)
        n *= s
    return tuple(reversed(strides))


@contextlib.contextmanager
def _opened(f, mode):
    if isinstance(f, (str, os.PathLike)):
        with open(f, mode) as fh:
            yield fh
    else:   # a caller's file object stays open, as in PyTorch
        yield f


# rebuilding (the callables a checkpoint may name) --------------------------------------------
class _LoadedStorage:
    """A storage read from the archive; only ``persistent_load`` makes these, so a crafted
    pickle cannot hand ``_rebuild_tensor`` an arbitrary buffer."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


def _rebuild_tensor(storage, offset, size, stride, requires_grad, *_torch_extras):
    """A tensor viewing ``storage``; also stands in for ``torch._utils._rebuild_tensor_v2``
    (whose backward hooks and metadata are ignored)."""
    if type(storage) is not _LoadedStorage:
        raise pickle.UnpicklingError(f"tensor storage must come from the archive, got "
                                     f"{type(storage).__name__}")
    flat = storage.array
    size, stride, offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), int(offset)
    numel = int(np.prod(size, dtype=np.int64))
    if (len(size) != len(stride) or offset < 0 or min(size + stride, default=0) < 0
            or (numel and offset + sum((n - 1) * s for n, s in zip(size, stride)) >= flat.size)):
        raise pickle.UnpicklingError(f"tensor of size {size}, stride {stride} and offset "
                                     f"{offset} is out of bounds of its storage of "
                                     f"{flat.size} elements")
    if stride == _contiguous_strides(size) or numel == 0:
        data = flat[offset:offset + numel].reshape(size)
    else:
        data = xp_of(flat).lib.stride_tricks.as_strided(
            flat[offset:], size, tuple(s * flat.itemsize for s in stride))
    t = Tensor._make(data)
    t._requires_grad = bool(requires_grad)
    return t


def _rebuild_parameter(data, requires_grad, *_torch_extras):
    from .nn.parameter import Parameter
    return Parameter(data, bool(requires_grad))


_TORCH_STORAGES = {"Bool": "bool", "Byte": "uint8", "Char": "int8", "Short": "int16",
                   "Int": "int32", "Long": "int64", "Half": "float16", "Float": "float32",
                   "Double": "float64"}

_SAFE_GLOBALS = {
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,   # PyTorch admits it too
    "builtins.set": set, "builtins.complex": complex,
    "builtins.bytes": bytes, "builtins.bytearray": bytearray,
    "_codecs.encode": _codecs.encode,   # how protocol 2 writes bytes
    "tracegrad.serialization._rebuild_tensor": _rebuild_tensor,
    "tracegrad.serialization._rebuild_parameter": _rebuild_parameter,
    "tracegrad.device.device": device,
    "tracegrad.tensor.Size": Size,
    # PyTorch's names, so files written by torch.save load as tracegrad tensors
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch.device": device,
    "torch.Size": Size,
}
_SAFE_GLOBALS.update({f"tracegrad.dtypes.{d.name}": d for d in dtypes.ALL})
_SAFE_GLOBALS.update({f"torch.{d.name}": d for d in dtypes.ALL})
_SAFE_GLOBALS.update({f"torch.{k}Storage": getattr(dtypes, v) for k, v in _TORCH_STORAGES.items()})


def add_safe_globals(safe_globals):
    """Let ``load(weights_only=True)`` admit these classes or functions (trusted by you)."""
    for obj in safe_globals:
        _SAFE_GLOBALS[f"{obj.__module__}.{obj.__qualname__}"] = obj


# loading -------------------------------------------------------------------------------------
def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """The object ``save`` wrote to ``f`` (a path or a readable, seekable binary file).

    ``map_location`` places each storage saved at ``location`` ("cpu", "cuda:0"):
      - None: on the CPU;
      - a str or ``tracegrad.device``: there ("cuda" needs CuPy and a GPU);
      - a dict such as ``{"cuda:0": "cpu"}``: locations it names go to its value, the others
        are restored where they were saved;
      - a callable ``(storage, location)``: ``storage`` is a 1-d CPU tensor; it returns a
        tensor (e.g. ``storage.cuda(1)``) or None for the CPU.
    ``weights_only=True`` (None, the default, means True) raises ``pickle.UnpicklingError``
    on any global other than tensors, parameters, ``OrderedDict``, ``Counter``, sets,
    complex, bytes, dtypes, devices and sizes (plus those given to ``add_safe_globals``);
    ``weights_only=False`` unpickles anything and can run arbitrary code: pass it only for a
    file from a trusted source.
    """
    weights_only = weights_only is None or bool(weights_only)
    if pickle_module is not None or mmap:
        raise NotImplementedError("tracegrad.load supports neither pickle_module nor mmap")
    encoding = pickle_load_args.pop("encoding", "ASCII")
    if pickle_load_args:
        raise TypeError(f"load() got unexpected arguments {sorted(pickle_load_args)}")
    with _opened(f, "rb") as fh:
        if not zipfile.is_zipfile(fh):
            raise RuntimeError(f"{_name(f)} is not a zip checkpoint written by tracegrad.save "
                               f"or torch.save (PyTorch's legacy pre-1.6 format is not "
                               f"supported)")
        fh.seek(0)
        with zipfile.ZipFile(fh) as zf:
            pkl = next((n for n in zf.namelist() if n.endswith("/data.pkl")
                        and n.count("/") == 1), None)
            if pkl is None:
                raise RuntimeError(f"{_name(f)} holds no data.pkl record")
            prefix = pkl[:-len("data.pkl")]
            names = set(zf.namelist())
            big = (prefix + "byteorder" in names
                   and zf.read(prefix + "byteorder").strip() == b"big")
            unpickler = _Unpickler(io.BytesIO(zf.read(pkl)), zf, prefix, big,
                                   _restorer(map_location), weights_only, encoding)
            return unpickler.load()


def _name(f):
    return repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else "the file object"


def _weights_only_error(module, name):
    return pickle.UnpicklingError(
        f"Weights only load failed. This file can still be loaded, to do so you have two "
        f"options, do those steps only if you trust the source of the checkpoint.\n"
        f"\t(1) Re-running `tracegrad.load` with `weights_only=False` will likely succeed, but "
        f"it can result in arbitrary code execution. Do it only if you got the file from a "
        f"trusted source.\n"
        f"\t(2) Alternatively, to load with `weights_only=True` please check the recommended "
        f"steps in the following error message.\n"
        f"\tWeightsUnpickler error: Unsupported global: GLOBAL {module}.{name} was not an "
        f"allowed global by default. Please use `tracegrad.serialization.add_safe_globals("
        f"[{name}])` to allowlist this global if you trust this class/function.")


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, zf, prefix, big_endian, restore, weights_only, encoding):
        super().__init__(file, encoding=encoding)
        self.zf, self.prefix, self.big, self.restore = zf, prefix, big_endian, restore
        self.weights_only = weights_only
        self.loaded = {}   # key -> _LoadedStorage, so tensors saved sharing a record share it

    def find_class(self, module, name):
        # protocol 2 pickles from Python 3 (torch.save's) name builtins as Python 2 did
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        if f"{module}.{name}" in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[f"{module}.{name}"]
        if module == "torch" and name.endswith("Storage"):
            raise pickle.UnpicklingError(f"torch.{name}: tracegrad has no dtype for this "
                                         f"storage (no bfloat16, complex or quantized dtypes)")
        if self.weights_only:
            raise _weights_only_error(module, name)
        if module.split(".")[0] == "torch":
            raise pickle.UnpicklingError(f"{module}.{name} from a PyTorch checkpoint has no "
                                         f"tracegrad counterpart")
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {pid!r}")
        _, dt, key, location, numel = pid
        if not isinstance(dt, dtypes.dtype):
            raise pickle.UnpicklingError(f"unsupported storage type {dt!r} (tracegrad has no "
                                         f"bfloat16 or complex dtypes)")
        key = str(key)
        storage = self.loaded.get(key)
        if storage is None:
            raw = self.zf.read(f"{self.prefix}data/{key}")
            if len(raw) != int(numel) * dt.itemsize:
                raise pickle.UnpicklingError(f"storage {key} holds {len(raw)} bytes, expected "
                                             f"{numel} x {dt.itemsize}")
            flat = np.frombuffer(bytearray(raw), dtype=dt.np.newbyteorder(">" if self.big
                                                                          else "<"))
            if not flat.dtype.isnative:
                flat = flat.astype(dt.np)
            storage = self.loaded[key] = _LoadedStorage(self.restore(flat, str(location)))
        return storage


def _restorer(map_location):
    """``(host_array, location) -> array`` on the device ``map_location`` picks."""
    if map_location is None:
        return lambda a, location: a
    if callable(map_location):
        def restore(a, location):
            out = map_location(Tensor._make(a), location)
            if out is None:
                return a
            if not isinstance(out, Tensor):
                raise TypeError(f"map_location must return a tensor or None, got "
                                f"{type(out).__name__}")
            return out._data
        return restore
    if isinstance(map_location, dict):
        table = {str(k): as_device(v) for k, v in map_location.items()}
        return lambda a, location: to_device(a, table.get(location) or as_device(location))
    if isinstance(map_location, (str, device)):
        target = as_device(map_location)
        return lambda a, location: to_device(a, target)
    raise TypeError(f"map_location must be None, a str, a tracegrad.device, a dict or a "
                    f"callable, got {type(map_location).__name__}")
