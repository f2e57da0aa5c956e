"""``nn.modules.activation``: PyTorch's path to layers defined in ``nn/activation.py``."""
from ..activation import (  # noqa: F401
    ReLU, GELU, Sigmoid, Tanh, SiLU, Softmax, LogSoftmax, LeakyReLU, ELU, Softplus, Mish,
    Hardswish, Hardsigmoid, PReLU, GLU, ReLU6, Hardtanh, SELU, CELU, Softsign, Softmin,
    Threshold, Hardshrink, Softshrink, Tanhshrink, LogSigmoid, Softmax2d, RReLU,
)
from ..attention import MultiheadAttention  # noqa: F401

__all__ = [
    "ReLU", "GELU", "Sigmoid", "Tanh", "SiLU", "Softmax", "LogSoftmax", "LeakyReLU", "ELU",
    "Softplus", "Mish", "Hardswish", "Hardsigmoid", "PReLU", "GLU", "MultiheadAttention",
    "ReLU6", "Hardtanh", "SELU", "CELU", "Softsign", "Softmin", "Threshold", "Hardshrink",
    "Softshrink", "Tanhshrink", "LogSigmoid", "Softmax2d", "RReLU",
]
