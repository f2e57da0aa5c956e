"""The C compiler's runs, their temporary files and the interpreter's exit, with what this
process remembers of its builds (``stats``, the compilers found broken).

A compiler runs in a session of its own (``_run``): a timeout kills its whole process group and
marks that compiler broken. Every temporary file and folder is recorded under the exit lock,
so that the exit hook (``_abandon``) kills the running compilers and removes what they were
writing; from then on no compiler starts and builds in flight raise ``Abandoned``.
"""
import atexit
import copy
import hashlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import threading

TIMEOUT_S = 120     # a variant's kernels compile in seconds; a compiler this slow is stuck

stats = {"compiled": 0, "loaded_from_cache": 0, "rejected_from_cache": 0,
         "compile_seconds": 0.0}

_lock = threading.Lock()    # guards stats and the dicts of builds (here, toolchain.py, build.py)
_toolchains = {}                           # ($CC, its path) -> toolchain() or its BuildError
_broken = {}                               # toolchain() -> the error that condemned it
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


def exiting() -> bool:
    """Whether the interpreter is exiting (builds in flight are being abandoned)."""
    return _exiting


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


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


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
