"""Op-table entries for the special functions (``ops/special_fns.py`` and
``tracegrad.special``), against SciPy's values (the ``scipy`` extra; without SciPy these
functions raise, and the entries are left out), PyTorch's, gradcheck, gradgradcheck and
compiled against eager."""
import numpy as np

from op_table import op

try:
    import scipy.special as sp
except ImportError:         # the functions need SciPy: nothing to check without it
    sp = None

_A = np.array([0.8, 1.7, 2.5, 4.0])     # the first argument of zeta and the incomplete gammas
# PyTorch's digamma and trigamma (polygamma 1, the derivative of digamma and the second of
# lgamma) are series accurate to about 1e-9 relative in float64; SciPy's are to rounding
_TORCH_GAMMA_RTOL = 1e-8
_GAMMA_FAMILY = ("lgamma", "digamma", "special.gammaln", "special.multigammaln")

if sp is not None:
    for _name, _call, _ref, _dom, _prim in (
            ("lgamma", lambda lib, x: lib.lgamma(x), sp.gammaln, "pos", "lgamma"),
            ("digamma", lambda lib, x: lib.digamma(x), sp.psi, "pos", "digamma"),
            ("erfinv", lambda lib, x: lib.erfinv(x), sp.erfinv, "unit", "erfinv"),
            ("i0", lambda lib, x: lib.i0(x), sp.i0, "real", "i0"),
            ("special.i0e", lambda lib, x: lib.special.i0e(x), sp.i0e, "real", "special_i0e"),
            ("special.i1", lambda lib, x: lib.special.i1(x), sp.i1, "real", "special_i1"),
            ("special.i1e", lambda lib, x: lib.special.i1e(x), sp.i1e, "real", "special_i1e"),
            ("special.ndtri", lambda lib, x: lib.special.ndtri(x), sp.ndtri, "prob",
             "special_ndtri"),
            ("special.log_ndtr", lambda lib, x: lib.special.log_ndtr(x * 4),
             lambda x: sp.log_ndtr(x * 4), "real", "special_log_ndtr"),
            ("special.erfcx", lambda lib, x: lib.special.erfcx(x), sp.erfcx, "real",
             "special_erfcx"),
            ("special.entr", lambda lib, x: lib.special.entr(x), sp.entr, "pos", "special_entr"),
            ("special.ndtr", lambda lib, x: lib.special.ndtr(x), sp.ndtr, "real", "erfc"),
            ("special.gammaln", lambda lib, x: lib.special.gammaln(x), sp.gammaln, "pos",
             "lgamma"),
            ("special.xlog1py", lambda lib, x: lib.special.xlog1py(x, x * 2),
             lambda x: sp.xlog1py(x, x * 2), "pos", "log1p")):
        op(_name, _call, _ref, [(3, 4)], [_prim], domain=_dom,
           torch_rtol=_TORCH_GAMMA_RTOL if _name in _GAMMA_FAMILY else 0.0)
    op("lgamma[0d].method", lambda lib, x: x.lgamma(), sp.gammaln, [()], ["lgamma"], domain="pos",
       torch_rtol=_TORCH_GAMMA_RTOL)
    op("erfinv_[inplace]", lambda lib, x: (x * 1).erfinv_(), sp.erfinv, [(2, 3)], ["erfinv"],
       domain="unit")
    for _n in (1, 2):
        op(f"polygamma[n={_n}]", lambda lib, x, n=_n: lib.polygamma(n, x),
           lambda x, n=_n: sp.polygamma(n, x), [(3, 4)], ["polygamma"], domain="pos",
           torch_rtol=_TORCH_GAMMA_RTOL)
    op("polygamma[n=0].method", lambda lib, x: x.polygamma(0), sp.psi, [(3, 4)], ["polygamma"],
       domain="pos", torch_rtol=_TORCH_GAMMA_RTOL)
    op("special.zeta", lambda lib, q: lib.special.zeta(lib.tensor(_A + 1.5, dtype=q.dtype), q),
       lambda q: sp.zeta(_A + 1.5, q), [(3, 4)], ["special_zeta"], domain="pos")
    op("special.gammainc", lambda lib, x: lib.special.gammainc(lib.tensor(_A, dtype=x.dtype), x),
       lambda x: sp.gammainc(_A, x), [(3, 4)], ["special_gammainc"], domain="pos")
    op("special.gammaincc",
       lambda lib, x: lib.special.gammaincc(lib.tensor(_A, dtype=x.dtype), x),
       lambda x: sp.gammaincc(_A, x), [(3, 4)], ["special_gammaincc"], domain="pos")
    op("special.multigammaln", lambda lib, x: lib.special.multigammaln(x + 2, 3),
       lambda x: sp.multigammaln(x + 2, 3) if np.ndim(x) == 0 else np.vectorize(
           lambda v: sp.multigammaln(v + 2, 3))(x), [(3, 4)], ["lgamma"], domain="pos",
       torch_rtol=_TORCH_GAMMA_RTOL)
    for _name, _scipy in (("bessel_j0", sp.j0), ("bessel_j1", sp.j1), ("bessel_y0", sp.y0),
                          ("bessel_y1", sp.y1), ("modified_bessel_i0", sp.i0),
                          ("modified_bessel_i1", sp.i1), ("modified_bessel_k0", sp.k0),
                          ("modified_bessel_k1", sp.k1), ("scaled_modified_bessel_k0", sp.k0e),
                          ("scaled_modified_bessel_k1", sp.k1e)):
        op(f"special.{_name}", lambda lib, x, n=_name: getattr(lib.special, n)(x), _scipy,
           [(3, 4)], [f"special_{_name}"], domain="pos", grad=False)
