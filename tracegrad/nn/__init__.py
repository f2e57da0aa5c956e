"""``tracegrad.nn``: modules, parameters, layers, losses, ``functional`` and ``init``.

Everything is written with tracegrad ops, so a model runs eagerly with
autograd and traces unchanged under ``tracegrad.compile``.
"""
from . import functional, init
from . import utils
from .activation import (
    ELU, GELU, GLU, Hardsigmoid, Hardswish, LeakyReLU, LogSoftmax, Mish, PReLU, ReLU, Sigmoid,
    SiLU, Softmax, Softplus, Tanh,
)
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .linear import Flatten, Identity, Linear
from .loss import (
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
    SmoothL1Loss,
)
from .module import Module
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .parameter import Parameter
from .sparse import Embedding

__all__ = [
    "Module", "Parameter", "Sequential", "ModuleList", "ModuleDict", "Linear", "Identity",
    "Flatten", "ReLU", "GELU", "Sigmoid", "Tanh", "SiLU", "Softmax", "LogSoftmax", "Dropout",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding", "MSELoss", "L1Loss", "NLLLoss",
    "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss", "LeakyReLU", "ELU", "Softplus", "Mish",
    "Hardswish", "Hardsigmoid", "PReLU", "GLU", "SmoothL1Loss", "HuberLoss", "KLDivLoss",
    "functional", "init",
]
