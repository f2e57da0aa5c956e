"""PyTorch's ``torch.masked``: reductions and normalizations over the elements a mask keeps.

The contract is PyTorch 2.13's ``torch/masked/_ops.py`` for dense (strided) tensors: a
``mask`` (None: every element) broadcastable to the input, no more dimensions than it, and
made boolean; masked-out elements are replaced by the reduction's identity (0 for sum, 1
for prod, -inf for amax/argmax/logsumexp/logaddexp, +inf for amin/argmin, NaN for median,
which reduces with ``nanmedian``) and the plain reduction runs on the result. So a slice
masked out entirely gives the identity (amax: -inf, sum: 0), or NaN where there is none
(mean, median, var, std: 0 / 0), or NaN from softmax of all -inf.

Every function is a composition of differentiable tensor ops (``where``, ``sum``,
``amax``...), so gradients and ``tracegrad.compile`` need nothing of their own; the
gradient at a masked-out position is PyTorch's: 0 through ``where``, except var/std of a
slice kept nowhere, where it is NaN (0 times the NaN deviation from a NaN mean) in both.
``dim=[]`` reduces every dim as PyTorch's reductions do (its ``logsumexp`` raises there
instead). Sparse layouts and MaskedTensor inputs are not supported (dense tensors only).
"""
import builtins
import math

from . import dtypes, ops
from .creation import ones, tensor
from .ops.more_ops import cumprod as _cumprod, cumsum as _cumsum, logaddexp as _logaddexp
from .type_info import iinfo

__all__ = [
    "amax", "amin", "argmax", "argmin", "cumprod", "cumsum", "log_softmax", "logaddexp",
    "logsumexp", "mean", "median", "norm", "normalize", "prod", "softmax", "softmin", "std",
    "sum", "var",
]

# Integer dtypes that sum and prod accumulate in int64, as PyTorch's do.
_PROMOTED_TO_INT64 = (dtypes.uint8, dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32)


def _reduction_identity(op_name, input, *args):
    """The identity of the reduction as a 0-d tensor of the input's dtype: the value whose
    presence among the operands does not change the result; None where there is none."""
    dtype = input.dtype
    floating = dtype.is_floating_point
    integral = not floating and (dtype.is_signed or dtype == dtypes.uint8)
    if op_name in ("sum", "cumsum"):
        value = 0
    elif op_name in ("prod", "cumprod"):
        value = 1
    elif op_name in ("amax", "argmax", "logaddexp", "logsumexp") and (floating or integral):
        value = -math.inf if floating else iinfo(dtype).min
    elif op_name in ("amin", "argmin") and (floating or integral):
        value = math.inf if floating else iinfo(dtype).max
    elif op_name in ("mean", "var", "std"):
        return None            # the mean of nothing is undefined
    elif op_name == "norm":
        value = math.inf if (args[0] if args else 2) == -math.inf else 0
    elif op_name == "median":   # NaN: nanmedian ignores it
        return tensor(math.nan, dtype=dtype if floating else dtypes.float32,
                      device=input.device)
    else:
        raise NotImplementedError(f"identity of {op_name} on {dtype} input")
    return tensor(value, dtype=dtype, device=input.device)


def _canonical_dim(dim, ndim):
    """``dim`` as a sorted tuple of non-negative dims; None or () is every dim."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    ndim = builtins.max(ndim, 1)
    dims = []
    for d in (dim,) if isinstance(dim, int) else dim:
        if d in dims:
            raise RuntimeError(f"dim={d} appears multiple times in the list of dims")
        if d >= ndim or d < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-ndim}, {ndim - 1}], but got {d})")
        dims.append(d % ndim)
    # PyTorch's check above compares d before it is made non-negative (dim=(1, -1) passes
    # it); its sum then rejects the repeat, with this message
    for d in dims:
        if dims.count(d) > 1:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return tuple(sorted(dims))


def _all_if_empty(dims, ndim):
    """The dims a reduction takes for PyTorch's ``dim=()``, which reduces every dim (an
    empty tuple reduces none in tracegrad's ``sum``)."""
    return dims if dims else tuple(range(ndim))


