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
"""
import atexit
import copy
import ctypes
import functools
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import defaultdict

from . import elf

FORMAT = 1  # bump when what a key stands for changes, so old entries are no longer found
# -fno-tree-slp-vectorize: gcc 12's straight-line vectorizer drops a double -> float ->
# double round trip in a loop's remainder (x.float().double() came back unrounded for the
# last 2 of 6 elements, at -O2 and -O3); the loop vectorizer, which omp simd uses, is kept.
# -fno-trapping-math: with it gcc may compute a float comparison for every element (no value
# changes; only floating-point exception flags, which nothing reads after a kernel); without
# it a comparison stored as a mask (relu's ``x <= 0``) is a branch and the loop stays scalar.
FLAGS = ("-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math",
         "-fno-tree-slp-vectorize", "-fopenmp", "-fPIC", "-shared", "-std=c11")
LIBS = ("-lmvec", "-lm")
TIMEOUT_S = 120     # a variant's kernels compile in seconds; a compiler this slow is stuck
PROBE_TIMEOUT_S = 30    # `cc --version` answers in milliseconds
STALE_S = 3600      # a temporary file this old is left over whoever wrote it

stats = {"compiled": 0, "loaded_from_cache": 0, "rejected_from_cache": 0,
         "compile_seconds": 0.0}

_lock = threading.Lock()                   # guards stats and the dicts below
_toolchains = {}                           # ($CC, its path) -> toolchain() or its BuildError
_probes = {}                               # ($CC, its path) -> (Event set when probed, start)
_path_locks = defaultdict(threading.Lock)  # .so path -> held while it is compiled or loaded
_loaded = {}                               # .so path -> its CDLL
_broken = {}                               # toolchain() -> the error that condemned it
_from_cache = set()                        # .so paths this process loaded from the disk cache
_swept = set()                             # cache folders already swept of stale .tmp files
_exit_lock = threading.Lock()              # guards the three below
_exiting = False                           # set at interpreter exit: no compiler starts
_children = set()                          # compilers running now (Popen)
_temps = set()                             # temporary files and folders being written
_HOST = hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


class BuildError(Exception):
    """The C tier cannot be built: no compiler, or the compiler failed. str() is one readable
    line naming the cause (e.g. "C compiler '/nonexistent' (from CC) not found", or
    "cc failed: <first error line of the compiler's stderr>")."""


class BadLibrary(BuildError):
    """The compiler reported success, but its library is unusable (truncated, not a shared
    object, or lacking a symbol the caller needs: ``missing``)."""

    def __init__(self, message, missing=()):
        super().__init__(message)
        self.missing = tuple(missing)

    def __reduce__(self):
        return type(self), (str(self), self.missing)


class Abandoned(BuildError):
    """The interpreter is exiting, so the build was dropped; there is nothing to report."""


def build_timeout() -> float:
    """Seconds a compiler run may take: $TRACEGRAD_BUILD_TIMEOUT, else ``TIMEOUT_S``."""
    text = os.environ.get("TRACEGRAD_BUILD_TIMEOUT")
    if not text:
        return TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise BuildError(f"TRACEGRAD_BUILD_TIMEOUT must be a positive number of seconds, "
                         f"got {text!r}")
    return value


def toolchain(wait=True):
    """(compiler path, its version line, flags) used for builds; raises BuildError when
    there is no usable compiler. The compiler is $CC when set, else `cc`. Probed once per
    process and compiler path (re-read if $CC changes), on a thread of its own; a failure is
    remembered too. ``wait``: True waits for the probe; False never waits (None while the
    compiler is unknown); seconds: waits at most that long after the probe started (so
    that a hung compiler costs one such wait per process), then None."""
    key = _compiler_key()
    with _lock:
        found = _toolchains.get(key)
        if found is None and wait is not False:
            probe = _probes.get(key)
            if probe is None:
                probe = _probes[key] = (threading.Event(), time.monotonic())
                threading.Thread(target=_probe_into, args=(key, probe[0]), daemon=True,
                                 name="tracegrad-cc-probe").start()
    if found is None:
        if wait is False:
            return None
        done, started = probe
        if not done.wait(None if wait is True else max(0.0, started + wait - time.monotonic())):
            return None
        with _lock:
            found = _toolchains.get(key)
        if found is None:
            raise Abandoned("the interpreter is exiting")
    if isinstance(found, BuildError):
        raise copy.copy(found)      # a fresh exception each time: tracebacks stay apart
    return found


def _probe_into(key, done):
    """Probe the compiler of `key` and record the toolchain or the error (thread target)."""
    try:
        found = _probe(key[0])
    except Abandoned:
        found = None
    except BuildError as exc:
        found = exc
    except Exception as exc:    # noqa: BLE001 - e.g. a locale that cannot decode the answer
        found = BuildError(f"probing the C compiler failed: {type(exc).__name__}: {exc}")
    if found is not None:
        with _lock:
            _toolchains.setdefault(key, found)
    done.set()


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


def exiting() -> bool:
    """Whether the interpreter is exiting (builds in flight are being abandoned)."""
    return _exiting


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

def _compiler_key():
    """($CC or None, the path its program resolves to now): a probe's result holds for both."""
    cc = os.environ.get("CC") or None
    try:
        words = shlex.split(cc) if cc else ["cc"]
    except ValueError:
        words = []
    return cc, shutil.which(words[0]) if words else None


