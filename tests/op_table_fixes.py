"""Op-table entries for the cases PyTorch's OpInfo samples found wrong (issue 22).

Imported at the end of ``op_table.py``, so every entry runs forward against NumPy,
gradcheck and gradgradcheck, against PyTorch (values, gradients, second order) and compiled
against eager. Where the point of a case is a derivative at NaN or at a kink (where finite
differences say nothing), the entry's output *is* that derivative (``_grads``), so its value is
checked on every path; such entries set ``grad=False``.
"""
import math

import numpy as np

from op_table import op

NAN = float("nan")


def _cubic_matrix(L, out, align, scale=None):
    """PyTorch's bicubic as a matrix (Keys' kernel, A = -0.75; edge taps clamped)."""
    a = -0.75
    m = np.zeros((out, L))
    for o in range(out):
        if align:
            src = (L - 1) / (out - 1) * o if out > 1 else 0.0
        else:
            src = (1 / scale if scale else L / out) * (o + 0.5) - 0.5
        i0 = math.floor(src)
        t = src - i0
        near = [((a + 2) * x - (a + 3)) * x * x + 1 for x in (t, 1 - t)]
        far = [((a * x - 5 * a) * x + 8 * a) * x - 4 * a for x in (t + 1, 2 - t)]
        for k, w in enumerate((far[0], near[0], near[1], far[1])):
            m[o, min(max(i0 - 1 + k, 0), L - 1)] += w
    return m


def _ref_bicubic(x, outs, align, scales=(None, None)):
    for i, (out, scale) in enumerate(zip(outs, scales)):
        axis = x.ndim - 2 + i
        m = _cubic_matrix(x.shape[axis], out, align, scale)
        x = np.moveaxis(np.tensordot(m, np.moveaxis(x, axis, 0), axes=(1, 0)), 0, axis)
    return x


def _F(lib):
    return lib.nn.functional


def _L(lib):
    return lib.linalg


def _const(lib, values, like):
    return lib.tensor(values, dtype=like.dtype)


def _grads(lib, f, *xs):
    """The gradients of ``f(*xs).sum()`` with respect to every x, as plain tensors (zeros where
    one does not reach): values to compare, not a function to differentiate further."""
    with lib.enable_grad():
        xs = [x.detach().requires_grad_(True) for x in xs]
        gs = lib.autograd.grad(f(*xs).sum(), xs, allow_unused=True)
    return tuple(lib.zeros_like(x) if g is None else g.detach() for g, x in zip(gs, xs))


# norm(x, p=-inf), p=0, zeros ------------------------------------------------------------------

op("norm[p=-inf]", lambda lib, x: lib.norm(x, -math.inf),
   lambda x: np.abs(x).min(), [(5, 5)], ["abs", "amin"])
op("norm[p=-inf,dim]", lambda lib, x: x.norm(p=-math.inf, dim=1, keepdim=True),
   lambda x: np.abs(x).min(1, keepdims=True), [(3, 4)], ["amin"])
op("norm[p=0,dim]", lambda lib, x: lib.norm(x, 0, 1),
   lambda x: np.count_nonzero(x, 1).astype(np.float64), [(3, 4)], grad=False)
op("norm[-1.5,dim]", lambda lib, x: lib.norm(x, -1.5, 1),
   lambda x: (np.abs(x) ** -1.5).sum(1) ** (1 / -1.5), [(3, 4)])
op("norm[nuc]", lambda lib, x: lib.norm(x, "nuc"), lambda x: np.linalg.norm(x, "nuc"),
   [(3, 4)], ["linalg_svd_s"])
# at a zero vector the gradient is 0 (PyTorch's subgradient), not 0 * inf = NaN; the second
# derivative there is unbounded, so no gradgradcheck
op("norm[zero rows]", lambda lib, x: lib.norm(x, dim=1), lambda x: np.linalg.norm(x, axis=1),
   [(2, 3)], fixed=([[0.0, 0.0, 0.0], [1.0, -2.0, 2.0]],), gradgrad=False)
op("norm[zero, p=3]", lambda lib, x: lib.norm(x, 3), lambda x: np.linalg.norm(x.ravel(), 3),
   [(3,)], fixed=([0.0, 0.0, 0.0],), gradgrad=False)
for _ord in (2, 1, 3, math.inf, -math.inf, 0.5):
    op(f"d linalg.vector_norm[{_ord}] at 0",
       lambda lib, x, o=_ord: _grads(lib, lambda t: _L(lib).vector_norm(t * 0, o, dim=1), x)[0],
       lambda x: np.zeros_like(x), [(2, 3)], grad=False)