def _input_mask(input, mask):
    """The mask broadcast to the input's shape, boolean."""
    if mask is None:
        raise ValueError("_input_mask requires explicit mask")
    if tuple(mask.shape) != tuple(input.shape):
        if mask.ndim > input.ndim:
            raise IndexError("_input_mask expected broadcastable mask (got mask "
                             "dimensionality higher than of the input)")
        mask = ops.broadcast_to(mask, input.shape)
    return mask.to(dtype=dtypes.bool)


def _combine_input_and_mask(op_name, input, mask, *args):
    """The input with its masked-out elements replaced by ``op_name``'s identity."""
    if mask is None:
        return input
    return ops.where(_input_mask(input, mask), input,
                     _reduction_identity(op_name, input, *args))


def _accumulate_dtype(input, dtype):
    if dtype is not None:
        return dtype
    return dtypes.int64 if input.dtype in _PROMOTED_TO_INT64 else input.dtype


def sum(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = _accumulate_dtype(input, dtype)
    dim_ = _canonical_dim(dim, input.ndim)
    return ops.sum(_combine_input_and_mask("sum", input, mask),
                   _all_if_empty(dim_, input.ndim), bool(keepdim), dtype=dtype)


def prod(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = _accumulate_dtype(input, dtype)
    dim_ = _canonical_dim(dim, input.ndim)
    # one dim at a time, from the last: the kept dims keep their positions (dim=[] reduces
    # none, as PyTorch's loop does)
    result = _combine_input_and_mask("prod", input, mask).to(dtype=dtype)
    for d in reversed(dim_):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def cumsum(input, dim, *, dtype=None, mask=None):
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    return _cumsum(_combine_input_and_mask("sum", input, mask), dim_,
                      dtype=dtype).to(dtype=dtype)


def cumprod(input, dim, *, dtype=None, mask=None):
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    return _cumprod(_combine_input_and_mask("prod", input, mask), dim_,
                       dtype=dtype).to(dtype=dtype)


def amax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("amax", input, mask)
    dim_ = _canonical_dim(dim, mask_input.ndim)
    return ops.amax(mask_input, _all_if_empty(dim_, input.ndim), bool(keepdim)).to(dtype=dtype)


def amin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("amin", input, mask)
    dim_ = _canonical_dim(dim, mask_input.ndim)
    return ops.amin(mask_input, _all_if_empty(dim_, input.ndim), bool(keepdim)).to(dtype=dtype)


def argmax(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the largest kept element, in the input's dtype (as PyTorch's)."""
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("argmax", input, mask)
    return ops.argmax(mask_input, dim, bool(keepdim)).to(dtype=dtype)


def argmin(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The index of the smallest kept element, in the input's dtype (as PyTorch's)."""
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("argmin", input, mask)
    return ops.argmin(mask_input, dim, bool(keepdim)).to(dtype=dtype)


def _count(input, dim, keepdim, mask):
    """(how many elements each output reduces, the mask broadcast to the input or None)."""
    if mask is None:
        return sum(ones(input.shape, dtype=dtypes.int64, device=input.device), dim,
                   keepdim=keepdim), None
    inmask = _input_mask(input, mask)
    dims = _all_if_empty(_canonical_dim(dim, input.ndim), input.ndim)
    return inmask.sum(dim=dims, keepdim=bool(keepdim)), inmask


def mean(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The mean of the kept elements; NaN (0 / 0) where a slice keeps none."""
    dtype_source = "Optional"
    if dtype is None:
        dtype, dtype_source = input.dtype, "Input"
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. {dtype_source} dtype must be "
                         f"either a floating point or complex dtype. Got: {dtype}")
    count, inmask = _count(input, dim, keepdim, mask)
    total = sum(input, dim, keepdim=keepdim, dtype=dtype, mask=inmask)
    return total / count


def median(input, dim=-1, *, keepdim=False, dtype=None, mask=None):
    """The lower median of the kept elements along one dim; NaN where a slice keeps none."""
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    is_float = input.dtype.is_floating_point
    if not is_float:
        input = input.to(dtype=dtypes.float32)
    mask_input = _combine_input_and_mask("median", input, mask)
    output = ops.nanmedian(mask_input, dim_, keepdim).values
    if is_float:
        return output
    if not bool(ops.isnan(output).any()):
        return output.to(dtype=dtype)
    raise ValueError("masked median expects no fully masked out rows if dtype is not "
                     "floating point")


def logsumexp(input, dim=None, *, keepdim=False, dtype=None, mask=None):
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)
    return ops.logsumexp(_combine_input_and_mask("logsumexp", input, mask),
                         _all_if_empty(dim_, input.ndim), keepdim=keepdim).to(dtype=dtype)


def logaddexp(input, other, *, dtype=None, input_mask=None, other_mask=None):
    """``logaddexp`` with the masked-out elements of each input taken as -inf."""
    dtype = input.dtype if dtype is None else dtype
    return _logaddexp(_combine_input_and_mask("logaddexp", input, input_mask),
                         _combine_input_and_mask("logaddexp", other, other_mask)).to(dtype=dtype)


def norm(input, ord=2.0, dim=None, *, keepdim=False, dtype=None, mask=None):
    """The vector ``ord``-norm of the kept elements (masked-out ones as 0; +inf for -inf)."""
    from .linalg import vector_norm
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("norm", input, mask, ord)
    dim_ = _canonical_dim(dim, input.ndim)
    return vector_norm(mask_input, ord, _all_if_empty(dim_, input.ndim), bool(keepdim),
                       dtype=dtype)


def _std_var(input, dim, unbiased, *, correction_opt, keepdim, dtype, mask, take_sqrt):
    """PyTorch's two-pass variance of the kept elements: the mean, then the mean squared
    deviation with ``correction`` taken from the count (floored at 0)."""
    if unbiased is not None and correction_opt is not None:
        raise AssertionError("Only one of unbiased and correction may be given")
    correction = 1.0
    if unbiased is not None:
        correction = 1.0 if unbiased else 0.0
    if correction_opt is not None:
        correction = float(correction_opt)
    if dtype is None:
        dtype = input.dtype
        if not (dtype.is_floating_point or dtype.is_complex):
            dtype = dtypes.float32
    compute_dtype = dtype
    if not (compute_dtype.is_floating_point or compute_dtype.is_complex):
        compute_dtype = dtypes.float32
    count, inmask = _count(input, dim, True, mask)
    sample_total = sum(input, dim, keepdim=True, dtype=dtype, mask=inmask)
    x = input - sample_total / count
    total = sum(x * x, dim, keepdim=keepdim, dtype=compute_dtype, mask=inmask)
    if not keepdim:
        count = count.reshape(total.shape)
    if correction != 0:
        count = count.to(compute_dtype) - correction
        count = ops.maximum(count, count.new_zeros([]))
    output = (total / count).to(dtype=dtype)
    return output.sqrt() if take_sqrt else output


def var(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """The variance of the kept elements; NaN where a slice keeps none."""
    return _std_var(input, dim, unbiased, correction_opt=correction, keepdim=keepdim,
                    dtype=dtype, mask=mask, take_sqrt=False)


def std(input, dim=None, unbiased=None, *, correction=None, keepdim=False, dtype=None,
        mask=None):
    """The standard deviation of the kept elements; NaN where a slice keeps none."""
    return _std_var(input, dim, unbiased, correction_opt=correction, keepdim=keepdim,
                    dtype=dtype, mask=mask, take_sqrt=True)


def _functional():
    from .nn import functional
    return functional


def softmax(input, dim, *, dtype=None, mask=None):
    """Softmax over the kept elements (masked-out ones as -inf: 0 out, NaN for none kept)."""
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    return _functional().softmax(_combine_input_and_mask("amax", input, mask), dim_,
                                 dtype=dtype)


def log_softmax(input, dim, *, dtype=None, mask=None):
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    return _functional().log_softmax(_combine_input_and_mask("amax", input, mask), dim_,
                                     dtype=dtype)


def softmin(input, dim, *, dtype=None, mask=None):
    dtype = input.dtype if dtype is None else dtype
    dim_ = _canonical_dim(dim, input.ndim)[0]
    return _functional().softmin(_combine_input_and_mask("amin", input, mask), dim_,
                                 dtype=dtype)


def normalize(input, ord, dim, *, eps=1e-12, dtype=None, mask=None):
    """The kept elements over their ``ord``-norm (at least ``eps``); masked-out ones 0."""
    dtype = input.dtype if dtype is None else dtype
    mask_input = _combine_input_and_mask("sum", input, mask)
    nrm_ = norm(input, ord, dim, keepdim=True, dtype=dtype, mask=mask)
    denom = ops.maximum(nrm_, nrm_.new_full([], eps))
    return mask_input / denom