def _probe(cc):
    """toolchain() for $CC = `cc` (None: unset). $CC may carry words after the program
    ("ccache gcc", "gcc -m64"); they go first among the flags."""
    try:
        words = shlex.split(cc) if cc else ["cc"]
    except ValueError as exc:
        raise BuildError(f"CC={cc!r} cannot be split into words: {exc}") from None
    path = shutil.which(words[0]) if words else None
    if path is None:
        if cc:
            raise BuildError(f"C compiler {cc!r} (from CC) not found")
        raise BuildError("C compiler 'cc' not found; install gcc or clang, or set CC")
    command = [path, *words[1:]]
    probe_s = min(PROBE_TIMEOUT_S, build_timeout())
    answer = _run(command + ["--version"], timeout=probe_s)
    if answer.returncode or not answer.stdout.strip():
        raise BuildError(f"C compiler {path!r} does not answer --version: "
                         f"{_first_error(answer.stderr, answer.returncode)}")
    version = answer.stdout.strip().splitlines()[0]
    # gcc and clang print a library's full path when they can link it, its bare name when not;
    # asking once here keeps the flags, and so the key, the same in every process.
    mvec = _run(command + ["-print-file-name=libmvec.so"], timeout=probe_s).stdout.strip()
    libs = LIBS if os.path.isabs(mvec) else tuple(f for f in LIBS if f != "-lmvec")
    return path, version, (*words[1:], *FLAGS, *libs)


def _mark_broken(tc, error):
    """From now on in this process, builds with the toolchain `tc` raise `error` at once.
    Returns the error to raise: the first one, where builds in several threads failed alike
    (so that the user reads one message)."""
    with _lock:
        error = _broken.setdefault(tc, error)
        for key, known in _toolchains.items():
            if known == tc:
                _toolchains[key] = error
    return copy.copy(error)


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


def _temp_file(folder, stem):
    """(fd, path) of a new empty temporary file in `folder`, named so that a sweep can tell
    whose it is. Made and recorded under the exit lock: the exit hook either removes it or
    ran before, and then none is made."""
    with _exit_lock:
        if _exiting:
            raise Abandoned("the interpreter is exiting")
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{stem}~{_HOST}~{os.getpid()}~",
                                   suffix=".tmp")
        _temps.add(tmp)
    return fd, tmp


def _temp_dir(folder):
    """A new temporary folder in `folder` for a compiler to work in (see ``_temp_file``)."""
    with _exit_lock:
        if _exiting:
            raise Abandoned("the interpreter is exiting")
        work = tempfile.mkdtemp(dir=folder, prefix=f".cc~{_HOST}~{os.getpid()}~", suffix=".tmp")
        _temps.add(work)
    return work


