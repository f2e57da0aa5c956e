"""C source to a loaded shared library, through the system C compiler and an on-disk cache.

    lib = build("double add1(double x) { return x + 1; }", "add1", symbols=["add1"])
    lib.add1.restype, lib.add1.argtypes = ctypes.c_double, [ctypes.c_double]
    lib.add1(2.0)                       # 3.0; a later process loads the cached file instead

Contract:
- The compiler is $CC, else ``cc``, run with ``FLAGS`` and linked with libmvec (vector expf,
  tanhf, ... for ``#pragma omp simd`` loops) and libm; libmvec is left out where the compiler
  cannot find it, and ``toolchain()`` says which flags are in use. ``-march=native`` builds for
  this CPU; no finite-math flag, so NaN, inf and -0.0 come out as NumPy's do.
- An entry is ``<cache_dir()>/<name>-<key[:16]>.so`` beside its source ``.c``; the key hashes
  the source, compiler path and version line, flags, CPU identity and ``FORMAT``. A library
  compiled once is loaded, not compiled, by every later build of the same source.
- No library is loaded before it is checked: a complete ELF shared object (dlopen of a
  truncated file kills the process with SIGBUS) that defines every name in ``symbols``. A
  cache entry that fails is removed and compiled again; a fresh library that fails is never
  published, and the compiler that made it is not used again in this process.
- Entries appear by atomic rename, so processes that build at once never load half a file.
  Temporary files carry their host and process id; those of dead processes (or older than
  ``STALE_S``) are swept from the cache by the next process that builds there. In one process,
  a second ``build`` of a source returns the same CDLL, and builds may run in several threads.
- The compiler runs in a session of its own and is given ``build_timeout()`` seconds
  ($TRACEGRAD_BUILD_TIMEOUT, default ``TIMEOUT_S``); past that its whole process group is
  killed. A compiler that cannot be probed, times out, or makes a bad library is remembered
  per process and per compiler path: later builds fail at once with the same error.
- At interpreter exit, running compilers are killed and their temporary files removed; a
  build then in flight raises ``Abandoned`` (a ``BuildError`` nobody needs to report).
- Any failure (no compiler, a compiler error, a timeout, a bad library, an unwritable cache)
  raises ``BuildError`` with one readable line; ``BadLibrary`` when the compiler succeeded
  but its library is unusable.
- ``stats`` counts, in this process, libraries compiled, libraries loaded from the cache,
  cache entries rejected, and seconds spent in the compiler (failed runs included).

Here are the cache and its entries; the compiler and the key are ``toolchain.py``'s, the
compiler's runs, temporary files and the exit hook ``build_process.py``'s.
"""
import ctypes
import os
import re
import threading
import time
from collections import defaultdict

from . import elf
from .build_process import (_HOST, TIMEOUT_S, Abandoned, BadLibrary, BuildError, _count,
                            _drop_temp, _lock, _mark_broken, _temp_file, _unlink, build_timeout,
                            exiting, stats)
from .toolchain import FLAGS, FORMAT, LIBS, PROBE_TIMEOUT_S, _compile, _key, toolchain

__all__ = ["build", "is_cached", "from_cache", "discard", "cache_dir", "toolchain",
           "build_timeout", "exiting", "stats", "BuildError", "BadLibrary", "Abandoned",
           "FLAGS", "LIBS", "FORMAT", "TIMEOUT_S", "PROBE_TIMEOUT_S", "STALE_S"]

STALE_S = 3600      # a temporary file this old is left over whoever wrote it

_path_locks = defaultdict(threading.Lock)  # .so path -> held while it is compiled or loaded
_loaded = {}                               # .so path -> its CDLL
_from_cache = set()                        # .so paths this process loaded from the disk cache
_swept = set()                             # cache folders already swept of stale .tmp files


def build(source: str, name: str, symbols=()) -> ctypes.CDLL:
    """The loaded shared library for `source` (C code), compiling it unless the cache holds it.
    `name` is a readable stem for the file (e.g. "step_v0"; characters other than letters,
    digits, '_', '-' and '.' become '_'); `symbols`: names the library must define. Raises
    BuildError."""
    tc = toolchain()
    so_path = _so_path(source, name, tc)
    lib = _loaded.get(so_path)
    if lib is not None:
        return lib
    with _lock:
        path_lock = _path_locks[so_path]
    with path_lock:
        lib = _loaded.get(so_path)
        if lib is None:
            try:
                _sweep_once(os.path.dirname(so_path))
                lib = _load_cached(so_path, symbols) \
                    or _compile_and_load(source, so_path, tc, symbols)
            except OSError as exc:  # the cache directory refused a read or write
                if exiting():       # e.g. a temporary file removed by the exit hook
                    raise Abandoned("the interpreter is exiting") from None
                raise BuildError(f"cache entry {so_path}: {exc}") from None
            _loaded[so_path] = lib
    return lib


def is_cached(source: str, name: str, symbols=()) -> bool:
    """Whether `build(source, name, symbols)` would only load (this process has it, or the
    disk cache holds a sound entry): cheap, and it never waits for a compiler probe (False
    while the compiler is unknown). Raises BuildError."""
    tc = toolchain(wait=False)
    if tc is None:
        return False
    so_path = _so_path(source, name, tc)
    if so_path in _loaded:
        return True
    try:
        return elf.problem(so_path, symbols) is None
    except OSError:
        return False


