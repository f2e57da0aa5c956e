"""Op-table entries for ``tracegrad/ops/math_ops.py``: the hyperbolic, tangent and inverse
trigonometric functions, log2/log10/exp2, reciprocal, erfc, hypot, copysign, signbit, and
the composites (deg2rad, frac, logit, xlogy, sinc, float_power, addcmul, ...).

Imported at the end of ``op_table.py``: each entry runs forward against the NumPy
reference, gradcheck and gradgradcheck in float64, PyTorch's values and gradients, and
compiled against eager (``test_compile_ops.py``).
"""
import math

import numpy as np

from op_table import op

_erfc = np.vectorize(math.erfc, otypes=[np.float64])

UNARY = [
    # name, primitive, NumPy reference, domain
    ("sinh", "sinh", np.sinh, "real"),
    ("cosh", "cosh", np.cosh, "real"),
    ("tan", "tan", np.tan, "unit"),
    ("asin", "asin", np.arcsin, "unit"),
    ("acos", "acos", np.arccos, "unit"),
    ("atan", "atan", np.arctan, "real"),
    ("asinh", "asinh", np.arcsinh, "real"),
    ("acosh", "acosh", np.arccosh, "above1"),
    ("atanh", "atanh", np.arctanh, "unit"),
    ("log2", "log2", np.log2, "pos"),
    ("log10", "log10", np.log10, "pos"),
    ("exp2", "exp2", np.exp2, "real"),
    ("reciprocal", "reciprocal", np.reciprocal, "real"),
    ("erfc", "erfc", _erfc, "real"),
]
for _name, _prim, _ref, _dom in UNARY:
    op(f"{_name}[3x4]", lambda lib, x, n=_name: getattr(lib, n)(x), _ref, [(3, 4)], [_prim],
       domain=_dom)
    op(f"{_name}[0d].method", lambda lib, x, n=_name: getattr(x, n)(), _ref, [()], [_prim],
       domain=_dom)
for _alias, _name, _ref, _dom in (("arcsin", "asin", np.arcsin, "unit"),
                                  ("arctanh", "atanh", np.arctanh, "unit")):
    op(f"{_alias}[alias]", lambda lib, x, n=_alias: getattr(lib, n)(x), _ref, [(2, 3)],
       [_name], domain=_dom)
op("sinh_[inplace]", lambda lib, x: (x * 1).sinh_(), np.sinh, [(2, 3)], ["sinh"])
op("tan[d tan]", lambda lib, x: _derivative(lib, lib.tan, x), lambda x: 1 + np.tan(x) ** 2,
   [(3, 4)], ["tan"], domain="unit")

for _pid, _shapes in (("3x4", [(3, 4), (3, 4)]), ("3x1+1x4", [(3, 1), (1, 4)]),
                      ("0d+3", [(), (3,)])):
    op(f"hypot[{_pid}]", lambda lib, a, b: lib.hypot(a, b), np.hypot, _shapes, ["hypot"])
    op(f"copysign[{_pid}]", lambda lib, a, b: lib.copysign(a, b), np.copysign, _shapes,
       ["copysign"])
op("copysign[scalar].method", lambda lib, a: a.copysign(-1.0), lambda a: np.copysign(a, -1.0),
   [(3, 4)], ["copysign"])
op("signbit", lambda lib, a: lib.signbit(a), np.signbit, [(3, 4)], ["signbit"], grad=False)
op("signbit[-0.0]", lambda lib, a: (a * 0).signbit(), lambda a: np.signbit(a * 0), [(4,)],
   ["signbit"], grad=False)

op("deg2rad", lambda lib, x: lib.deg2rad(x), np.deg2rad, [(3, 4)], ["mul"])
op("rad2deg.method", lambda lib, x: x.rad2deg(), np.rad2deg, [(3, 4)], ["mul"])
op("frac", lambda lib, x: lib.frac(x), lambda x: x - np.trunc(x), [(3, 4)], ["sub", "trunc"],
   domain="frac")
