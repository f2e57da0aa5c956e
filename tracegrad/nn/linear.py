"""``Linear``, ``Bilinear``, ``Identity`` and ``Flatten``: the layers that only reshape or map
linearly."""
import math

from .. import creation
from ..ops.core import op_error
from . import functional as F, init
from .module import Module
from .parameter import Parameter


class Identity(Module):
    """Returns its input; takes (and ignores) any constructor arguments."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` of shape ``(out_features, in_features)``.

    Initialised as PyTorch does: ``kaiming_uniform_(a=sqrt(5))`` for the weight, which is
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and the same bound for the bias.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(creation.empty(out_features, in_features, device=device,
                                               dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init._default_affine_(self.weight, self.bias)

    def forward(self, input):
        if input.shape[-1:] != (self.in_features,):
            raise op_error("Linear", f"expected input with last dimension {self.in_features} "
                                     f"(in_features), got input of shape {list(input.shape)}")
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class Flatten(Module):
    """Flattens dims ``start_dim`` to ``end_dim`` (by default all but the batch dim)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into ``unflattened_size`` (the inverse of ``Flatten``)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, input):
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Bilinear(Module):
    """``y = x1 @ weight[o] @ x2 + bias`` with ``weight`` of shape ``(out_features,
    in1_features, in2_features)``; weight and bias start U(-1/sqrt(in1), 1/sqrt(in1)), as
    PyTorch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        factory = {"device": device, "dtype": dtype}
        self.weight = Parameter(creation.empty(out_features, in1_features, in2_features,
                                               **factory))
        if bias:
            self.bias = Parameter(creation.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
