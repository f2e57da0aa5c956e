"""The checkpoint file itself: written atomically, read with every record's size checked
before a byte of it is read.

Writing (``write_file``): a path is written to a temporary file in the same folder, flushed,
fsynced and renamed over the target (``os.replace``, atomic on POSIX and Windows), so a
concurrent reader, a concurrent saver or a crash mid-save leaves either the old file or the
new one under the real name, never a mix. A killed process leaves its temporary file
(``.<name>.<random>.tmp``) behind, as any atomic writer does.

Reading (``Archive``; ``StorageReader`` for the tensor storages the pickle names): each record
is looked up by an exact name built from a checked key (no ``..``, no separators; nothing is
ever extracted to disk), and its declared size is checked before reading: a stored record must
lie within the archive and a deflated one cannot claim more than DEFLATE's maximum ratio, so a
forged size or a zip bomb is refused instead of allocated. Whatever the zip layer raises on a
damaged file (bad CRC, truncation, a forged header) becomes a ``RuntimeError`` naming the file
and the record.
"""
import contextlib
import os
import pickle
import re
import reprlib
import stat
import struct
import tempfile
import warnings
import zipfile
import zlib

import numpy as np

from . import dtypes
from .device import as_device, device, to_device
from .tensor import Tensor

# what a damaged zip can raise from zipfile's parsing and inflating
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, struct.error, ValueError,
               OverflowError, KeyError, NotImplementedError, UnicodeDecodeError, OSError)
_DEFLATE_MAX_RATIO = 1032   # the most one DEFLATE byte expands to (258-byte matches of 2 bits)
_KEY = re.compile(r"[A-Za-z0-9_.-]+")


# writing -------------------------------------------------------------------------------------
def write_file(path, write):
    """Call ``write(fh)`` on a temporary file beside ``path``, then rename it over ``path``."""
    target = os.path.realpath(os.fspath(path))   # through a symlink, as open(path, "wb") does
    folder, base = os.path.split(target)
    if not os.path.isdir(folder):
        raise RuntimeError(f"Parent directory {folder} does not exist.")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{base[:100]}.", suffix=".tmp", dir=folder)
    except PermissionError:
        if not os.access(target, os.W_OK):
            raise
        # a writable file in a folder we may not create files in: in place, as PyTorch does
        warnings.warn(f"tracegrad.save: cannot create a temporary file in {folder}, so "
                      f"{target} is overwritten in place (not atomically)", stacklevel=3)
        with open(target, "wb") as fh:
            write(fh)
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _mode_for(target))   # mkstemp's 0600 would make every checkpoint private
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def _mode_for(target):
    """The file's mode if it exists (a rewrite keeps it), else what ``open`` would create."""
    try:
        return stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        return 0o666 & ~_umask()