def _drop_temp(path):
    with _exit_lock:
        _temps.discard(path)
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        _unlink(path)


def _write_atomic(path, data, mode):
    fd, tmp = _temp_file(os.path.dirname(path), "")
    try:
        with os.fdopen(fd, "wb") as f:  # through the fd: if the exit hook removed the name,
            f.write(data)               # nothing re-creates it
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, path)
    finally:
        _drop_temp(tmp)


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


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


# the compiler ---------------------------------------------------------------------------------

def _compile(c_path, out, tc):
    """Compile `c_path` into the shared library `out`, dropping -lmvec for the rest of the
    process if the linker cannot find it after all."""
    path, _, flags = tc
    result = _cc(tc, flags, c_path, out)
    if result.returncode and "-lmvec" in flags and "-lmvec" in result.stderr:
        flags = tuple(f for f in flags if f != "-lmvec")
        with _lock:
            for cc, known in _toolchains.items():
                if known == tc:
                    _toolchains[cc] = (path, tc[1], flags)
        result = _cc(tc, flags, c_path, out)
    if result.returncode:
        line = _first_error(result.stderr, result.returncode)
        raise BuildError(f"{os.path.basename(path)} failed: {line}")


def _cc(tc, flags, c_path, out):
    libs = [f for f in flags if f.startswith("-l")]  # after the source, or they link nothing
    options = [f for f in flags if not f.startswith("-l")]
    start = time.perf_counter()
    # Whatever a compiler drops in its working directory lands somewhere thrown away (and
    # swept, if this process is killed). Not a TemporaryDirectory: its finalizer removes it
    # at exit, under a compiler about to start there ("cannot run C compiler").
    work = _temp_dir(os.path.dirname(out))
    try:
        return _run([tc[0], *options, c_path, "-o", out, *libs], cwd=work, compiler=tc)
    finally:
        _drop_temp(work)
        _count("compile_seconds", time.perf_counter() - start)


def _run(command, cwd=None, timeout=None, compiler=None):
    """The finished compiler run (CompletedProcess). It runs in a new session, so that a
    timeout kills every process it started (a driver's cc1, as, ld), not just the first.
    A compile that times out (`compiler`: its toolchain) marks the compiler broken."""
    timeout = timeout or build_timeout()
    # LC_ALL=C: English, ASCII messages, and a version line that is the same in every locale.
    env = {**os.environ, "LC_ALL": "C"}
    with _exit_lock:
        if _exiting:
            raise Abandoned("the interpreter is exiting")
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True, encoding="utf-8", errors="replace")
        except OSError as exc:
            raise BuildError(f"cannot run C compiler {command[0]!r}: "
                             f"{exc.strerror or exc}") from None
        _children.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        if exiting():
            raise Abandoned("the interpreter is exiting") from None
        error = BuildError(f"C compiler {command[0]!r} did not finish in {timeout:g} s "
                           f"(TRACEGRAD_BUILD_TIMEOUT) and was stopped: {shlex.join(command)}")
        raise (error if compiler is None else _mark_broken(compiler, error)) from None
    finally:
        with _exit_lock:
            _children.discard(proc)
    if exiting():       # killed by the exit hook: its result means nothing
        raise Abandoned("the interpreter is exiting")
    return subprocess.CompletedProcess(command, proc.returncode, out, err)


def _kill_group(proc):
    """Kill `proc` and everything in its session, and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:   # a process that left the group holds the pipes open
        for stream in (proc.stdout, proc.stderr):
            stream.close()
        proc.wait()


@atexit.register
def _abandon():
    """At interpreter exit: start no compiler, kill the running ones, remove their files.
    Build threads are daemons that die mid-step once the interpreter finalizes, so nothing
    they would have cleaned up later may be left to them."""
    global _exiting
    with _exit_lock:
        _exiting = True
        children, temps = list(_children), list(_temps)
    for proc in children:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in children:   # dead before its output file is removed, or it could write it again
        try:
            proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass
    for path in temps:
        _drop_temp(path)


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
