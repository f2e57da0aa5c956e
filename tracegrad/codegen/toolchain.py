"""The C compiler a build uses and the key of a cache entry.

``toolchain()`` probes $CC (else ``cc``) once per process and compiler path, on a thread of
its own, for its path, version line and flags (``FLAGS``, and libmvec where it links);
``_key`` hashes these with the source, the CPU identity and ``FORMAT``. ``_compile`` runs the
compiler on a cache entry's source.
"""
import copy
import functools
import hashlib
import json
import os
import platform
import shlex
import shutil
import threading
import time

from .build_process import (Abandoned, BuildError, _count, _drop_temp, _first_error, _lock, _run,
                            _temp_dir, _toolchains, build_timeout)

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
PROBE_TIMEOUT_S = 30    # `cc --version` answers in milliseconds

_probes = {}                               # ($CC, its path) -> (Event set when probed, start)


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
