"""Convolution layers: ``Conv1d/2d/3d`` and ``ConvTranspose1d/2d/3d``, as PyTorch's.

Parameters, defaults, initialisation (``kaiming_uniform_(a=sqrt(5))`` on the weight, the bias
uniform in +-1/sqrt(fan_in)), ``padding_mode``, ``extra_repr`` and ``state_dict`` keys follow
``torch.nn.Conv2d``; the arithmetic is ``nn.functional``'s.
"""
from .. import creation
from ..tensor import Size
from . import functional as F, init
from .module import Module
from .parameter import Parameter

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(value, n):
    return tuple(value) if hasattr(value, "__len__") else (value,) * n


class _ConvNd(Module):
    """What the convolution layers share: arguments, parameters and their initialisation."""

    _nd = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, dilation,
                 groups, bias, padding_mode, output_padding=0, device=None, dtype=None):
        super().__init__()
        nd = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 f"{{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, nd)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, nd)
        self.stride = _ntuple(stride, nd)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, nd)
        self.dilation = _ntuple(dilation, nd)
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, nd)
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's widths (last dim first) for a non-zeros padding_mode; 'same' splits as F does
        pads = []
        for k, d, p in reversed(list(zip(self.kernel_size, self.dilation,
                                          _ntuple(0 if padding == "valid" else padding, nd)))):
            if padding == "same":
                total = d * (k - 1)
                pads += [total // 2, total - total // 2]
            else:
                pads += [p, p]
        self._reversed_padding_repeated_twice = pads
        shape = ((in_channels, out_channels // groups) if self._transposed
                 else (out_channels, in_channels // groups)) + self.kernel_size
        self.weight = Parameter(creation.empty(*shape, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(creation.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init._default_affine_(self.weight, self.bias)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device=device, dtype=dtype)

    def _conv_forward(self, input, weight, bias):
        conv = (F.conv1d, F.conv2d, F.conv3d)[self._nd - 1]
        if self.padding_mode != "zeros":
            input = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(input, weight, bias, self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)

    def forward(self, input):
        return self._conv_forward(input, self.weight, self.bias)


class Conv1d(_Conv):
    """1-d convolution over ``(N, C, L)`` (or unbatched ``(C, L)``)."""
    _nd = 1


class Conv2d(_Conv):
    """2-d convolution over ``(N, C, H, W)`` (or unbatched ``(C, H, W)``)."""
    _nd = 2


class Conv3d(_Conv):
    """3-d convolution over ``(N, C, D, H, W)`` (or unbatched ``(C, D, H, W)``)."""
    _nd = 3


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding, device=device, dtype=dtype)

    def _output_padding(self, input, output_size):
        """The output padding that gives ``output_size`` (PyTorch's ``output_size=`` argument)."""
        if output_size is None:
            return self.output_padding
        nd = self._nd
        lead = 2 if input.ndim == nd + 2 else 1
        requested = output_size
        output_size = tuple(output_size)
        if len(output_size) == lead + nd:
            output_size = output_size[lead:]
        if len(output_size) != nd:
            raise ValueError(f"ConvTranspose{nd}D: for {input.ndim}D input, output_size must "
                             f"have {nd} or {lead + nd} elements (got {len(output_size)})")
        low = [(input.shape[lead + d] - 1) * self.stride[d] - 2 * self.padding[d]
               + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(nd)]
        high = [n + s - 1 for n, s in zip(low, self.stride)]
        for size, lo, hi in zip(output_size, low, high):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {requested}, but valid sizes "
                                 f"range from {low} to {high} (for an input of "
                                 f"{Size(input.shape[lead:])})")
        return tuple(size - lo for size, lo in zip(output_size, low))

    def forward(self, input, output_size=None):
        conv = (F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)[self._nd - 1]
        return conv(input, self.weight, self.bias, self.stride, self.padding,
                    self._output_padding(input, output_size), self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose):
    """The adjoint of ``Conv1d`` in its input (a "deconvolution")."""
    _nd = 1


class ConvTranspose2d(_ConvTranspose):
    """The adjoint of ``Conv2d`` in its input (a "deconvolution")."""
    _nd = 2


class ConvTranspose3d(_ConvTranspose):
    """The adjoint of ``Conv3d`` in its input (a "deconvolution")."""
    _nd = 3
