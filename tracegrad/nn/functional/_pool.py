"""``nn.functional``'s pooling: max, average and adaptive pools in 1, 2 and 3 dims.

Each pool builds, per spatial dim, the tap-map descriptor of ``tracegrad.ops.pool`` and
binds that module's primitives; 1-d pools go through the 2-d primitive on an unsqueezed
input, as PyTorch's do (so their ``grad_fn`` is a squeeze). Signatures, defaults and the
errors for a wrong input rank or window are PyTorch's.
"""
import numbers

from ...ops import pool as P
from ...ops.core import op_error


def _ntuple(v, n, name="kernel_size"):
    if isinstance(v, numbers.Integral):
        return (int(v),) * n
    v = tuple(v)
    if len(v) == 1 and n > 1:
        return v * n
    if len(v) != n:
        raise RuntimeError(f"{name} must either be a single int, or a tuple of {n} ints")
    return v


def _window_args(name, n, kernel_size, stride, padding, dilation):
    k = _ntuple(kernel_size, n)
    s = k if stride is None or (not isinstance(stride, numbers.Integral) and not len(stride)) \
        else _ntuple(stride, n, "stride")
    p, d = _ntuple(padding, n, "padding"), _ntuple(dilation, n, "dilation")
    if any(x <= 0 for x in k):
        raise op_error(name, "kernel size should be greater than zero")
    if any(x == 0 for x in s):
        raise op_error(name, "stride should not be zero")
    if any(x <= 0 for x in d):
        raise op_error(name, "dilation should be greater than zero")
    for ki, pi, di in zip(k, p, d):
        if pi > ((ki - 1) * di + 1) // 2:
            raise op_error(name, f"pad should be at most half of effective kernel size, but got "
                                 f"pad={pi}, kernel_size={ki} and dilation={di}")
    return k, s, p, d


def _check_out(name, input, n, outs):
    if any(o <= 0 for o in outs):
        c = input.shape[-n - 1] if input.ndim > n else 1
        raise op_error(name, f"Given input size: ({'x'.join(map(str, (c,) + input.shape[-n:]))})"
                             f". Calculated output size: ({'x'.join(map(str, (c,) + outs))}). "
                             f"Output size is too small")