op("d linalg.norm at 0", lambda lib, x: _grads(lib, lambda t: _L(lib).norm(t * 0), x)[0],
   lambda x: np.zeros_like(x), [(2, 3)], grad=False)
op("d linalg.matrix_norm[fro] at 0",
   lambda lib, x: _grads(lib, lambda t: _L(lib).matrix_norm(t * 0), x)[0],
   lambda x: np.zeros_like(x), [(2, 3)], grad=False)
op("normalize[p=0]", lambda lib, x: _F(lib).normalize(x, p=0.0, dim=1),
   lambda x: x / np.maximum(np.count_nonzero(x, 1), 1e-12)[:, None], [(3, 4)])
op("normalize[zeros]", lambda lib, x: _F(lib).normalize(x * 0),
   lambda x: np.zeros_like(x), [(2, 3)], gradgrad=False)

# var/std with the legacy positional ``unbiased`` ------------------------------------------------

op("var[legacy unbiased=True]", lambda lib, x: lib.var(x, True),
   lambda x: np.var(x, ddof=1), [(5, 3)], ["sum"], rtol=1e-4)
op("std[legacy unbiased=False]", lambda lib, x: x.std(False),
   lambda x: np.std(x), [(5, 3)], ["sqrt"], rtol=1e-4)
op("var_mean[legacy unbiased=True]", lambda lib, x: lib.var_mean(x, True),
   lambda x: (np.var(x, ddof=1), np.mean(x)), [(5, 3)], rtol=1e-4)
op("std_mean[legacy unbiased=False]", lambda lib, x: lib.std_mean(x, False),
   lambda x: (np.std(x), np.mean(x)), [(5, 3)], rtol=1e-4)

# remainder, fmod and floor division: Python's algorithm, exact for large quotients ----------

op("remainder[tensor]", lambda lib, a, b: lib.remainder(a, b), np.remainder, [(3, 4), (4,)],
   ["remainder", "div_rounding"], domain="pos")
op("remainder[signs]", lambda lib, a, b: a % b, np.remainder, [(3, 4), (3, 4)], ["remainder"])
op("fmod", lambda lib, a, b: lib.fmod(a, b), np.fmod, [(3, 4), (4,)], ["fmod", "div_rounding"])
op("fmod[method,scalar]", lambda lib, a: a.fmod(0.7), lambda a: np.fmod(a, 0.7), [(3, 4)],
   ["fmod"], kinks=(-1.4, -0.7, 0.7, 1.4))
# quotients past 2**53 (float32: 2**24): floor(a / b) rounds; fmod is exact
_BIG = ([-1e20, 1e20, 7.5, -7.5, 1.0, -1.0], [501.0, -501.0, 0.1, 0.1, 0.001, 0.001])
op("remainder[large quotient]", lambda lib, a, b: lib.remainder(a, b), np.remainder, [(6,)] * 2,
   fixed=_BIG, grad=False, rtol=1e-4)
op("div[floor, exact]", lambda lib, a, b: lib.div(a, b, rounding_mode="floor"),
   np.floor_divide, [(6,)] * 2, fixed=_BIG, grad=False)
op("floor_divide[exact]", lambda lib, a, b: lib.floor_divide(a, b), np.floor_divide,
   [(6,)] * 2, fixed=_BIG, grad=False)
op("div[trunc]", lambda lib, a, b: lib.div(a, b, rounding_mode="trunc"),
   lambda a, b: np.trunc(a / b), [(3, 4), (4,)], ["div_rounding"], domain="frac")
op("div[floor] grads", lambda lib, a, b: _grads(
       lib, lambda s, t: lib.div(s, t, rounding_mode="floor"), a, b),
   lambda a, b: (np.zeros_like(a), np.zeros_like(b)), [(4,), (4,)],
   fixed=([1.0, -2.0, 0.0, 3.0], [0.0, 0.0, 0.0, 2.0]), grad=False)

# narrow, movedim, take_along_dim, gather/scatter_add of 0-d --------------------------------------

op("narrow[negative start]", lambda lib, x: lib.narrow(x, 0, -10, 10), lambda x: x,
   [(10,)], ["index"])
op("narrow[negative start,dim 1]", lambda lib, x: x.narrow(1, -3, 2), lambda x: x[:, 1:3],
   [(2, 4)], ["index"])
