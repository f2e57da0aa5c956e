"""Op-table entries for pooling, adaptive pooling, interpolation and pixel shuffle.

Imported at the end of ``op_table.py``, so ``test_ops.py`` and ``test_compile_ops.py`` run
each entry. The NumPy references here loop over output positions (or build dense
interpolation matrices), independent of the tap maps of ``tracegrad.ops.pool``. Inputs have
distinct magnitudes, so max pooling has no ties and finite differences are exact enough.
"""
import itertools
import math

import numpy as np

from op_table import op


def _F(lib):
    return lib.nn.functional


def _nt(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _out_size(L, k, s, p, d, ceil_mode):
    span = L + 2 * p - d * (k - 1) - 1
    o = (math.ceil(span / s) if ceil_mode else span // s) + 1
    return o - 1 if ceil_mode and (o - 1) * s >= L + p else o


# references ------------------------------------------------------------------------------

def _ref_max_pool(x, k, s=None, p=0, d=1, ceil_mode=False, nd=2):
    k = _nt(k, nd)
    s, p, d = _nt(s or k, nd), _nt(p, nd), _nt(d, nd)
    sizes = x.shape[-nd:]
    outs = [_out_size(*a, ceil_mode) for a in zip(sizes, k, s, p, d)]
    vals = np.empty(x.shape[:-nd] + tuple(outs))
    idx = np.empty(vals.shape, np.int64)
    flat = x.reshape(x.shape[:-nd] + (-1,))
    for o in itertools.product(*map(range, outs)):
        pos = [[o[i] * s[i] - p[i] + t * d[i] for t in range(k[i])
                if 0 <= o[i] * s[i] - p[i] + t * d[i] < sizes[i]] for i in range(nd)]
        cand = np.array([np.ravel_multi_index(c, sizes) for c in itertools.product(*pos)])
        best = cand[np.argmax(flat[..., cand], axis=-1)]
        idx[(Ellipsis,) + o] = best
        vals[(Ellipsis,) + o] = np.take_along_axis(flat, best[..., None], -1)[..., 0]
    return vals, idx


def _ref_avg_pool(x, k, s=None, p=0, ceil_mode=False, count_include_pad=True, divisor=None,
                  nd=2):
    k = _nt(k, nd)
    s, p = _nt(s or k, nd), _nt(p, nd)
    sizes = x.shape[-nd:]
    outs = [_out_size(L, ki, si, pi, 1, ceil_mode) for L, ki, si, pi in zip(sizes, k, s, p)]
    out = np.empty(x.shape[:-nd] + tuple(outs))
    for o in itertools.product(*map(range, outs)):
        start = [o[i] * s[i] - p[i] for i in range(nd)]
        lo = [max(a, 0) for a in start]
        hi = [min(a + k[i], sizes[i]) for i, a in enumerate(start)]
        window = x[(Ellipsis,) + tuple(slice(a, b) for a, b in zip(lo, hi))]
        total = window.sum(axis=tuple(range(-nd, 0)))
        if divisor is None:
            divisor_o = math.prod(min(a + k[i], sizes[i] + p[i]) - a for i, a in enumerate(start)) \
                if count_include_pad else math.prod(b - a for a, b in zip(lo, hi))
        out[(Ellipsis,) + o] = total / (divisor or divisor_o)
    return out


def _bins(L, n):
    return [(i * L // n, -(-(i + 1) * L // n)) for i in range(n)]


def _ref_adaptive(x, outs, kind):
    nd = len(outs)
    sizes = x.shape[-nd:]
    out = np.empty(x.shape[:-nd] + tuple(outs))
    idx = np.empty(out.shape, np.int64)
    flat = x.reshape(x.shape[:-nd] + (-1,))
    for o in itertools.product(*map(range, outs)):
        bins = [_bins(sizes[i], outs[i])[o[i]] for i in range(nd)]
        cand = np.array([np.ravel_multi_index(c, sizes)
                         for c in itertools.product(*(range(a, b) for a, b in bins))])
        if kind == "avg":
            out[(Ellipsis,) + o] = flat[..., cand].mean(-1)
        else:
            best = cand[np.argmax(flat[..., cand], axis=-1)]
            idx[(Ellipsis,) + o] = best
            out[(Ellipsis,) + o] = np.take_along_axis(flat, best[..., None], -1)[..., 0]
    return out if kind == "avg" else (out, idx)


def _interp_matrix(L, n, mode, align_corners=False, scale=None):
    """The dense (n, L) matrix of one dim's interpolation, from PyTorch's formulas."""
    m = np.zeros((n, L))
    for o in range(n):
        if mode in ("nearest", "nearest-exact"):
            sc = np.float32(1 / scale if scale else L / n)
            shift = np.float32(0.5 if mode == "nearest-exact" else 0)
            m[o, min(int(np.floor((np.float32(o) + shift) * sc)), L - 1)] = 1
            continue
        if align_corners:
            src = o * (L - 1) / (n - 1) if n > 1 else 0.0
        else:
            src = max((1 / scale if scale else L / n) * (o + 0.5) - 0.5, 0.0)
        i0 = min(int(src), L - 1)
        lam = src - i0
        m[o, i0] += 1 - lam
        m[o, min(i0 + 1, L - 1)] += lam
    return m


def _ref_interp(x, outs, mode, align_corners=False, scales=None):
    nd = len(outs)
    scales = scales or (None,) * nd
    for i in range(nd):
        m = _interp_matrix(x.shape[x.ndim - nd + i], outs[i], mode, align_corners, scales[i])
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, x.ndim - nd + i, 0), axes=(1, 0)), 0,
                        x.ndim - nd + i)
    return x


def _ref_pixel_shuffle(x, r):
    *lead, c, h, w = x.shape
    out = np.empty(tuple(lead) + (c // (r * r), h * r, w * r))
    for ch, i, j in itertools.product(range(c // (r * r)), range(r), range(r)):
        out[..., ch, i::r, j::r] = x[..., ch * r * r + i * r + j, :, :]
    return out


def _ref_pixel_unshuffle(x, r):
    *lead, c, h, w = x.shape
    out = np.empty(tuple(lead) + (c * r * r, h // r, w // r))
    for ch, i, j in itertools.product(range(c), range(r), range(r)):
        out[..., ch * r * r + i * r + j, :, :] = x[..., ch, i::r, j::r]
    return out


# max pooling --------------------------------------------------------------------------------

_MP2 = ["max_pool2d", "max_pool2d_backward"]
_MP3 = ["max_pool3d", "max_pool3d_backward"]

op("max_pool2d[k3 s2 p1 ceil, indices]",
   lambda lib, x: _F(lib).max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True),
   lambda x: _ref_max_pool(x, 3, 2, 1, ceil_mode=True), [(2, 2, 5, 6)], _MP2)
op("max_pool2d[k2 s3 p1 d2, stride>kernel]",
   lambda lib, x: _F(lib).max_pool2d(x, 2, 3, 1, dilation=2),
   lambda x: _ref_max_pool(x, 2, 3, 1, 2)[0], [(1, 2, 7, 8)], _MP2)
op("max_pool2d[3d input, k(3,2) s(1,2)]",
   lambda lib, x: _F(lib).max_pool2d(x, (3, 2), (1, 2)),
   lambda x: _ref_max_pool(x, (3, 2), (1, 2))[0], [(2, 5, 5)], _MP2)
op("max_pool1d[k3 s1 p1, indices]",
   lambda lib, x: _F(lib).max_pool1d(x, 3, 1, 1, return_indices=True),
   lambda x: _ref_max_pool(x, 3, 1, 1, nd=1), [(2, 3, 7)], _MP2)
op("max_pool1d[k2 s2 ceil, odd]",
   lambda lib, x: _F(lib).max_pool1d(x, 2, ceil_mode=True),
   lambda x: _ref_max_pool(x, 2, 2, ceil_mode=True, nd=1)[0], [(2, 9)], _MP2)
op("max_pool3d[k2 s(1,2,2) p(0,1,1) ceil, indices]",
   lambda lib, x: _F(lib).max_pool3d(x, 2, (1, 2, 2), (0, 1, 1), ceil_mode=True,
                                     return_indices=True),
   lambda x: _ref_max_pool(x, 2, (1, 2, 2), (0, 1, 1), ceil_mode=True, nd=3),
   [(1, 2, 3, 4, 5)], _MP3)
op("adaptive_max_pool2d[5x7->3x4, indices]",
   lambda lib, x: _F(lib).adaptive_max_pool2d(x, (3, 4), return_indices=True),
   lambda x: _ref_adaptive(x, (3, 4), "max"), [(2, 2, 5, 7)],
   ["adaptive_max_pool2d", "adaptive_max_pool2d_backward"])
op("adaptive_max_pool1d[7->3]",
   lambda lib, x: _F(lib).adaptive_max_pool1d(x, 3),
   lambda x: _ref_adaptive(x, (3,), "max")[0], [(2, 3, 7)], ["adaptive_max_pool2d"])
op("adaptive_max_pool3d[3x5x4->2x2x3, indices]",
   lambda lib, x: _F(lib).adaptive_max_pool3d(x, (2, 2, 3), return_indices=True),
   lambda x: _ref_adaptive(x, (2, 2, 3), "max"), [(1, 2, 3, 5, 4)],
   ["adaptive_max_pool3d", "adaptive_max_pool3d_backward"])

# average pooling ----------------------------------------------------------------------------

_AP2 = ["avg_pool2d", "avg_pool2d_backward"]

op("avg_pool2d[k3 s2 p1 ceil, count_include_pad]",
   lambda lib, x: _F(lib).avg_pool2d(x, 3, 2, 1, ceil_mode=True),
   lambda x: _ref_avg_pool(x, 3, 2, 1, ceil_mode=True), [(2, 2, 6, 7)], _AP2)
op("avg_pool2d[k3 s2 p1 ceil, exclude pad]",
   lambda lib, x: _F(lib).avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
   lambda x: _ref_avg_pool(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
   [(2, 2, 6, 7)], _AP2)
op("avg_pool2d[k(2,3) s3 p1, divisor_override=4]",
   lambda lib, x: _F(lib).avg_pool2d(x, (2, 3), 3, 1, divisor_override=4),
   lambda x: _ref_avg_pool(x, (2, 3), 3, 1, divisor=4), [(1, 2, 7, 8)], _AP2)
op("avg_pool1d[k3 s2 p1 ceil, exclude pad]",
   lambda lib, x: _F(lib).avg_pool1d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
   lambda x: _ref_avg_pool(x, 3, 2, 1, ceil_mode=True, count_include_pad=False, nd=1),
   [(2, 3, 8)], _AP2)
op("avg_pool3d[k(2,3,2) s(1,2,3) p(1,1,0)]",
   lambda lib, x: _F(lib).avg_pool3d(x, (2, 3, 2), (1, 2, 3), (1, 1, 0)),
   lambda x: _ref_avg_pool(x, (2, 3, 2), (1, 2, 3), (1, 1, 0), nd=3), [(1, 2, 3, 5, 7)],
   ["avg_pool3d", "avg_pool3d_backward"])
op("adaptive_avg_pool2d[5x7->3x4]",
   lambda lib, x: _F(lib).adaptive_avg_pool2d(x, (3, 4)),
   lambda x: _ref_adaptive(x, (3, 4), "avg"), [(2, 2, 5, 7)],
   ["adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"])
op("adaptive_avg_pool1d[7->4]",
   lambda lib, x: _F(lib).adaptive_avg_pool1d(x, 4),
   lambda x: _ref_adaptive(x, (4,), "avg"), [(2, 3, 7)], ["adaptive_avg_pool2d"])
op("adaptive_avg_pool3d[3x5x4->2x3x3]",
   lambda lib, x: _F(lib).adaptive_avg_pool3d(x, (2, 3, 3)),
   lambda x: _ref_adaptive(x, (2, 3, 3), "avg"), [(1, 2, 3, 5, 4)],
   ["adaptive_avg_pool3d", "adaptive_avg_pool3d_backward"])

# interpolation --------------------------------------------------------------------------

for _mode, _nm in (("nearest", "nearest"), ("nearest-exact", "nearest_exact")):
    op(f"interpolate[{_mode} 1d scale 2.5]",
       lambda lib, x, m=_mode: _F(lib).interpolate(x, scale_factor=2.5, mode=m),
       lambda x, m=_mode: _ref_interp(x, (12,), m, scales=(2.5,)), [(2, 2, 5)],
       [f"upsample_{_nm}1d", f"upsample_{_nm}1d_backward"])
    op(f"interpolate[{_mode} 2d size 3x5->7x4]",
       lambda lib, x, m=_mode: _F(lib).interpolate(x, size=(7, 4), mode=m),
       lambda x, m=_mode: _ref_interp(x, (7, 4), m), [(2, 2, 3, 5)],
       [f"upsample_{_nm}2d", f"upsample_{_nm}2d_backward"])
    op(f"interpolate[{_mode} 3d scale (2,1.5,0.5)]",
       lambda lib, x, m=_mode: _F(lib).interpolate(x, scale_factor=(2, 1.5, 0.5), mode=m),
       lambda x, m=_mode: _ref_interp(x, (4, 4, 2), m, scales=(2, 1.5, 0.5)),
       [(1, 2, 2, 3, 5)], [f"upsample_{_nm}3d", f"upsample_{_nm}3d_backward"])

for _ac in (True, False):
    op(f"interpolate[linear scale 1.7 align_corners={_ac}]",
       lambda lib, x, a=_ac: _F(lib).interpolate(x, scale_factor=1.7, mode="linear",
                                                 align_corners=a),
       lambda x, a=_ac: _ref_interp(x, (8,), "linear", a, (1.7,)), [(2, 2, 5)],
       ["upsample_linear1d", "upsample_linear1d_backward"])
    op(f"interpolate[bilinear size 4x5->7x3 align_corners={_ac}]",
       lambda lib, x, a=_ac: _F(lib).interpolate(x, size=(7, 3), mode="bilinear",
                                                 align_corners=a),
       lambda x, a=_ac: _ref_interp(x, (7, 3), "linear", a), [(2, 2, 4, 5)],
       ["upsample_bilinear2d", "upsample_bilinear2d_backward"])
    op(f"interpolate[bilinear scale (2,1.5) align_corners={_ac}]",
       lambda lib, x, a=_ac: _F(lib).interpolate(x, scale_factor=(2, 1.5), mode="bilinear",
                                                 align_corners=a),
       lambda x, a=_ac: _ref_interp(x, (6, 7), "linear", a, (2.0, 1.5)), [(1, 2, 3, 5)],
       ["upsample_bilinear2d", "upsample_bilinear2d_backward"])
    op(f"interpolate[trilinear size align_corners={_ac}]",
       lambda lib, x, a=_ac: _F(lib).interpolate(x, size=(3, 5, 2), mode="trilinear",
                                                 align_corners=a),
       lambda x, a=_ac: _ref_interp(x, (3, 5, 2), "linear", a), [(1, 2, 2, 3, 4)],
       ["upsample_trilinear3d", "upsample_trilinear3d_backward"])

# pixel shuffle (compositions of reshape and permute) ------------------------------------------

op("pixel_shuffle[r2]", lambda lib, x: _F(lib).pixel_shuffle(x, 2),
   lambda x: _ref_pixel_shuffle(x, 2), [(2, 8, 2, 3)], ["permute"])
op("pixel_unshuffle[r2]", lambda lib, x: _F(lib).pixel_unshuffle(x, 2),
   lambda x: _ref_pixel_unshuffle(x, 2), [(2, 2, 4, 6)], ["permute"])
