"""erf for NumPy arrays, whole-array (NumPy has none; CuPy's is in cupyx).

``erf(xp, x)`` is what erf's implementation and its NumPy template call. It uses
``scipy.special.erf`` where SciPy is installed (the ``scipy`` extra) and otherwise
``erf_rational``, a vectorised form of the piecewise rational approximations of
fdlibm's ``s_erf.c`` (Sun Microsystems, 1993), written here from the method and the
coefficients it publishes (within 1 ulp of ``math.erf`` in float64 on our tests). Neither
calls Python per element.
"""
import numpy as np

from .. import dtypes

_scipy = None       # scipy.special.erf, or False without SciPy: looked up on first use


def _scipy_erf():
    global _scipy
    if _scipy is None:
        try:
            from scipy.special import erf as f
        except ImportError:
            f = False
        _scipy = f
    return _scipy


def erf(xp, x):
    """erf of an array in its floating dtype (ints and bools: the default float dtype),
    computed to double precision."""
    if xp is not np:
        from cupyx.scipy.special import erf as cupy_erf
        return cupy_erf(x)
    x = np.asarray(x)
    dt = x.dtype if x.dtype.kind == "f" else dtypes.get_default_dtype().np
    if x.dtype.kind != "f":
        x = x.astype(dt)
    f = _scipy_erf()
    y = f(x) if f else erf_rational(x.astype(np.float64, copy=False))
    return np.asarray(y).astype(dt, copy=False)


# The method (s_erf.c's comment, in short): erf(-x) = -erf(x), and on |x| in
#   [0, 0.84375)       erf = x + x * P(x^2) / Q(x^2)
#   [0.84375, 1.25)    erf = c + P1(s) / Q1(s), s = |x| - 1, c = erf(1) rounded to 24 bits
#   [1.25, 1/0.35)     erfc = exp(-x^2 - 0.5625 + R1(t) / S1(t)) / |x|, t = 1 / x^2
#   [1/0.35, 6)        erfc = the same with R2 / S2; erf = 1 - erfc
#   [6, inf]           erf = 1 (erfc < 2e-17, below half an ulp of 1)
# To keep exp's argument exact, -x^2 = -z^2 + (z - x)(z + x) with z = x cut to 21
# significant bits (the low 32 bits of its encoding cleared), so z^2 is exact:
# erfc = exp(-z^2 - 0.5625) * exp((z - x)(z + x) + R/S) / x.
# Coefficients lowest degree first (Q-type ones start with their constant term, 1).
_ERX = 8.45062911510467529297e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02,
       5.08130628187576562776e-03, 1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01,
       7.18286544141962662868e-02, 1.26171219808761642112e-01, 1.36370839120290507362e-02,
       1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02,
       4.34565877475229228821e+02, 6.45387271733267880336e+02, 4.29008140027567833386e+02,
       1.08635005541779435134e+02, 6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02,
       1.53672958608443695994e+03, 3.19985821950859553908e+03, 2.55305040643316442583e+03,
       4.74528541206955367215e+02, -2.24409524465858183362e+01)
_HIGH_WORD = np.uint64(0xFFFFFFFF00000000)


def _horner(t, coeffs):
    """sum(c * t**k for k, c in enumerate(coeffs)), evaluated by Horner's rule in place."""
    acc = np.full_like(t, coeffs[-1])
    for c in coeffs[-2::-1]:
        acc *= t
        acc += c
    return acc


_CHUNK = 1 << 16     # elements per pass: its temporaries stay in cache (2x faster at 1M)


def erf_rational(x):
    """erf of a float64 array (see the comment above); NaN stays NaN, -0.0 stays -0.0.
    Whole-array NumPy calls on chunks of ``_CHUNK`` elements, never one call per element."""
    x = np.asarray(x, dtype=np.float64)
    if x.size <= _CHUNK:
        return _erf_chunk(x)
    flat = x.reshape(-1)
    out = np.empty_like(flat)
    for i in range(0, flat.size, _CHUNK):
        out[i:i + _CHUNK] = _erf_chunk(flat[i:i + _CHUNK])
    return out.reshape(x.shape)


def _erf_chunk(x):
    out = x.copy()                      # NaN, in no region below, passes through
    ax = np.abs(x)
    near = ax < 1.25                    # the two forms in x, chosen by np.where
    if near.any():
        xs = x[near]
        a = np.abs(xs)
        t = xs * xs
        s = a - 1.0
        out[near] = np.where(a < 0.84375, xs + xs * (_horner(t, _PP) / _horner(t, _QQ)),
                             np.copysign(_ERX + _horner(s, _PA) / _horner(s, _QA), xs))
    tail = (ax >= 1.25) & (ax < 6.0)    # the two erfc forms, which differ only in R/S
    if tail.any():
        xs = x[tail]
        a = np.abs(xs)
        t = 1.0 / (a * a)
        rs = np.where(a < 1 / 0.35, _horner(t, _RA) / _horner(t, _SA),
                      _horner(t, _RB) / _horner(t, _SB))
        z = (a.view(np.uint64) & _HIGH_WORD).view(np.float64)
        erfc = np.exp(-z * z - 0.5625) * np.exp((z - a) * (z + a) + rs) / a
        out[tail] = np.copysign(1.0 - erfc, xs)
    np.copyto(out, np.copysign(1.0, x), where=ax >= 6.0)
    return out


__all__ = ["erf", "erf_rational"]
