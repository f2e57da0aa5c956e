"""Op-table entries for ``ops/pointwise_more.py`` and ``ops/index_more.py``: fmax/fmin,
gcd/lcm, heaviside, ldexp/frexp, nextafter, dist, cross, diagflat, the in-place and alias
methods (``atan2_``, ``eq_``, ``addmm_``, ``multiply``, ``mH``...), and the indexing tail
(take, select, the ``*_scatter`` family, index_add/copy/put, masked_scatter, tensor_split...).

Imported by ``op_table.py``: each entry runs forward against the NumPy reference, gradcheck
and gradgradcheck, PyTorch's values and gradients, and compiled against eager. Integer and
bool results have ``grad=False``; what the table cannot say (in-place semantics, errors,
NaN and ties) is in ``test_pointwise_more.py``.
"""
import numpy as np

from op_table import _erf, op

_SHAPES = (("3x4", [(3, 4), (3, 4)]), ("3x1+1x4", [(3, 1), (1, 4)]), ("0d+3", [(), (3,)]))


for _pid, _shapes in _SHAPES:
    op(f"fmax[{_pid}]", lambda lib, a, b: lib.fmax(a, b), np.fmax, _shapes, ["fmax"])
    op(f"fmin[{_pid}]", lambda lib, a, b: lib.fmin(a, b), np.fmin, _shapes, ["fmin"])
op("fmax[method]", lambda lib, a, b: a.fmax(b), np.fmax, [(2, 3), (3,)], ["fmax"])
op("fmin[method]", lambda lib, a, b: a.fmin(b), np.fmin, [(2, 3), (3,)], ["fmin"])
_NAN = [[1.0, np.nan, 3.0, np.nan, -1.0], [2.0, 1.0, np.nan, np.nan, -2.0]]
op("fmax[nan]", lambda lib, a, b: lib.fmax(a, b), np.fmax, [(5,), (5,)], ["fmax"],
   fixed=_NAN, grad=False)
op("fmin[nan]", lambda lib, a, b: lib.fmin(a, b), np.fmin, [(5,), (5,)], ["fmin"],
   fixed=_NAN, grad=False)


def _ints(x):
    return (x * 10).astype(np.int64)


op("gcd", lambda lib, a, b: lib.gcd((a * 10).long(), (b * 10).long()),
   lambda a, b: np.gcd(_ints(a), _ints(b)), [(3, 4), (4,)], grad=False)
op("lcm.method", lambda lib, a, b: (a * 10).long().lcm((b * 10).long()),
   lambda a, b: np.lcm(_ints(a), _ints(b)), [(3, 4), (3, 1)], grad=False)
op("gcd_", lambda lib, a, b: (a * 10).long().gcd_((b * 10).long()),
   lambda a, b: np.gcd(_ints(a), _ints(b)), [(3, 4), (4,)], grad=False)
op("logical_xor", lambda lib, a, b: lib.logical_xor(a > 0, b),
   lambda a, b: np.logical_xor(a > 0, b != 0), [(3, 4), (4,)], grad=False)
# PyTorch records no node for logical_*_: the target keeps its history (test_pointwise_more)
op("logical_xor_", lambda lib, a, b: (a * 1).logical_xor_(b > 0),
   lambda a, b: np.logical_xor(a != 0, b > 0).astype(a.dtype), [(3, 4), (4,)], grad=False)
op("isposinf", lambda lib, a: lib.isposinf(a / (a > 1)), lambda a: np.isposinf(a / (a > 1)),
   [(3, 4)], grad=False)
op("isneginf.method", lambda lib, a: (a / (a > 1)).isneginf(),
   lambda a: np.isneginf(a / (a > 1)), [(3, 4)], grad=False)
op("isreal", lambda lib, a: lib.isreal(a), lambda a: np.isreal(a), [(2, 3)], grad=False)
op("heaviside", lambda lib, a, b: lib.heaviside(a * (a > 0.5), b),
   lambda a, b: np.where(a * (a > 0.5) == 0, b, a * (a > 0.5) > 0), [(3, 4), (4,)],
   grad=False)