op("movedim[lists]", lambda lib, x: lib.movedim(x, [0, 1], [2, 0]),
   lambda x: np.moveaxis(x, [0, 1], [2, 0]), [(2, 3, 4)], ["permute"])
op("movedim[tuples,method]", lambda lib, x: x.movedim((2, 0), (0, 1)),
   lambda x: np.moveaxis(x, (2, 0), (0, 1)), [(2, 3, 4)], ["permute"])
_TAD = np.array([[0, 3]])
op("take_along_dim[broadcast index]",
   lambda lib, x: lib.take_along_dim(x, lib.tensor(_TAD), 1),
   lambda x: np.take_along_axis(x, np.broadcast_to(_TAD, (5, 2)), 1), [(5, 5)],
   ["gather"])
op("take_along_dim[broadcast input]",
   lambda lib, x: lib.take_along_dim(x, lib.tensor(np.array([[0, 3]] * 5)), 1),
   lambda x: np.take_along_axis(np.broadcast_to(x, (5, 5)), np.array([[0, 3]] * 5), 1),
   [(1, 5)], ["gather"])
op("take_along_dim[no dim]", lambda lib, x: lib.take_along_dim(x, lib.tensor([7, 1, 1])),
   lambda x: x.ravel()[[7, 1, 1]], [(3, 4)], ["gather"])
op("take_along_dim[negative index]",
   lambda lib, x: x.take_along_dim(lib.tensor([[-1, -3]] * 3), 1),
   lambda x: np.take_along_axis(x, np.array([[3, 1]] * 3), 1), [(3, 4)], ["gather"])
op("gather[int32 index]",
   lambda lib, x: lib.gather(x, 1, lib.tensor([[0, 2], [1, 1]], dtype=lib.int32)),
   lambda x: np.take_along_axis(x, np.array([[0, 2], [1, 1]]), 1), [(2, 3)], ["gather"])
op("gather[0-d]", lambda lib, x: lib.gather(x, 0, lib.tensor(0)), lambda x: x, [()],
   ["gather"])
op("scatter_add[0-d]", lambda lib, x, s: lib.scatter_add(x, 0, lib.tensor(0), s),
   lambda x, s: x + s, [(), ()], ["scatter_add_zeros"])

# sign, clamp, relu, abs, softplus, maximum, minimum at NaN, as PyTorch ---------------------------

_NANS = [NAN, 0.0, 0.0, NAN]


def _with_nan(lib, x, at=_NANS):
    """``x`` plus NaN at the marked places: the NaN stays on x's differentiable path."""
    return x + _const(lib, at, x)


op("sign[nan]", lambda lib, x: lib.sign(_with_nan(lib, x)),
   lambda x: np.where(np.isnan(np.array(_NANS)), 0.0, np.sign(x)), [(4,)], ["sign"])
op("clamp[nan min tensor]",
   lambda lib, x, lo: lib.clamp(x, min=_with_nan(lib, lo, [NAN, 0.0, 0.0, 0.0])),
   lambda x, lo: np.where(np.arange(4) == 0, NAN, np.maximum(x, lo)), [(4,), (4,)],
   ["where"], grad=False)
op("clamp[nan max scalar]", lambda lib, x: lib.clamp(x, max=NAN),
   lambda x: np.full_like(x, NAN), [(4,)], grad=False)
for _name, _f, _want in (
        ("relu", lambda lib, t: lib.relu(t), lambda x: np.where(x > 0, 1.0, 0.0)),
        ("abs", lambda lib, t: lib.abs(t), np.sign),
        ("softplus", lambda lib, t: _F(lib).softplus(t), lambda x: 1 / (1 + np.exp(-x)))):
    op(f"d {_name} at nan", lambda lib, x, f=_f: _grads(lib, lambda t: f(lib, _with_nan(lib, t)),
                                                      x)[0],
       lambda x, n=_name, w=_want: np.where(np.isnan(np.array(_NANS)),
                                            {"relu": 1.0, "abs": 0.0, "softplus": NAN}[n], w(x)),
       [(4,)], grad=False)
_NAN_A, _NAN_B = [NAN, 0.0, 0.0, NAN], [0.0, NAN, 0.0, NAN]
for _name, _fn in (("maximum", np.maximum), ("minimum", np.minimum)):
    op(f"d {_name} at nan", lambda lib, a, b, n=_name: _grads(
           lib, lambda s, t: getattr(lib, n)(_with_nan(lib, s, _NAN_A), _with_nan(lib, t, _NAN_B)),
           a, b),
       lambda a, b, fn=_fn: (np.where(np.isnan(np.array(_NAN_A) + _NAN_B), 1.0,
                                      (fn(a, b) == a).astype(float)),
                             np.where(np.isnan(np.array(_NAN_A) + _NAN_B), 1.0,
                                      (fn(a, b) == b).astype(float))),
       [(4,), (4,)], grad=False)
