"""The CUDA tier of a variant whose tensors are on a GPU.

``start(variant)`` renders the variant's kernels that the CUDA language takes into one
``.cu`` source (``render``), compiles it once as a ``cupy.RawModule`` (NVRTC through
CuPy, cached by CuPy), and rebinds each of those kernels' names in the generated module
to its ``CudaKernel``, as the C tier does for C. The rest of the driver runs CuPy's
NumPy-compatible calls (a CUDA variant's module imports ``cupy as np``), so a kernel the
language does not take still runs on the GPU. ``TRACEGRAD_DUMP`` writes the source as
``<label>.cu``. ``place(variant, constants)`` ties the variant to its GPU (one variant a
device: the guard signature holds the device index): its large constants copied there once
when it is built, its driver run with that GPU current (host scalars, an optimizer's
learning rate or step count, copied over at each call). The build is synchronous: the
first call waits for NVRTC (CuPy's disk cache makes later processes' builds quick).
``check(backend, tensors, label)`` is the error for ``backend="cuda"`` where it cannot
run: without CuPy or a GPU, or with tensors on the CPU (compile does not move data, as
``torch.compile`` does not).
"""
import os
import time
import warnings

import numpy as np

from tracegrad.codegen import cuda
from tracegrad.codegen.cuda_launch import CudaKernel, CudaModule
from tracegrad.codegen.numpy import site_comment
from tracegrad.codegen.support import buffer_bytes
from tracegrad.ops.core import op_error

from . import cuda_graphs


def on_gpu(array):
    """Whether ``array`` (a tensor's data) lives on a GPU: a CuPy array, not NumPy's."""
    return type(array) is not np.ndarray


def cupy():
    """The CuPy module (``tracegrad.device.cupy()``: its clear error where there is none)."""
    from tracegrad.device import cupy       # (``tracegrad.device`` is the class)
    return cupy()


def check(backend, tensors, label):
    """Raise where ``backend="cuda"`` cannot run on ``tensors`` (the call's)."""
    if backend != "cuda":
        return
    try:
        cupy()
    except RuntimeError as e:
        raise op_error("compile(backend='cuda')", f"cannot run {label}: {e}") from None
    on_cpu = [k for k, t in enumerate(tensors) if not on_gpu(t._data)]
    if on_cpu:
        raise op_error(
            "compile(backend='cuda')",
            f"{label} was called with tensors on the CPU (tensor argument(s) "
            f"{', '.join(map(str, on_cpu))} of {len(tensors)}); compile does not move data: "
            "move them with .cuda() or .to('cuda'), or compile with backend='auto' to run them "
            "on the CPU")


def place(variant, constants):
    """Make ``variant``'s driver run on its GPU (``variant.device_index``): the NumPy arrays
    among ``constants`` (its module's globals: constants over the inline limit) become
    device arrays once, ``forward`` and ``backward`` run with that GPU as CuPy's current
    device (where CuPy's calls allocate and launch), and results are kept on it. The
    variant's scalar inputs (a learning rate read afresh each call) stay host tensors, as
    traced: their guards check that, and ``on_device`` copies them over at each call."""
    cp, index = cupy(), variant.device_index
    ns = variant.namespace
    with cp.cuda.Device(index):
        for name, obj in constants.items():
            if isinstance(obj, np.ndarray):
                ns[name] = cp.asarray(obj)
    variant.graph_off = cuda_graphs.unwanted(variant)
    if variant.graph_off is None:   # replayed as one CUDA graph once warm
        variant.forward = cuda_graphs.Graphed(variant.forward, cp, index, ns,
                                              variant.n_results, variant.mutated)
    else:
        variant.forward = on_device(variant.forward, cp, index)
    if variant.backward is not None:
        variant.backward_graph_off = cuda_graphs.unwanted(variant, "backward")
        if variant.backward_graph_off is None:
            variant.backward = cuda_graphs.Graphed(variant.backward, cp, index, ns, 0)
        else:
            variant.backward = on_device(variant.backward, cp, index)
    variant.on_device = lambda: cp.cuda.Device(index)
    ndarray = cp.ndarray

    def asarray(a):     # a result: a CuPy array already, or a scalar made one on the GPU
        if type(a) is ndarray:
            return a
        with cp.cuda.Device(index):
            return cp.asarray(a)
    variant.asarray = asarray


def on_device(fn, cp, index):
    """``fn`` (a generated function) run with GPU ``index`` as CuPy's current device. A host
    array among its arguments (a CPU scalar tensor that joins CUDA ops, as an optimizer's
    step count does in PyTorch) is copied there first: CuPy refuses host arrays."""
    host = np.ndarray

    def run(*arrays):
        with cp.cuda.Device(index):
            return fn(*[cp.asarray(a) if type(a) is host else a for a in arrays])
    run.__wrapped__ = fn
    return run


def render(variant):
    """``(source, [(kernel, launch)] it holds, {kernel name: why not})`` for ``variant``."""
    lang = cuda.CUDA()
    parts, kept, skipped = [], [], {}
    for k in variant.kernel_ir:
        try:
            src, launch = lang.render(k, site_comment)
        except cuda.Unsupported as e:
            skipped[k.name] = str(e)
            continue
        parts.append(src)
        kept.append((k, launch))
    if not kept:
        return None, [], skipped
    head = (f"// CUDA tier of {variant.title}: one kernel per fused group (and a _combine\n"
            f"// kernel where a group reduces over its rows), compiled by NVRTC through CuPy.\n")
    source = head + cuda.declarations([k for k, _ in kept], lang) + "\n" + "\n\n\n".join(parts)
    return source + "\n", kept, skipped


def start(variant, strict):
    """Build the CUDA tier of ``variant`` and switch its kernels to it. A failed build
    raises with ``strict`` (``backend="cuda"``); else (``"auto"``) it warns once and the
    kernels keep running as CuPy's calls."""
    try:
        _start(variant)
    except Exception as e:      # noqa: BLE001 - NVRTC's error, or a renderer bug
        if strict:
            raise
        warnings.warn(f"tracegrad.compile: building the CUDA tier of {variant.label} failed "
                      f"({type(e).__name__}: {e}); its kernels run as CuPy's calls.",
                      RuntimeWarning, stacklevel=3)


def _start(variant):
    started = time.perf_counter()
    source, kept, skipped = render(variant)
    variant.cuda_skipped = skipped
    if source is None:
        return
    dump = os.environ.get("TRACEGRAD_DUMP")
    if dump:
        os.makedirs(dump, exist_ok=True)
        with open(os.path.join(dump, f"{variant.label}.cu"), "w") as f:
            f.write(source)
    module = CudaModule(source)
    for k, launch in kept:
        dts = [i.dtype.np for i in k.inputs] + [op.dtype.np for op in k.outputs]
        parts = [(op.value.shape, np.dtype(op.dtype.np)) for op in k.partials]
        variant.namespace[k.name] = CudaKernel(module, launch, dts, parts, len(k.inputs))
    variant.cuda_source = source
    variant.cuda_kernels = [k.name for k, _ in kept]
    # a CUDA kernel takes no scratch: the workspaces stop making its NumPy tier's on the GPU
    for name in variant.workspaces:
        variant.namespace[name].drop(variant.cuda_kernels)
    variant.workspace_bytes = sum(buffer_bytes(kernels, slots, variant.cuda_kernels)
                                  for kernels, slots, _ in variant.workspaces.values())
    variant.cuda_seconds = time.perf_counter() - started
    variant.tier = "cuda"
