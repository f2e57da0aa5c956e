"""The op test table: one entry per public op form, read by ``test_ops.py``.

An entry says how to make its float inputs (shapes and a value domain), how to
call the op (``fn(lib, *tensors)``, the same code for ``lib = tracegrad`` and
``lib = torch``), the NumPy reference over float64 arrays, and which
primitives of ``tracegrad.ops.PRIMITIVES`` it exercises (the coverage test
checks that every differentiable primitive is named by some entry, and that
the names an entry gives really appear in its forward or backward graph).

Inputs are drawn so that no value sits near a kink: magnitudes are distinct
across all inputs of an entry (no ties for max/min/maximum), away from 0, and
``kinks`` moves values away from an entry's own break points (clamp bounds).
"""
import math
import zlib
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

# domain: (low magnitude, high magnitude, random sign)
DOMAINS = {
    "real": (0.3, 2.0, True),
    "pos": (0.5, 2.0, False),
    "unit": (0.1, 0.8, True),
    "prob": (0.1, 0.9, False),      # logit
    "above1": (1.2, 3.0, False),    # acosh
}


@dataclass
class Op:
    name: str
    fn: Callable                  # fn(lib, *tensors) -> tensor or tuple of tensors
    ref: Callable                 # ref(*float64 arrays) -> array or tuple of arrays
    shapes: tuple                 # shapes of the float tensor inputs
    prims: tuple = ()             # primitive names this entry exercises
    domain: str = "real"
    grad: bool = True             # gradcheck (and the torch gradient comparison)
    gradgrad: bool = True
    kinks: tuple = ()
    rtol: float = 1e-5            # forward tolerance in float32 (float64 uses 1e-10)
    out_dtype: str = None         # float results: None for the input's dtype
    gc: dict = field(default_factory=dict)   # gradcheck keyword arguments
    fixed: tuple = None           # given input values instead of drawn ones
    xfail: dict = field(default_factory=dict)   # test name -> reason for a known failure
    torch_rtol: float = 0.0       # PyTorch's own accuracy where it is not to rounding (float64)

    def sample(self, seed_extra=""):
        """The float64 input arrays of this entry (deterministic per entry name)."""
        if self.fixed is not None:
            return [np.array(v, dtype=np.float64) for v in self.fixed]
        rng = np.random.default_rng(zlib.crc32((self.name + seed_extra).encode()))
        sizes = [math.prod(s) for s in self.shapes]
        n = sum(sizes)
        if self.domain == "frac":     # rounding ops: fractional parts away from 0 and .5
            vals = rng.integers(-2, 3, n) + 0.15 + 0.2 * (rng.permutation(n) + 0.5) / n
            vals = np.where(rng.random(n) < 0.5, vals, vals + 0.5)
        else:
            lo, hi, signed = DOMAINS[self.domain]
            vals = lo + (hi - lo) * (rng.permutation(n) + 0.5) / max(n, 1)
            if signed:
                vals = vals * rng.choice([-1.0, 1.0], n)
        for k in self.kinks:
            vals = np.where(np.abs(vals - k) < 0.05, vals + 0.1, vals)
        out, start = [], 0
        for s, size in zip(self.shapes, sizes):
            out.append(vals[start:start + size].reshape(s).copy())
            start += size
        return out


TABLE = []


def op(name, fn, ref, shapes, prims=(), **kw):
    TABLE.append(Op(name, fn, ref, tuple(tuple(s) for s in shapes), tuple(prims), **kw))


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _logsumexp(x, axis, keepdims=False):
    m = x.max(axis=axis, keepdims=True)
    r = np.log(np.exp(x - m).sum(axis=axis, keepdims=True)) + m
    return r if keepdims else np.squeeze(r, axis=axis)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# unary elementwise ---------------------------------------------------------------------
# (name, primitive, lib function name, numpy reference, domain)

UNARY = [
    ("exp", "exp", np.exp, "real"),
    ("log", "log", np.log, "pos"),
    ("log1p", "log1p", np.log1p, "unit"),
    ("expm1", "expm1", np.expm1, "real"),
    ("sqrt", "sqrt", np.sqrt, "pos"),
    ("rsqrt", "rsqrt", lambda x: 1 / np.sqrt(x), "pos"),
    ("sin", "sin", np.sin, "real"),
    ("cos", "cos", np.cos, "real"),
    ("tanh", "tanh", np.tanh, "real"),
    ("sigmoid", "sigmoid", _sigmoid, "real"),
    ("erf", "erf", _erf, "real"),
    ("neg", "neg", np.negative, "real"),
    ("abs", "abs", np.abs, "real"),
    ("sign", "sign", np.sign, "real"),
    ("relu", "relu", lambda x: np.maximum(x, 0), "real"),
    ("floor", "floor", np.floor, "frac"),
    ("ceil", "ceil", np.ceil, "frac"),
    ("trunc", "trunc", np.trunc, "frac"),
    ("round", "round", np.round, "frac"),
]

for _name, _prim, _ref, _dom in UNARY:
    # function form on a matrix, method form on a 0-dim tensor
    op(f"{_name}[3x4]", lambda lib, x, n=_name: getattr(lib, n)(x), _ref, [(3, 4)], [_prim],
       domain=_dom)
    op(f"{_name}[0d].method", lambda lib, x, n=_name: getattr(x, n)(), _ref, [()], [_prim],
       domain=_dom)



def _derivative(lib, f, x):
    """f'(x) as a differentiable tensor: exercises the backward primitives of f."""
    with lib.enable_grad():       # gradcheck's finite differences run under no_grad
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        return lib.autograd.grad(f(x).sum(), x, create_graph=True)[0]


op("tanh_backward[d tanh]", lambda lib, x: _derivative(lib, lib.tanh, x),
   lambda x: 1 - np.tanh(x) ** 2, [(3, 4)], ["tanh_backward"])
op("sigmoid_backward[d sigmoid]", lambda lib, x: _derivative(lib, lib.sigmoid, x),
   lambda x: _sigmoid(x) * (1 - _sigmoid(x)), [(3, 4)], ["sigmoid_backward"])
op("threshold_backward[d relu]", lambda lib, x: _derivative(lib, lib.relu, x) * x,
   lambda x: np.where(x > 0, x, 0.0), [(3, 4)], ["threshold_backward"])
op("neg[operator]", lambda lib, x: -x, np.negative, [(2, 3)], ["neg"])
op("abs[operator]", lambda lib, x: abs(x), np.abs, [(2, 3)], ["abs"])
def _gelu(lib, x, **kw):
    # PyTorch has gelu in nn.functional only; tracegrad also has it at the top level
    return lib.gelu(x, **kw) if lib.__name__ == "tracegrad" else lib.nn.functional.gelu(x, **kw)


op("gelu", lambda lib, x: _gelu(lib, x), lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
   [(3, 4)], ["mul", "erf", "add"])
op("gelu[tanh]", lambda lib, x: _gelu(lib, x, approximate="tanh"),
   lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
   [(3, 4)], ["tanh", "mul"])
