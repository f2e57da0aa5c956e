"""Op-table entries for convolution, transposed convolution, padding and unfold/fold.

Imported at the end of ``op_table.py``, so ``test_ops.py`` and ``test_compile_ops.py`` run
each entry: forward against the NumPy references below (written per kernel offset with
``einsum``, independent of the strided-window implementation), gradcheck and gradgradcheck
in float64, PyTorch's values and gradients, and compiled against eager.
"""
import numpy as np

from op_table import op


def _F(lib):
    return lib.nn.functional


# NumPy references (float64) ---------------------------------------------------------------

def _offsets(kernel):
    return np.ndindex(*kernel)


def _ref_conv(x, w, b=None, stride=1, pads=0, dilation=1, groups=1):
    nd = w.ndim - 2
    stride, dilation = _nt(stride, nd), _nt(dilation, nd)
    if not (isinstance(pads, tuple) and isinstance(pads[0], tuple)):
        pads = tuple((p, p) for p in _nt(pads, nd))
    xp = np.pad(x, ((0, 0), (0, 0)) + tuple(pads))
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    og = o // groups
    pos = tuple((xp.shape[2 + i] - dilation[i] * (w.shape[2 + i] - 1) - 1) // stride[i] + 1
                for i in range(nd))
    out = np.zeros((n, groups, og) + pos)
    wg = w.reshape((groups, og, cg) + w.shape[2:])
    for k in _offsets(w.shape[2:]):
        sl = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + stride[i] * (pos[i] - 1) + 1,
                         stride[i]) for i in range(nd))
        patch = xp[(slice(None), slice(None)) + sl].reshape((n, groups, cg) + pos)
        out += np.einsum("ngc...,goc->ngo...", patch, wg[(Ellipsis,) + k])
    out = out.reshape((n, o) + pos)
    if b is not None:
        out = out + b.reshape((o,) + (1,) * nd)
    return out


def _nt(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _ref_conv_t(u, w, b=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """out[n, c, p*s + k*d - pad] += u[n, o, p] * w[o, c, k], summed by kernel offset."""
    nd = w.ndim - 2
    stride, padding = _nt(stride, nd), _nt(padding, nd)
    output_padding, dilation = _nt(output_padding, nd), _nt(dilation, nd)
    n, o = u.shape[:2]
    og, cg = o // groups, w.shape[1]
    pos = u.shape[2:]
    full = tuple((pos[i] - 1) * stride[i] + dilation[i] * (w.shape[2 + i] - 1) + 1
                 + output_padding[i] for i in range(nd))
    out = np.zeros((n, groups, cg) + full)
    ug = u.reshape((n, groups, og) + pos)
    wg = w.reshape((groups, og, cg) + w.shape[2:])
    for k in _offsets(w.shape[2:]):
        sl = tuple(slice(k[i] * dilation[i], k[i] * dilation[i] + stride[i] * (pos[i] - 1) + 1,
                         stride[i]) for i in range(nd))
        out[(slice(None),) * 3 + sl] += np.einsum("ngo...,goc->ngc...", ug, wg[(Ellipsis,) + k])
    crop = tuple(slice(padding[i], full[i] - padding[i]) for i in range(nd))
    out = out.reshape((n, groups * cg) + full)[(slice(None), slice(None)) + crop]
    if b is not None:
        out = out + b.reshape((groups * cg,) + (1,) * nd)
    return out


def _ref_pad(x, pad, mode="constant", value=0.0):
    pairs = [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(len(pad) // 2))]
    lead = x.ndim - len(pairs)
    crop = (slice(None),) * lead + tuple(slice(max(-lo, 0), x.shape[lead + i] - max(-hi, 0))
                                         for i, (lo, hi) in enumerate(pairs))
    x = x[crop]
    widths = ((0, 0),) * lead + tuple((max(lo, 0), max(hi, 0)) for lo, hi in pairs)
    if mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=value)
    return np.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge",
                                   "circular": "wrap"}[mode])


def _ref_unfold(x, k, dilation=1, padding=0, stride=1):
    k, d, p, s = _nt(k, 2), _nt(dilation, 2), _nt(padding, 2), _nt(stride, 2)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])))
    n, c, h, w = xp.shape
    oh, ow = (h - d[0] * (k[0] - 1) - 1) // s[0] + 1, (w - d[1] * (k[1] - 1) - 1) // s[1] + 1
    cols = np.zeros((n, c, k[0], k[1], oh, ow))
    for i in range(k[0]):
        for j in range(k[1]):
            cols[:, :, i, j] = xp[:, :, i * d[0]:i * d[0] + s[0] * (oh - 1) + 1:s[0],
                                  j * d[1]:j * d[1] + s[1] * (ow - 1) + 1:s[1]]
    return cols.reshape(n, c * k[0] * k[1], oh * ow)