def _umask():
    try:   # Linux reports it without changing it (os.umask would race with other threads)
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def _fsync_folder(folder):
    """Make the rename itself durable (POSIX); folders cannot be opened on Windows."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# reading -------------------------------------------------------------------------------------
class Archive:
    """The records of a zip checkpoint open as ``fh``; ``name`` is how errors name the file."""

    def __init__(self, fh, name):
        self.name = name
        try:
            fh.seek(0, os.SEEK_END)
            self.size = fh.tell()
            fh.seek(0)
            if not zipfile.is_zipfile(fh):
                raise RuntimeError(f"{name} is not a zip checkpoint written by tracegrad.save "
                                   f"or torch.save (PyTorch's legacy pre-1.6 format is not "
                                   f"supported)")
            fh.seek(0)
            self.zf = zipfile.ZipFile(fh)
            names = self.zf.namelist()
        except _ZIP_ERRORS as e:
            raise self._corrupt("its zip directory", e) from e
        self.names = set(names)
        # the top-level folder holding data.pkl (torch.save names it after the file)
        pkl = next((n for n in names if n.endswith("/data.pkl") and n.count("/") == 1), None)
        if pkl is None:
            raise RuntimeError(f"{name} holds no data.pkl record")
        self.prefix = pkl[:-len("data.pkl")]
        if self.prefix[:-1] in (".", "..") or any(c in self.prefix for c in "\\\0"):
            raise RuntimeError(f"{name}: the archive folder {self.prefix[:-1]!r} is not a plain "
                               f"name")

    def __contains__(self, record):
        return self.prefix + record in self.names

    def read(self, record, expected=None):
        """The bytes of ``prefix/record``; ``expected`` is the size the caller needs."""
        member = self.prefix + record
        try:
            info = self.zf.getinfo(member)
        except KeyError:
            raise RuntimeError(f"{self.name} holds no record {member!r}") from None
        if expected is not None and info.file_size != expected:
            raise RuntimeError(f"{self.name}: record {member!r} holds {info.file_size} bytes, "
                               f"expected {expected}")
        if info.compress_type == zipfile.ZIP_STORED:
            if (info.file_size != info.compress_size
                    or info.header_offset + info.compress_size > self.size):
                raise RuntimeError(f"{self.name}: record {member!r} declares {info.file_size} "
                                   f"bytes in an archive of {self.size}")
        elif info.compress_type == zipfile.ZIP_DEFLATED:
            if info.file_size > _DEFLATE_MAX_RATIO * info.compress_size + 64:
                raise RuntimeError(f"{self.name}: record {member!r} declares {info.file_size} "
                                   f"bytes, more than its {info.compress_size} deflated bytes "
                                   f"can hold (a zip bomb or a forged header)")
        else:
            raise RuntimeError(f"{self.name}: record {member!r} uses zip compression method "
                               f"{info.compress_type}; only stored and deflated records are "
                               f"read (as by PyTorch)")
        try:
            return self._inflate(info)
        except _ZIP_ERRORS as e:
            raise self._corrupt(f"record {member!r}", e) from e

    def _inflate(self, info):
        """The record's bytes (a bytearray, so arrays over it are writable), read in slices:
        ``ZipFile.read`` inflates all the compressed bytes at once, however far they expand
        beyond the declared size. Reading exactly the declared size also checks the CRC."""
        out = bytearray(info.file_size)
        view, done = memoryview(out), 0
        with self.zf.open(info) as src:
            while done < len(out):
                chunk = src.read(min(len(out) - done, 1 << 20))
                if not chunk:
                    raise EOFError(f"the record ends after {done} of {len(out)} bytes")
                view[done:done + len(chunk)] = chunk
                done += len(chunk)
        return out

    def storage_record(self, key):
        """The record name of storage ``key``; a key from the pickle is a plain name."""
        if not isinstance(key, str) or not _KEY.fullmatch(key) or key in (".", ".."):
            raise RuntimeError(f"{self.name}: storage key {key!r} is not a plain name")
        return f"data/{key}"

    def close(self):
        self.zf.close()

    def _corrupt(self, where, e):
        return RuntimeError(f"{self.name} is corrupt ({where}): {type(e).__name__}: {e}")


# storages ------------------------------------------------------------------------------------
class LoadedStorage:
    """A storage read from the archive; only ``persistent_load`` makes these, so a crafted
    pickle cannot hand ``_rebuild_tensor`` an arbitrary buffer."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array


class StorageReader:
    """``persistent_load``: the storage a ``("storage", dtype, key, location, numel)`` id
    names, read once per key (tensors saved sharing a record share it again), its size
    checked against the archive before reading."""

    def __init__(self, archive, big_endian, map_location):
        self.archive, self.big, self.restore = archive, big_endian, _restorer(map_location)
        self.loaded = {}

    def __call__(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unknown persistent id {reprlib.repr(pid)}")
        _, dt, key, location, numel = pid
        if not isinstance(dt, dtypes.dtype):
            raise pickle.UnpicklingError(f"unsupported storage type {reprlib.repr(dt)} "
                                         f"(tracegrad has no bfloat16 or complex dtypes)")
        if type(numel) is not int or numel < 0 or type(key) not in (str, int):
            raise pickle.UnpicklingError(f"storage {reprlib.repr(key)} has an invalid size "
                                         f"{reprlib.repr(numel)}")
        key = str(key)
        storage = self.loaded.get(key)
        if storage is None:
            raw = self.archive.read(self.archive.storage_record(key), numel * dt.itemsize)
            flat = np.frombuffer(raw, dtype=dt.np.newbyteorder(">" if self.big
                                                                          else "<"))
            if not flat.dtype.isnative:
                flat = flat.astype(dt.np)
            storage = self.loaded[key] = LoadedStorage(self.restore(flat, str(location)))
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
