"""``nn.SyncBatchNorm``: batch norm whose statistics are those of the whole global batch.

In training, with a process group of more than one rank, the per-channel count,
sum and sum of squares of the local batch travel in one packed all-reduce; the
mean and the biased variance of the global batch normalise, and the running
stats are updated as BatchNorm's, with the unbiased variance of the global count.
The all-reduce is a custom ``Function`` whose backward all-reduces the gradient
of the packed sums, so backward costs one more all-reduce, carrying per channel
what PyTorch's ``sum_dy`` and ``sum_dy_xmu`` carry (the gradient with respect to
the global sum and sum of squares, from which each rank's input gradient
follows); weight and bias gradients stay local, for DDP to average. Being a
``Function``, it also runs at every call under ``compile``.

In eval mode, without an initialised process group, or in a world of one
process it is exactly ``BatchNorm``. The variance is computed as
``E[x^2] - mean^2`` of the global batch (what one all-reduce allows), in the
input's dtype.
"""
from .. import creation
from ..autograd import grad_mode
from ..ops import cat, rsqrt
from .normalization import _BatchNorm


class SyncBatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, process_group=None, device=None, dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device=device,
                         dtype=dtype)
        self.process_group = process_group

    def _check_input_dim(self, input):
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")

    def _group_size(self):
        from .. import distributed as dist
        if not dist.is_initialized():
            return 1
        return dist.get_world_size(self.process_group)

    def forward(self, input):
        if not self.training or self._group_size() == 1:
            return super().forward(input)
        self._check_input_dim(input)
        from ..distributed._functions import all_reduce_sum
        factor = 0.0 if self.momentum is None else self.momentum
        if self.track_running_stats and self.num_batches_tracked is not None:
            with grad_mode.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked)
        c = input.shape[1]
        dims = (0,) + tuple(range(2, input.ndim))
        shape = (1, c) + (1,) * (input.ndim - 2)
        count = creation.full((1,), float(input.numel() // c), dtype=input.dtype,
                              device=input.device)
        packed = cat([input.sum(dims), (input * input).sum(dims), count])
        packed = all_reduce_sum(packed, self.process_group)
        n = float(packed[2 * c])
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"{int(n)} over the group")
        mean = packed[:c] / n
        var = packed[c:2 * c] / n - mean * mean
        if self.track_running_stats and self.running_mean is not None:
            with grad_mode.no_grad():
                self.running_mean.mul_(1 - factor).add_(mean.detach() * factor)
                self.running_var.mul_(1 - factor).add_(var.detach() * (factor * n / (n - 1)))
        out = (input - mean.reshape(shape)) * rsqrt(var.reshape(shape) + self.eps)
        if self.weight is not None:
            out = out * self.weight.reshape(shape)
        if self.bias is not None:
            out = out + self.bias.reshape(shape)
        return out

    @classmethod
    def convert_sync_batchnorm(cls, module, process_group=None):
        """``module`` with every BatchNorm layer (1d/2d/3d) replaced by a ``SyncBatchNorm``
        that shares its parameters and buffers."""
        out = module
        if (isinstance(module, _BatchNorm) and not isinstance(module, SyncBatchNorm)
                and type(module).__name__.startswith("BatchNorm")):
            out = cls(module.num_features, module.eps, module.momentum, module.affine,
                      module.track_running_stats, process_group)
            for name in ("weight", "bias"):
                if name in module._parameters:
                    out._parameters[name] = module._parameters[name]
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                if name in module._buffers:
                    out._buffers[name] = module._buffers[name]
            out.training = module.training
        for name, child in module.named_children():
            out.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return out
