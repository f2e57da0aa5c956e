"""tracegrad: PyTorch's autograd on NumPy/CuPy, and a compiler for it.

``import tracegrad as torch`` gives tensors, autograd and grad modes with
PyTorch's behaviour; ``tracegrad.compile`` traces a function
into an IR and emits fused NumPy or CUDA code for its forward and backward.
"""
from . import dtypes
from .dtypes import (
    bool, double, dtype, float, float16, float32, float64, get_default_dtype, half, int, int8,
    int16, int32, int64, long, set_default_dtype, short, uint8,
)
from .device import device, get_default_device, set_default_device
from .layouts import layout, strided  # noqa: F401 - PyTorch's one layout: dense
from .tensor import Size, Tensor
from .tensor import (  # noqa: F401 - PyTorch's memory formats, accepted and ignored
    channels_last, channels_last_3d, contiguous_format, memory_format, preserve_format,
)
from . import ops
from .ops import *  # noqa: F401,F403 - the op functions are tracegrad's namespace
from .ops import _install_new_methods
from .creation import (
    Generator, arange, as_tensor, default_generator, empty, empty_like, eye, from_numpy, full,
    full_like, initial_seed, linspace, manual_seed, ones, ones_like, rand, rand_like, randint,
    randint_like, randn, randn_like, randperm, seed, tensor, zeros, zeros_like,
)
from ._tensor_str import set_printoptions
from . import autograd, compiler, cuda, utils
from . import amp, multiprocessing
from .amp import autocast
from . import accelerator, backends
from .backends import get_float32_matmul_precision, set_float32_matmul_precision
from .symbolic import mark_dynamic, mark_static
from . import nn, optim
from . import distributed  # imports no MPI until init_process_group
from . import onnx  # imports the onnx package only when export is called
from . import profiler, viz
from .autograd import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled
from .autograd.function import Function
from .parallel import get_num_threads, set_num_threads
from .serialization import load, save
import importlib as _importlib
_importlib.import_module("tracegrad.trace")  # loaded first, so tracegrad.trace is the op
from . import func, linalg, masked, random, signal, special, testing
from .linalg.composed import det, inverse, logdet, slogdet
from .linalg.more import _LEGACY as _legacy_linalg
from .linalg.lu import _LEGACY as _legacy_lu
globals().update(_legacy_linalg)     # torch.cholesky, torch.svd (U, S, V), torch.qr, ...
globals().update(_legacy_lu)         # torch.lu, torch.lu_solve, torch.lu_unpack
from .ops.more_ops import *  # noqa: F401,F403 - trace among them, over the module's name
from .type_info import finfo, iinfo

_install_new_methods()
from .torch_functions import exports as _torch_functions
globals().update({k: v for k, v in _torch_functions().items() if k not in globals()})


def compile(fn=None, *, backend=None, dynamic=None, fullgraph=False, mode=None,
            max_variants=8):
    """Trace ``fn`` (a function or an ``nn.Module``) into an IR and run generated code.

    Works as ``@compile``, ``@compile(backend=...)`` and ``compile(model)``. The result
    takes and returns what ``fn`` does; its tensor outputs take part in autograd. A module
    compiles to an ``OptimizedModule``: a module whose calls run the compiled forward and
    whose parameters, ``state_dict`` (the original's keys), ``train()``/``eval()`` and
    attributes are the original's (``_orig_mod``); ``Module.compile()`` compiles in place.
    ``backend``: "auto" (the default, or ``$TRACEGRAD_BACKEND``) runs fused groups on the
    NumPy tier at once and on C kernels once they are built in the background; "c" waits
    for the C build; "numpy" never builds. Without a C compiler, "auto" and "c" keep the
    NumPy tier and warn once.
    ``dynamic``: None (PyTorch's automatic dynamic: a retrace caused by a changed size makes
    that dim symbolic, so one variant serves every size), True (symbolic from the first
    call), False (every variant specialised to its shapes); ``mark_dynamic(t, dim)`` and
    ``mark_static`` decide per tensor. What a graph cannot hold (a store to outside state
    that the function also reads, an op whose result's size depends on the data, an
    ``LBFGS`` step) makes the rest of the call, and later calls, run eagerly after one
    warning; with ``fullgraph=True`` it raises instead, before the call changes anything.
    Stores to outside state that the function only writes are replayed after each run.
    A construct that cannot be traced at all raises. ``max_variants`` bounds retracing
    before the function runs eagerly.
    """
    from tracegrad.runtime.compiled import CompiledFunction   # the runtime loads lazily
    from tracegrad.runtime.module import OptimizedModule

    def wrap(f):
        compiled = CompiledFunction(f, backend=backend, dynamic=dynamic, fullgraph=fullgraph,
                                    max_variants=max_variants)
        return OptimizedModule(f, compiled) if isinstance(f, nn.Module) else compiled
    return wrap if fn is None else wrap(fn)


def _conv_kernels():
    """The C window kernels of the convolutions and pools (``ops/conv_columns.py``): the
    package installs this look-up, so that the eager core does not import the code
    generator; without it (no ``tracegrad.codegen``) the NumPy code runs."""
    try:
        from tracegrad.codegen import conv_kernels
    except ImportError:
        return False
    return conv_kernels.provide()


ops.conv_columns.KERNEL_PROVIDER = _conv_kernels


class _LegacyTensorType(type):
    """``tracegrad.FloatTensor`` and friends: constructors and isinstance checks by dtype."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __call__(cls, *args, device=None):
        if len(args) == 1 and not isinstance(args[0], builtins_int):
            return tensor(args[0], dtype=cls.dtype, device=device)
        return zeros(*args, dtype=cls.dtype, device=device)


builtins_int = type(0)
FloatTensor = _LegacyTensorType("FloatTensor", (), {"dtype": float32})
DoubleTensor = _LegacyTensorType("DoubleTensor", (), {"dtype": float64})
HalfTensor = _LegacyTensorType("HalfTensor", (), {"dtype": float16})
LongTensor = _LegacyTensorType("LongTensor", (), {"dtype": int64})
IntTensor = _LegacyTensorType("IntTensor", (), {"dtype": int32})
BoolTensor = _LegacyTensorType("BoolTensor", (), {"dtype": bool})
is_tensor = lambda obj: isinstance(obj, Tensor)  # noqa: E731


def is_floating_point(input):
    return input.is_floating_point()


def numel(input):
    return input.numel()


def typename(obj):
    return obj.type() if isinstance(obj, Tensor) else type(obj).__name__


__version__ = "0.1.0"