def _clamp_grads(x, lo, hi):
    """PyTorch's clamp_backward_min_max: each mask a comparison, False at NaN."""
    with np.errstate(invalid="ignore"):
        return (((x >= lo) & (x <= hi)).astype(float), ((x < lo) & (lo < hi)).astype(float),
                ((x > hi) | (hi < lo)).astype(float))


op("d clamp at nan", lambda lib, x, lo, hi: _grads(
       lib, lambda s, a, b: lib.clamp(_with_nan(lib, s, [NAN, 0, 0, 0]),
                                      _with_nan(lib, a, [0, NAN, 0, 0]),
                                      _with_nan(lib, b, [0, 0, NAN, 0])), x, lo, hi),
   lambda x, lo, hi: _clamp_grads(x + [NAN, 0, 0, 0], lo + [0, NAN, 0, 0], hi + [0, 0, NAN, 0]),
   [(4,), (4,), (4,)], grad=False)
op("clamp[tensor bounds, min > max]", lambda lib, x, lo, hi: lib.clamp(x, lo, hi),
   lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), [(4,), (4,), (4,)], ["where"],
   fixed=([0.5, -2.0, 3.0, 0.1], [1.0, 1.0, -1.0, -0.5], [-1.0, 0.0, 2.0, 0.5]))

# atan2 at (0, 0): gradient 0 --------------------------------------------------------------------

op("d atan2 at (0, 0)", lambda lib, a, b: _grads(lib, lib.atan2, a, b),
   lambda a, b: (np.where((a == 0) & (b == 0), 0.0, b / np.where(a * a + b * b == 0, 1,
                                                                   a * a + b * b)),
                 np.where((a == 0) & (b == 0), 0.0, -a / np.where(a * a + b * b == 0, 1,
                                                                    a * a + b * b))),
   [(3,), (3,)], fixed=([0.0, 1.0, 0.0], [0.0, 2.0, -1.0]), grad=False)

# linalg ----------------------------------------------------------------------------------------


_LSTSQ = (np.random.default_rng(3).standard_normal((5, 3)).round(6).tolist(),
          np.random.default_rng(4).standard_normal((5, 2)).round(6).tolist())
op("linalg.lstsq[gelsd, residuals]",
   lambda lib, a, b: tuple(_L(lib).lstsq(a, b, driver="gelsd")[:2]),
   lambda a, b: tuple(np.linalg.lstsq(a, b, rcond=None)[:2]), [(5, 3), (5, 2)],
   ["linalg_qr_r"], fixed=_LSTSQ)
op("linalg.lstsq[gelsd, rank, singular values]",
   lambda lib, a, b: tuple(_L(lib).lstsq(a, b, driver="gelsd")[2:]),
   lambda a, b: (np.int64(np.linalg.matrix_rank(a)), np.linalg.svd(a, compute_uv=False)),
   [(5, 3), (5, 2)], fixed=_LSTSQ, grad=False)
op("linalg.lstsq[gels, vector]", lambda lib, a, b: tuple(
       t for t in _L(lib).lstsq(a, b, driver="gels")[:2]),
   lambda a, b: tuple(np.linalg.lstsq(a, b, rcond=None)[:2])[:1] + (
       np.atleast_1d(np.linalg.lstsq(a, b, rcond=None)[1]),), [(4, 3), (4,)],
   fixed=(np.random.default_rng(5).standard_normal((4, 3)).round(6).tolist(),
          np.random.default_rng(6).standard_normal(4).round(6).tolist()))
op("linalg.matrix_power[0]", lambda lib, x: _L(lib).matrix_power(x, 0),
   lambda x: np.broadcast_to(np.eye(3), x.shape).copy(), [(2, 3, 3)], ["where"])
