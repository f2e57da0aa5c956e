"""Op-table entries for torch.special's orthogonal polynomials, airy_ai and
spherical_bessel_j0 (``ops/special_poly.py``), against SciPy's ``eval_*`` polynomials and
special functions. None is differentiable in PyTorch (its results do not require grad), so
none is here either: every entry says ``grad=False``. The edge cases (negative, NaN and
large degrees, x at the ends of the interval, int inputs) are in ``test_special_poly.py``."""
import numpy as np

from op_table import op

try:
    import scipy.special as sp
except ImportError:         # airy_ai needs SciPy, and SciPy gives the references
    sp = None

# degrees per column of a (3, 4) input: 0, the recurrence, and past every threshold where
# PyTorch switches to the trigonometric form (6 for T, 8 for U, V, W, 4 for shifted W)
_N = np.array([0, 2, 7, 10])


def _chebyu(n, x):
    return np.where(n >= 0, sp.eval_chebyu(np.maximum(n, 0), x), 0.0)


def _chebyv(n, x):          # V_n = U_n - U_{n-1}, W_n = U_n + U_{n-1}
    return _chebyu(n, x) - _chebyu(n - 1, x)


def _chebyw(n, x):
    return _chebyu(n, x) + _chebyu(n - 1, x)


if sp is not None:
    POLYNOMIALS = [
        # name, reference ref(n, x), domain of x
        ("chebyshev_polynomial_t", sp.eval_chebyt, "unit"),
        ("chebyshev_polynomial_u", sp.eval_chebyu, "unit"),
        ("chebyshev_polynomial_v", _chebyv, "unit"),
        ("chebyshev_polynomial_w", _chebyw, "unit"),
        ("shifted_chebyshev_polynomial_t", sp.eval_sh_chebyt, "prob"),
        ("shifted_chebyshev_polynomial_u", sp.eval_sh_chebyu, "prob"),
        ("shifted_chebyshev_polynomial_v", lambda n, x: _chebyv(n, 2 * x - 1), "prob"),
        ("shifted_chebyshev_polynomial_w", lambda n, x: _chebyw(n, 2 * x - 1), "prob"),
        ("hermite_polynomial_h", sp.eval_hermite, "real"),
        ("hermite_polynomial_he", sp.eval_hermitenorm, "real"),
        ("laguerre_polynomial_l", sp.eval_laguerre, "real"),
        ("legendre_polynomial_p", sp.eval_legendre, "unit"),
    ]
    for _name, _ref, _dom in POLYNOMIALS:
        _prim = [f"special_{_name}"]
        op(f"special.{_name}[n=3]", lambda lib, x, f=_name: getattr(lib.special, f)(x, 3),
           lambda x, r=_ref: r(3, x), [(3, 4)], _prim, domain=_dom, grad=False)
        op(f"special.{_name}[n tensor]",
           lambda lib, x, f=_name: getattr(lib.special, f)(x, lib.tensor(_N)),
           lambda x, r=_ref: r(_N, x), [(3, 4)], _prim, domain=_dom, grad=False)
        # a Number x and a float tensor n (truncated to integers), as PyTorch takes them
        op(f"special.{_name}[x number]",
           lambda lib, n, f=_name: getattr(lib.special, f)(0.375, n),
           lambda n, r=_ref: r(np.trunc(n).astype(np.int64), 0.375), [(5,)], _prim,
           fixed=([0.0, 1.5, 3.0, 6.25, 9.0],), grad=False)
    op("special.chebyshev_polynomial_t[3x1 by n 4]",
       lambda lib, x: lib.special.chebyshev_polynomial_t(x, lib.tensor(_N)),
       lambda x: sp.eval_chebyt(_N, x), [(3, 1)], ["special_chebyshev_polynomial_t"],
       domain="unit", grad=False)
    op("special.hermite_polynomial_h[0d x by n 4]",
       lambda lib, x: lib.special.hermite_polynomial_h(x, lib.tensor(_N)),
       lambda x: sp.eval_hermite(_N, x), [()], ["special_hermite_polynomial_h"], grad=False)
    # PyTorch's own airy_ai is a Cephes series inside |x| < 2.09 (the domain drawn here);
    # outside, its asymptotic forms are accurate to about 1e-4 (test_special_poly.py)
    op("special.airy_ai", lambda lib, x: lib.special.airy_ai(x), lambda x: sp.airy(x)[0],
       [(3, 4)], ["special_airy_ai"], grad=False)
    op("special.spherical_bessel_j0", lambda lib, x: lib.special.spherical_bessel_j0(x * 4),
       lambda x: sp.spherical_jn(0, x * 4), [(3, 4)], ["special_spherical_bessel_j0"],
       grad=False)
    op("special.spherical_bessel_j0[small]",
       lambda lib, x: lib.special.spherical_bessel_j0(x * 0.25),
       lambda x: sp.spherical_jn(0, x * 0.25), [(2, 3)], ["special_spherical_bessel_j0"],
       grad=False)