def _check_rank(name, input, n):
    """PyTorch's error for a pool's input that is neither batched nor unbatched."""
    if input.ndim in (n + 1, n + 2) and all(input.shape[1:]):
        return
    if n == 1:
        raise op_error(name, f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                             f"tensor for argument #1 'self' (while checking arguments for "
                             f"{name})")
    raise op_error(name, f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for input")


# max pooling --------------------------------------------------------------------------

def _max_pool(name, n, input, kernel_size, stride, padding, dilation, ceil_mode,
              return_indices):
    if n == 1 and input.ndim not in (2, 3):
        raise op_error(name, f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 "
                             f"dim batch size for input, but got:{list(input.shape)}")
    _check_rank(name, input, n)
    k, s, p, d = _window_args(name, n, kernel_size, stride, padding, dilation)
    if any(pi > ki // 2 for pi, ki in zip(p, k)):     # max pool's own check ignores dilation
        raise op_error(name, _MAX_PAD_ERRORS[n].format(k=k, p=p))
    sizes = input.shape[-n:]
    outs = tuple(P.pool_out_size(*a, ceil_mode) for a in zip(sizes, k, s, p, d))
    _check_out(name, input, n, outs)
    maps = tuple(("window",) + a for a in zip(sizes, outs, k, s, p, d))
    if n == 1:      # through the 2-d primitive, as PyTorch's max_pool1d
        maps = (("window", 1, 1, 1, 1, 0, 1),) + maps
        out = P.max_pool(input.unsqueeze(-2), P.max_pool2d_p, maps, return_indices)
        return tuple(o.squeeze(-2) for o in out) if return_indices else out.squeeze(-2)
    prim = P.max_pool2d_p if n == 2 else P.max_pool3d_p
    return P.max_pool(input, prim, maps, return_indices)


_MAX_PAD_ERRORS = {
    1: "max_pool1d() padding should be at most half of kernel size, but got padding={p[0]} and "
       "kernel_size={k[0]}",
    2: "pad should be smaller than or equal to half of kernel size, but got padW = {p[1]}, "
       "padH = {p[0]}, kW = {k[1]}, kH = {k[0]}",
    3: "pad should be smaller than or equal to half of kernel size, but got kT: {k[0]} kW: {k[2]} "
       "kH: {k[1]} padT: {p[0]} padW: {p[2]} padH: {p[1]}",
}


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool("max_pool1d", 1, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool1d`` returning ``(values, indices)``, as PyTorch's (``return_indices`` is
    accepted and ignored there too)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool2d`` returning ``(values, indices)``."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=True):
    """``max_pool3d`` returning ``(values, indices)``."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# average pooling ------------------------------------------------------------------------

def _avg_pool(name, n, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override):
    if n == 2 and input.ndim < 3:
        raise op_error(name, f"Dimension out of range (expected to be in range of "
                             f"[{-input.ndim}, {input.ndim - 1}], but got -3)", IndexError)
    _check_rank(name, input, n)
    k, s, p, _ = _window_args(name, n, kernel_size, stride, padding, 1)
    if divisor_override is not None and divisor_override == 0:
        raise op_error(name, "divisor must be not zero")
    sizes = input.shape[-n:]
    outs = tuple(P.pool_out_size(L, ki, si, pi, 1, ceil_mode)
                 for L, ki, si, pi in zip(sizes, k, s, p))
    _check_out(name, input, n, outs)
    maps = tuple(("avg", L, o, ki, si, pi, bool(count_include_pad))
                 for L, o, ki, si, pi in zip(sizes, outs, k, s, p))
    if n == 1:      # through the 2-d primitive, as PyTorch's avg_pool1d
        maps = (("avg", 1, 1, 1, 1, 0, True),) + maps
        return P.linear_map(input.unsqueeze(-2), P.avg_pool2d_p, maps).squeeze(-2)
    prim = P.avg_pool2d_p if n == 2 else P.avg_pool3d_p
    return P.linear_map(input, prim, maps, divisor_override)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


# adaptive pooling ----------------------------------------------------------------------

def _adaptive_sizes(input, n, output_size):
    outs = _ntuple(output_size, n, "output_size") if not isinstance(output_size, numbers.Integral) \
        else (int(output_size),) * n
    return tuple(L if o is None else int(o) for L, o in zip(input.shape[-n:], outs))


def _adaptive_check(name, input, n):
    if n == 1:
        return _check_rank(name, input, 1)
    if input.ndim not in (n + 1, n + 2):
        colon = ":" if "max" in name else ""
        raise op_error(name, f"{name}(): Expected {n + 1}D or {n + 2}D tensor, but got{colon} "
                             f"{list(input.shape)}")


def _adaptive_avg(name, n, input, output_size):
    _adaptive_check(name, input, n)
    if not input.dtype.is_floating_point:
        raise op_error(name, f'"{name if n > 1 else "adaptive_avg_pool2d"}" not implemented for '
                             f"'{input.dtype.name.capitalize().replace('Int64', 'Long')}'",
                       NotImplementedError)
    if n == 1:
        out = _adaptive_avg("adaptive_avg_pool2d", 2, input.unsqueeze(-2), (1,) + tuple(
            _adaptive_sizes(input, 1, output_size)))
        return out.squeeze(-2)
    outs = _adaptive_sizes(input, n, output_size)
    if all(o == 1 for o in outs):       # a global average: PyTorch takes the mean too
        return input.mean(tuple(range(-n, 0)), keepdim=True)
    maps = tuple(("adaptive", L, o) for L, o in zip(input.shape[-n:], outs))
    prim = P.adaptive_avg_pool2d_p if n == 2 else P.adaptive_avg_pool3d_p
    return P.linear_map(input, prim, maps)


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool2d(input, output_size):
    return _adaptive_avg("adaptive_avg_pool2d", 2, input, output_size)


def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg("adaptive_avg_pool3d", 3, input, output_size)


def _adaptive_max(name, n, input, output_size, return_indices):
    _adaptive_check(name, input, n)
    if n == 1:
        out = _adaptive_max("adaptive_max_pool2d", 2, input.unsqueeze(-2), (1,) + tuple(
            _adaptive_sizes(input, 1, output_size)), return_indices)
        return tuple(o.squeeze(-2) for o in out) if return_indices else out.squeeze(-2)
    outs = _adaptive_sizes(input, n, output_size)
    maps = tuple(("adaptive", L, o) for L, o in zip(input.shape[-n:], outs))
    prim = P.adaptive_max_pool2d_p if n == 2 else P.adaptive_max_pool3d_p
    return P.max_pool(input, prim, maps, return_indices)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max("adaptive_max_pool2d", 2, input, output_size, return_indices)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)