op("round[decimals=1]", lambda lib, x: lib.round(x * 10, decimals=1),
   lambda x: np.round(x * 10, 1), [(2, 3)], ["round"], domain="frac", grad=False)

# binary elementwise ----------------------------------------------------------------------

BROADCAST = [
    ("3x4", [(3, 4), (3, 4)]),
    ("3x4+4", [(3, 4), (4,)]),
    ("3x1+1x4", [(3, 1), (1, 4)]),
    ("2x3x4+3x1", [(2, 3, 4), (3, 1)]),
    ("0d+3", [(), (3,)]),
    ("3+0d", [(3,), ()]),
]

BINARY = [
    # name, primitive, call, reference, domain of (a, b)
    ("add", "add", lambda lib, a, b: a + b, np.add, "real"),
    ("sub", "sub", lambda lib, a, b: a - b, np.subtract, "real"),
    ("mul", "mul", lambda lib, a, b: a * b, np.multiply, "real"),
    ("div", "div", lambda lib, a, b: a / b, np.divide, "real"),
    ("maximum", "maximum", lambda lib, a, b: lib.maximum(a, b), np.maximum, "real"),
    ("minimum", "minimum", lambda lib, a, b: lib.minimum(a, b), np.minimum, "real"),
    ("pow", "pow", lambda lib, a, b: a ** b, np.power, "pos"),
]

for _name, _prim, _call, _ref, _dom in BINARY:
    for _pid, _shapes in BROADCAST:
        op(f"{_name}[{_pid}]", _call, _ref, _shapes, [_prim], domain=_dom)

op("add[fn,alpha]", lambda lib, a, b: lib.add(a, b, alpha=2), lambda a, b: a + 2 * b,
   [(3, 4), (4,)], ["add", "mul"])
op("sub[fn,alpha]", lambda lib, a, b: lib.sub(a, b, alpha=0.5), lambda a, b: a - 0.5 * b,
   [(3, 1), (1, 4)], ["sub", "mul"])
op("mul[method]", lambda lib, a, b: a.mul(b), np.multiply, [(3, 4), (4,)], ["mul"])
op("div[fn]", lambda lib, a, b: lib.div(a, b), np.divide, [(3, 1), (1, 4)], ["div"])
op("pow[fn]", lambda lib, a, b: lib.pow(a, b), np.power, [(3, 4), (4,)], ["pow"], domain="pos")
op("max[binary]", lambda lib, a, b: lib.max(a, b), np.maximum, [(3, 1), (1, 4)], ["maximum"])
op("min[binary]", lambda lib, a, b: lib.min(a, b), np.minimum, [(2, 3, 4), (3, 1)], ["minimum"])
op("add[scalar]", lambda lib, a: a + 2.5, lambda a: a + 2.5, [(3, 4)], ["add"])
op("radd[scalar]", lambda lib, a: 2.5 + a, lambda a: 2.5 + a, [(3, 4)], ["add"])
op("rsub[scalar]", lambda lib, a: 2.5 - a, lambda a: 2.5 - a, [(3, 4)], ["sub"])
op("mul[int scalar]", lambda lib, a: a * 3, lambda a: a * 3, [(3, 4)], ["mul"])
op("rdiv[scalar]", lambda lib, a: 2 / a, lambda a: 2 / a, [(3, 4)], ["div"])
op("div[scalar]", lambda lib, a: a / 3, lambda a: a / 3, [(3, 4)], ["div"])
op("sub[0d-0d]", lambda lib, a, b: a - b, np.subtract, [(), ()], ["sub"])

# pow with a scalar exponent and with a scalar base
for _e in (2, 3, -1, 0, 1):
    op(f"pow[x**{_e}]", lambda lib, x, e=_e: x ** e, lambda x, e=_e: x ** float(e), [(3, 4)],
       ["pow_scalar"])
for _e in (0.5, -1.5, 2.5):
    op(f"pow[x**{_e}]", lambda lib, x, e=_e: x ** e, lambda x, e=_e: x ** e, [(3, 4)],
       ["pow_scalar"], domain="pos")
op("pow[fn,x**2]", lambda lib, x: lib.pow(x, 2), lambda x: x ** 2, [(2, 3)], ["pow_scalar"])
op("pow[method,x**3]", lambda lib, x: x.pow(3), lambda x: x ** 3, [()], ["pow_scalar"])
op("pow[2.0**x]", lambda lib, x: 2.0 ** x, lambda x: 2.0 ** x, [(3, 4)], ["pow"])
op("pow[0.5**x]", lambda lib, x: 0.5 ** x, lambda x: 0.5 ** x, [(2, 3)], ["pow"])

# where, clamp ---------------------------------------------------------------------------

_COND = np.array([[True, False, True, False], [False, False, True, True],
                  [True, True, False, False]])

op("where[3x4,3x1,4]", lambda lib, a, b: lib.where(lib.tensor(_COND), a, b),
   lambda a, b: np.where(_COND, a, b), [(3, 1), (4,)], ["where"])
op("where[3x4,3x4]", lambda lib, a, b: lib.where(lib.tensor(_COND), a, b),
   lambda a, b: np.where(_COND, a, b), [(3, 4), (3, 4)], ["where"])
op("where[cond 4,0d]", lambda lib, a, b: lib.where(lib.tensor(_COND[0]), a, b),
   lambda a, b: np.where(_COND[0], a, b), [(3, 4), ()], ["where"])
op("where[scalar other]", lambda lib, a: lib.where(lib.tensor(_COND), a, 0.0),
   lambda a: np.where(_COND, a, 0.0), [(3, 4)], ["where"])
op("where[computed cond]", lambda lib, a, b: lib.where(a > b, a, b * 2),
   lambda a, b: np.where(a > b, a, b * 2), [(3, 4), (4,)], ["where", "mul"])
op("where[method]", lambda lib, a, b: a.where(lib.tensor(_COND), b),
   lambda a, b: np.where(_COND, a, b), [(3, 4), (3, 4)], ["where"])

op("clamp[min,max]", lambda lib, x: lib.clamp(x, -0.6, 0.7), lambda x: np.clip(x, -0.6, 0.7),
   [(3, 4)], ["clamp"], kinks=(-0.6, 0.7))
op("clamp[min]", lambda lib, x: lib.clamp(x, min=-0.6), lambda x: np.maximum(x, -0.6),
   [(3, 4)], ["clamp"], kinks=(-0.6,))
op("clamp[max]", lambda lib, x: x.clamp(max=0.7), lambda x: np.minimum(x, 0.7),
   [(3, 4)], ["clamp"], kinks=(0.7,))
op("clamp[method]", lambda lib, x: x.clamp(-1.0, 1.0), lambda x: np.clip(x, -1, 1),
   [()], ["clamp"], kinks=(-1.0, 1.0))
op("clip", lambda lib, x: lib.clip(x, -0.6, 0.7), lambda x: np.clip(x, -0.6, 0.7),
   [(2, 3)], ["clamp"], kinks=(-0.6, 0.7))
