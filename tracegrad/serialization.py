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
Without ``map_location`` every tensor loads to the CPU (PyTorch would restore ``cuda``
tensors to the GPU); see ``load`` for the other forms.

``weights_only=True`` (the default) admits only tensors, parameters, containers (dict,
``OrderedDict``, ``Counter``, list, tuple, set), scalars, strings, bytes, dtypes, devices and
sizes, as PyTorch's does, plus the classes and functions given to ``add_safe_globals`` or
``safe_globals``. It runs the restricted interpreter of ``_unpickler``: a pickle can create
new objects of those types and fill them, but never mutate an allowed global or anything it
did not create. ``weights_only=False`` unpickles anything and must only be used for trusted
files. ``save`` to a path is atomic, and ``load`` checks each record's size against the
archive before reading it (``_archive``).
"""
import _codecs
import collections
import contextlib
import io
import math
import os
import pickle
import zipfile

import numpy as np

from . import dtypes
from ._archive import Archive, LoadedStorage, StorageReader, write_file
from ._safe_globals import user_globals
# PyTorch's names for the allow-list, at its path: tracegrad.serialization.add_safe_globals
from ._safe_globals import (add_safe_globals, clear_safe_globals,  # noqa: F401
                            get_safe_globals, safe_globals)
from ._unpickler import WeightsUnpickler, WeightsUnpicklingError, canonical_name
from .autograd.graph import _HookDict
from .device import CPU, device, to_device, xp_of
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
        self.protocol = protocol
        self.storages = {}   # id(array) -> (array, _Storage); holding the array keeps ids unique

    def persistent_id(self, obj):
        if type(obj) is _Storage:
            if self.protocol == 0:   # its text persistent ids would hold str(tuple)
                raise pickle.PicklingError("tracegrad.save(pickle_protocol=0) cannot record "
                                           "tensor storages; use a protocol from 1 to 5")
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
    ``f``, a path (str or ``os.PathLike``) or a writable binary file object. A path is
    replaced atomically: until the new file is complete and on disk, it holds the old one."""
    if pickle_module is not None or not _use_new_zipfile_serialization:
        raise NotImplementedError("tracegrad.save writes only the zip format with pickle")
    buf = io.BytesIO()
    pickler = _Pickler(buf, pickle_protocol)
    pickler.dump(obj)

    def write(fh):
        with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as zf:
            zf.writestr(f"{_ARCHIVE}/data.pkl", buf.getvalue())
            zf.writestr(f"{_ARCHIVE}/byteorder", "little")
            for _, storage in pickler.storages.values():
                a = storage.array
                zf.writestr(f"{_ARCHIVE}/data/{storage.key}",
                            a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes())
            zf.writestr(f"{_ARCHIVE}/version", _VERSION)
    if isinstance(f, (str, os.PathLike)):
        write_file(f, write)   # atomic: readers and crashes see the old file or the new one
    else:   # a caller's file object stays open, as in PyTorch
        write(f)


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
def _rebuild_tensor(storage, offset, size, stride, requires_grad, *_torch_extras):
    """A tensor viewing ``storage``; also stands in for ``torch._utils._rebuild_tensor_v2``
    (whose backward hooks and metadata are ignored)."""
    if type(storage) is not LoadedStorage:
        raise pickle.UnpicklingError(f"tensor storage must come from the archive, got "
                                     f"{type(storage).__name__}")
    flat = storage.array
    size, stride, offset = tuple(int(s) for s in size), tuple(int(s) for s in stride), int(offset)
    numel = math.prod(size)   # Python ints: a forged shape must not wrap around
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
    if requires_grad and flat.dtype.kind != "f":
        raise pickle.UnpicklingError(f"only tensors of floating point dtype can require "
                                     f"gradients, got a {flat.dtype} tensor with "
                                     f"requires_grad=True")
    t = Tensor._make(data)
    t._requires_grad = bool(requires_grad)
    return t


def _rebuild_parameter(data, requires_grad, *_torch_extras):
    from .nn.parameter import Parameter
    return Parameter(data, bool(requires_grad))


_TORCH_STORAGES = {"Bool": "bool", "Byte": "uint8", "Char": "int8", "Short": "int16",
                   "Int": "int32", "Long": "int64", "Half": "float16", "Float": "float32",
                   "Double": "float64"}

def _latin1_bytes(s, encoding):
    """``_codecs.encode`` as protocol 2 uses it for bytes; any other codec is refused."""
    if type(s) is not str or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError(f"_codecs.encode is allowed for (str, 'latin1') only, got "
                                     f"({type(s).__name__}, {encoding!r})")
    return _codecs.encode(s, encoding)


def _sized_by_content(cls):
    """``bytes``/``bytearray`` from content only: ``bytearray(2**40)`` would allocate."""
    def make(*args):
        if args and isinstance(args[0], int):
            raise pickle.UnpicklingError(f"{cls.__name__}() from a size is not allowed")
        return cls(*args)
    make.__qualname__ = make.__name__ = cls.__name__
    return make


