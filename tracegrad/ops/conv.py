"""Convolution, transposed convolution and im2col/col2im primitives.

Every spatial primitive is N-d: the trailing ``len(kernel)`` dims are spatial, the two before
them batch and channels. Padding is a tuple of ``(low, high)`` pairs, one per spatial dim,
so PyTorch's asymmetric ``'same'`` split needs no extra op (the pad primitives themselves,
``F.pad``'s, are ``pad.py``'s).

Implementations copy the input's windows once into columns and contract them with the
weight by GEMM: where a sample has few output positions, ONE GEMM per group over every
sample, the batch beside the positions ``(G, Cg*K, N*P)`` (N small GEMMs would be slower);
where it has many, one per sample ``(N, G, Cg*K, P)``, which needs no transpose of the
output (``PER_SAMPLE_POSITIONS``; ``einsum`` over the windows was slower than either). The
adjoints add columns back into an image. Those copies and scatter-adds are
``conv_columns.py``'s (C kernels where they can run, else NumPy).

The VJP rules are tracegrad ops, so double backward works. Three bilinear primitives close
under differentiation (W is the weight gradient, itself one windows-times-matmul):

    conv(x, w)            dx = conv_transpose(g, w)    dw = W(x, g)
    conv_transpose(u, w)  du = conv(g, w)              dw = W(g, u)
    W(x, gy)              dx = conv_transpose(gy, g)   dgy = conv(x, g)

im2col and col2im are each other's VJP.
"""
import math

from .conv_columns import _columns, _image, _out_len, _scatter, _windows, c_kernels
from .core import Primitive, bind
from .shape_ops import narrow

_TYPE_NAMES = {"float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long",
               "int32": "Int", "bool": "Bool", "int8": "Char", "uint8": "Byte", "int16": "Short"}


def _type_name(dt):
    return f"torch.{_TYPE_NAMES.get(dt.name, dt.name)}Tensor"


def _same_dtype(x, w, **_):
    if x.dtype is not w.dtype:
        raise RuntimeError(f"Input type ({_type_name(x.dtype)}) and weight type "
                           f"({_type_name(w.dtype)}) should be the same or input should be a "
                           f"MKLDNN tensor and weight is a dense tensor")
    return x.dtype


def _sizes(shape):
    return " x ".join(map(str, shape))


# convolution ----------------------------------------------------------------------------------

def _conv_shape(x, w, stride, padding, dilation, groups):
    nd = len(w) - 2
    if len(x) != nd + 2:
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"conv{nd}d, but got input of size: {list(x)}")
    if x[1] != w[1] * groups:
        raise RuntimeError(f"Given groups={groups}, weight of size {list(w)}, expected "
                           f"input{list(x)} to have {w[1] * groups} channels, but got {x[1]} "
                           f"channels instead")
    if w[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(w)} instead")
    padded = tuple(n + lo + hi for n, (lo, hi) in zip(x[2:], padding))
    eff = tuple(d * (k - 1) + 1 for k, d in zip(w[2:], dilation))
    if any(p < e for p, e in zip(padded, eff)):
        raise RuntimeError(f"Calculated padded input size per channel: ({_sizes(padded)}). Kernel "
                           f"size: ({_sizes(eff)}). Kernel size can't be greater than actual "
                           f"input size")
    return (x[0], w[0]) + tuple(_out_len(n, k, s, d, lo, hi) for n, k, s, d, (lo, hi)
                                in zip(x[2:], w[2:], stride, dilation, padding))


# One GEMM per sample where a sample has this many output positions or more (its GEMM is then
# wide enough for BLAS), else one GEMM over every sample. One thread, float32: LeNet's conv1
# (6 x 25 weights, 64 x 784 positions) took 1.3 ms as one GEMM plus the output's transpose,
# 0.5 ms per sample; ResNet-18's last stage (512 x 4608, 8 x 4 positions) 1.7 ms as one GEMM,
# 6 ms per sample.
PER_SAMPLE_POSITIONS = 100
# The weight gradient of per-sample columns sums the samples' products, made at once where
# they take at most this many bytes, else accumulated one sample at a time.
PER_SAMPLE_PRODUCTS = 4 << 20


def _per_sample(pos):
    return math.prod(pos) >= PER_SAMPLE_POSITIONS


