"""C source to a loaded shared library, through the system C compiler and an on-disk cache.

    lib = build("double add1(double x) { return x + 1; }", "add1")
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
- Entries appear by atomic rename, so processes that build at once never load half a file; an
  entry that is truncated or does not load is rebuilt. In one process, a second ``build`` of a
  source returns the same CDLL, and builds may run in several threads.
- Any failure (no compiler, a compiler error, a timeout, a fresh library that does not load, an
  unwritable cache) raises ``BuildError`` with one readable line.
- ``stats`` counts, in this process, libraries compiled, libraries loaded from the cache, and
  seconds spent in the compiler (failed runs included).
"""
import ctypes
import functools
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
import threading
import time
from collections import defaultdict

FORMAT = 1  # bump when what a key stands for changes, so old entries are no longer found
# -fno-tree-slp-vectorize: gcc 12's straight-line vectorizer drops a double -> float ->
# double round trip in a loop's remainder (x.float().double() came back unrounded for the
# last 2 of 6 elements, at -O2 and -O3); the loop vectorizer, which omp simd uses, is kept.
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-tree-slp-vectorize", "-fopenmp",
         "-fPIC", "-shared", "-std=c11")
LIBS = ("-lmvec", "-lm")
TIMEOUT_S = 120

stats = {"compiled": 0, "loaded_from_cache": 0, "compile_seconds": 0.0}

_lock = threading.Lock()                   # guards stats and the three dicts below
_toolchains = {}                           # $CC (None when unset) -> toolchain()
_path_locks = defaultdict(threading.Lock)  # .so path -> held while it is compiled or loaded
_loaded = {}                               # .so path -> its CDLL


class BuildError(Exception):
    """The C tier cannot be built: no compiler, or the compiler failed. str() is one readable
    line naming the cause (e.g. "C compiler '/nonexistent' (from CC) not found", or
    "cc failed: <first error line of the compiler's stderr>")."""


def toolchain() -> tuple[str, str, tuple[str, ...]]:
    """(compiler path, its version line, flags) used for builds; raises BuildError when
    there is no usable compiler. The compiler is $CC when set, else `cc`. Cached per process
    (but re-read if $CC changes)."""
    cc = os.environ.get("CC") or None
    with _lock:
        found = _toolchains.get(cc)
    if found is None:
        found = _probe(cc)  # outside the lock: it runs the compiler twice
        with _lock:
            found = _toolchains.setdefault(cc, found)
    return found


def build(source: str, name: str) -> ctypes.CDLL:
    """The loaded shared library for `source` (C code), compiling it unless the cache holds it.
    `name` is a readable stem for the file (e.g. "step_v0"; characters other than letters,
    digits, '_', '-' and '.' become '_'). Raises BuildError."""
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
                lib = _load_cached(so_path) or _compile_and_load(source, so_path, tc)
            except OSError as exc:  # the cache directory refused a read or write
                raise BuildError(f"cache entry {so_path}: {exc}") from None
            _loaded[so_path] = lib
    return lib


def is_cached(source: str, name: str) -> bool:
    """Whether `build(source, name)` would only load (this process has it, or the disk cache
    holds it): cheap enough to decide whether to wait for it. Raises BuildError."""
    so_path = _so_path(source, name, toolchain())
    return so_path in _loaded or os.path.exists(so_path)


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


# toolchain and key ----------------------------------------------------------------------------

def _probe(cc):
    """toolchain() for $CC = `cc` (None: unset). $CC may carry words after the program
    ("ccache gcc", "gcc -m64"); they go first among the flags."""
    words = shlex.split(cc) if cc else ["cc"]
    path = shutil.which(words[0]) if words else None
    if path is None:
        if cc:
            raise BuildError(f"C compiler {cc!r} (from CC) not found")
        raise BuildError("C compiler 'cc' not found; install gcc or clang, or set CC")
    command = [path, *words[1:]]
    answer = _run(command + ["--version"])
    if answer.returncode or not answer.stdout.strip():
        raise BuildError(f"C compiler {path!r} does not answer --version: "
                         f"{_first_error(answer.stderr, answer.returncode)}")
    version = answer.stdout.strip().splitlines()[0]
    # gcc and clang print a library's full path when they can link it, its bare name when not;
    # asking once here keeps the flags, and so the key, the same in every process.
    mvec = _run(command + ["-print-file-name=libmvec.so"]).stdout.strip()
    libs = LIBS if os.path.isabs(mvec) else tuple(f for f in LIBS if f != "-lmvec")
    return path, version, (*words[1:], *FLAGS, *libs)