op("clamp[tensor bounds]", lambda lib, x, lo, hi: lib.clamp(x, lo, hi),
   lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi), [(3, 4), (4,), (3, 1)], ["where"])

# comparisons and logic (no gradient) ---------------------------------------------------

for _name, _call, _ref in [
        ("eq", lambda lib, a, b: a == b, np.equal), ("ne", lambda lib, a, b: a != b, np.not_equal),
        ("lt", lambda lib, a, b: a < b, np.less), ("le", lambda lib, a, b: a <= b, np.less_equal),
        ("gt", lambda lib, a, b: lib.gt(a, b), np.greater),
        ("ge", lambda lib, a, b: a.ge(b), np.greater_equal)]:
    op(f"{_name}[3x1+1x4]", _call, _ref, [(3, 1), (1, 4)], grad=False)
    op(f"{_name}[self]", lambda lib, a, c=_call: c(lib, a, a[0]),
       lambda a, r=_ref: r(a, a[0]), [(3, 4)], grad=False)
op("logical_not", lambda lib, a: lib.logical_not(a > 0), lambda a: ~(a > 0), [(3, 4)], grad=False)
op("logical_and", lambda lib, a, b: lib.logical_and(a > 0, b > 0),
   lambda a, b: (a > 0) & (b > 0), [(3, 4), (4,)], grad=False)
op("isnan", lambda lib, a: lib.isnan(lib.log(a)), lambda a: np.isnan(np.log(a)), [(3, 4)],
   grad=False)

# reductions --------------------------------------------------------------------------

REDUCE_DIMS = [
    ("all", {}, None, False),
    ("dim1", {"dim": 1}, 1, False),
    ("dim-1,keep", {"dim": -1, "keepdim": True}, -1, True),
    ("dim(0,2),keep", {"dim": (0, 2), "keepdim": True}, (0, 2), True),
    ("dim(0,2)", {"dim": (0, 2)}, (0, 2), False),
]

for _rid, _kw, _ax, _keep in REDUCE_DIMS:
    op(f"sum[{_rid}]", lambda lib, x, kw=_kw: lib.sum(x, **kw),
       lambda x, a=_ax, k=_keep: np.sum(x, axis=a, keepdims=k), [(2, 3, 2)], ["sum"])
    op(f"mean[{_rid}]", lambda lib, x, kw=_kw: x.mean(**kw),
       lambda x, a=_ax, k=_keep: np.mean(x, axis=a, keepdims=k), [(2, 3, 2)], ["sum", "div"])
    # PyTorch's prod takes one dim: a tuple of dims is two prods
    op(f"prod[{_rid}]", lambda lib, x, kw=_kw: lib.prod(x, **kw) if "dim" not in kw or
       isinstance(kw["dim"], int) else lib.prod(lib.prod(x, 2, kw.get("keepdim", False)), 0,
                                                 kw.get("keepdim", False)),
       lambda x, a=_ax, k=_keep: np.prod(x, axis=a, keepdims=k), [(2, 3, 2)], ["prod"])
    op(f"amax[{_rid}]", lambda lib, x, kw=_kw: lib.amax(x, **kw) if kw else lib.amax(x),
       lambda x, a=_ax, k=_keep: np.max(x, axis=a, keepdims=k), [(2, 3, 2)], ["amax"])
    op(f"amin[{_rid}]", lambda lib, x, kw=_kw: x.amin(**kw) if kw else x.amin(),
       lambda x, a=_ax, k=_keep: np.min(x, axis=a, keepdims=k), [(2, 3, 2)], ["amin"])
    for _unb in (True, False):
        _ddof = 1 if _unb else 0
        op(f"var[{_rid},unbiased={_unb}]",
           lambda lib, x, kw=_kw, u=_unb: lib.var(x, unbiased=u, **kw) if kw else
           lib.var(x, unbiased=u),
           lambda x, a=_ax, k=_keep, d=_ddof: np.var(x, axis=a, keepdims=k, ddof=d),
           [(2, 3, 2)], ["sum", "sub", "mul", "div"], rtol=1e-4)
        op(f"std[{_rid},unbiased={_unb}]",
           lambda lib, x, kw=_kw, u=_unb: x.std(unbiased=u, **kw) if kw else x.std(unbiased=u),
           lambda x, a=_ax, k=_keep, d=_ddof: np.std(x, axis=a, keepdims=k, ddof=d),
           [(2, 3, 2)], ["sum", "sqrt"], rtol=1e-4)

op("sum[0d]", lambda lib, x: x.sum(), np.sum, [()], ["sum"])
op("sum[0d,dim0]", lambda lib, x: x.sum(0), lambda x: np.sum(x), [()], ["sum"])
op("sum[dtype=float64]", lambda lib, x: x.sum(dtype=lib.float64), lambda x: np.sum(x),
   [(3, 4)], ["sum"], out_dtype="float64")
op("mean[1d]", lambda lib, x: lib.mean(x), np.mean, [(5,)], ["sum", "div"])
op("var[correction=0]", lambda lib, x: lib.var(x, dim=0, correction=0),
   lambda x: np.var(x, axis=0), [(4, 3)], ["sum"], rtol=1e-4)
op("std[1d]", lambda lib, x: lib.std(x), lambda x: np.std(x, ddof=1), [(5,)], ["sqrt"],
   rtol=1e-4)
op("prod[1d]", lambda lib, x: lib.prod(x), np.prod, [(5,)], ["prod"])
# prod is a polynomial: finite differences are exact at zeros, so check the rule there
op("prod[one zero]", lambda lib, x: lib.prod(x), np.prod, [(4,)], ["prod"],
   fixed=([1.5, 0.0, -2.0, 0.5],))
op("prod[two zeros]", lambda lib, x: x.prod(), np.prod, [(4,)], ["prod"],
   fixed=([1.5, 0.0, -2.0, 0.0],))
op("prod[three zeros]", lambda lib, x: x.prod(), np.prod, [(4,)], ["prod"],
   fixed=([0.0, 0.0, -2.0, 0.0],))
op("prod[zeros,dim1]", lambda lib, x: lib.prod(x, 1), lambda x: np.prod(x, 1), [(3, 3)],
   ["prod"], fixed=([[1.5, 0.0, -2.0], [0.0, 0.0, 0.5], [1.0, -1.5, 2.0]],))
op("prod[zeros,dim0,keep]", lambda lib, x: lib.prod(x, 0, keepdim=True),
   lambda x: np.prod(x, 0, keepdims=True), [(2, 3)], ["prod"],
   fixed=([[0.0, 0.0, 3.0], [2.0, 0.0, 0.5]],))
op("prod[0d]", lambda lib, x: lib.prod(x), np.prod, [()], ["prod"])

op("max[0d,dim0]", lambda lib, x: tuple(lib.max(x, 0)), lambda x: (x, np.array(0)), [()])

