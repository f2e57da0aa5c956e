"""The base of ``nn.functional``: activations, softmax, distances, linear, dropout, embedding
and the batch and layer norms, with the helpers the other parts share (``_inplace``,
``_softmax_dim``, ``log_sigmoid``); those parts import them from here, never from the package.

Every function is a composition of tracegrad ops, so it has no derivative
of its own and traces into the compiler's IR like user code does. Formulas
follow PyTorch's kernels where the form matters for rounding or for a
gradient at a kink (noted where they do). Randomness (dropout) comes from
``tracegrad.rand_like`` so a tracer sees it as a random op.
"""
import warnings

from ... import creation, dtypes
from ...autograd.grad_mode import no_grad
from ...ops import (
    broadcast_tensors, exp, expm1, gelu as _gelu, index_select, log1p,
    log_softmax as _log_softmax, matmul, norm, relu as _relu, rsqrt,
    sigmoid as _sigmoid, silu as _silu, softmax as _softmax, softplus, tanh as _tanh,
    where,
)
from ...ops.core import op_error
from ...tensor import Tensor
from ...ops.linalg import mm
from ...ops.nn_ops import _tracing, addmm
from ...ops.nn_ops import embedding as _embedding
from ...ops.declare import backward_name, method

# activations ------------------------------------------------------------------------------


def relu(input, inplace=False):
    return input.relu_() if inplace else _relu(input)


def gelu(input, approximate="none"):
    return _gelu(input, approximate=approximate)


def sigmoid(input):
    return _sigmoid(input)


def tanh(input):
    return _tanh(input)


def silu(input, inplace=False):
    return input.mul_(_sigmoid(input)) if inplace else _silu(input)




@backward_name("LogSigmoidBackward0")
def log_sigmoid(input):
    """log(sigmoid(x)): x - log1p(exp(x)) below 0, -log1p(exp(-x)) from 0 on, each branch fed
    only its own side of 0 (so neither exp overflows, nor makes the other's gradient NaN).
    Both branches are smooth and meet smoothly, so the slope at 0 is 1/2 and the second
    derivative -1/4, as PyTorch's."""
    below = input < 0
    neg = where(below, input, 0.0)
    pos = where(below, 0.0, input)
    return where(below, neg - log1p(exp(neg)), -log1p(exp(-pos)))


logsigmoid = log_sigmoid


def _inplace(input, fn):
    """``fn(input)`` written back into ``input``. ``fn`` runs on a clone, so the values its
    backward saves are not the ones ``copy_`` overwrites."""
    return input.copy_(fn(input.clone()))


@backward_name("LeakyReluBackward0")
def leaky_relu(input, negative_slope=0.01, inplace=False):
    """``x`` for ``x > 0``, else ``negative_slope * x``; the slope at 0 is ``negative_slope``,
    as in PyTorch."""
    if inplace:
        return _inplace(input, lambda x: leaky_relu(x, negative_slope))
    return where(input > 0, input, input * negative_slope)


def _scaled_elu(input, alpha, scale, input_scale):
    """PyTorch's elu kernel: ``scale * x`` for ``x > 0`` (and NaN), else ``scale * alpha *
    expm1(x * input_scale)``. At 0 the slope is the left branch's, ``scale * alpha *
    input_scale``, but the second derivative is 0 (PyTorch's double backward masks
    ``x < 0``): the left branch is ``expm1`` of the part below 0 plus the linear rest."""
    below = where(input < 0, input, 0.0)
    rest = where(input < 0, 0.0, input)     # input - below, but 0 (not NaN) at -inf
    neg = (expm1(below * input_scale) + rest * input_scale) * (alpha * scale)
    return where(input <= 0, neg, input * scale if scale != 1.0 else input)


def _elu(input, alpha):
    """PyTorch's elu: slope alpha at 0, second derivative 0 there (``_scaled_elu``, which
    selu and celu share)."""
    return _scaled_elu(input, alpha, 1.0, 1.0)


@backward_name("EluBackward0")
def elu(input, alpha=1.0, inplace=False):
    return _inplace(input, lambda x: _elu(x, alpha)) if inplace else _elu(input, alpha)


def _mish(input):
    return input * _tanh(softplus(input))


@backward_name("MishBackward0")
def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    return _inplace(input, _mish) if inplace else _mish(input)


def _relu6_shifted(input):
    # relu6(x + 3) by where, not clamp: its slope is 0 at -3 and 3, so hardswish's is 0 and 1
    # and hardsigmoid's 0 there, as in PyTorch (clamp passes the gradient on its bounds)
    return where(input <= -3, 0.0, where(input >= 3, 6.0, input + 3))


def _hardswish(input):
    return input * _relu6_shifted(input) / 6


