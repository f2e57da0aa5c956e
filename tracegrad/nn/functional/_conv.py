"""``nn.functional``'s convolutions, padding and unfold/fold, with PyTorch's signatures.

Each function checks its arguments with PyTorch's wording, adds and removes the batch dim of
an unbatched input, and calls one primitive of ``tracegrad.ops.conv`` (of ``ops.pad`` for
``pad``), plus an add for the bias; in eager mode the two are one ``ConvolutionBackward0``
node over input, weight and bias, as PyTorch's fused kernel reports (``_biased``).
"""
from ...ops.conv import col2im, conv_nd, conv_transpose_nd, im2col
from ...ops.core import op_error
from ...ops.declare import backward_name
from ...ops.pad import pad_nd
from ...ops.shape_ops import reshape, squeeze, unsqueeze

_AXES = {1: ("width",), 2: ("height", "width"), 3: ("depth", "height", "width")}


def _tuple(value, n, name, op):
    """``value`` (an int or a sequence of ``n``) as a tuple of ``n`` ints."""
    if not hasattr(value, "__len__"):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise op_error(op, f"expected {name} to be a single integer value or a list of {n} values "
                           f"to match the convolution dimensions, but got {name}={list(value)}")
    return value


def _check_positive(op, stride, padding, dilation, groups):
    if any(s <= 0 for s in stride):
        raise op_error(op, "non-positive stride is not supported")
    if any(d <= 0 for d in dilation):
        raise op_error(op, "dilation should be greater than zero")
    if padding is not None and any(p < 0 for p in padding):
        raise op_error(op, "negative padding is not supported")
    if groups <= 0:
        raise op_error(op, "non-positive groups is not supported")


def _batched(op, input, nd, what="input"):
    """``(input with a batch dim, whether one was added)``, or PyTorch's rank error."""
    if input.ndim == nd + 2:
        return input, False
    if input.ndim == nd + 1:
        return unsqueeze(input, 0), True
    raise op_error(op, f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) {what} to {op}, "
                       f"but got input of size: {list(input.shape)}")


def _add_bias(op, out, weight, bias, channels):
    if bias is None:
        return out
    if bias.ndim != 1 or bias.shape[0] != channels:
        raise op_error(op, f"Given weight of size {list(weight.shape)}, expected bias to be "
                           f"1-dimensional with {channels} elements, but got bias of size "
                           f"{list(bias.shape)} instead")
    return out + reshape(bias, (channels,) + (1,) * (out.ndim - 2))


@backward_name("ConvolutionBackward0")
def _biased(conv, input, weight, bias, op, channels, *params):
    """``conv(input, weight, *params)`` plus the bias: one node in eager mode."""
    return _add_bias(op, conv(input, weight, *params), weight, bias, channels)


