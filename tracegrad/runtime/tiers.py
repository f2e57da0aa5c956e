"""Tiers of a variant: NumPy kernels at once, C kernels when their build is ready,
CUDA kernels for a variant whose tensors are on a GPU (``cuda_tier``).

A variant's fused groups first run as NumPy kernels (the module's ``<name>`` globals).
``start(variant, backend)`` renders the kernels the C language takes into one C
source, builds it (``codegen.build``: the system compiler, the on-disk cache) and
rebinds each of those globals to its ``CKernel``: the driver looks them up at each
call, so the next call runs C. With ``backend="auto"`` the build runs on a background
thread; with ``"c"`` the call waits for it. A missing compiler or a failed build leaves
the NumPy tier running, after one warning that names the cause. With "auto" the
caller's thread never runs the compiler: it waits for the compiler's probe (its own
thread, once per process: ``build.toolchain``) at most ``PROBE_GRACE_S`` after the probe
began, so a warm cache still runs C from the first call, and a hung compiler costs that
wait once; past it, even the cache lookup is left to the background thread.
Before C kernels replace NumPy ones, the library is checked: ``build`` loads only a
complete library that defines every kernel, and on its first load here each small
kernel runs once on the NumPy tier and in C with the same inputs (``self_check``). A
library that fails is removed from the cache and built once more, then given up: with
"auto" after one warning, with "c" by an error that names the kernel. A variant on a GPU
gets its CUDA kernels at once with "auto" and "cuda" (its driver runs CuPy's calls with
"numpy", and the C tier never takes GPU arrays); ``backend="cuda"`` on the CPU is an
error (``cuda_tier.check``), never a silent NumPy run.
"""
import math
import os
import threading
import time
import warnings

import numpy as np

from tracegrad.codegen import build, cstyle
from tracegrad.codegen.numpy import site_comment
from tracegrad.codegen.kernel import kernel_symbols
from tracegrad.codegen.support import CKernel, Workspace

from . import cuda_tier

BACKENDS = ("auto", "numpy", "c", "cuda")
PROBE_GRACE_S = 0.5     # `cc --version` answers in tens of ms, on a busy machine in hundreds
SELF_CHECK_MAX = 1 << 15    # elements of a kernel's domain: larger kernels are not run twice
_warned = set()
_warn_lock = threading.Lock()


def choose(backend):
    """The backend a compile call uses: its own, else ``$TRACEGRAD_BACKEND``, else auto."""
    chosen = backend or os.environ.get("TRACEGRAD_BACKEND") or "auto"
    if chosen not in BACKENDS:
        raise ValueError(f"compile: backend must be one of {', '.join(map(repr, BACKENDS))}, "
                         f"got {chosen!r}")
    return chosen


def start(variant, backend):
    """Begin the C tier of ``variant`` as ``backend`` says (see the module docstring).
    With "auto", a library the disk cache already holds is loaded at once (once the
    compiler is known), so a warm cache runs C from the first call."""
    if variant.device == "cuda":
        if backend in ("auto", "cuda") and variant.kernel_ir:
            cuda_tier.start(variant, strict=backend == "cuda")
        return
    if backend == "cuda":       # only captured tensors, all on the CPU
        raise RuntimeError(f"compile(backend='cuda'): {variant.title} reads no tensor on a "
                           "GPU; move its tensors with .cuda(), or compile with backend='auto'")
    if backend not in ("auto", "c") or not variant.kernel_ir:
        return
    if backend == "c":
        _build(variant, strict=True)
        return
    try:
        known = build.toolchain(wait=PROBE_GRACE_S)     # None: the probe has not answered
    except build.BuildError:
        _build(variant)         # a compiler that failed before fails at once (one warning)
        return
    try:
        if known is not None:
            source, kept, _ = variant.c_render = render(variant)
            if source is not None and build.is_cached(source, variant.label, _names(kept)):
                _build(variant)
                return
    except build.BuildError:
        pass        # the background build reports it, once
    variant.c_thread = threading.Thread(target=_build, args=(variant,), daemon=True,
                                        name=f"tracegrad-build-{variant.label}")
    variant.c_thread.start()