@backward_name("HardswishBackward0")
def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``."""
    return _inplace(input, _hardswish) if inplace else _hardswish(input)


def _hardsigmoid(input):
    return _relu6_shifted(input) / 6


@backward_name("HardsigmoidBackward0")
def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``."""
    return _inplace(input, _hardsigmoid) if inplace else _hardsigmoid(input)


@method("prelu")     # Tensor.prelu too: declared here, where prelu lives
def prelu(input, weight):
    """``x`` for ``x > 0``, else ``weight * x``, one weight per channel (dim 1) or one for
    all; at 0 the input's slope is the weight, as in PyTorch."""
    if input.dtype != weight.dtype:
        raise op_error("prelu", f"prelu: Type promoting not supported. Got "
                                f"{input.dtype.name.capitalize()} and "
                                f"{weight.dtype.name.capitalize()}")
    if weight.numel() != 1:
        if input.ndim == 0:
            raise op_error("prelu", "Not allow zero-dim input tensor.")
        channels = input.shape[1] if input.ndim > 1 else 1
        if channels != weight.numel():
            raise op_error("prelu", f"Mismatch of parameter numbers and input channel size. "
                                    f"Found parameter numbers = {weight.numel()} and channel "
                                    f"size = {channels}.")
    if weight.ndim > 1:
        raise op_error("prelu", f"prelu: Expected `weight` to be a scalar or 1D tensor, but "
                                f"got: ndim = {weight.ndim}")
    if input.ndim != weight.ndim:
        shape = [1] * input.ndim
        if input.ndim > 1:
            shape[1] = weight.numel()
        weight = weight.reshape(shape)
    return where(input > 0, input, weight * input)


def glu(input, dim=-1):
    """``a * sigmoid(b)`` for the halves ``a, b`` of ``input`` along ``dim``."""
    if input.ndim == 0:
        raise op_error("glu", "glu does not support scalars because halving size must be even")
    d = dim + input.ndim if dim < 0 else dim
    if input.shape[d] % 2:
        raise op_error("glu", f"Halving dimension must be even, but dimension {d} is size "
                              f"{input.shape[d]}")
    a, b = input.chunk(2, dim)
    return a * _sigmoid(b)


def _softmax_dim(name, ndim, stacklevel):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.ndim, _stacklevel)
    return _softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.ndim, _stacklevel)
    return _log_softmax(input, dim, dtype=dtype)


# distances -----------------------------------------------------------------------------------


def _vector_norm(input, p, dim):
    """``norm(input, p, dim, keepdim=True)`` with PyTorch's zero gradient at a zero vector
    (``sqrt'(0) = inf`` would make it NaN); every order of ``linalg.vector_norm``, 0 too."""
    return norm(input, p, dim, keepdim=True)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(norm_p(input, dim), eps)``."""
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported by tracegrad")
    return input / _vector_norm(input, p, dim).clamp(min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``sum(x1 / |x1| * x2 / |x2|, dim)``, each norm at least ``eps``. PyTorch clamps the
    norms in place under no_grad, so the gradient ignores the clamp; so does this."""
    x1, x2 = broadcast_tensors(x1, x2)

    def clamped(n):
        # the value eps below eps, the gradient of n everywhere
        return where(n >= eps, n, n - n.detach() + eps)
    n1, n2 = clamped(_vector_norm(x1, 2, dim)), clamped(_vector_norm(x2, 2, dim))
    return ((x1 / n1) * (x2 / n2)).sum(dim)


# linear, dropout, embedding ------------------------------------------------------------------


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``, with PyTorch's nodes: ``AddmmBackward0`` on a matrix, the
    same between two ``ViewBackward0`` for other ranks; without a bias ``MmBackward0`` (and
    ``UnsafeViewBackward0`` for a batch)."""
    if _tracing() or input.ndim == 0 or weight.ndim != 2:
        out = matmul(input, weight.t())
        return out if bias is None else out + bias
    wt = weight.t()
    if input.ndim == 2:
        return mm(input, wt) if bias is None else addmm(bias, input, wt)
    if bias is None and input.ndim == 1:
        return matmul(input, wt)
    lead = input.shape[:-1]
    flat = input.reshape(-1, input.shape[-1])
    if bias is None:
        return _unsafe_view(mm(flat, wt), (*lead, weight.shape[0]))
    return addmm(bias, flat, wt).reshape(*lead, weight.shape[0])


@backward_name("UnsafeViewBackward0", collapse=False)
def _unsafe_view(input, shape):
    return input.reshape(shape)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability ``p`` and scale the rest by ``1/(1-p)``; the
    identity when not training or when ``p == 0``."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:        # 1/(1-p) would be inf; every element is dropped
        scale = creation.zeros_like(input)
    else:
        keep = creation.rand_like(input) >= p           # P(keep) = 1 - p
        scale = keep.to(input.dtype) * (1.0 / (1.0 - p))
    return input.mul_(scale) if inplace else input * scale


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer ``input``: shape ``input.shape + (dim,)``.
    Positions equal to ``padding_idx`` send no gradient to the weight."""
    if input.is_floating_point() or input.dtype is dtypes.bool:
        raise op_error("embedding", f"Expected tensor for argument #1 'indices' to have one of "
                                    f"the following scalar types: Long, Int; but got "
                                    f"{input.type()} instead (while checking arguments for "
                                    f"embedding)")
    if sparse:
        raise NotImplementedError("embedding: sparse gradients are not supported by tracegrad")
    num = weight.shape[0]
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx + num if padding_idx < 0 else padding_idx
    flat = input.reshape(-1)
    if max_norm is not None:
        # inside a trace, the written weight is a new value no gradient reaches, where
        # PyTorch's stays the leaf it was: the rows are looked up in a copy taken before the
        # write, which the gradient goes through, and given the written values
        before = weight.clone() if _tracing() and weight.requires_grad else None
        with no_grad():     # PyTorch renormalises the looked-up rows in place
            rows = index_select(weight, 0, flat)
            norms = norm(rows, norm_type, dim=1, keepdim=True)
            scale = where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
            weight[flat] = rows * scale
        if before is not None:
            looked = _embedding(before, input, padding_idx, scale_grad_by_freq)
            written = _embedding(weight, input, padding_idx, scale_grad_by_freq)
            return looked + (written - looked).detach()
    return _embedding(weight, input, padding_idx, scale_grad_by_freq)   # EmbeddingBackward0