def _same_padding(kernel, dilation):
    """PyTorch's split of ``'same'``: the odd element of an even total goes on the high side."""
    pads = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        pads.append((total // 2, total - total // 2))
    return tuple(pads)


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    op = f"conv{nd}d"
    stride = _tuple(stride, nd, "stride", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    x, added = _batched(op, input, nd)
    if weight.ndim != nd + 2:
        raise op_error(op, f"expected weight to be {nd + 2}-D (out_channels, in_channels / groups,"
                           f" *kernel_size), but got weight of size {list(weight.shape)}")
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise op_error(op, "padding='same' is not supported for strided convolutions")
            pads = _same_padding(weight.shape[2:], dilation)
        else:
            raise op_error(op, f"Invalid padding string: {padding!r}")
        _check_positive(op, stride, None, dilation, groups)
    else:
        padding = _tuple(padding, nd, "padding", op)
        _check_positive(op, stride, padding, dilation, groups)
        pads = tuple((p, p) for p in padding)
    out = conv_nd(x, weight, stride, pads, dilation, groups) if bias is None else \
        _biased(conv_nd, x, weight, bias, op, weight.shape[0], stride, pads, dilation, groups)
    return squeeze(out, 0) if added else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    op = f"conv_transpose{nd}d"
    stride = _tuple(stride, nd, "stride", op)
    padding = _tuple(padding, nd, "padding", op)
    output_padding = _tuple(output_padding, nd, "output_padding", op)
    dilation = _tuple(dilation, nd, "dilation", op)
    _check_positive(op, stride, padding, dilation, groups)
    if weight.ndim != nd + 2:
        raise op_error(op, f"expected weight to be {nd + 2}-D (in_channels, out_channels / groups,"
                           f" *kernel_size), but got weight of size {list(weight.shape)}")
    if any(e >= s and e >= d for e, s, d in zip(output_padding, stride, dilation)):
        axes = _AXES[nd]
        parts = [f"{kind}_{a}: {v}" for kind, vals in (("output_padding", output_padding),
                                                       ("stride", stride),
                                                       ("dilation", dilation))
                 for a, v in zip(axes, vals)]
        if nd == 1:     # PyTorch runs 1-d as 2-d with a unit height
            parts = ["output_padding_height: 0"] + parts[:1] + ["stride_height: 1"] \
                + parts[1:2] + ["dilation_height: 1"] + parts[2:]
        raise op_error(op, "output padding must be smaller than either stride or dilation, but "
                           "got " + " ".join(parts))
    x, added = _batched(op, input, nd)
    pads = tuple((p, p) for p in padding)
    out = conv_transpose_nd(x, weight, stride, pads, dilation, groups, output_padding) \
        if bias is None else _biased(conv_transpose_nd, x, weight, bias, op,
                                     weight.shape[1] * groups, stride, pads, dilation, groups,
                                     output_padding)
    return squeeze(out, 0) if added else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


# padding --------------------------------------------------------------------------------------

_NON_CONSTANT = ("Supported combinations for non-constant padding:\n"
                 "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                 "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                 "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")


def _widths(pad):
    """``pad`` as a tuple of ints, or PyTorch's TypeError for one that is not."""
    if isinstance(pad, str) or not hasattr(pad, "__iter__"):
        raise op_error("pad", f"pad(): argument 'pad' (position 2) must be tuple of ints, not "
                              f"{type(pad).__name__}", TypeError)
    pad = tuple(pad)
    for i, p in enumerate(pad):
        if isinstance(p, bool) or not hasattr(type(p), "__index__"):
            raise op_error("pad", f"pad(): argument 'pad' (position 2) must be tuple of ints, but "
                                  f"found element of type {type(p).__name__} at pos {i}", TypeError)
    return tuple(int(p) for p in pad)


def pad(input, pad, mode="constant", value=None):
    """PyTorch's ``F.pad``: ``pad`` lists (low, high) widths from the last dim backwards."""
    pad = _widths(pad)
    if len(pad) % 2:
        raise op_error("pad", "Padding length must be divisible by 2")
    n = len(pad) // 2
    pairs = tuple((pad[2 * i], pad[2 * i + 1]) for i in reversed(range(n)))
    if mode == "constant":
        if n > input.ndim:
            raise op_error("pad", f"Padding length should be less than or equal to two times the "
                                  f"input dimension but got padding length {len(pad)} and input "
                                  f"of dimension {input.ndim}")
        return pad_nd(input, pairs, "constant", 0.0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise op_error("pad", f"Unrecognised padding mode {mode}", NotImplementedError)
    if value is not None and value != 0:
        raise op_error("pad", f'Padding mode "{mode}" doesn\'t take in value argument')
    if n not in (1, 2, 3) or input.ndim not in (n + 1, n + 2):
        raise op_error("pad", f"Padding size {len(pad)} is not supported for {input.ndim}D input "
                              f"tensor.\n{_NON_CONSTANT}", NotImplementedError)
    batched = input.ndim == n + 2
    if mode != "circular" and any(d == 0 for d in (input.shape[1:] if batched else input.shape)):
        raise op_error("pad", f"Expected {n + 1}D or {n + 2}D (batch mode) tensor with possibly 0 "
                              f"batch size and other non-zero dimensions for input, but got: "
                              f"{list(input.shape)}")
    # a negative width crops first, as torch; pad_nd takes replicate's itself (a crop past the
    # far end still replicates the last element there)
    if mode != "replicate" and any(w < 0 for pair in pairs for w in pair):
        lead = input.ndim - n
        key = (slice(None),) * lead + tuple(
            slice(max(-lo, 0), (input.shape[lead + i] - max(-hi, 0))) for i, (lo, hi) in
            enumerate(pairs))
        input = input[key]
        pairs = tuple((max(lo, 0), max(hi, 0)) for lo, hi in pairs)
    return pad_nd(input, pairs, mode)


# unfold / fold --------------------------------------------------------------------------------

def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: ``(N, C, H, W)`` -> ``(N, C * kh * kw, L)`` columns of sliding blocks."""
    if input.ndim not in (3, 4):
        raise op_error("unfold", f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch "
                                 f"size and other non-zero dimensions for input, but got: "
                                 f"{list(input.shape)}")
    kernel, dilation = _tuple(kernel_size, 2, "kernel_size", "unfold"), \
        _tuple(dilation, 2, "dilation", "unfold")
    padding, stride = _tuple(padding, 2, "padding", "unfold"), _tuple(stride, 2, "stride", "unfold")
    x, added = (unsqueeze(input, 0), True) if input.ndim == 3 else (input, False)
    out = im2col(x, kernel, dilation, tuple((p, p) for p in padding), stride)
    return squeeze(out, 0) if added else out


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im: sums ``(N, C * kh * kw, L)`` columns back into ``(N, C, *output_size)``."""
    if input.ndim not in (2, 3):
        raise op_error("fold", f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                               f"batch size and non-zero dimensions for input, but got: "
                               f"{list(input.shape)}")
    size = _tuple(output_size, 2, "output_size", "fold")
    kernel, dilation = _tuple(kernel_size, 2, "kernel_size", "fold"), \
        _tuple(dilation, 2, "dilation", "fold")
    padding, stride = _tuple(padding, 2, "padding", "fold"), _tuple(stride, 2, "stride", "fold")
    x, added = (unsqueeze(input, 0), True) if input.ndim == 2 else (input, False)
    out = col2im(x, size, kernel, dilation, tuple((p, p) for p in padding), stride)
    return squeeze(out, 0) if added else out


__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "pad", "unfold", "fold"]