@functools.cache
def _cpu_identity():
    """What -march=native reads: the first CPU's model and feature lines of /proc/cpuinfo
    (x86 and arm names), hashed, with the machine type."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    wanted, seen = ("model name", "flags", "Features", "CPU implementer", "CPU part"), {}
    for line in lines:
        field, _, value = line.partition(":")
        if field.strip() in wanted:
            seen.setdefault(field.strip(), value.strip())
    text = json.dumps([platform.machine(), sorted(seen.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _key(source, tc):
    path, version, flags = tc
    parts = [FORMAT, path, version, list(flags), _cpu_identity(), source]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


# cache entries --------------------------------------------------------------------------------

def _load_cached(so_path):
    """The CDLL of an existing entry, or None when there is none or it is corrupt (the caller
    then builds a new one and renames it over the old)."""
    if not os.path.exists(so_path) or not _elf_complete(so_path):
        return None
    try:
        lib = ctypes.CDLL(so_path)
    except OSError:
        return None
    _count("loaded_from_cache", 1)
    return lib


def _compile_and_load(source, so_path, tc):
    cache, stem = os.path.dirname(so_path), os.path.basename(so_path)[:-3]
    c_path = os.path.join(cache, stem + ".c")
    # Written first and compiled from the cache, so that an error line names a file that stays.
    _write_atomic(c_path, source.encode(), 0o644)
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=f".{stem}.", suffix=".tmp")
    os.close(fd)
    try:
        _compile(c_path, tmp, tc)
        os.chmod(tmp, 0o755)  # mkstemp's 0600 would hide the entry from others sharing the cache
        os.replace(tmp, so_path)
    finally:
        _unlink(tmp)
    try:
        lib = ctypes.CDLL(so_path)
    except OSError as exc:  # e.g. an undefined symbol: the entry would fail every process alike
        _unlink(so_path)
        raise BuildError(f"{so_path} was built but does not load: {exc}") from None
    _count("compiled", 1)
    return lib


def _write_atomic(path, data, mode):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    finally:
        _unlink(tmp)


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _elf_complete(path):
    """False when `path` is an ELF file shorter than its own headers say. dlopen maps segments
    past the end of a truncated file, and the process dies of SIGBUS instead of getting an
    OSError, so truncation is caught here. A file that is not ELF passes: dlopen rejects it."""
    with open(path, "rb") as f:
        head, size = f.read(64), os.fstat(f.fileno()).st_size
        if head[:4] != b"\x7fELF":
            return True
        wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
        if len(head) < (64 if wide else 52):
            return False
        # e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum
        header = order + ("8xQQ4x2xHHHH" if wide else "4xII4x2xHHHH")
        phoff, shoff, phentsize, phnum, shentsize, shnum = struct.unpack_from(header, head, 24)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    segment = order + ("I4xQ8x8xQ" if wide else "II8xI")  # p_type, p_offset, p_filesz
    if len(table) < phentsize * phnum or (phnum and phentsize < struct.calcsize(segment)):
        return False
    end = shoff + shentsize * shnum
    for i in range(phnum):
        kind, offset, filesz = struct.unpack_from(segment, table, i * phentsize)
        if kind == 1:  # PT_LOAD
            end = max(end, offset + filesz)
    return size >= end


# the compiler ---------------------------------------------------------------------------------

def _compile(c_path, out, tc):
    """Compile `c_path` into the shared library `out`, dropping -lmvec for the rest of the
    process if the linker cannot find it after all."""
    path, _, flags = tc
    result = _cc(path, flags, c_path, out)
    if result.returncode and "-lmvec" in flags and "-lmvec" in result.stderr:
        flags = tuple(f for f in flags if f != "-lmvec")
        with _lock:
            for cc, known in _toolchains.items():
                if known == tc:
                    _toolchains[cc] = (path, tc[1], flags)
        result = _cc(path, flags, c_path, out)
    if result.returncode:
        line = _first_error(result.stderr, result.returncode)
        raise BuildError(f"{os.path.basename(path)} failed: {line}")


def _cc(path, flags, c_path, out):
    libs = [f for f in flags if f.startswith("-l")]  # after the source, or they link nothing
    options = [f for f in flags if not f.startswith("-l")]
    start = time.perf_counter()
    # Whatever a compiler drops in its working directory lands somewhere thrown away.
    with tempfile.TemporaryDirectory(prefix="tracegrad-cc-") as work:
        result = _run([path, *options, c_path, "-o", out, *libs], cwd=work)
    _count("compile_seconds", time.perf_counter() - start)
    return result


def _run(command, cwd=None):
    # LC_ALL=C: English, ASCII messages, and a version line that is the same in every locale.
    env = {**os.environ, "LC_ALL": "C"}
    try:
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, timeout=TIMEOUT_S,
                              encoding="utf-8", errors="replace")
    except subprocess.TimeoutExpired:
        raise BuildError(f"{command[0]} timed out after {TIMEOUT_S} s: "
                         f"{shlex.join(command)}") from None
    except OSError as exc:
        raise BuildError(f"cannot run C compiler {command[0]!r}: {exc.strerror or exc}") from None


def _first_error(stderr, returncode):
    """The line of a compiler's stderr that says what went wrong ("x.c:2:12: error: ...", not
    the "In function" line before it). collect2's summary is skipped: the linker's own line
    before it names the cause."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines
              if re.search(r"(^|\s)error:", line) and not line.startswith("collect2")]
    return (errors or lines or [f"exit status {returncode}"])[0]


def _count(field, amount):
    with _lock:
        stats[field] += amount