# normalisation -------------------------------------------------------------------------------


@backward_name("NativeBatchNormBackward0")
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise over every dim but the channel dim 1.

    Training normalises with the batch mean and biased variance and, when running stats are
    given, updates them in place (without autograd) with the unbiased variance:
    ``running = (1 - momentum) * running + momentum * batch_stat``. Otherwise the running
    stats normalise.
    """
    if input.ndim < 2 and input.numel() == 0 and all(
            t is None or t.numel() == 0 for t in (running_mean, running_var, weight, bias)):
        return input.clone()    # an empty 1-D batch (no channels): PyTorch returns a copy
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2D input (got {input.ndim}D input)")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise op_error("batch_norm", f"{name} should contain {c} elements not {t.numel()}")
    shape = (1, c) + (1,) * (input.ndim - 2)
    if training and input.numel() == 0:    # an empty batch: an empty output, the running
        # statistics untouched, the affine parameters' gradients zeros (as PyTorch)
        out = input
        if weight is not None:
            out = out * weight.reshape(shape)
        return out + bias.reshape(shape) if bias is not None else out * 1
    if training:
        n = input.numel() // c
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {input.shape}")
        dims = (0,) + tuple(range(2, input.ndim))
        mean = input.mean(dims, keepdim=True)
        centered = input - mean
        var = (centered * centered).mean(dims, keepdim=True)
        out = centered * rsqrt(var + eps)
        if running_mean is not None and running_var is not None:
            with no_grad():
                running_mean.mul_(1 - momentum).add_(mean.reshape(c) * momentum)
                running_var.mul_(1 - momentum).add_(var.reshape(c) * (momentum * n / (n - 1)))
    else:
        if running_mean is None or running_var is None:
            raise op_error("batch_norm", "running_mean and running_var must be defined in "
                                         "evaluation mode")
        out = (input - running_mean.reshape(shape)) * rsqrt(running_var.reshape(shape) + eps)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


@backward_name("NativeLayerNormBackward0")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims (biased variance)."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) \
        else tuple(normalized_shape)
    k = len(normalized_shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != normalized_shape or input.ndim < k:
        raise op_error("layer_norm", f"Given normalized_shape={list(normalized_shape)}, expected "
                                     f"input with shape [*, {', '.join(map(str, normalized_shape))}"
                                     f"], but got input of size{list(input.shape)}")
    dims = tuple(range(input.ndim - k, input.ndim))
    mean = input.mean(dims, keepdim=True)
    centered = input - mean
    out = centered * rsqrt((centered * centered).mean(dims, keepdim=True) + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def one_hot(tensor, num_classes=-1):
    """Integer ``tensor`` as int64 one-hot rows; ``num_classes=-1`` takes max + 1. A class
    outside ``[0, num_classes)`` is PyTorch's error (checked outside a trace: a host read)."""
    if num_classes == -1:
        if not tensor.numel():
            raise op_error("one_hot", "Can not infer total number of classes from empty "
                                      "tensor.")
        num_classes = int(tensor.max().item()) + 1
    elif not _tracing() and type(tensor) is Tensor and tensor.numel():    # not in a vmap
        if bool((tensor < 0).any()):
            raise op_error("one_hot", "Class values must be non-negative.")
        if bool((tensor >= num_classes).any()):
            raise op_error("one_hot", "Class values must be smaller than num_classes.")
    classes = creation.arange(num_classes, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).long()

