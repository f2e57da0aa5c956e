"""Tiers of a variant: NumPy kernels at once, C kernels when their build is ready,
CUDA kernels for a variant whose tensors are on a GPU (``cuda_tier``).

A variant's fused groups first run as NumPy kernels (the module's ``<name>`` globals).
``start(variant, backend)`` renders the kernels the C language takes into one C
source, builds it (``codegen.build``: the system compiler, the on-disk cache) and
rebinds each of those globals to its ``CKernel``: the driver looks them up at each
call, so the next call runs C. With ``backend="auto"`` the build runs on a background
thread; with ``"c"`` the call waits for it. A missing compiler or a failed build leaves
the NumPy tier running, after one warning that names the cause. A variant on a GPU
gets its CUDA kernels at once with "auto" and "cuda" (its driver runs CuPy's calls with
"numpy", and the C tier never takes GPU arrays); ``backend="cuda"`` on the CPU is an
error (``cuda_tier.check``), never a silent NumPy run.
"""
import os
import threading
import time
import warnings

import numpy as np

from tracegrad.codegen import build, cstyle
from tracegrad.codegen.numpy import site_comment
from tracegrad.codegen.kernel import kernel_symbols
from tracegrad.codegen.support import CKernel

from . import cuda_tier

BACKENDS = ("auto", "numpy", "c", "cuda")
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
    With "auto", a library the disk cache already holds is loaded at once, so a warm
    cache runs C from the first call."""
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
        source, _, _ = variant.c_render = render(variant)
        if source is not None and build.is_cached(source, variant.label):
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
        lib = build.build(source, variant.label)
    except build.BuildError as e:
        _warn_once(f"tracegrad.compile: the C tier is not available ({e}); fused kernels "
                   "keep running on the NumPy tier.")
        return
    except Exception as e:      # noqa: BLE001 - a renderer bug must not stop the NumPy tier
        if strict:
            raise
        _warn_once(f"tracegrad.compile: building the C tier of {variant.label} failed "
                   f"({type(e).__name__}: {e}); it keeps running on the NumPy tier.")
        return
    dump = os.environ.get("TRACEGRAD_DUMP")
    if dump:
        with open(os.path.join(dump, f"{variant.label}.c"), "w") as f:
            f.write(source)
    for k in kept:
        dts = [i.dtype.np for i in k.inputs] + [op.dtype.np for op in k.outputs]
        parts = [(op.value.shape, np.dtype(op.dtype.np)) for op in k.partials]
        variant.namespace[k.name] = CKernel(getattr(lib, k.name), dts, parts, len(k.inputs),
                                            kernel_symbols(k))
    variant.c_source = source
    variant.c_kernels = [k.name for k in kept]
    variant.c_ready_at = time.perf_counter()
    variant.c_seconds = variant.c_ready_at - started
    variant.tier = "c"


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