op("heaviside_", lambda lib, a, b: (a * (a > 0.5)).heaviside_(b),
   lambda a, b: np.where(a * (a > 0.5) == 0, b, a * (a > 0.5) > 0), [(3, 4), (4,)],
   grad=False)
op("nextafter", lambda lib, a, b: lib.nextafter(a, b), np.nextafter, [(3, 4), (4,)],
   ["nextafter"])
op("nextafter_[inplace]", lambda lib, a, b: (a * 1).nextafter_(b), np.nextafter,
   [(3, 4), (3, 1)], ["nextafter"])
_EXPONENTS = [1, 2, 3, 0]
op("ldexp[int-exponent]", lambda lib, a: lib.ldexp(a, lib.tensor(_EXPONENTS)),
   lambda a: a * 2.0 ** np.array(_EXPONENTS), [(3, 4)], ["mul"])
_LDEXP_BUG = ("PyTorch's LdexpBackward0 computes 2 ** other in the integer dtype of other, so "
              "its gradient is 0 where an integer exponent is negative; tracegrad gives "
              "grad * 2 ** other")
op("ldexp[negative-int-exponent]", lambda lib, a: lib.ldexp(a, lib.tensor([1, -2, 3, 0])),
   lambda a: a * 2.0 ** np.array([1, -2, 3, 0]), [(3, 4)], ["mul"],
   xfail={"torch": _LDEXP_BUG, "torch2": _LDEXP_BUG})
op("ldexp[float-exponent].method", lambda lib, a, b: a.ldexp(b), lambda a, b: a * 2.0 ** b,
   [(3, 4), (4,)], ["mul", "exp2"])
op("frexp.mantissa", lambda lib, a: lib.frexp(a)[0], lambda a: np.frexp(a)[0], [(3, 4)],
   ["frexp_mantissa"])
op("frexp.exponent", lambda lib, a: a.frexp().exponent.long(),
   lambda a: np.frexp(a)[1].astype(np.int64), [(3, 4)], grad=False)
for _p, _ref in ((2, lambda d: np.sqrt((d * d).sum())), (1, lambda d: np.abs(d).sum()),
                 (3, lambda d: (np.abs(d) ** 3).sum() ** (1 / 3)),
                 (float("inf"), lambda d: np.abs(d).max())):
    op(f"dist[p={_p}]", lambda lib, a, b, p=_p: lib.dist(a, b, p),
       lambda a, b, r=_ref: r(a - b), [(3, 4), (4,)], ["sub"])
op("dist[method]", lambda lib, a, b: a.dist(b), lambda a, b: np.sqrt(((a - b) ** 2).sum()),
   [(5,), (5,)], ["sub"])
op("linalg.cross", lambda lib, a, b: lib.linalg.cross(a, b), lambda a, b: np.cross(a, b),
   [(4, 3), (4, 3)], ["mul", "sub"])
op("linalg.cross[broadcast]", lambda lib, a, b: lib.linalg.cross(a, b),
   lambda a, b: np.cross(a, b), [(2, 1, 3), (1, 4, 3)], ["mul", "sub"])
op("cross[dim0].method", lambda lib, a, b: a.cross(b, dim=0),
   lambda a, b: np.cross(a, b, axis=0), [(3, 2), (3, 2)], ["mul"])
op("diagflat", lambda lib, a: lib.diagflat(a), lambda a: np.diagflat(a), [(2, 2)],
   ["diagonal_scatter"])
op("diagflat[offset]", lambda lib, a: a.diagflat(-1), lambda a: np.diagflat(a, -1), [(3,)],
   ["diagonal_scatter"])

# in-place forms (on a copy, so the input is a non-leaf) and aliases -------------------------

for _name, _ref, _dom, _prim in (("absolute_", np.abs, "real", "abs"),
                                 ("erf_", _erf, "real", "erf"),
                                 ("expm1_", np.expm1, "real", "expm1"),
                                 ("log1p_", np.log1p, "unit", "log1p"),
                                 ("square_", np.square, "real", "mul"),
                                 ("negative_", np.negative, "real", "neg"),
                                 ("rsqrt_", lambda x: 1 / np.sqrt(x), "pos", "rsqrt")):
    op(f"{_name}[inplace]", lambda lib, x, n=_name: getattr(x * 1, n)(), _ref, [(3, 4)],
       [_prim], domain=_dom)