_RANKS = np.diag([3.0, 1.0, 0.01]) @ np.random.default_rng(7).standard_normal((3, 4))
for _kw, _tol in ((dict(atol=0.5), 0.5), (dict(rtol=0.1), 0.1), (dict(atol=0.05, rtol=0.01), None),
                  (dict(tol=2.0), 2.0)):
    op(f"linalg.matrix_rank[{','.join(f'{k}={v}' for k, v in _kw.items())}]",
       lambda lib, x, kw=_kw: _L(lib).matrix_rank(x, **kw),
       lambda x, kw=_kw: np.int64(np.sum(np.linalg.svd(x, compute_uv=False) > max(
           kw.get("atol", kw.get("tol", 0.0)),
           kw.get("rtol", 0.0) * np.linalg.svd(x, compute_uv=False).max()))),
       [(3, 4)], fixed=(_RANKS.tolist(),), grad=False)

# what raised ------------------------------------------------------------------------------------

op("softmax[empty]", lambda lib, x: lib.softmax(x, 0), lambda x: x, [(0, 3)])
op("log_softmax[empty]", lambda lib, x: _F(lib).log_softmax(x, dim=1), lambda x: x, [(2, 0)])
op("batch_norm[1-D empty, eval]", lambda lib, x: _F(lib).batch_norm(
       x, lib.zeros(0, dtype=x.dtype), lib.ones(0, dtype=x.dtype), training=False),
   lambda x: x, [(0,)])
for _ac in (True, False):
    op(f"interpolate[bicubic scale 2 align_corners={_ac}]",
       lambda lib, x, a=_ac: _F(lib).interpolate(x, scale_factor=2, mode="bicubic",
                                                 align_corners=a),
       lambda x, a=_ac: _ref_bicubic(x, (6, 8), a, (2.0, 2.0)), [(1, 2, 3, 4)],
       ["upsample_bicubic2d", "upsample_bicubic2d_backward"])
    op(f"interpolate[bicubic size 5x4->3x7 align_corners={_ac}]",
       lambda lib, x, a=_ac: _F(lib).interpolate(x, size=(3, 7), mode="bicubic",
                                                 align_corners=a),
       lambda x, a=_ac: _ref_bicubic(x, (3, 7), a), [(2, 1, 5, 4)],
       ["upsample_bicubic2d", "upsample_bicubic2d_backward"])
op("pad[replicate, negative widths]",
   lambda lib, x: _F(lib).pad(x, (-1, 2, 1, -2), mode="replicate"),
   lambda x: np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2)), mode="edge")[:, :, :-2, 1:],
   [(1, 2, 4, 4)])

# Tensor.addmm, memory formats, Linear/Embedding/stack primitives -------------------------------

op("addmm[method]", lambda lib, c, a, b: c.addmm(a, b), lambda c, a, b: c + a @ b,
   [(3, 2), (3, 4), (4, 2)], ["addmm"])
op("addmm[beta=0]", lambda lib, c, a, b: lib.addmm(c, a, b, beta=0, alpha=0.5),
   lambda c, a, b: 0.5 * (a @ b), [(1, 2), (3, 4), (4, 2)], ["addmm"])
op("linear[3d]", lambda lib, x, w, b: _F(lib).linear(x, w, b),
   lambda x, w, b: x @ w.T + b, [(2, 3, 4), (5, 4), (5,)], ["addmm", "reshape"])
op("linear[no bias, 3d]", lambda lib, x, w: _F(lib).linear(x, w),
   lambda x, w: x @ w.T, [(2, 3, 4), (5, 4)], ["matmul"])
_IDS = np.array([[1, 3, 1], [0, 2, 3]])
for _pad, _freq in ((None, False), (1, False), (None, True), (3, True)):
    op(f"embedding[padding_idx={_pad},scale_grad_by_freq={_freq}]",
       lambda lib, w, p=_pad, s=_freq: _F(lib).embedding(lib.tensor(_IDS), w, padding_idx=p,
                                                         scale_grad_by_freq=s),
       lambda w: w[_IDS], [(4, 3)], ["embedding", "embedding_backward"],
       xfail={} if _pad is None and not _freq else {
           "gradcheck": "by design not the derivative (a padding row gets no gradient, "
                        "scale_grad_by_freq divides it), as PyTorch's"})
op("stack[dim 1]", lambda lib, a, b: lib.stack([a, b], 1), lambda a, b: np.stack([a, b], 1),
   [(2, 3), (2, 3)], ["stack"])
op("to[memory_format]", lambda lib, x: x.to(memory_format=lib.channels_last) * 2,
   lambda x: x * 2, [(1, 2, 2, 3)])
op("float[memory_format]", lambda lib, x: x.float(memory_format=lib.contiguous_format),
   lambda x: x.astype(np.float32), [(2, 3)], out_dtype="float32",
   gc={"eps": 1e-3, "atol": 1e-3})