op("sum[empty]", lambda lib, x: lib.sum(x, 0), lambda x: np.sum(x, 0), [(0, 3)], ["sum"])
op("sum[empty,full]", lambda lib, x: x.sum(), np.sum, [(2, 0)], ["sum"])
op("prod[empty]", lambda lib, x: lib.prod(x, 1), lambda x: np.prod(x, 1), [(3, 0)], ["prod"])
op("amax[empty dim kept]", lambda lib, x: lib.amax(x, 1), lambda x: np.max(x, 1), [(0, 3)],
   ["amax"])
op("max[full]", lambda lib, x: x.max(), np.max, [(3, 4)], ["amax"])
op("min[full]", lambda lib, x: lib.min(x), np.min, [(3, 4)], ["amin"])
op("max[dim1]", lambda lib, x: tuple(lib.max(x, 1)),
   lambda x: (np.max(x, 1), np.argmax(x, 1)), [(3, 4)], ["gather", "reshape"])
op("max[dim0,keep]", lambda lib, x: tuple(x.max(dim=0, keepdim=True)),
   lambda x: (np.max(x, 0, keepdims=True), np.argmax(x, 0)[None]), [(3, 4)], ["gather"])
op("min[dim-1]", lambda lib, x: tuple(lib.min(x, dim=-1)),
   lambda x: (np.min(x, -1), np.argmin(x, -1)), [(2, 3, 2)], ["gather"])
op("max[dim].values", lambda lib, x: lib.max(x, 1).values * 2,
   lambda x: np.max(x, 1) * 2, [(3, 4)], ["gather", "mul"])
op("argmax[full]", lambda lib, x: lib.argmax(x), np.argmax, [(3, 4)], grad=False)
op("argmax[dim1]", lambda lib, x: x.argmax(1), lambda x: np.argmax(x, 1), [(3, 4)], grad=False)
op("argmin[dim0,keep]", lambda lib, x: lib.argmin(x, 0, keepdim=True),
   lambda x: np.argmin(x, 0)[None], [(3, 4)], grad=False)
op("any", lambda lib, x: (x > 1).any(), lambda x: np.any(x > 1), [(3, 4)], grad=False)
op("all[dim1]", lambda lib, x: lib.all(x > -1, 1), lambda x: np.all(x > -1, 1), [(3, 4)],
   grad=False)

op("logsumexp[dim1]", lambda lib, x: lib.logsumexp(x, 1), lambda x: _logsumexp(x, 1),
   [(3, 4)], ["exp", "log", "sum"])
op("logsumexp[dim(0,2),keep]", lambda lib, x: x.logsumexp((0, 2), keepdim=True),
   lambda x: _logsumexp(x, (0, 2), True), [(2, 3, 2)], ["exp", "log"])
op("softmax[dim1]", lambda lib, x: lib.softmax(x, 1), lambda x: _softmax(x, 1), [(3, 4)],
   ["exp", "sum", "div"])
op("softmax[dim0,method]", lambda lib, x: x.softmax(0), lambda x: _softmax(x, 0), [(3, 4)],
   ["exp"])
op("softmax[dim-1,3d]", lambda lib, x: lib.softmax(x, dim=-1), lambda x: _softmax(x, -1),
   [(2, 3, 2)], ["exp"])
op("log_softmax[dim1]", lambda lib, x: lib.log_softmax(x, 1),
   lambda x: x - _logsumexp(x, 1, True), [(3, 4)], ["sub", "log"])
op("log_softmax[dim0,method]", lambda lib, x: x.log_softmax(dim=0),
   lambda x: x - _logsumexp(x, 0, True), [(2, 3, 2)], ["log"])

# other composites -------------------------------------------------------------------

op("square", lambda lib, x: lib.square(x), np.square, [(3, 4)], ["mul"])
op("lerp", lambda lib, a, b: lib.lerp(a, b, 0.3), lambda a, b: a + (b - a) * 0.3,
   [(3, 4), (4,)], ["sub", "mul", "add"])
op("addmm", lambda lib, c, a, b: lib.addmm(c, a, b, beta=0.5, alpha=2.0),
   lambda c, a, b: 0.5 * c + 2.0 * (a @ b), [(2,), (3, 4), (4, 2)], ["addmm", "matmul"])
op("norm", lambda lib, x: x.norm(), lambda x: np.sqrt(np.sum(x * x)), [(3, 4)], ["sqrt"])
op("norm[p=1,dim]", lambda lib, x: lib.norm(x, 1, 1), lambda x: np.abs(x).sum(1), [(3, 4)],
   ["abs", "sum"])
op("silu", lambda lib, x: lib.nn.functional.silu(x) if lib.__name__ == "torch" else
   lib.silu(x), lambda x: x * _sigmoid(x), [(3, 4)], ["sigmoid", "mul"])
op("softplus", lambda lib, x: lib.nn.functional.softplus(x) if lib.__name__ == "torch" else
   lib.softplus(x), lambda x: np.log1p(np.exp(x)), [(3, 4)], ["exp", "log1p"])
op("remainder", lambda lib, a, b: a % b, np.remainder, [(3, 4), (4,)], ["remainder"],
   domain="pos")
op("floor_divide", lambda lib, a, b: a // b, np.floor_divide, [(3, 4), (4,)], grad=False,
   domain="pos")   # PyTorch has no derivative for floor_divide
op("var_mean", lambda lib, x: lib.var_mean(x, 1), lambda x: (np.var(x, 1, ddof=1),
                                                            np.mean(x, 1)), [(3, 4)],
   ["sum"], rtol=1e-4)

# shape ops ------------------------------------------------------------------------------

op("reshape", lambda lib, x: x.reshape(4, 3), lambda x: x.reshape(4, 3), [(3, 4)], ["reshape"])
op("reshape[fn,-1]", lambda lib, x: lib.reshape(x, (-1, 2)), lambda x: x.reshape(-1, 2),
   [(3, 4)], ["reshape"])
op("reshape[0d]", lambda lib, x: x.reshape(1, 1), lambda x: x.reshape(1, 1), [()], ["reshape"])
op("view", lambda lib, x: x.view(2, 6), lambda x: x.reshape(2, 6), [(3, 4)], ["reshape"])
op("view[-1]", lambda lib, x: x.view(-1), lambda x: x.reshape(-1), [(2, 3, 2)], ["reshape"])
op("flatten", lambda lib, x: lib.flatten(x), lambda x: x.reshape(-1), [(2, 3, 2)], ["reshape"])
op("flatten[start1]", lambda lib, x: x.flatten(1), lambda x: x.reshape(2, 6), [(2, 3, 2)],
   ["reshape"])
op("permute", lambda lib, x: x.permute(2, 0, 1), lambda x: x.transpose(2, 0, 1), [(2, 3, 2)],
   ["permute"])
op("permute[fn]", lambda lib, x: lib.permute(x, (1, 0, 2)), lambda x: x.transpose(1, 0, 2),
   [(2, 3, 2)], ["permute"])
op("transpose", lambda lib, x: lib.transpose(x, 0, 2), lambda x: np.swapaxes(x, 0, 2),
   [(2, 3, 2)], ["permute"])