op("trunc_[inplace]", lambda lib, x: (x * 1).trunc_(), np.trunc, [(3, 4)], ["trunc"],
   domain="frac")
op("sign_[inplace]", lambda lib, x: (x * 1).sign_(), np.sign, [(3, 4)], ["sign"])
for _name, _ref, _prim in (("atan2_", np.arctan2, "atan2"), ("arctan2_", np.arctan2, "atan2"),
                           ("copysign_", np.copysign, "copysign"),
                           ("hypot_", np.hypot, "hypot"), ("fmod_", np.fmod, "fmod"),
                           ("remainder_", np.remainder, "remainder"),
                           ("multiply_", np.multiply, "mul"), ("subtract_", np.subtract, "sub"),
                           ("divide_", np.divide, "div"), ("true_divide_", np.divide, "div")):
    op(f"{_name}[inplace]", lambda lib, a, b, n=_name: getattr(a * 1, n)(b), _ref,
       [(3, 4), (4,)], [_prim])
op("floor_divide_[inplace]", lambda lib, a, b: (a * 1).floor_divide_(b), np.floor_divide,
   [(3, 4), (4,)], domain="pos", grad=False)     # PyTorch: no derivative for floor_divide_
op("divide_[trunc]", lambda lib, a, b: (a * 1).divide_(b, rounding_mode="trunc"),
   lambda a, b: np.trunc(a / b), [(3, 4), (4,)], ["div_rounding"], domain="pos",
   gradgrad=False)
op("lerp_[inplace]", lambda lib, a, b: (a * 1).lerp_(b, 0.25), lambda a, b: a + (b - a) * 0.25,
   [(3, 4), (4,)], ["mul", "index_put"])
op("cumsum_[inplace]", lambda lib, a: (a * 1).cumsum_(1), lambda a: np.cumsum(a, 1), [(3, 4)],
   ["cumsum"])
op("cumprod_[inplace]", lambda lib, a: (a * 1).cumprod_(0), lambda a: np.cumprod(a, 0),
   [(3, 4)], ["cumprod"])
op("clip_[inplace]", lambda lib, a: (a * 1).clip_(-0.6, 0.7), lambda a: np.clip(a, -0.6, 0.7),
   [(3, 4)], ["clamp"], kinks=(-0.6, 0.7))
op("addmm_[inplace]", lambda lib, c, a, b: (c * 1).addmm_(a, b, beta=0.5, alpha=2),
   lambda c, a, b: 0.5 * c + 2 * a @ b, [(2, 4), (2, 3), (3, 4)], ["addmm"])
op("addmv_[inplace]", lambda lib, c, a, v: (c * 1).addmv_(a, v), lambda c, a, v: c + a @ v,
   [(2,), (2, 3), (3,)], ["matmul"])
op("addr_[inplace]", lambda lib, c, u, v: (c * 1).addr_(u, v, alpha=0.5),
   lambda c, u, v: c + 0.5 * np.outer(u, v), [(2, 3), (2,), (3,)], ["mul"])
op("baddbmm_[inplace]", lambda lib, c, a, b: (c * 1).baddbmm_(a, b),
   lambda c, a, b: c + a @ b, [(2, 2, 4), (2, 2, 3), (2, 3, 4)], ["matmul"])
op("addbmm_[inplace]", lambda lib, c, a, b: (c * 1).addbmm_(a, b),
   lambda c, a, b: c + (a @ b).sum(0), [(2, 4), (2, 2, 3), (2, 3, 4)], ["matmul"])
for _name, _ref in (("eq_", np.equal), ("ne_", np.not_equal), ("lt_", np.less),
                    ("le_", np.less_equal), ("gt_", np.greater), ("ge_", np.greater_equal),
                    ("greater_", np.greater), ("less_equal_", np.less_equal),
                    ("not_equal_", np.not_equal)):
    op(f"{_name}[inplace]", lambda lib, a, b, n=_name: getattr(a * 1, n)(b),
       lambda a, b, r=_ref: r(a, b).astype(a.dtype), [(3, 4), (4,)], ["index_put"])