def render(variant):
    """``(C source, kernels it holds, {kernel name: why not})`` for ``variant``."""
    lang = cstyle.C()
    parts, kept, skipped = [], [], {}
    for k in variant.kernel_ir:
        try:
            parts.append(lang.render_kernel(k, site_comment))
            kept.append(k)
        except cstyle.Unsupported as e:
            skipped[k.name] = str(e)
    if not kept:
        return None, [], skipped
    simd = "-lmvec" in build.toolchain()[2]
    head = (f"/* C tier of {variant.title}: one function per fused group.\n"
            f"   Built by tracegrad.codegen.build with {' '.join(build.toolchain()[2])}. */\n")
    source = head + cstyle.declarations(kept, lang, simd) + "\n\n" + "\n\n\n".join(parts) + "\n"
    return source, kept, skipped


def _build(variant, strict=False):
    started = time.perf_counter()
    try:
        source, kept, skipped = getattr(variant, "c_render", None) or render(variant)
        variant.c_render = None
        variant.c_skipped = skipped
        if source is None:
            return
        # Idle OpenMP threads sleep instead of spinning: on a machine whose cores are busy
        # a spinning thread holds a core the others wait for, and a kernel of 0.2 ms took
        # a whole scheduler slice (8 ms). libgomp reads this when the first library loads.
        os.environ.setdefault("OMP_WAIT_POLICY", "passive")
        kernels = _load(variant, source, kept)
    except build.BadLibrary as e:
        if build.exiting():
            return
        if strict:
            named = e.missing or _names(kept)
            raise RuntimeError(
                f"compile(backend='c'): the C kernel{'s' * (len(named) > 1)} "
                f"{', '.join(named)} of {variant.title} cannot run: {e}. Compile with "
                "backend='auto' to keep the NumPy tier instead.") from None
        _warn_once(f"tracegrad.compile: the C tier is not available ({e}); fused kernels "
                   "keep running on the NumPy tier.")
        return
    except build.BuildError as e:
        if not build.exiting():     # at exit the build was abandoned: nothing went wrong
            _warn_once(f"tracegrad.compile: the C tier is not available ({e}); fused "
                       "kernels keep running on the NumPy tier.")
        return
    except Exception as e:      # noqa: BLE001 - a renderer bug must not stop the NumPy tier
        if strict:
            raise
        if not build.exiting():
            _warn_once(f"tracegrad.compile: building the C tier of {variant.label} failed "
                       f"({type(e).__name__}: {e}); it keeps running on the NumPy tier.")
        return
    dump = os.environ.get("TRACEGRAD_DUMP")
    if dump:
        with open(os.path.join(dump, f"{variant.label}.c"), "w") as f:
            f.write(source)
    variant.namespace.update(kernels)
    variant.c_source = source
    variant.c_kernels = [k.name for k in kept]
    variant.c_ready_at = time.perf_counter()
    variant.c_seconds = variant.c_ready_at - started
    variant.tier = "c"


def _names(kept):
    return tuple(k.name for k in kept)


def _load(variant, source, kept):
    """``{kernel name: CKernel}`` from the library of ``source``, checked against the NumPy
    tier on its first load here; a cached library that fails is removed and built again
    once. Raises BuildError (BadLibrary when the library itself is at fault)."""
    for _ in range(2):
        lib = build.build(source, variant.label, symbols=_names(kept))
        kernels = {}
        for k in kept:
            dts = [i.dtype.np for i in k.inputs] + [op.dtype.np for op in k.outputs]
            parts = [(op.value.shape, np.dtype(op.dtype.np)) for op in k.partials]
            kernels[k.name] = CKernel(getattr(lib, k.name), dts, parts, len(k.inputs),
                                      kernel_symbols(k))
        with _warn_lock:
            checked = lib._name in _checked
        problem = None if checked else self_check(variant, kept, kernels)
        if problem is None:
            with _warn_lock:
                _checked.add(lib._name)
            return kernels
        cached = build.from_cache(lib)
        build.discard(lib)      # wrong for every process that would load it
        if not cached:
            break
    name, what = problem
    raise build.BadLibrary(f"its library {os.path.basename(lib._name)} disagrees with the "
                           f"NumPy tier: {what}", (name,))