def _ref_fold(cols, size, k, dilation=1, padding=0, stride=1):
    """The adjoint of ``_ref_unfold``, by its Jacobian on the basis (small inputs only)."""
    n, ck, L = cols.shape
    kk = _nt(k, 2)
    c = ck // (kk[0] * kk[1])
    basis = np.eye(c * size[0] * size[1]).reshape(-1, c, size[0], size[1])
    jac = _ref_unfold(basis, k, dilation, padding, stride).reshape(len(basis), -1)  # (in, out)
    return (cols.reshape(n, -1) @ jac.T).reshape(n, c, size[0], size[1])


# convolution ---------------------------------------------------------------------------------

_CONV = "convolution"
_CONV_T = "convolution_transpose"
_CONV_ALL = [_CONV, _CONV_T, "convolution_weight"]

op("conv1d[bias,stride2,pad1]",
   lambda lib, x, w, b: _F(lib).conv1d(x, w, b, stride=2, padding=1),
   lambda x, w, b: _ref_conv(x, w, b, 2, 1), [(2, 3, 7), (4, 3, 3), (4,)], _CONV_ALL)
op("conv2d[odd 5x4,pad(1,0)]",
   lambda lib, x, w: _F(lib).conv2d(x, w, padding=(1, 0)),
   lambda x, w: _ref_conv(x, w, pads=(1, 0)), [(2, 2, 5, 4), (3, 2, 3, 2)], _CONV_ALL)
op("conv2d[stride3>kernel2]",
   lambda lib, x, w: _F(lib).conv2d(x, w, stride=3),
   lambda x, w: _ref_conv(x, w, stride=3), [(1, 2, 7, 8), (2, 2, 2, 2)], _CONV_ALL)
op("conv2d[dilation2,pad2,stride(1,2)]",
   lambda lib, x, w: _F(lib).conv2d(x, w, stride=(1, 2), padding=2, dilation=2),
   lambda x, w: _ref_conv(x, w, stride=(1, 2), pads=2, dilation=2),
   [(1, 2, 6, 5), (2, 2, 3, 3)], _CONV_ALL)
op("conv2d[depthwise groups=3,bias]",
   lambda lib, x, w, b: _F(lib).conv2d(x, w, b, padding=1, groups=3),
   lambda x, w, b: _ref_conv(x, w, b, pads=1, groups=3),
   [(2, 3, 5, 5), (3, 1, 3, 3), (3,)], _CONV_ALL)
op("conv2d[groups2,x3 channels]",
   lambda lib, x, w: _F(lib).conv2d(x, w, groups=2),
   lambda x, w: _ref_conv(x, w, groups=2), [(1, 4, 4, 4), (6, 2, 2, 2)], _CONV_ALL)
op("conv2d[same,even kernel 4x2]",
   lambda lib, x, w: _F(lib).conv2d(x, w, padding="same"),
   lambda x, w: _ref_conv(x, w, pads=((1, 2), (0, 1))), [(1, 2, 5, 6), (2, 2, 4, 2)],
   _CONV_ALL)
op("conv2d[same,dilation(2,3),even]",
   lambda lib, x, w: _F(lib).conv2d(x, w, padding="same", dilation=(2, 3)),
   lambda x, w: _ref_conv(x, w, pads=((1, 1), (1, 2)), dilation=(2, 3)),
   [(1, 1, 5, 6), (2, 1, 2, 2)], _CONV_ALL)
op("conv2d[valid,unbatched]",
   lambda lib, x, w: _F(lib).conv2d(x, w, padding="valid"),
   lambda x, w: _ref_conv(x[None], w)[0], [(2, 5, 4), (3, 2, 3, 3)], _CONV_ALL)
op("conv3d[stride(1,2,1),pad1]",
   lambda lib, x, w: _F(lib).conv3d(x, w, stride=(1, 2, 1), padding=1),
   lambda x, w: _ref_conv(x, w, stride=(1, 2, 1), pads=1),
   [(1, 2, 3, 4, 3), (2, 2, 2, 3, 2)], _CONV_ALL)

# transposed convolution --------------------------------------------------------------------

op("conv_transpose1d[bias,stride2,output_padding1]",
   lambda lib, u, w, b: _F(lib).conv_transpose1d(u, w, b, stride=2, output_padding=1),
   lambda u, w, b: _ref_conv_t(u, w, b, stride=2, output_padding=1),
   [(2, 3, 4), (3, 2, 3), (2,)], _CONV_ALL)
op("conv_transpose2d[stride2,pad1,op1,groups2]",
   lambda lib, u, w: _F(lib).conv_transpose2d(u, w, stride=2, padding=1, output_padding=1,
                                              groups=2),
   lambda u, w: _ref_conv_t(u, w, stride=2, padding=1, output_padding=1, groups=2),
   [(1, 4, 3, 3), (4, 1, 3, 3)], _CONV_ALL)