def from_cache(lib) -> bool:
    """Whether this process loaded `lib` from the disk cache (rather than compiling it)."""
    return lib._name in _from_cache


def discard(lib):
    """Forget `lib`, a library that loaded but misbehaves: its cache entry is removed and this
    process unloads it, so that the next ``build`` of its source compiles it again."""
    path = lib._name
    with _lock:
        _loaded.pop(path, None)
        _from_cache.discard(path)
    _unlink(path)
    try:
        import _ctypes
        _ctypes.dlclose(lib._handle)    # else dlopen of the same path returns this one again
    except (ImportError, AttributeError, OSError):
        pass


def _so_path(source, name, tc):
    stem = re.sub(r"[^\w.-]", "_", name, flags=re.ASCII) + "-" + _key(source, tc)[:16]
    try:
        return os.path.join(cache_dir(), stem + ".so")
    except OSError as exc:
        raise BuildError(f"cannot create the cache directory: {exc}") from None


def cache_dir() -> str:
    """$TRACEGRAD_CACHE_DIR, else $XDG_CACHE_HOME/tracegrad, else ~/.cache/tracegrad (created)."""
    path = os.environ.get("TRACEGRAD_CACHE_DIR")
    if not path:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "tracegrad")
    os.makedirs(path, exist_ok=True)
    return path


# cache entries --------------------------------------------------------------------------------

def _load_cached(so_path, symbols):
    """The CDLL of an existing entry, or None when there is none; an entry that is not sound
    is removed (the caller then builds a new one)."""
    try:
        problem = elf.problem(so_path, symbols)
    except FileNotFoundError:
        return None
    lib = None
    if problem is None:
        try:
            lib = ctypes.CDLL(so_path)
        except OSError:
            problem = "does not load"
    if problem is None and not all(hasattr(lib, s) for s in symbols):  # no section table
        problem = "lacks a symbol"
    if problem is not None:
        _unlink(so_path)
        _count("rejected_from_cache", 1)
        return None
    _count("loaded_from_cache", 1)
    with _lock:
        _from_cache.add(so_path)
    return lib


def _compile_and_load(source, so_path, tc, symbols):
    cache, stem = os.path.dirname(so_path), os.path.basename(so_path)[:-3]
    c_path = os.path.join(cache, stem + ".c")
    # Written first and compiled from the cache, so that an error line names a file that stays.
    _write_atomic(c_path, source.encode(), 0o644)
    fd, tmp = _temp_file(cache, stem)
    os.close(fd)
    try:
        _compile(c_path, tmp, tc)
        problem = elf.problem(tmp, symbols)
        if problem is not None:     # never published, never loaded: it could kill the process
            raise _mark_broken(tc, BadLibrary(f"C compiler {tc[0]!r} exited 0, but the library "
                                              f"it wrote for {stem} {problem[0]}", problem[1]))
        os.chmod(tmp, 0o755)  # mkstemp's 0600 would hide the entry from others sharing the cache
        os.replace(tmp, so_path)
    finally:
        _drop_temp(tmp)
    try:
        lib = ctypes.CDLL(so_path)
    except OSError as exc:  # e.g. an undefined symbol: the entry would fail every process alike
        _unlink(so_path)
        raise BadLibrary(f"{so_path} was built but does not load: {exc}") from None
    missing = tuple(s for s in symbols if not hasattr(lib, s))  # where no section table said
    if missing:
        discard(lib)
        raise BadLibrary(f"{so_path} was built but lacks {', '.join(missing)}", missing)
    _count("compiled", 1)
    return lib


def _write_atomic(path, data, mode):
    fd, tmp = _temp_file(os.path.dirname(path), "")
    try:
        with os.fdopen(fd, "wb") as f:  # through the fd: if the exit hook removed the name,
            f.write(data)               # nothing re-creates it
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    finally:
        _drop_temp(tmp)


_TEMP_NAME = re.compile(r"~(?P<host>[0-9a-f]{8})~(?P<pid>\d+)~[^~/]*\.tmp$")


def _sweep_once(cache):
    """Remove the temporary files that processes killed mid-build left in `cache`: those of a
    process of this host that is gone, and any older than ``STALE_S``."""
    with _lock:
        if cache in _swept:
            return
        _swept.add(cache)
    now, stale_s = time.time(), max(STALE_S, 2 * build_timeout())
    for entry in os.scandir(cache):
        if not (entry.name.startswith(".") and entry.name.endswith(".tmp")):
            continue
        m = _TEMP_NAME.search(entry.name)
        pid = int(m["pid"]) if m and m["host"] == _HOST else None
        if pid == os.getpid():
            continue
        try:
            old = now - entry.stat().st_mtime > stale_s
        except OSError:
            continue
        if old or pid is not None and not _alive(pid):
            try:
                _drop_temp(entry.path)
            except OSError:     # another process swept it first, or it is not ours to remove
                pass


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's process
        return True
    return True