op("transpose[-1,-2]", lambda lib, x: x.transpose(-1, -2), lambda x: np.swapaxes(x, -1, -2),
   [(2, 3, 2)], ["permute"])
op("t", lambda lib, x: x.t(), lambda x: x.T, [(3, 4)], ["permute"])
op("t[fn,1d]", lambda lib, x: lib.t(x), lambda x: x, [(3,)])
op("T", lambda lib, x: x.T, lambda x: x.T, [(3, 4)], ["permute"])
op("unsqueeze", lambda lib, x: x.unsqueeze(1), lambda x: x[:, None], [(3, 4)], ["reshape"])
op("unsqueeze[-1]", lambda lib, x: lib.unsqueeze(x, -1), lambda x: x[..., None], [(3, 4)],
   ["reshape"])
op("unsqueeze[0d]", lambda lib, x: x.unsqueeze(0), lambda x: x[None], [()], ["reshape"])
op("squeeze", lambda lib, x: x.squeeze(), lambda x: x.squeeze(), [(3, 1, 4, 1)], ["reshape"])
op("squeeze[dim]", lambda lib, x: lib.squeeze(x, 1), lambda x: x.squeeze(1), [(3, 1, 4)],
   ["reshape"])
op("squeeze[dim not 1]", lambda lib, x: x.squeeze(0), lambda x: x, [(3, 1, 4)])
op("expand", lambda lib, x: x.expand(2, 3, 4), lambda x: np.broadcast_to(x, (2, 3, 4)),
   [(3, 1)], ["broadcast_to"])
op("expand[-1]", lambda lib, x: x.expand(-1, 4), lambda x: np.broadcast_to(x, (3, 4)),
   [(3, 1)], ["broadcast_to"])
op("broadcast_to", lambda lib, x: lib.broadcast_to(x, (3, 4)),
   lambda x: np.broadcast_to(x, (3, 4)), [(4,)], ["broadcast_to"])
op("broadcast_to[0d]", lambda lib, x: lib.broadcast_to(x, (2, 3)),
   lambda x: np.broadcast_to(x, (2, 3)), [()], ["broadcast_to"])
op("expand_as", lambda lib, x, y: x.expand_as(y) * y,
   lambda x, y: np.broadcast_to(x, y.shape) * y, [(1, 4), (3, 4)], ["broadcast_to"])
op("cat[empty member]", lambda lib, a, b: lib.cat([a, b]),
   lambda a, b: np.concatenate([a, b]), [(0, 3), (2, 3)], ["cat"])
op("reshape[empty]", lambda lib, x: x.reshape(3, 0), lambda x: x.reshape(3, 0), [(0, 3)],
   ["reshape"])
op("matmul[empty k]", lambda lib, a, b: a @ b, np.matmul, [(3, 0), (0, 2)], ["matmul"])
op("cat[dim0]", lambda lib, a, b: lib.cat([a, b]), lambda a, b: np.concatenate([a, b]),
   [(2, 3), (1, 3)], ["cat"])
op("cat[dim1,3 inputs]", lambda lib, a, b, c: lib.cat((a, b, c), dim=1),
   lambda a, b, c: np.concatenate([a, b, c], 1), [(2, 1), (2, 3), (2, 2)], ["cat"])
op("cat[dim-1,3d]", lambda lib, a, b: lib.cat([a, b], -1),
   lambda a, b: np.concatenate([a, b], -1), [(2, 3, 1), (2, 3, 2)], ["cat"])
op("stack[dim0]", lambda lib, a, b: lib.stack([a, b]), lambda a, b: np.stack([a, b]),
   [(2, 3), (2, 3)], ["stack", "reshape"])
op("stack[dim-1]", lambda lib, a, b, c: lib.stack([a, b, c], -1),
   lambda a, b, c: np.stack([a, b, c], -1), [(3,), (3,), (3,)], ["stack"])
op("split[2]", lambda lib, x: lib.split(x, 2), lambda x: tuple(np.split(x, [2, 4])),
   [(5, 2)], ["index", "index_backward_sum"])
op("split[sizes,dim1]", lambda lib, x: x.split([1, 3], dim=1),
   lambda x: tuple(np.split(x, [1], axis=1)), [(2, 4)], ["index"])
op("chunk", lambda lib, x: lib.chunk(x, 3, 1), lambda x: tuple(np.split(x, [2, 4], 1)),
   [(2, 5)], ["index"])
op("chunk[method]", lambda lib, x: x.chunk(2), lambda x: tuple(np.split(x, [2])), [(4, 2)],
   ["index"])
op("unbind", lambda lib, x: lib.unbind(x, 1), lambda x: tuple(x[:, i] for i in range(3)),
   [(2, 3)], ["index", "index_backward_sum"])
# overlapping basic slices of one tensor: their gradients add up in one buffer
op("getitem[overlapping slices]", lambda lib, x: x[0:3] * x[1:4] + x[2],
   lambda x: x[0:3] * x[1:4] + x[2], [(4, 3)], ["index", "index_backward_sum"])
op("narrow", lambda lib, x: lib.narrow(x, 1, 1, 2), lambda x: x[:, 1:3], [(3, 4)], ["index"])
op("flip", lambda lib, x: lib.flip(x, (0, 1)), lambda x: x[::-1, ::-1], [(3, 4)], ["index"])
op("movedim", lambda lib, x: lib.movedim(x, 0, 2), lambda x: np.moveaxis(x, 0, 2),
   [(2, 3, 2)], ["permute"])
op("contiguous", lambda lib, x: x.t().contiguous(), lambda x: x.T, [(3, 4)],
   ["permute", "clone"])
op("clone", lambda lib, x: lib.clone(x), lambda x: x.copy(), [(3, 4)], ["clone"])
op("clone[method]", lambda lib, x: x.clone() * 2, lambda x: x * 2, [()], ["clone"])
# float64 -> float32: a float32 result, so finite differences need a large step
op("to[float32]", lambda lib, x: x.to(lib.float32), lambda x: x.astype(np.float32), [(3, 4)],
   ["convert"], gc={"eps": 1e-3, "atol": 1e-3}, out_dtype="float32")
op("float().double()", lambda lib, x: x.float().double(),
   lambda x: x.astype(np.float32).astype(np.float64), [(2, 3)], ["convert"],
   gc={"eps": 1e-3, "atol": 1e-3}, out_dtype="float64")

# indexing -------------------------------------------------------------------------------

_IDX = np.array([2, 0, 2, 1])          # with a repeat: the backward must accumulate
_MASK = np.array([[True, False, False, True], [False, True, True, False],
                  [True, True, False, False]])
_GATHER = np.array([[0, 3, 3], [1, 1, 0], [2, 0, 1]])
_GATHER0 = np.array([[0, 2, 2, 1], [1, 1, 0, 0]])