_SAFE_GLOBALS = {   # the defaults; ``add_safe_globals`` extends them (_safe_globals)
    "collections.OrderedDict": collections.OrderedDict,
    "collections.Counter": collections.Counter,   # PyTorch admits it too
    "builtins.set": set, "builtins.frozenset": frozenset, "builtins.complex": complex,
    "builtins.bytes": _sized_by_content(bytes),
    "builtins.bytearray": _sized_by_content(bytearray),
    "_codecs.encode": _latin1_bytes,   # how protocol 2 writes bytes
    "tracegrad.serialization._rebuild_tensor": _rebuild_tensor,
    "tracegrad.serialization._rebuild_parameter": _rebuild_parameter,
    "tracegrad.device.device": device,
    "tracegrad.tensor.Size": Size,
    "tracegrad.autograd.graph._HookDict": _HookDict,   # a module's hook tables
    # PyTorch's names, so files written by torch.save load as tracegrad tensors
    "torch._utils._rebuild_tensor_v2": _rebuild_tensor,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch.device": device,
    "torch.Size": Size,
}
_SAFE_GLOBALS.update({f"tracegrad.dtypes.{d.name}": d for d in dtypes.ALL})
_SAFE_GLOBALS.update({f"torch.{d.name}": d for d in dtypes.ALL})
_SAFE_GLOBALS.update({f"torch.{k}Storage": getattr(dtypes, v) for k, v in _TORCH_STORAGES.items()})
_BUILDABLE = (collections.OrderedDict,)   # state_dict()'s _metadata attribute
def _allowed():
    """``(name -> object, types BUILD may fill)`` for one load: the defaults and the user's."""
    user = user_globals()
    allowed = {**_SAFE_GLOBALS, **user}
    return allowed, _BUILDABLE + tuple(v for v in user.values() if isinstance(v, type))


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
    complex, bytes, dtypes, devices and sizes (plus those given to ``add_safe_globals`` or
    active ``safe_globals`` blocks), and on any opcode that would mutate an object the pickle
    did not create; ``weights_only=False`` unpickles anything and can run arbitrary code: pass
    it only for a file from a trusted source. A damaged file raises ``RuntimeError`` (the
    archive) or ``pickle.UnpicklingError`` (the pickle), naming what is wrong.
    """
    weights_only = weights_only is None or bool(weights_only)
    if pickle_module is not None or mmap:
        raise NotImplementedError("tracegrad.load supports neither pickle_module nor mmap")
    encoding = pickle_load_args.pop("encoding", "ASCII")
    if pickle_load_args:
        raise TypeError(f"load() got unexpected arguments {sorted(pickle_load_args)}")
    with _opened(f, "rb") as fh:
        archive = Archive(fh, _name(f))
        try:
            big = "byteorder" in archive and archive.read("byteorder").strip() == b"big"
            pkl = io.BytesIO(archive.read("data.pkl"))
            storages = StorageReader(archive, big, map_location)
            if not weights_only:
                unpickler = _Unpickler(pkl, encoding=encoding)
                unpickler.persistent_load = storages
                return unpickler.load()
            allowed, buildable = _allowed()
            unpickler = _WeightsUnpickler(pkl, allowed=allowed, buildable=buildable,
                                          encoding=encoding)
            unpickler.persistent_load = storages
            try:
                return unpickler.load()
            except WeightsUnpicklingError as e:
                raise _weights_only_error(str(e)) from None
        finally:
            archive.close()


def _name(f):
    return repr(os.fspath(f)) if isinstance(f, (str, os.PathLike)) else "the file object"


def _weights_only_error(detail):
    return pickle.UnpicklingError(
        f"Weights only load failed. This file can still be loaded, to do so you have two "
        f"options, do those steps only if you trust the source of the checkpoint.\n"
        f"\t(1) Re-running `tracegrad.load` with `weights_only=False` will likely succeed, but "
        f"it can result in arbitrary code execution. Do it only if you got the file from a "
        f"trusted source.\n"
        f"\t(2) Alternatively, to load with `weights_only=True` please check the recommended "
        f"steps in the following error message.\n"
        f"\tWeightsUnpickler error: {detail}")


def _no_counterpart(module, name):
    """The error for a PyTorch global that tracegrad cannot stand in for, or None."""
    if module == "torch" and name.endswith("Storage"):
        return pickle.UnpicklingError(f"torch.{name}: tracegrad has no dtype for this storage "
                                      f"(no bfloat16, complex or quantized dtypes)")
    if module.split(".")[0] == "torch":
        return pickle.UnpicklingError(f"{module}.{name} from a PyTorch checkpoint has no "
                                      f"tracegrad counterpart")
    return None


class _WeightsUnpickler(WeightsUnpickler):
    def find_class(self, module, name):
        module, name = canonical_name(module, name)
        if f"{module}.{name}" not in self.allowed and module == "torch" and \
                name.endswith("Storage"):   # say which dtype is missing, not "allow it"
            raise _no_counterpart(module, name)
        return super().find_class(module, name)


class _Unpickler(pickle.Unpickler):
    """``weights_only=False``: anything importable, with PyTorch's names mapped."""

    def find_class(self, module, name):
        module, name = canonical_name(module, name)
        if f"{module}.{name}" in _SAFE_GLOBALS:
            return _SAFE_GLOBALS[f"{module}.{name}"]
        err = _no_counterpart(module, name)
        if err is not None:
            raise err
        return super().find_class(module, name)