op("fix.method", lambda lib, x: x.fix(), np.trunc, [(3, 4)], ["trunc"], domain="frac")
op("sgn", lambda lib, x: lib.sgn(x), np.sign, [(3, 4)], ["sign"])
op("positive", lambda lib, x: lib.positive(x) * 1, lambda x: x, [(3, 4)], ["mul"])
op("logit", lambda lib, x: lib.logit(x), lambda x: np.log(x / (1 - x)), [(3, 4)], ["log"],
   domain="prob")
op("logit[eps]", lambda lib, x: lib.logit(x, eps=0.25),
   lambda x: np.log(np.clip(x, 0.25, 0.75) / (1 - np.clip(x, 0.25, 0.75))), [(3, 4)],
   ["log", "clamp"], domain="prob", kinks=(0.25, 0.75))
op("xlogy", lambda lib, x, y: lib.xlogy(x, y), lambda x, y: x * np.log(y), [(3, 4), (4,)],
   ["log", "where"], domain="pos")
op("xlogy[zeros]", lambda lib, x, y: lib.xlogy(x * lib.tensor([0.0, 1.0, 0.0, 1.0]), y),
   lambda x, y: np.where(np.array([0.0, 1.0, 0.0, 1.0]) == 0, 0.0,
                         x * np.array([0.0, 1.0, 0.0, 1.0]) * np.log(y)),
   [(3, 4), (4,)], ["log", "where"], domain="pos")
op("xlogy[scalar y].method", lambda lib, x: x.xlogy(2.5), lambda x: x * np.log(2.5), [(3, 4)],
   ["mul", "where"])
op("sinc", lambda lib, x: lib.sinc(x), np.sinc, [(3, 4)], ["sin", "div"])
op("sinc[0]", lambda lib, x: lib.sinc(x * lib.tensor([0.0, 1.0, 1.0])),
   lambda x: np.sinc(x * np.array([0.0, 1.0, 1.0])), [(2, 3)], ["sin", "where"],
   xfail={"torch2": "at 0 PyTorch's second derivative of sinc is NaN "
                   "(0/0 in its formula), tracegrad's is 0"})
op("float_power", lambda lib, x, y: lib.float_power(x, y), np.power, [(3, 4), (4,)], ["pow"],
   domain="pos", out_dtype="float64")
op("float_power[scalar].method", lambda lib, x: x.float_power(2), lambda x: x ** 2, [(3, 4)],
   ["pow_scalar"], out_dtype="float64")
op("clamp_min", lambda lib, x: lib.clamp_min(x, 0.5), lambda x: np.maximum(x, 0.5), [(3, 4)],
   ["clamp"], kinks=(0.5,))
op("clamp_max_[inplace]", lambda lib, x: (x * 1).clamp_max_(0.5), lambda x: np.minimum(x, 0.5),
   [(3, 4)], ["clamp"], kinks=(0.5,))
op("addcmul", lambda lib, a, b, c: lib.addcmul(a, b, c, value=0.5),
   lambda a, b, c: a + 0.5 * b * c, [(3, 4), (4,), (3, 1)], ["add", "mul"])
op("addcdiv.method", lambda lib, a, b, c: a.addcdiv(b, c), lambda a, b, c: a + b / c,
   [(3, 4), (3, 4), (4,)], ["add", "div"])
op("addcdiv_[value, inplace]", lambda lib, a, b, c: (a * 1).addcdiv_(b, c, value=-2),
   lambda a, b, c: a - 2 * b / c, [(3, 4), (3, 4), (4,)], ["div"])


def _derivative(lib, f, x):
    with lib.enable_grad():
        if not x.requires_grad:
            x = x.detach().requires_grad_(True)
        return lib.autograd.grad(f(x).sum(), x, create_graph=True)[0]