for _name, _ref in (("logical_and_", np.logical_and), ("logical_or_", np.logical_or)):
    op(f"{_name}[inplace]", lambda lib, a, b, n=_name: getattr(a * 1, n)(b > 0),
       lambda a, b, r=_ref: r(a != 0, b > 0).astype(a.dtype), [(3, 4), (4,)], grad=False)
op("logical_not_[inplace]", lambda lib, a: (a > 0).logical_not_(), lambda a: ~(a > 0),
   [(3, 4)], grad=False)
for _name, _ref in (("bitwise_and_", np.bitwise_and), ("bitwise_or_", np.bitwise_or),
                    ("bitwise_xor_", np.bitwise_xor)):
    op(f"{_name}[inplace]", lambda lib, a, b, n=_name: getattr((a * 10).long(), n)(
        (b * 10).long()), lambda a, b, r=_ref: r(_ints(a), _ints(b)), [(3, 4), (4,)],
        grad=False)
op("bitwise_not_[inplace]", lambda lib, a: (a * 10).long().bitwise_not_(),
   lambda a: ~_ints(a), [(3, 4)], grad=False)
for _name, _ref, _prim in (("multiply", np.multiply, "mul"), ("divide", np.divide, "div"),
                           ("subtract", np.subtract, "sub")):
    op(f"{_name}.method", lambda lib, a, b, n=_name: getattr(a, n)(b), _ref, [(3, 4), (4,)],
       [_prim])
for _name, _ref in (("greater", np.greater), ("greater_equal", np.greater_equal),
                    ("less", np.less), ("less_equal", np.less_equal),
                    ("not_equal", np.not_equal)):
    op(f"{_name}.method", lambda lib, a, b, n=_name: getattr(a, n)(b), _ref, [(3, 4), (4,)],
       grad=False)
op("absolute.method", lambda lib, a: a.absolute(), np.abs, [(3, 4)], ["abs"])
op("clip.method", lambda lib, a: a.clip(-0.6, 0.7), lambda a: np.clip(a, -0.6, 0.7), [(3, 4)],
   ["clamp"], kinks=(-0.6, 0.7))
op("moveaxis", lambda lib, a: lib.moveaxis(a, 0, -1) * 1, lambda a: np.moveaxis(a, 0, -1),
   [(2, 3, 4)], ["permute"])
op("moveaxis.method", lambda lib, a: a.moveaxis((0, 1), (2, 0)) * 1,
   lambda a: np.moveaxis(a, (0, 1), (2, 0)), [(2, 3, 4)], ["permute"])
op("adjoint", lambda lib, a: a.adjoint() * 1, lambda a: np.swapaxes(a, -1, -2), [(2, 3, 4)],
   ["permute"])
op("mH", lambda lib, a: a.mH * 1, lambda a: np.swapaxes(a, -1, -2), [(2, 3, 4)], ["permute"])
op("H", lambda lib, a: a.H * 1, lambda a: a.T, [(3, 4)], ["permute"])
op("fill_diagonal_", lambda lib, a: (a * 1).fill_diagonal_(0.5),
   lambda a: _fill_diagonal(a, 0.5, False), [(3, 4)], ["index_put"])
op("fill_diagonal_[wrap]", lambda lib, a: (a * 1).fill_diagonal_(-2.0, wrap=True),
   lambda a: _fill_diagonal(a, -2.0, True), [(7, 3)], ["index_put"])
op("fill_diagonal_[3d]", lambda lib, a: (a * 1).fill_diagonal_(0.0),
   lambda a: _fill_diagonal(a, 0.0, False), [(2, 2, 2)], ["index_put"])


def _fill_diagonal(a, value, wrap):
    a = a.copy()
    np.fill_diagonal(a, value, wrap=wrap)
    return a


# indexing ---------------------------------------------------------------------------------

_TAKE = [[0, 11, -1], [3, 3, 5]]
op("take", lambda lib, a: lib.take(a, lib.tensor(_TAKE)),
   lambda a: a.reshape(-1)[np.array(_TAKE)], [(3, 4)], ["index", "index_backward"])