op("getitem[int]", lambda lib, x: x[1], lambda x: x[1], [(3, 4)], ["index", "index_backward"])
op("getitem[-1,0d result]", lambda lib, x: x[-1, 2], lambda x: x[-1, 2], [(3, 4)], ["index"])
op("getitem[slices]", lambda lib, x: x[:, 1:3], lambda x: x[:, 1:3], [(3, 4)],
   ["index", "index_backward"])
op("getitem[step,ellipsis]", lambda lib, x: x[..., ::2], lambda x: x[..., ::2], [(2, 3, 4)],
   ["index"])
op("getitem[None]", lambda lib, x: x[None, 1], lambda x: x[None, 1], [(3, 4)], ["index"])
op("getitem[list]", lambda lib, x: x[[2, 0, 2]], lambda x: x[[2, 0, 2]], [(3, 4)],
   ["index", "index_backward"])
op("getitem[tensor,dim1]", lambda lib, x: x[:, lib.tensor(_IDX)], lambda x: x[:, _IDX],
   [(3, 4)], ["index", "index_backward"])
op("getitem[2 tensors]", lambda lib, x: x[lib.tensor([0, 2, 0]), lib.tensor([1, 3, 1])],
   lambda x: x[[0, 2, 0], [1, 3, 1]], [(3, 4)], ["index", "index_backward"])
op("getitem[mask]", lambda lib, x: x[lib.tensor(_MASK)], lambda x: x[_MASK], [(3, 4)],
   ["index", "index_backward"])
op("getitem[0d tensor]", lambda lib, x: x[lib.tensor(1)], lambda x: x[1], [(3, 4)], ["index"])
op("masked_select[broadcast]", lambda lib, x: lib.masked_select(x, lib.tensor(_MASK)),
   lambda x: np.broadcast_to(x, (3, 4))[_MASK], [(4,)],
   ["index", "broadcast_to"])
op("index_select[dim0]", lambda lib, x: lib.index_select(x, 0, lib.tensor([2, 0, 2])),
   lambda x: x[[2, 0, 2]], [(3, 4)], ["index", "index_backward"])
op("index_select[dim1,method]", lambda lib, x: x.index_select(1, lib.tensor(_IDX)),
   lambda x: x[:, _IDX], [(3, 4)], ["index"])
op("gather[dim1]", lambda lib, x: lib.gather(x, 1, lib.tensor(_GATHER)),
   lambda x: np.take_along_axis(x, _GATHER, 1), [(3, 4)], ["gather", "scatter_add_zeros"])
op("gather[dim0,method]", lambda lib, x: x.gather(0, lib.tensor(_GATHER0)),
   lambda x: np.take_along_axis(x, _GATHER0, 0), [(3, 4)], ["gather"])
op("take_along_dim", lambda lib, x: lib.take_along_dim(x, lib.tensor(_GATHER), 1),
   lambda x: np.take_along_axis(x, _GATHER, 1), [(3, 4)], ["gather"])
op("scatter_add", lambda lib, x, s: x.scatter_add(1, lib.tensor(_GATHER), s),
   lambda x, s: _scatter_add(x, _GATHER, s), [(3, 4), (3, 3)],
   ["scatter_add_zeros", "gather", "add"])
op("masked_fill", lambda lib, x: x.masked_fill(lib.tensor(_MASK), 0.5),
   lambda x: np.where(_MASK, 0.5, x), [(3, 4)], ["where"])
op("masked_fill[fn,broadcast mask]", lambda lib, x: lib.masked_fill(x, lib.tensor(_MASK[1]), -1.0),
   lambda x: np.where(_MASK[1], -1.0, x), [(3, 4)], ["where"])
op("masked_fill[0d tensor value]", lambda lib, x, v: x.masked_fill(lib.tensor(_MASK), v),
   lambda x, v: np.where(_MASK, v, x), [(3, 4), ()], ["where"])


def _scatter_add(x, index, src):
    out = x.copy()
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            out[i, index[i, j]] += src[i, j]
    return out


def _setitem_ref(x, v, key):
    out = x.copy()
    out[key] = v
    return out


def _setitem(lib, x, v, key):
    y = x.clone()
    y[key] = v
    return y


op("setitem[row]", lambda lib, x, v: _setitem(lib, x, v, 1),
   lambda x, v: _setitem_ref(x, v, 1), [(3, 4), (4,)], ["index_put", "clone"])
op("setitem[slice,broadcast]", lambda lib, x, v: _setitem(lib, x, v, (slice(1, None), 0)),
   lambda x, v: _setitem_ref(x, v, (slice(1, None), 0)), [(3, 4), ()], ["index_put"])
op("setitem[scalar]", lambda lib, x: _setitem(lib, x, 2.0, (0, slice(None, None, 2))),
   lambda x: _setitem_ref(x, 2.0, (0, slice(None, None, 2))), [(3, 4)], ["index_put"])
op("setitem[mask]", lambda lib, x: _setitem(lib, x, 0.0, lib.tensor(_MASK)),
   lambda x: _setitem_ref(x, 0.0, _MASK), [(3, 4)], ["index_put"])
op("setitem[index tensor]", lambda lib, x, v: _setitem(lib, x, v, lib.tensor([2, 0])),
   lambda x, v: _setitem_ref(x, v, [2, 0]), [(3, 4), (2, 4)], ["index_put"])


def _inplace_view(lib, x, v):
    y = x.clone()
    y[1].mul_(v)                      # a write through a view: the base gets CopySlices
    return y


def _inplace_view_ref(x, v):
    out = x.copy()
    out[1] *= v
    return out


op("view inplace[mul_]", _inplace_view, _inplace_view_ref, [(3, 4), (4,)],
   ["view_scatter", "index", "mul"])
op("view inplace[t().add_]", lambda lib, x, v: _t_add(x, v),
   lambda x, v: (x.T + v).T, [(3, 4), (3,)], ["view_scatter", "permute"])


def _t_add(x, v):
    y = x.clone()
    y.t().add_(v)
    return y


def _inplace(method, *args, **kw):
    def fn(lib, x, *others):
        y = x.clone()
        getattr(y, method)(*others, *args, **kw)
        return y
    return fn


op("add_", _inplace("add_"), np.add, [(3, 4), (4,)], ["add", "clone"])
op("add_[alpha]", _inplace("add_", alpha=2.0), lambda x, v: x + 2 * v, [(3, 4), (3, 1)],
   ["add", "mul"])
op("sub_", _inplace("sub_"), np.subtract, [(3, 4), ()], ["sub"])
op("mul_", _inplace("mul_"), np.multiply, [(3, 4), (4,)], ["mul"])
op("div_", _inplace("div_"), np.divide, [(3, 4), (3, 1)], ["div"])
op("mul_[scalar]", _inplace("mul_", 2.5), lambda x: x * 2.5, [(3, 4)], ["mul"])
op("clamp_", _inplace("clamp_", -0.6, 0.7), lambda x: np.clip(x, -0.6, 0.7), [(3, 4)],
   ["clamp"], kinks=(-0.6, 0.7))