def _conv_impl(xp, x, w, stride, padding, dilation, groups):
    # checked here too (a wrong shape may fit the windows)
    pos = _conv_shape(x.shape, w.shape, stride, padding, dilation, groups)[2:]
    n, g, kernel, o = x.shape[0], groups, w.shape[2:], w.shape[0]
    per_sample = _per_sample(pos)
    cols = _columns(xp, x, kernel, stride, padding, dilation, pos, g, per_sample)
    wg = w.reshape(g, o // g, w.shape[1] * math.prod(kernel))
    if per_sample:      # (N, G, Og, P): the output's layout
        return xp.matmul(wg, cols).reshape((n, o) + pos)
    # the batch beside the positions, so that ONE GEMM per group covers every sample
    out = xp.matmul(wg, cols).reshape((o, n) + pos)                    # (G, Og, N*P)
    return xp.ascontiguousarray(xp.moveaxis(out, 1, 0))


def _input_grad(g, x, w, stride, padding, dilation, groups):
    extra = tuple(n + lo + hi - d * (k - 1) - 1 - s * (p - 1) for n, k, s, d, (lo, hi), p
                  in zip(x.shape[2:], w.shape[2:], stride, dilation, padding, g.shape[2:]))
    return conv_transpose_nd(g, w, stride, padding, dilation, groups, extra)


def _conv_weight_impl(xp, x, g, kernel, stride, padding, dilation, groups):
    n, c = x.shape[:2]
    o, pos = g.shape[1], g.shape[2:]
    cg, og, npos = c // groups, o // groups, math.prod(pos)
    per_sample = _per_sample(pos)
    # the forward's columns; the GEMM takes them transposed, which BLAS does without a copy
    cols = _columns(xp, x, kernel, stride, padding, dilation, pos, groups, per_sample)
    shape = (o, cg) + tuple(kernel)
    if not per_sample:
        gs = g.reshape(n, groups, og, npos).transpose(1, 2, 0, 3).reshape(groups, og, n * npos)
        return xp.matmul(gs, cols.transpose(0, 2, 1)).reshape(shape)
    gs, cols_t = g.reshape(n, groups, og, npos), cols.transpose(0, 1, 3, 2)
    if n * o * cols.shape[2] * g.itemsize <= PER_SAMPLE_PRODUCTS:
        return xp.matmul(gs, cols_t).sum(0).reshape(shape)
    out = xp.zeros((groups, og, cols.shape[2]), g.dtype)
    for i in range(n):
        out += xp.matmul(gs[i], cols_t[i])
    return out.reshape(shape)


def _conv_weight_shape(x, g, kernel, stride, padding, dilation, groups):
    return (g[1], x[1] // groups) + tuple(kernel)


convolution_weight_p = Primitive(
    "convolution_weight", _conv_weight_impl, args=("input", "grad_output"), dtype=_same_dtype,
    shape=_conv_weight_shape,
    vjp=(lambda g, x, gy, out, kernel, stride, padding, dilation, groups:
         _input_grad(gy, x, g, stride, padding, dilation, groups),
         lambda g, x, gy, out, kernel, stride, padding, dilation, groups:
         _fit(conv_nd(x, g, stride, padding, dilation, groups), gy.shape)),
    saves=("input", "grad_output"), node="ConvolutionBackwardBackward0", kind="other")


def conv_weight_grad(x, g, kernel, stride, padding, dilation, groups):
    """d(conv(x, w))/dw given the output gradient ``g`` (a primitive bilinear in ``x`` and
    ``g``: its VJPs are the transposed convolution and the convolution)."""
    return bind(convolution_weight_p, x, g, kernel=tuple(kernel), stride=tuple(stride),
                padding=tuple(tuple(p) for p in padding), dilation=tuple(dilation),
                groups=int(groups))


convolution_p = Primitive(
    "convolution", _conv_impl, args=("input", "weight"), dtype=_same_dtype, shape=_conv_shape,
    vjp=(lambda g, x, w, out, stride, padding, dilation, groups:
         _input_grad(g, x, w, stride, padding, dilation, groups),
         lambda g, x, w, out, stride, padding, dilation, groups:
         conv_weight_grad(x, g, w.shape[2:], stride, padding, dilation, groups)),
    saves=("input", "weight"), node="ConvolutionBackward0", kind="other")


def conv_nd(input, weight, stride, padding, dilation, groups):
    """The convolution primitive: ``padding`` is one ``(low, high)`` pair per spatial dim."""
    return bind(convolution_p, input, weight, stride=tuple(stride),
                padding=tuple(tuple(p) for p in padding), dilation=tuple(dilation),
                groups=int(groups))


# transposed convolution (the adjoint of convolution in its input) -------------------------------

def _convt_size(u, w, stride, padding, dilation, output_padding):
    return tuple((p - 1) * s - lo - hi + d * (k - 1) + 1 + e for p, k, s, d, (lo, hi), e
                 in zip(u[2:], w[2:], stride, dilation, padding, output_padding))


def _convt_shape(u, w, stride, padding, dilation, groups, output_padding):
    nd = len(w) - 2
    if len(u) != nd + 2:
        raise RuntimeError(f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to "
                           f"conv_transpose{nd}d, but got input of size: {list(u)}")
    if u[1] != w[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(w)}, expected input{list(u)}"
                           f" to have {w[0]} channels, but got {u[1]} channels instead")
    if w[0] % groups:
        raise RuntimeError(f"Given groups={groups}, expected weight to be divisible by {groups} "
                           f"at dimension 0, but got weight of size {list(w)} instead")
    size = _convt_size(u, w, stride, padding, dilation, output_padding)
    if any(n <= 0 for n in size):
        raise RuntimeError(f"Given input size per channel: ({_sizes(u[2:])}). Calculated output "
                           f"size per channel: ({_sizes(size)}). Output size is too small")
    return (u[0], w[1] * groups) + size


def _convt_impl(xp, u, w, stride, padding, dilation, groups, output_padding):
    _convt_shape(u.shape, w.shape, stride, padding, dilation, groups, output_padding)
    n, g, kernel, pos = u.shape[0], groups, w.shape[2:], u.shape[2:]
    og, cg = w.shape[0] // g, w.shape[1]
    wt = w.reshape(g, og, cg * math.prod(kernel)).transpose(0, 2, 1)  # (G, Cg*K, Og)
    size = _convt_size(u.shape, w.shape, stride, padding, dilation, output_padding)
    per_sample = _per_sample(pos)
    if per_sample:      # (N, G, Cg*K, P)
        cols = xp.matmul(wt, u.reshape(n, g, og, math.prod(pos)))
    else:               # one GEMM per group over every sample: the batch beside the positions
        us = u.reshape(n, g, og, math.prod(pos)).transpose(1, 2, 0, 3).reshape(g, og, -1)
        cols = xp.matmul(wt, us)                                       # (G, Cg*K, N*P)
    return _image(xp, cols, n, size, kernel, stride, padding, dilation, pos, per_sample)


def _fit(t, shape):
    """``t`` cut to ``shape`` where an output padding >= stride left extra positions."""
    for i, n in enumerate(shape):
        if t.shape[i] != n:
            t = narrow(t, i, 0, n)
    return t


convolution_transpose_p = Primitive(
    "convolution_transpose", _convt_impl, args=("input", "weight"), dtype=_same_dtype,
    shape=_convt_shape,
    vjp=(lambda g, u, w, out, stride, padding, dilation, groups, output_padding:
         _fit(conv_nd(g, w, stride, padding, dilation, groups), u.shape),
         lambda g, u, w, out, stride, padding, dilation, groups, output_padding:
         conv_weight_grad(g, u, w.shape[2:], stride, padding, dilation, groups)),
    saves=("input", "weight"), node="ConvolutionBackward0", kind="other")


def conv_transpose_nd(input, weight, stride, padding, dilation, groups, output_padding):
    """The transposed-convolution primitive (``padding`` as ``(low, high)`` pairs)."""
    return bind(convolution_transpose_p, input, weight, stride=tuple(stride),
                padding=tuple(tuple(p) for p in padding), dilation=tuple(dilation),
                groups=int(groups), output_padding=tuple(output_padding))


# im2col / col2im ----------------------------------------------------------------------------

def _im2col_impl(xp, x, kernel, dilation, padding, stride):
    pos = _im2col_pos(x.shape, kernel, dilation, padding, stride)
    fast = c_kernels(xp, x)
    if fast is not None:
        return fast.im2col(x, kernel, stride, padding, dilation, pos, batch_major=True)
    nd = len(kernel)
    win = _windows(xp, x, kernel, stride, padding, dilation)           # (N, C, *P, *K)
    spatial = tuple(range(2, 2 + nd))
    cols = win.transpose((0, 1) + tuple(a + nd for a in spatial) + spatial)
    return cols.reshape(x.shape[0], x.shape[1] * math.prod(kernel), math.prod(win.shape[2:2 + nd]))


def _im2col_shape(x, kernel, dilation, padding, stride):
    pos = _im2col_pos(x, kernel, dilation, padding, stride)
    return (x[0], x[1] * math.prod(kernel), math.prod(pos))


def _im2col_pos(x, kernel, dilation, padding, stride):
    """The sliding blocks' positions per spatial dim (checked to be at least one)."""
    nd = len(kernel)
    pos = tuple(_out_len(n, k, s, d, lo, hi) for n, k, s, d, (lo, hi)
                in zip(x[-nd:], kernel, stride, dilation, padding))
    if any(p < 1 for p in pos):
        raise RuntimeError(f"Given input with spatial size ({', '.join(map(str, x[-nd:]))}), "
                           f"kernel_size={tuple(kernel)}, dilation={tuple(dilation)}, padding="
                           f"{tuple(lo for lo, _ in padding)}, calculated shape of the array of "
                           f"sliding blocks as ({', '.join(map(str, pos))}), but its components "
                           f"must be at least one.")
    return pos


def _col2im_impl(xp, cols, output_size, kernel, dilation, padding, stride):
    _col2im_shape(cols.shape, output_size, kernel, dilation, padding, stride)
    pos = tuple(_out_len(n, k, s, d, lo, hi) for n, k, s, d, (lo, hi)
                in zip(output_size, kernel, stride, dilation, padding))
    c = cols.shape[1] // math.prod(kernel)
    fast = c_kernels(xp, cols)
    if fast is not None:
        return fast.col2im(cols, cols.shape[0], c, output_size, kernel, stride, padding,
                           dilation, pos, batch_major=True)
    cols = cols.reshape((cols.shape[0], c) + tuple(kernel) + pos)
    return _scatter(xp, cols, output_size, stride, padding, dilation)


def _col2im_shape(s, output_size, kernel, dilation, padding, stride):
    k = math.prod(kernel)
    if s[1] % k:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product "
                           f"of kernel_size, but got input.size(1)={s[1]} and kernel_size="
                           f"{tuple(kernel)}.")
    pos = [_out_len(n, kk, st, d, lo, hi) for n, kk, st, d, (lo, hi)
           in zip(output_size, kernel, stride, dilation, padding)]
    if s[2] != math.prod(pos):
        raise RuntimeError(
            f"Given output_size={tuple(output_size)}, kernel_size={tuple(kernel)}, dilation="
            f"{tuple(dilation)}, padding={tuple(lo for lo, _ in padding)}, stride={tuple(stride)},"
            f" expected size of input's dimension 2 to match the calculated number of sliding "
            f"blocks {' * '.join(map(str, pos))} = {math.prod(pos)}, but got input.size(2)="
            f"{s[2]}.")
    return (s[0], s[1] // k) + tuple(output_size)


im2col_p = Primitive(
    "im2col", _im2col_impl, dtype=lambda x, **_: x.dtype, shape=_im2col_shape,
    vjp=(lambda g, x, out, kernel, dilation, padding, stride:
         col2im(g, x.shape[2:], kernel, dilation, padding, stride),),
    node="Im2ColBackward0", kind="other")


col2im_p = Primitive(
    "col2im", _col2im_impl, dtype=lambda x, **_: x.dtype, shape=_col2im_shape,
    vjp=(lambda g, x, out, output_size, kernel, dilation, padding, stride:
         im2col(g, kernel, dilation, padding, stride),),
    node="Col2ImBackward0", kind="other")


def im2col(input, kernel, dilation, padding, stride):
    return bind(im2col_p, input, kernel=tuple(kernel), dilation=tuple(dilation),
                padding=tuple(tuple(p) for p in padding), stride=tuple(stride))


def col2im(input, output_size, kernel, dilation, padding, stride):
    return bind(col2im_p, input, output_size=tuple(output_size), kernel=tuple(kernel),
                dilation=tuple(dilation), padding=tuple(tuple(p) for p in padding),
                stride=tuple(stride))



__all__ = ["conv_nd", "conv_transpose_nd", "conv_weight_grad", "im2col", "col2im"]
