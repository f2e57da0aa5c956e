"""Lazy modules: ``LazyLinear``, ``LazyConv*``, ``LazyConvTranspose*``, ``LazyBatchNorm*`` and
``LazyInstanceNorm*``, over PyTorch's ``UninitializedParameter``/``UninitializedBuffer``
(``nn.parameter``).

A lazy module is built without its input size; its parameters are placeholders with no
shape. The first call infers ``in_features``/``in_channels``/``num_features`` from the
input, materialises the placeholders in place (the same objects become ordinary
``Parameter``s and tensors, so anything holding them keeps them), initialises them as the
regular layer does and turns the module into that layer (``cls_to_become``), as PyTorch's
``LazyModuleMixin`` does. Loading a state_dict into a lazy module materialises the
placeholders with the checkpoint's shapes first.
"""
from .. import creation, dtypes
from ..autograd.grad_mode import no_grad
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import (
    BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,
)
from .parameter import UninitializedBuffer, UninitializedParameter, _UninitializedMixin


def is_lazy(value):
    return isinstance(value, _UninitializedMixin)


class LazyModuleMixin:
    """What the lazy layers share: the first call's parameter inference, the switch to
    ``cls_to_become``, state_dict saving and loading of placeholders."""

    cls_to_become = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def has_uninitialized_params(self):
        """Whether a parameter or buffer is still a placeholder."""
        values = list(self._parameters.values()) + list(self._buffers.values())
        return any(is_lazy(v) for v in values)

    def initialize_parameters(self, *args, **kwargs):
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def _infer_parameters(self, module, args, kwargs=None):
        kwargs = kwargs or {}
        self.initialize_parameters(*args, **kwargs)
        if self.has_uninitialized_params():
            raise RuntimeError(f"module {self._get_name()} has not been fully initialized")
        self._initialize_hook.remove()
        del self._initialize_hook
        if self.cls_to_become is not None:
            self.__class__ = self.cls_to_become

    def _apply(self, fn):
        # a placeholder buffer stays one, in the converted dtype (parameters keep their
        # object: _apply assigns their .data)
        lazy = {name: fn(b).dtype for name, b in self._buffers.items() if is_lazy(b)}
        super()._apply(fn)
        for name, dtype in lazy.items():
            self._buffers[name] = UninitializedBuffer(dtype=dtype)
        return self

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        # placeholders are saved as themselves (they have no values to detach)
        for name, value in self._parameters.items():
            if value is not None:
                destination[prefix + name] = value if keep_vars or is_lazy(value) \
                    else value.detach()
        for name, value in self._buffers.items():
            if value is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = value if keep_vars or is_lazy(value) \
                    else value.detach()

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys,
                              error_msgs, assign):
        for store in (self._parameters, self._buffers):
            for name, value in store.items():
                key = prefix + name
                if is_lazy(value) and key in state_dict and not is_lazy(state_dict[key]):
                    with no_grad():
                        value.materialize(tuple(state_dict[key].shape))
        super()._load_from_state_dict(state_dict, prefix, missing_keys, unexpected_keys,
                                      error_msgs, assign)


# linear --------------------------------------------------------------------------------------


class LazyLinear(LazyModuleMixin, Linear):
    """``Linear`` whose ``in_features`` is the first input's last dim."""

    cls_to_become = Linear

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            with no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        if self.in_features == 0:       # materialised by load_state_dict
            if input.shape[-1] != self.weight.shape[-1]:
                raise AssertionError(f"The in_features inferred from input: {input.shape[-1]} "
                                     f"is not equal to in_features from self.weight: "
                                     f"{self.weight.shape[-1]}")
            self.in_features = input.shape[-1]


# convolutions --------------------------------------------------------------------------------


class _LazyConvXdMixin(LazyModuleMixin):
    """``in_channels`` from dim 1 of a batch (dim 0 of one sample)."""

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input):
        unbatched = self._nd + 1
        if input.dim() not in (unbatched, unbatched + 1):
            raise RuntimeError(f"Expected {unbatched}D (unbatched) or {unbatched + 1}D "
                               f"(batched) input to {type(self).__name__}, but got input of "
                               f"size: {input.shape}")
        return input.shape[1] if input.dim() == unbatched + 1 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.in_channels = self._get_in_channels(input)
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with no_grad():
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups)
            else:
                shape = (self.out_channels, self.in_channels // self.groups)
            self.weight.materialize(shape + tuple(self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()

    def _lazy_placeholders(self, out_channels, bias, device, dtype):
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)


class _LazyConv(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device=device, dtype=dtype)
        self._lazy_placeholders(out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(self, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device=device, dtype=dtype)
        self._lazy_placeholders(out_channels, bias, device, dtype)


class LazyConv1d(_LazyConv, Conv1d):
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    cls_to_become = ConvTranspose3d


# normalisation -------------------------------------------------------------------------------


class _LazyNormBase(LazyModuleMixin):
    """``num_features`` from the input's dim 1, as PyTorch's ``_LazyNormBase``."""

    def __init__(self, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = creation.tensor(0, dtype=dtypes.int64)

    def reset_parameters(self):
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs):
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with no_grad():
            if self.affine:
                self.weight.materialize((self.num_features,))
                if self.bias is not None:
                    self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    cls_to_become = BatchNorm3d


class LazyInstanceNorm1d(_LazyNormBase, InstanceNorm1d):
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyNormBase, InstanceNorm2d):
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyNormBase, InstanceNorm3d):
    cls_to_become = InstanceNorm3d