op("relu_", _inplace("relu_"), lambda x: np.maximum(x, 0), [(3, 4)], ["relu"])
op("exp_", _inplace("exp_"), np.exp, [(3, 4)], ["exp"])
op("pow_", _inplace("pow_", 2), lambda x: x ** 2, [(3, 4)], ["pow_scalar"])
op("fill_", lambda lib, x: _fill_row(x), lambda x: _setitem_ref(x, 1.5, 0), [(3, 4)],
   ["index_put", "view_scatter"])
op("copy_", lambda lib, x, v: _copy_row(x, v), lambda x, v: _setitem_ref(x, v, 2),
   [(3, 4), (4,)], ["index_put", "view_scatter"])
op("zero_", lambda lib, x: _zero_col(x), lambda x: _setitem_ref(x, 0.0, (slice(None), 1)),
   [(3, 4)], ["index_put"])


def _fill_row(x):
    y = x.clone()
    y[0].fill_(1.5)
    return y


def _copy_row(x, v):
    y = x.clone()
    y[2].copy_(v)
    return y


def _zero_col(x):
    y = x.clone()
    y[:, 1].zero_()
    return y


# matmul ---------------------------------------------------------------------------------

op("mm", lambda lib, a, b: lib.mm(a, b), np.matmul, [(3, 4), (4, 2)], ["matmul"])
op("mm[method]", lambda lib, a, b: a.mm(b), np.matmul, [(2, 3), (3, 3)], ["matmul"])
op("matmul[@]", lambda lib, a, b: a @ b, np.matmul, [(3, 4), (4, 2)], ["matmul"])
op("matmul[1d@1d]", lambda lib, a, b: lib.matmul(a, b), np.matmul, [(4,), (4,)],
   ["matmul", "reshape"])
op("matmul[2d@1d]", lambda lib, a, b: lib.matmul(a, b), np.matmul, [(3, 4), (4,)],
   ["matmul"])
op("matmul[1d@2d]", lambda lib, a, b: a.matmul(b), np.matmul, [(4,), (4, 2)], ["matmul"])
op("matmul[1d@3d]", lambda lib, a, b: a @ b, np.matmul, [(3,), (2, 3, 2)], ["matmul"])
op("matmul[3d@1d]", lambda lib, a, b: a @ b, np.matmul, [(2, 2, 3), (3,)], ["matmul"])
op("matmul[3d@2d]", lambda lib, a, b: a @ b, np.matmul, [(2, 3, 4), (4, 2)], ["matmul"])
op("matmul[broadcast batch]", lambda lib, a, b: a @ b, np.matmul, [(2, 1, 2, 3), (3, 3, 2)],
   ["matmul"])
op("bmm", lambda lib, a, b: lib.bmm(a, b), np.matmul, [(2, 3, 4), (2, 4, 2)], ["matmul"])
op("bmm[method]", lambda lib, a, b: a.bmm(b), np.matmul, [(2, 2, 3), (2, 3, 2)], ["matmul"])
op("dot", lambda lib, a, b: lib.dot(a, b), np.dot, [(3,), (3,)], ["matmul"])
op("mv", lambda lib, a, b: lib.mv(a, b), np.matmul, [(2, 3), (3,)], ["matmul"])
op("outer", lambda lib, a, b: lib.outer(a, b), np.outer, [(3,), (2,)], ["mul"])


# dtype cases: int/bool inputs, checked against PyTorch's result dtype and values -------
# (id, fn(lib) -> tensor); inputs are built inside with lib.tensor so dtypes are explicit.

def _ints(lib, dtype="int64", shape=(2, 3), lo=1):
    a = np.arange(lo, lo + math.prod(shape)).reshape(shape)
    return lib.tensor(a.tolist(), dtype=getattr(lib, dtype))


def _bools(lib, shape=(2, 3)):
    return lib.tensor((np.arange(math.prod(shape)).reshape(shape) % 3 == 0).tolist())


