"""``tracegrad.special``: PyTorch's ``torch.special``.

The special functions proper (the gamma family, erfinv, Bessel functions, the normal
distribution's functions, zeta, the incomplete gammas) are primitives of
``ops/special_fns.py`` computed by SciPy; the rest are tracegrad's own functions under
SciPy's names (``expit`` is ``sigmoid``, ``gammaln`` is ``lgamma``, ``psi`` is ``digamma``).
The orthogonal polynomials, ``airy_ai`` and ``spherical_bessel_j0`` are
``ops/special_poly.py``'s.
"""
import math as _math

from .ops import (
    digamma, erf, erfc, erfinv, exp2, expm1, i0, isnan, lgamma, log, log1p, log_softmax,
    logit, logsumexp, polygamma, round, sigmoid, sinc, softmax, where, xlogy,
)
from .ops.special_fns import (
    BESSEL, special_entr as entr, special_erfcx as erfcx, special_gammainc as gammainc,
    special_gammaincc as gammaincc, special_i0e as i0e, special_i1 as i1, special_i1e as i1e,
    special_log_ndtr as log_ndtr, special_ndtri as ndtri, special_zeta as zeta,
)
from .ops import special_poly as _special_poly
from .ops.special_poly import (
    airy_ai, chebyshev_polynomial_t, chebyshev_polynomial_u, chebyshev_polynomial_v,
    chebyshev_polynomial_w, hermite_polynomial_h, hermite_polynomial_he, laguerre_polynomial_l,
    legendre_polynomial_p, shifted_chebyshev_polynomial_t, shifted_chebyshev_polynomial_u,
    shifted_chebyshev_polynomial_v, shifted_chebyshev_polynomial_w, spherical_bessel_j0,
)

expit = sigmoid
gammaln = lgamma
psi = digamma
bessel_j0, bessel_j1 = BESSEL["bessel_j0"], BESSEL["bessel_j1"]
bessel_y0, bessel_y1 = BESSEL["bessel_y0"], BESSEL["bessel_y1"]
modified_bessel_i0, modified_bessel_i1 = BESSEL["modified_bessel_i0"], BESSEL["modified_bessel_i1"]
modified_bessel_k0, modified_bessel_k1 = BESSEL["modified_bessel_k0"], BESSEL["modified_bessel_k1"]
scaled_modified_bessel_k0 = BESSEL["scaled_modified_bessel_k0"]
scaled_modified_bessel_k1 = BESSEL["scaled_modified_bessel_k1"]


def ndtr(input):
    """The standard normal CDF, 0.5 * erfc(-x / sqrt(2))."""
    return erfc(input * (-1 / _math.sqrt(2))) * 0.5


def xlog1py(input, other):
    """x * log1p(y), 0 where x is 0 (unless y is NaN)."""
    from .ops.math_ops import _floating, _operands
    x, y = (_floating(t) for t in _operands(input, other))
    zero = (x == 0) & ~isnan(y)
    return where(zero, 0.0, x * log1p(where(zero, 0.0, y)))


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension p."""
    from .ops import stack
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    terms = stack([lgamma(input - 0.5 * j) for j in range(p)], -1).sum(-1)
    return terms + p * (p - 1) / 4 * _math.log(_math.pi)


__all__ = ["digamma", "entr", "erf", "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1",
           "gammainc", "gammaincc", "gammaln", "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr",
           "log_softmax", "logit", "logsumexp", "multigammaln", "ndtr", "ndtri", "polygamma",
           "psi", "round", "sinc", "softmax", "xlog1py", "xlogy", "zeta", "bessel_j0",
           "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0",
           "scaled_modified_bessel_k1"]
__all__ += _special_poly.__all__
