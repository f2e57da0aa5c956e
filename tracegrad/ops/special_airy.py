"""``airy_ai``'s array implementation: PyTorch's kernel (``airy_ai_forward`` in ATen's
``Math.h``, Cephes' ``airy``), vectorised and evaluated in float64 whatever the input's
float dtype, then rounded to it.

Its three regions: below x = -2.09 the oscillating asymptotic form (rational
approximations in 1/zeta^2 times sin and cos of zeta + pi/4, zeta = 2/3 |x|^1.5); from
2.09 the decaying one (a rational approximation in 1/zeta over exp(zeta)), 0 above
103.892, where it underflows; between them the Maclaurin series, summed until a term adds
less than float64's epsilon. NaN at +-inf and at NaN, as PyTorch's. SciPy's ``airy``
answers NaN for |x| beyond about 1e4 (and its float32 loop) where this form still
converges; float64 keeps the phase zeta + pi/4 exact to ~1e-16 relative, which float32
loses from |x| ~ 500 on.
"""
import numpy as np

_AN = (3.46538101525629032477e-01, 1.20075952739645805542e+01, 7.62796053615234516538e+01,
       1.68089224934630576269e+02, 1.59756391350164413639e+02, 7.05360906840444183113e+01,
       1.40264691163389668864e+01, 9.99999999999999995305e-01)
_AD = (5.67594532638770212846e-01, 1.47562562584847203173e+01, 8.45138970141474626562e+01,
       1.77318088145400459522e+02, 1.64234692871529701831e+02, 7.14778400825575695274e+01,
       1.40959135607834029598e+01, 1.00000000000000000470e+00)
_AFN = (-1.31696323418331795333e-01, -6.26456544431912369773e-01, -6.93158036036933542233e-01,
        -2.79779981545119124951e-01, -4.91900132609500318020e-02, -4.06265923594885404393e-03,
        -1.59276496239262096340e-04, -2.77649108155232920844e-06, -1.67787698489114633780e-08)
_AFD = (1.33560420706553243746e+01, 3.26825032795224613948e+01, 2.67367040941499554804e+01,
        9.18707402907259625840e+00, 1.47529146771666414581e+00, 1.15687173795188044134e-01,
        4.40291641615211203805e-03, 7.54720348287414296618e-05, 4.51850092970580378464e-07)
_AGN = (1.97339932091685679179e-02, 3.91103029615688277255e-01, 1.06579897599595591108e+00,
        9.39169229816650230044e-01, 3.51465656105547619242e-01, 6.33888919628925490927e-02,
        5.85804113048388458567e-03, 2.82851600836737019778e-04, 6.98793669997260967291e-06,
        8.11789239554389293311e-08, 3.41551784765923618484e-10)
_AGD = (9.30892908077441974853e+00, 1.98352928718312140417e+01, 1.55646628932864612953e+01,
        5.47686069422975497931e+00, 9.54293611618961883998e-01, 8.64580826352392193095e-02,
        4.12656523824222607191e-03, 1.01259085116509135510e-04, 1.17166733214413521882e-06,
        4.91834570062930015649e-09)
_INV_SQRT_PI = 5.64189583547756286948e-01
_AI0, _AI0_SLOPE = 0.355028053887817239260, 0.258819403792806798405   # Ai(0), -Ai'(0)


def _horner(z, coefficients):
    """The polynomial with ``coefficients`` (highest degree first) at ``z``."""
    acc = 0.0
    for c in coefficients:
        acc = acc * z + c
    return acc


def _oscillating(xp, x):
    """x < -2.09: Ai(x) ~ (sin(zeta + pi/4) f - cos(zeta + pi/4) g) / (sqrt(pi) |x|^1/4)."""
    zeta = -2.0 * x * xp.sqrt(-x) / 3.0
    z = 1.0 / zeta
    zz = z * z
    f = 1.0 + zz * _horner(zz, _AFN) / _horner(zz, _AFD)
    g = z * _horner(zz, _AGN) / _horner(zz, _AGD)
    phase = zeta + 0.25 * np.pi
    return _INV_SQRT_PI / xp.sqrt(xp.sqrt(-x)) * (xp.sin(phase) * f - xp.cos(phase) * g)


def _decaying(xp, x):
    """x >= 2.09: Ai(x) ~ (rational in 1/zeta) / (2 sqrt(pi) x^1/4 exp(zeta))."""
    zeta = 2.0 * x * xp.sqrt(x) / 3.0
    ratio = _horner(1.0 / zeta, _AN) / _horner(1.0 / zeta, _AD)
    return _INV_SQRT_PI * ratio / (2.0 * xp.sqrt(xp.sqrt(x)) * xp.exp(zeta))


def _series(xp, x):
    """-2.09 <= x < 2.09: Ai(0) f(x) + Ai'(0) g(x), the two Maclaurin series in x^3, each element
    summed until its term is below float64's epsilon relative to its sum."""
    z = x * x * x
    f, g = xp.ones_like(x), x.copy()
    m, n = xp.ones_like(x), x.copy()
    k = 1.0
    active = xp.ones(x.shape, dtype=bool)
    while bool(active.any()):
        m = m * z / (k + 1) / (k + 2)
        n = n * z / (k + 2) / (k + 3)
        k += 3.0
        f = xp.where(active, f + m, f)
        g = xp.where(active, g + n, g)
        active = active & (xp.abs(m / f) > np.finfo(np.float64).eps)
    return _AI0 * f - _AI0_SLOPE * g


def airy_ai_impl(xp, x):
    """Ai of a float array, in its dtype (PyTorch's regions, evaluated in float64)."""
    wide = x.astype(np.float64)
    with np.errstate(all="ignore"):
        low = _oscillating(xp, xp.where(wide < -2.09, wide, -3.0))
        high = _decaying(xp, xp.where((wide >= 2.09) & (wide <= 103.892), wide, 3.0))
        middle = _series(xp, xp.where((wide >= -2.09) & (wide < 2.09), wide, 0.0))
    out = xp.where(wide < -2.09, low, xp.where(wide >= 2.09, high, middle))
    out = xp.where(wide > 103.892, 0.0, out)
    return xp.where(xp.isinf(wide) | xp.isnan(wide), np.nan, out).astype(x.dtype, copy=False)