DTYPE_CASES = [
    ("exp(int64)", lambda lib: lib.exp(_ints(lib)), "float32"),
    ("sqrt(int32)", lambda lib: lib.sqrt(_ints(lib, "int32")), "float32"),
    ("log(int64)", lambda lib: lib.log(_ints(lib)), "float32"),
    ("sin(bool)", lambda lib: lib.sin(_bools(lib)), "float32"),
    ("sigmoid(int64)", lambda lib: lib.sigmoid(_ints(lib)), "float32"),
    ("tanh(int32)", lambda lib: lib.tanh(_ints(lib, "int32")), "float32"),
    ("erf(int64)", lambda lib: lib.erf(_ints(lib)), "float32"),
    ("rsqrt(int64)", lambda lib: lib.rsqrt(_ints(lib)), "float32"),
    ("abs(int32)", lambda lib: lib.abs(-_ints(lib, "int32")), "int32"),
    ("neg(int64)", lambda lib: -_ints(lib), "int64"),
    ("sign(int64)", lambda lib: lib.sign(_ints(lib, lo=-3)), "int64"),
    ("relu(int64)", lambda lib: lib.relu(_ints(lib, lo=-3)), "int64"),
    ("floor(int64)", lambda lib: lib.floor(_ints(lib)), "int64"),
    ("int32+int64 0d", lambda lib: _ints(lib, "int32") + lib.tensor(5), "int32"),
    ("int32+int64 1d", lambda lib: _ints(lib, "int32") + _ints(lib, "int64", (3,)), "int64"),
    ("int64*2.5", lambda lib: _ints(lib) * 2.5, "float32"),
    ("int32*2", lambda lib: _ints(lib, "int32") * 2, "int32"),
    ("int64/int64", lambda lib: _ints(lib) / _ints(lib, shape=(3,)), "float32"),
    ("int64/2", lambda lib: _ints(lib) / 2, "float32"),
    ("int64//2", lambda lib: _ints(lib) // 2, "int64"),
    ("int64-float32 0d", lambda lib: _ints(lib) - lib.tensor(1.5), "float32"),
    ("float32+float64 0d", lambda lib: _ints(lib).float() + lib.tensor(1.5, dtype=lib.float64),
     "float32"),
    ("float32+float64 1d", lambda lib: _ints(lib).float() + _ints(lib, shape=(3,)).double(),
     "float64"),
    ("bool+bool", lambda lib: _bools(lib) + _bools(lib), "bool"),
    ("bool+1", lambda lib: _bools(lib) + 1, "int64"),
    ("bool*1.5", lambda lib: _bools(lib) * 1.5, "float32"),
    ("bool+int32", lambda lib: _bools(lib) + _ints(lib, "int32"), "int32"),
    ("int64**2", lambda lib: _ints(lib) ** 2, "int64"),
    ("int64**0.5", lambda lib: _ints(lib) ** 0.5, "float32"),
    ("2**int64", lambda lib: 2 ** _ints(lib), "int64"),
    ("2.0**int64", lambda lib: 2.0 ** _ints(lib), "float32"),
    ("int**int", lambda lib: _ints(lib, "int32") ** _ints(lib, "int64", (3,)), "int64"),
    ("maximum(int32,float32)", lambda lib: lib.maximum(_ints(lib, "int32"),
                                                       _ints(lib, shape=(3,)).float() * 2.5),
     "float32"),
    ("minimum(int32,int64)", lambda lib: lib.minimum(_ints(lib, "int32"), _ints(lib)), "int64"),
    ("where(int64,float32)", lambda lib: lib.where(_bools(lib), _ints(lib), lib.tensor(1.5)),
     "float32"),
    ("where(int64,int scalar)", lambda lib: lib.where(_bools(lib), _ints(lib), 0), "int64"),
    ("where(int32,float scalar)", lambda lib: lib.where(_bools(lib), _ints(lib, "int32"), 0.5),
     "float32"),
    ("clamp(int64,int)", lambda lib: lib.clamp(_ints(lib), 2, 4), "int64"),
    ("clamp(int64,float)", lambda lib: lib.clamp(_ints(lib), 2.5, 4.5), "float32"),
    ("eq(int,float)", lambda lib: _ints(lib) == 2.0, "bool"),
    ("lt(int32,int64)", lambda lib: _ints(lib, "int32") < _ints(lib, shape=(3,)), "bool"),
    ("gt(float,int scalar)", lambda lib: _ints(lib).float() > 3, "bool"),
    ("ne(bool,bool)", lambda lib: _bools(lib) != _bools(lib, (3,)), "bool"),
    ("sum(int32)", lambda lib: _ints(lib, "int32").sum(), "int64"),
    ("sum(bool)", lambda lib: _bools(lib).sum(), "int64"),
    ("sum(int32,dim)", lambda lib: lib.sum(_ints(lib, "int32"), 1), "int64"),
    ("sum(int32,dtype=int32)", lambda lib: _ints(lib, "int32").sum(dtype=lib.int32), "int32"),
    ("sum(int64,dtype=float64)", lambda lib: _ints(lib).sum(dtype=lib.float64), "float64"),
    ("prod(int32)", lambda lib: _ints(lib, "int32").prod(), "int64"),
    ("prod(int32,dim)", lambda lib: _ints(lib, "int32").prod(0), "int64"),
    ("amax(int32)", lambda lib: _ints(lib, "int32").amax(), "int32"),
    ("max(int32)", lambda lib: _ints(lib, "int32").max(), "int32"),
    ("max(int64,dim).values", lambda lib: _ints(lib).max(1).values, "int64"),
    ("min(int64,dim).indices", lambda lib: _ints(lib).min(1).indices, "int64"),
    ("argmax(int32)", lambda lib: _ints(lib, "int32").argmax(), "int64"),
    ("any(int64)", lambda lib: _ints(lib, lo=-3).any(1), "bool"),
    ("cat(int32,int64)", lambda lib: lib.cat([_ints(lib, "int32"), _ints(lib)]), "int64"),
    ("cat(float32,int64)", lambda lib: lib.cat([_ints(lib).float(), _ints(lib)]), "float32"),
    ("matmul(int64)", lambda lib: _ints(lib) @ _ints(lib, shape=(3, 2)), "int64"),
    ("gather(int32)", lambda lib: lib.gather(_ints(lib, "int32"), 1,
                                             lib.tensor([[0, 2], [1, 1]])), "int32"),
    ("gather(int32 index)", lambda lib: lib.gather(_ints(lib), 1,
                                                   lib.tensor([[0, 2]], dtype=lib.int32)), "int64"),
    ("index(int64)", lambda lib: _ints(lib)[:, lib.tensor([2, 0])], "int64"),
    ("masked_fill(int64,float)", lambda lib: _ints(lib).masked_fill(_bools(lib), 7),
     "int64"),
    ("reshape(bool)", lambda lib: _bools(lib).reshape(3, 2), "bool"),
    ("to(int32)", lambda lib: (_ints(lib).float() * 1.7).to(lib.int32), "int32"),
    ("float->bool", lambda lib: (_ints(lib, lo=-2).float()).bool(), "bool"),
    ("logsumexp(int64)", lambda lib: lib.logsumexp(_ints(lib), 1), "float32"),
    ("mean(int64,dtype)", lambda lib: _ints(lib).mean(dtype=lib.float64), "float64"),
]

# cases PyTorch rejects (the check is that tracegrad rejects them too)
DTYPE_ERRORS = [
    ("mean(int64)", lambda lib: _ints(lib).mean()),
    ("var(int64)", lambda lib: _ints(lib).var()),
    ("matmul(int64,float32)", lambda lib: _ints(lib) @ _ints(lib, shape=(3, 2)).float()),
    ("bitwise_and(float)", lambda lib: _ints(lib).float() & _ints(lib).float()),
    ("where(int cond)", lambda lib: lib.where(_ints(lib), _ints(lib), _ints(lib))),
    ("masked_fill(int mask)", lambda lib: _ints(lib).masked_fill(_ints(lib), 0)),
    ("gather(float index)", lambda lib: lib.gather(_ints(lib), 1, lib.tensor([[0.0]]))),
    ("sub(bool,bool)", lambda lib: _bools(lib) - _bools(lib)),
    ("sub(int,bool)", lambda lib: _ints(lib) - _bools(lib)),
    ("neg(bool)", lambda lib: -_bools(lib)),
]

import op_table_conv  # noqa: E402,F401 - convolution, padding and unfold/fold entries
import op_table_pool  # noqa: E402,F401 - pooling, interpolation and pixel shuffle entries
import op_table_more  # noqa: E402,F401 - scans, sorting, einsum and linalg entries
import op_table_fixes  # noqa: E402,F401 - the cases PyTorch's OpInfo samples found wrong
import op_table_math  # noqa: E402,F401 - inverse trigonometry, log2, hypot, xlogy, addcmul...
import op_table_stacking  # noqa: E402,F401 - atleast_*, hstack..., rot90, tensordot, kron...
import op_table_reduce_more  # noqa: E402,F401 - nansum, median, quantile, cummax, logcumsumexp
import op_table_special  # noqa: E402,F401 - lgamma, digamma, erfinv, Bessel, zeta... (SciPy)
import op_table_pointwise_more  # noqa: E402,F401 - fmax, gcd, ldexp, heaviside, in-place forms
import op_table_statistics  # noqa: E402,F401 - bucketize, bincount, cov, cdist, trapezoid...
import op_table_linalg_more  # noqa: E402,F401 - matrix_exp, pinv, solve_triangular, cond...
import op_table_methods_more  # noqa: E402,F401 - repeat, tile, ravel, Tensor.unfold, vdot...
import op_table_special_poly  # noqa: E402,F401 - orthogonal polynomials, airy_ai...
import op_table_linalg_ldl  # noqa: E402,F401 - ldl_factor, ldl_solve, householder_product
import op_table_scatter_reduce  # noqa: E402,F401 - scatter_reduce, index_reduce, put...
import op_table_vmap  # noqa: E402,F401 - shared_matmul (vmap of a matmul by a shared weight)