op("conv_transpose2d[dilation3,op2>=stride2]",
   lambda lib, u, w: _F(lib).conv_transpose2d(u, w, stride=2, output_padding=2, dilation=3),
   lambda u, w: _ref_conv_t(u, w, stride=2, output_padding=2, dilation=3),
   [(1, 2, 3, 2), (2, 2, 2, 2)], _CONV_ALL)
op("conv_transpose3d[stride(2,1,1),pad(0,1,0)]",
   lambda lib, u, w: _F(lib).conv_transpose3d(u, w, stride=(2, 1, 1), padding=(0, 1, 0)),
   lambda u, w: _ref_conv_t(u, w, stride=(2, 1, 1), padding=(0, 1, 0)),
   [(1, 2, 2, 3, 2), (2, 1, 2, 2, 2)], _CONV_ALL)

# padding ---------------------------------------------------------------------------------

op("pad[constant 2 dims,value]",
   lambda lib, x: _F(lib).pad(x, (1, 2, 0, 1), value=0.5),
   lambda x: _ref_pad(x, (1, 2, 0, 1), value=0.5), [(2, 3, 4)], ["constant_pad_nd"])
op("pad[constant negative crop]",
   lambda lib, x: _F(lib).pad(x, (-1, 2, 1, -2)),
   lambda x: _ref_pad(x, (-1, 2, 1, -2)), [(4, 5)], ["constant_pad_nd"])
op("pad[constant 3 dims of 4]",
   lambda lib, x: _F(lib).pad(x, (1, 0, 0, 1, 2, 1)),
   lambda x: _ref_pad(x, (1, 0, 0, 1, 2, 1)), [(2, 1, 2, 3)], ["constant_pad_nd"])
_MODES = [("reflect", "reflection"), ("replicate", "replication")]
_SHAPES = {1: ((2, 3, 5), (2, 1)), 2: ((1, 2, 4, 5), (1, 3, 2, 0)),
           3: ((1, 3, 4, 3), (1, 1, 2, 0, 0, 2))}
for _mode, _stem in _MODES:
    for _nd, (_shape, _pad) in _SHAPES.items():
        op(f"pad[{_mode} {_nd}d]",
           lambda lib, x, m=_mode, p=_pad: _F(lib).pad(x, p, mode=m),
           lambda x, m=_mode, p=_pad: _ref_pad(x, p, m), [_shape],
           [f"{_stem}_pad{_nd}d", f"{_stem}_pad{_nd}d_backward"])
op("pad[circular 1d]",
   lambda lib, x: _F(lib).pad(x, (3, 2), mode="circular"),
   lambda x: _ref_pad(x, (3, 2), "circular"), [(2, 3)], ["circular_pad", "circular_pad_backward"])
op("pad[circular 2d]",
   lambda lib, x: _F(lib).pad(x, (1, 2, 2, 0), mode="circular"),
   lambda x: _ref_pad(x, (1, 2, 2, 0), "circular"), [(1, 2, 3, 4)],
   ["circular_pad", "circular_pad_backward"])
op("pad[circular 3d]",
   lambda lib, x: _F(lib).pad(x, (1, 1, 0, 2, 1, 0), mode="circular"),
   lambda x: _ref_pad(x, (1, 1, 0, 2, 1, 0), "circular"), [(1, 2, 3, 2)],
   ["circular_pad", "circular_pad_backward"])

# unfold / fold ---------------------------------------------------------------------------

op("unfold[k(2,3),dilation2,pad1,stride2]",
   lambda lib, x: _F(lib).unfold(x, (2, 3), dilation=2, padding=1, stride=2),
   lambda x: _ref_unfold(x, (2, 3), 2, 1, 2), [(2, 2, 5, 6)], ["im2col", "col2im"])
op("unfold[unbatched,k2]",
   lambda lib, x: _F(lib).unfold(x, 2),
   lambda x: _ref_unfold(x[None], 2)[0], [(2, 3, 4)], ["im2col", "col2im"])
op("fold[k2,stride1 overlapping]",
   lambda lib, c: _F(lib).fold(c, (4, 5), 2),
   lambda c: _ref_fold(c, (4, 5), 2), [(2, 8, 12)], ["col2im", "im2col"])
op("fold[k(3,2),dilation(1,2),pad1,stride2]",
   lambda lib, c: _F(lib).fold(c, (5, 6), (3, 2), dilation=(1, 2), padding=1, stride=2),
   lambda c: _ref_fold(c, (5, 6), (3, 2), (1, 2), 1, 2), [(1, 12, 9)], ["col2im", "im2col"])
