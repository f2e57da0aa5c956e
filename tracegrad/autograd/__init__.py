"""PyTorch's autograd: engine, Function, grad modes, hooks, checks, functional."""
from . import forward_ad, functional, graph
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .grad_mode import (
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad,
    set_grad_enabled,
)
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .variable import Variable
from . import profiler, profiler_util  # last: they import tracegrad.profiler, which needs the engine

__all__ = [
    "backward", "grad", "Function", "FunctionCtx", "once_differentiable", "Variable",
    "no_grad", "enable_grad", "set_grad_enabled", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled", "gradcheck", "gradgradcheck", "GradcheckError",
    "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "forward_ad", "functional",
    "graph",
    "profiler",
]
