"""``nn.functional``'s per-sample normalisations: ``group_norm``, ``instance_norm`` and
``local_response_norm``.

Each is a composition of tracegrad ops (``instance_norm`` is ``batch_norm`` over the input
seen as one sample of ``N*C`` channels; ``local_response_norm`` averages squares with the
average-pool primitive), so none has a derivative of its own. Signatures, defaults and
errors are PyTorch's.
"""
import math

from ...autograd.grad_mode import no_grad
from ...ops import pool as P
from ...ops.core import op_error
from ._base import batch_norm


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each sample over groups of ``C / num_groups`` channels (biased variance),
    then scale and shift per channel."""
    if input.ndim < 2:
        raise op_error("group_norm", f"Expected at least 2 dimensions for input tensor but "
                                     f"received {input.ndim}")
    n, c = input.shape[:2]
    if c % num_groups:
        raise op_error("group_norm", f"Expected number of channels in input to be divisible by "
                                     f"num_groups, but got input of shape {list(input.shape)} and "
                                     f"num_groups={num_groups}")
    per_group = (c // num_groups) * math.prod(input.shape[2:])
    x = input.reshape(n, num_groups, per_group)     # explicit: -1 is ambiguous for n = 0
    mean = x.mean(-1, keepdim=True)
    centered = x - mean
    out = (centered * (centered * centered).mean(-1, keepdim=True).add(eps).rsqrt())
    out = out.reshape(input.shape)
    shape = (1, c) + (1,) * (input.ndim - 2)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Batch norm of each (sample, channel) plane: the input seen as ``(1, N*C, ...)``.
    Running stats (if given) are updated with the average over the batch of the per-sample
    statistics, as PyTorch's are."""
    if use_input_stats:
        spatial = math.prod(input.shape[2:])
        if spatial <= 1:
            raise ValueError(f"Expected more than 1 spatial element when training, got input "
                             f"size {_torch_size(input.shape)}")
    n, c = input.shape[:2]

    def repeat(t):
        return None if t is None else t.reshape(1, c).expand(n, c).reshape(n * c)

    rm, rv = repeat(running_mean), repeat(running_var)
    if rm is not None:
        rm, rv = rm.detach().clone(), rv.detach().clone()
    out = batch_norm(input.reshape((1, n * c) + input.shape[2:]), rm, rv, repeat(weight),
                     repeat(bias), use_input_stats, momentum, eps)
    if use_input_stats and running_mean is not None:
        with no_grad():
            running_mean.copy_(rm.reshape(n, c).mean(0))
            running_var.copy_(rv.reshape(n, c).mean(0))
    return out.reshape(input.shape)


def _torch_size(shape):
    return f"torch.Size([{', '.join(map(str, shape))}])"


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha * mean of x^2 over ``size`` neighbouring channels) ** beta``, the
    window zero-padded by ``size // 2`` before and ``(size - 1) // 2`` after, as PyTorch's."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         f"dimensions)")
    if input.numel() == 0:
        return input
    n, c = input.shape[:2]
    sq = (input * input).reshape(n, 1, c, -1)
    maps = (("avg", c, c, size, 1, size // 2, True), ("avg", sq.shape[-1], sq.shape[-1], 1, 1, 0,
                                                      True))
    div = P.linear_map(sq, P.avg_pool2d_p, maps, size).reshape(input.shape)
    return input / (div * alpha + k) ** beta