op("take[0d].method", lambda lib, a: a.take(lib.tensor(2)), lambda a: a.reshape(-1)[2],
   [(2, 2)], ["index"])
op("select", lambda lib, a: lib.select(a, 1, -1) * 1, lambda a: a[:, -1], [(3, 4)], ["index"])
op("select.method", lambda lib, a: a.select(0, 1) * 1, lambda a: a[1], [(3, 4)], ["index"])
op("select_scatter", lambda lib, a, s: lib.select_scatter(a, s, 1, 0),
   lambda a, s: _put(a, (slice(None), 0), s), [(3, 4), (3,)], ["index_put", "index"])
op("select_scatter.method", lambda lib, a, s: a.select_scatter(s, 0, -1),
   lambda a, s: _put(a, -1, s), [(3, 4), (4,)], ["index_put"])
op("slice_scatter", lambda lib, a, s: lib.slice_scatter(a, s, 1, 1, 4, 2),
   lambda a, s: _put(a, (slice(None), slice(1, 4, 2)), s), [(3, 4), (3, 2)], ["index_put"])
op("slice_scatter[default].method", lambda lib, a, s: a.slice_scatter(s, start=1),
   lambda a, s: _put(a, slice(1, None), s), [(3, 4), (2, 4)], ["index_put"])
op("diagonal_scatter", lambda lib, a, s: lib.diagonal_scatter(a, s),
   lambda a, s: _put(a, (np.arange(3), np.arange(3)), s), [(3, 4), (3,)],
   ["diagonal_scatter", "where", "diagonal"])
op("diagonal_scatter[offset,dims].method", lambda lib, a, s: a.diagonal_scatter(s, -1, 2, 0),
   lambda a, s: _diag_put(a, s), [(3, 2, 4), (2, 3)], ["diagonal_scatter", "where"])


def _put(a, key, s):
    a = a.copy()
    a[key] = s
    return a


def _diag_put(a, s):
    """a with diagonal(a, -1, 2, 0) (shape (2, 3): dim 1, then the diagonal) set to s."""
    a = a.copy()
    for k in range(3):                  # diagonal element k: dim2 = 0 index k, dim1 = 2 index k+1
        a[k, :, k + 1] = s[:, k]
    return a


_IDX = [2, 0, 2]
op("index_add", lambda lib, a, s: lib.index_add(a, 0, lib.tensor(_IDX), s),
   lambda a, s: _add_at(a, _IDX, s, 1), [(3, 4), (3, 4)], ["index_backward", "add"])
op("index_add[alpha,dim1].method", lambda lib, a, s: a.index_add(1, lib.tensor(_IDX), s,
                                                                 alpha=-2),
   lambda a, s: _add_at(a.T, _IDX, s.T, -2).T, [(2, 4), (2, 3)], ["index_backward"])
op("index_add_", lambda lib, a, s: (a * 1).index_add_(0, lib.tensor(_IDX), s),
   lambda a, s: _add_at(a, _IDX, s, 1), [(3, 4), (3, 4)], ["index_backward", "index_put"])
op("index_copy", lambda lib, a, s: lib.index_copy(a, 0, lib.tensor([2, 0]), s),
   lambda a, s: _put(a, np.array([2, 0]), s), [(3, 4), (2, 4)], ["index_put"])
op("index_copy_[dim1]", lambda lib, a, s: (a * 1).index_copy_(1, lib.tensor([3, 1]), s),
   lambda a, s: _put(a, (slice(None), np.array([3, 1])), s), [(3, 4), (3, 2)], ["index_put"])
_ROWS, _COLS = [0, 2, 0], [1, 1, 1]
op("index_put", lambda lib, a, v: lib.index_put(a, (lib.tensor(_ROWS[:2]), lib.tensor(_COLS[:2])),
                                                v),
   lambda a, v: _put(a, (np.array(_ROWS[:2]), np.array(_COLS[:2])), v), [(3, 4), (2,)],
   ["index_put"])
op("index_put[accumulate]", lambda lib, a, v: a.index_put(
    (lib.tensor(_ROWS), lib.tensor(_COLS)), v, accumulate=True),
   lambda a, v: _acc(a, (np.array(_ROWS), np.array(_COLS)), v), [(3, 4), (3,)],
   ["index_backward", "add"])