_checked = set()    # libraries whose kernels passed self_check in this process


def self_check(variant, kept, kernels):
    """None when each C kernel of ``kernels`` gives its NumPy kernel's results, else (the
    kernel's name, what differs: "forward_fused0 gives [0.] where the NumPy tier gives
    [2.31]"). Inputs are drawn in [0.5, 1.5] (ints in 1..3), where no op of the C tier
    divides by zero, so a sound library agrees to rounding; a kernel with symbolic sizes,
    or over more than ``SELF_CHECK_MAX`` elements, is not run."""
    rng = np.random.default_rng(0)
    for k in kept:
        fn, specs = variant.namespace.get(k.name), None
        for kernels_spec, *_ in getattr(variant, "workspaces", {}).values():
            specs = kernels_spec.get(k.name, specs)
        if kernel_symbols(k) or math.prod(k.domain) > SELF_CHECK_MAX or isinstance(fn, CKernel) \
                or fn is None:
            continue
        args = [_sample(rng, (i.value if i.source is None else i.source).shape,
                        np.dtype(i.dtype.np)) for i in k.inputs]
        outs_np = [np.zeros(op.value.shape, op.dtype.np) for op in k.outputs]
        outs_c = [np.zeros(op.value.shape, op.dtype.np) for op in k.outputs]
        # a workspace of its own: the variant's pool may be in use by the caller's thread
        ws = Workspace(kernels={k.name: specs} if specs else {}).take()
        try:
            with np.errstate(all="ignore"):
                want = list(outs_np) + list(fn(*args, *outs_np, ws) or ())
        except Exception:   # noqa: BLE001 - a kernel these inputs do not suit: not checked
            continue
        try:
            got = list(outs_c) + list(kernels[k.name](*args, *outs_c, ws) or ())
        except Exception as e:  # noqa: BLE001 - arguments the library's function refuses
            return k.name, f"{k.name} refuses the NumPy tier's arguments ({e})"
        for g, w in zip(got, want):
            g, w = np.asarray(g), np.asarray(w)
            if g.size != w.size or not _agree(g.reshape(-1), w.reshape(-1)):
                return k.name, f"{k.name} gives {_show(g)} where the NumPy tier gives {_show(w)}"
    return None


def _sample(rng, shape, dtype):
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return np.asarray(rng.integers(1, 4, shape), dtype)
    return np.asarray(rng.uniform(0.5, 1.5, shape), dtype)


def _agree(got, want):
    """Equal to rounding at 99% of the elements or more: C and NumPy round some functions
    differently (vector tanhf), and a comparison on such a value may flip; a library that
    is not this source's gets most of them wrong."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    finite = np.abs(w[np.isfinite(w)])
    scale = finite.max() if finite.size else 1.0
    close = np.isclose(g, w, rtol=1e-3, atol=1e-3 * max(scale, 1.0), equal_nan=True)
    return close.all() if g.size < 100 else close.mean() >= 0.99


def _show(a):
    flat = a.reshape(-1)
    return np.array2string(flat[:3], precision=4) + (" ..." if flat.size > 3 else "")


def wait(variant, timeout=None):
    """Wait for a background C build of ``variant`` (tests and benchmarks use it)."""
    t = getattr(variant, "c_thread", None)
    if t is not None:
        t.join(timeout)


def _warn_once(message):
    with _warn_lock:
        if message in _warned:
            return
        _warned.add(message)
    warnings.warn(message, RuntimeWarning, stacklevel=2)