op("index_put_[accumulate,broadcast]", lambda lib, a, v: (a * 1).index_put_(
    (lib.tensor(_ROWS),), v, accumulate=True),
   lambda a, v: _acc(a, (np.array(_ROWS),), np.broadcast_to(v, (3, 4))), [(3, 4), (4,)],
   ["index_backward"])
op("index_put[broadcast]", lambda lib, a, v: a.index_put((lib.tensor([0, 2]),), v),
   lambda a, v: _put(a, np.array([0, 2]), v), [(3, 4), (4,)], ["index_put"])


def _add_at(a, idx, s, alpha):
    a = a.copy()
    np.add.at(a, np.array(idx), alpha * s)
    return a


def _acc(a, key, v):
    a = a.copy()
    np.add.at(a, key, v)
    return a


_MASK = [[True, False, True, False], [False, False, True, True], [True, True, False, False]]
op("masked_scatter", lambda lib, a, s: lib.masked_scatter(a, lib.tensor(_MASK), s),
   lambda a, s: _masked_scatter(a, np.array(_MASK), s), [(3, 4), (2, 4)],
   ["masked_scatter", "masked_gather", "where"])
op("masked_scatter[broadcast].method", lambda lib, a, s: a.masked_scatter(
    lib.tensor([True, False, True, True]), s),
   lambda a, s: _masked_scatter(a, np.broadcast_to([True, False, True, True], (3, 4)), s),
   [(3, 4), (10,)], ["masked_scatter", "masked_gather"])
op("masked_scatter_", lambda lib, a, s: (a * 1).masked_scatter_(lib.tensor(_MASK), s),
   lambda a, s: _masked_scatter(a, np.array(_MASK), s), [(3, 4), (6,)],
   ["masked_scatter", "index_put"])


def _masked_scatter(a, mask, s):
    a = a.copy()
    a[mask] = s.reshape(-1)[:mask.sum()]
    return a


def _parts(lib, parts):
    return tuple(p * 1 for p in parts)


op("tensor_split[sections]", lambda lib, a: _parts(lib, lib.tensor_split(a, 3, 1)),
   lambda a: tuple(np.array_split(a, 3, 1)), [(2, 7)], ["index"])
op("tensor_split[indices].method", lambda lib, a: _parts(lib, a.tensor_split([1, 5, 9])),
   lambda a: (a[:1], a[1:5], a[5:], a[9:]), [(7, 2)], ["index"])
op("tensor_split[tensor]", lambda lib, a: _parts(lib, lib.tensor_split(a, lib.tensor([-2, 3]))),
   lambda a: (a[:-2], a[-2:3], a[3:]), [(6,)], ["index"])
op("hsplit", lambda lib, a: _parts(lib, lib.hsplit(a, 2)), lambda a: tuple(np.hsplit(a, 2)),
   [(3, 4)], ["index"])
op("hsplit[1d,indices].method", lambda lib, a: _parts(lib, a.hsplit([2])),
   lambda a: tuple(np.hsplit(a, [2])), [(5,)], ["index"])
op("vsplit", lambda lib, a: _parts(lib, lib.vsplit(a, [1])), lambda a: tuple(np.vsplit(a, [1])),
   [(3, 4)], ["index"])
op("dsplit", lambda lib, a: _parts(lib, lib.dsplit(a, 2)), lambda a: tuple(np.dsplit(a, 2)),
   [(2, 1, 4)], ["index"])
op("narrow_copy", lambda lib, a: lib.narrow_copy(a, 1, 1, 2), lambda a: a[:, 1:3].copy(),
   [(3, 4)], ["index", "clone"])
op("narrow_copy.method", lambda lib, a: a.narrow_copy(0, 1, 2), lambda a: a[1:].copy(),
   [(3, 4)], ["index"])
op("unravel_index", lambda lib, a: lib.unravel_index((a * 10).long(), (2, 3, 4)),
   lambda a: tuple(c.astype(np.int64) for c in np.unravel_index(_ints(a) % 24, (2, 3, 4))),
   [(3, 4)], grad=False, domain="pos")
