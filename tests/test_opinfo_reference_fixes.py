"""The OpInfo sweep's reference stage (PyTorch's reference inputs: extremes, NaN/inf,
non-contiguous) found these; one focused test each against PyTorch: ``__rsub__`` with a
number as self, the special functions' edge values (incomplete gammas, polygamma, zeta,
airy_ai), float32 rounding where the order of operations decides the result (recurrences,
grid_sample's and interpolate's coordinates), and ``interpolate(antialias=True)``.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tracegrad as tg  # noqa: E402
from test_opinfo_fixes import _compiled, _tg  # noqa: E402 - the same helpers
from tolerances import close  # noqa: E402


# the reference stage's findings: edge values, float32 rounding, antialiasing ---------------

def test_rsub_of_a_number_and_a_tensor_is_not_implemented_as_torch():
    """``Tensor.__rsub__(2.0, t)``, a number as self, is NotImplemented in PyTorch (its
    binding's TypeError): Python then tries the number's own ``__sub__``."""
    t = torch.tensor([1.0, 4.0])
    assert torch.Tensor.__rsub__(5.0, t) is NotImplemented
    assert tg.Tensor.__rsub__(5.0, _tg(t)) is NotImplemented
    np.testing.assert_array_equal(tg.Tensor.__rsub__(_tg(t), 5.0).numpy(), (5.0 - t).numpy())


EDGES = [np.nan, np.inf, 0.0, -1.0, 1.5]


@pytest.mark.parametrize("name", ["igamma", "igammac"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_incomplete_gammas_at_edge_values_as_torch(name, dtype):
    """PyTorch's boundary values, in its order: P(inf, NaN) = 0 and P(NaN, inf) = 1 (SciPy
    says NaN), x = 0 before a NaN a, a = 0 before a NaN x."""
    a, x = (torch.tensor(v, dtype=getattr(torch, dtype)) for v in np.meshgrid(EDGES, EDGES))
    want = getattr(torch, name)(a, x).numpy()
    got = getattr(tg, name)(_tg(a), _tg(x)).numpy()
    # boundary values are exact constants; the series at (1.5, 1.5) ~30 operations deep
    np.testing.assert_allclose(got, want, equal_nan=True, **close(dtype, n_ops=30))


@pytest.mark.parametrize("n", range(5))
def test_polygamma_at_infinities_as_torch(n):
    """NaN at +inf for n >= 2 and at -inf for n = 1, as PyTorch (SciPy: -+0 and +inf)."""
    x = torch.tensor([np.inf, -np.inf, np.nan, 2.5, -2.5, 1e30])
    want = torch.polygamma(n, x).numpy()
    np.testing.assert_allclose(tg.polygamma(n, _tg(x)).numpy(), want, equal_nan=True,
                               **close("float32", n_ops=30))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_zeta_beyond_q_1e8_as_torch(dtype):
    """For q > 1e8 SciPy takes an asymptotic form and says 0 where PyTorch's sum meets
    0 * inf (x ~ 1e13 and more, or q = inf): NaN, as PyTorch; finite values agree."""
    xs = np.array([1e20, 1e13, 50.5, 3.0, 1.5, 1e20, 2.0, 2.0, 1.0, 0.5])
    qs = np.array([1e20, 1e9, 1.5e8, 1e12, 1e9, 2.0, np.inf, 1.5, 1e9, 1e9])
    x, q = (torch.tensor(v, dtype=getattr(torch, dtype)) for v in (xs, qs))
    want = torch.special.zeta(x, q).numpy()
    got = tg.special.zeta(_tg(x), _tg(q)).numpy()
    # both sum the same ~20 terms in float64; float32 rounds that once
    np.testing.assert_allclose(got, want, equal_nan=True, **close(dtype, n_ops=20, scale=0))


AIRY_POINTS = [-1e20, -4988429.0, -13437.7, -1001.2, -501.0, -50.0, -2.09, -2.0, -0.3, 0.0,
               1.0, 2.09, 5.0, 9.0, 50.0, 103.0, 104.0, np.inf, -np.inf, np.nan]


def test_airy_ai_float64_as_torch():
    """PyTorch's kernel (its three regions) in float64, where SciPy's airy says NaN from
    |x| ~ 1e4 on: the same values to a few ulps of the phase and the series."""
    x = torch.tensor(AIRY_POINTS, dtype=torch.float64)
    want = torch.special.airy_ai(x).numpy()
    np.testing.assert_allclose(tg.special.airy_ai(_tg(x)).numpy(), want, equal_nan=True,
                               **close("float64", n_ops=40, scale=1e-300))


def _no_further_from_float64(got, want, truth, dtype):
    """The sweep's arbitration: ``got`` as close to ``truth`` as ``want``, give or take one
    rounding of the truth to ``dtype``."""
    slack = np.finfo(dtype).eps * np.abs(truth)
    return np.abs(got - truth) <= np.abs(want - truth) + slack


def test_airy_ai_float32_is_as_close_to_float64_as_torch():
    """PyTorch's float32 kernel loses the phase zeta + pi/4 from |x| ~ 500 on (-501: 4e-4
    relative); tracegrad evaluates in float64 and rounds: no further from the float64 value
    anywhere, and NaN exactly where PyTorch's is."""
    x = torch.tensor(AIRY_POINTS, dtype=torch.float32)
    want = torch.special.airy_ai(x).numpy().astype(np.float64)
    truth = torch.special.airy_ai(x.double()).numpy()
    got = tg.special.airy_ai(_tg(x)).numpy().astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    assert _no_further_from_float64(got[finite], want[finite], truth[finite], np.float32).all()


# values from the reference inputs where float32 rounding order decided the result: a
# Hermite recurrence cancelling to ~1e2 from terms ~1e5 (fused multiply-adds, as PyTorch's
# build), a Chebyshev trigonometric form beside a root (evaluated in float64)
CANCELLING = [
    ("hermite_polynomial_he", [-4.150057792663574, 4.144494533538818, -4.148883819580078],
     [8.124107360839844, 8.136385917663574, 8.141837120056152]),
    ("hermite_polynomial_h", [-2.6490535736083984, -2.649596691131592, -2.6509056091308594],
     [7.215203285217285, 7.304516792297363, 7.543285846710205]),
    ("shifted_chebyshev_polynomial_v", [0.033780813217163086], [8.529997825622559]),
]


@pytest.mark.parametrize("name, x, n", CANCELLING, ids=[c[0] for c in CANCELLING])
def test_float32_special_values_as_close_to_float64_as_torch(name, x, n):
    args = [torch.tensor(x), torch.tensor(n)]
    fn = getattr(torch.special, name)
    want = fn(*args).numpy().astype(np.float64)
    truth = fn(*(a.double() for a in args)).numpy()
    got = getattr(tg.special, name)(*(_tg(a) for a in args)).numpy().astype(np.float64)
    assert _no_further_from_float64(got, want, truth, np.float32).all(), (got, want, truth)


def _torch_fuses_multiply_add():
    """Whether this PyTorch build rounds ``a * b - c`` once (GCC contracts it into a fused
    multiply-add where the CPU has one): He_2(x) = x * x - 1 at x = 1 + 2**-12 keeps the
    2**-24 of x * x only when fused."""
    x = torch.tensor([1 + 2 ** -12])
    return torch.special.hermite_polynomial_he(x, 2).item() != 2 ** -11


needs_fused_torch = pytest.mark.skipif(
    not _torch_fuses_multiply_add(),
    reason="this PyTorch build rounds a * b - c twice; tracegrad rounds it once")


@needs_fused_torch
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_pixel_coordinates_round_as_torch(mode, padding_mode):
    """ATen's 2-D kernel unnormalises ((g + 1) * W - 1) / 2 with one rounding: on a
    345 x 456 image of 0..255 one ulp of the coordinate (3e-5) moved a value by up to
    4e-3. Rounded alike, the results part only by the blend's roundings."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (1, 2, 345, 456), generator=gen).float()
    grid = torch.rand((1, 200, 200, 2), generator=gen) * 2.4 - 1.2
    want = torch.nn.functional.grid_sample(x, grid, mode=mode, padding_mode=padding_mode,
                                           align_corners=False).numpy()
    got = tg.nn.functional.grid_sample(_tg(x), _tg(grid), mode=mode, padding_mode=padding_mode,
                                       align_corners=False).numpy()
    # 16 products and sums of weights and values up to 255
    np.testing.assert_allclose(got, want, **close("float32", n_ops=16, scale=255))


@needs_fused_torch
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_interpolate_source_index_rounds_as_torch(mode):
    """scale * (i + 0.5) - 0.5, rounded once as PyTorch's build does: 345 -> 270 rows put
    output row 200 at 255.69..., where a second rounding moved values by 1e-4."""
    x = torch.randn((1, 2, 345, 456), generator=torch.Generator().manual_seed(0))
    want = torch.nn.functional.interpolate(x, size=(270, 270), mode=mode).numpy()
    got = tg.nn.functional.interpolate(_tg(x), size=(270, 270), mode=mode).numpy()
    # 16 taps of values ~N(0, 1) (up to 5), the taps' weights up to 1.3
    np.testing.assert_allclose(got, want, **close("float32", n_ops=16, scale=5))


# interpolate(antialias=True) ---------------------------------------------------------------

ANTIALIAS = [((9, 13), (4, 5)), ((9, 13), (20, 30)), ((16, 5), (7, 9)), ((6, 6), (1, 1)),
             ((5, 7), (5, 7))]


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("size, out", ANTIALIAS)
def test_antialiased_interpolate_as_torch(mode, align_corners, size, out):
    """Separable weights, the filter stretched by the scale when downsampling, normalised
    per output pixel: values and input gradients as PyTorch's, float64."""
    x = torch.randn((2, 3) + size, dtype=torch.float64, requires_grad=True,
                    generator=torch.Generator().manual_seed(1))
    kwargs = dict(size=out, mode=mode, align_corners=align_corners, antialias=True)
    want = torch.nn.functional.interpolate(x, **kwargs)
    cotangent = torch.randn(want.shape, dtype=torch.float64)
    (want_grad,) = torch.autograd.grad(want, x, cotangent)
    xt = _tg(x, requires_grad=True)
    got = tg.nn.functional.interpolate(xt, **kwargs)
    (got_grad,) = tg.autograd.grad(got, xt, _tg(cotangent))
    # each output a sum over up to 13 x 21 taps, each weight a few operations deep
    tolerance = close("float64", n_ops=300, scale=4)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tolerance)
    np.testing.assert_allclose(got_grad.numpy(), want_grad.numpy(), **tolerance)


@pytest.mark.parametrize("scale_factor, recompute", [(0.3, None), (0.45, True), (2.5, None),
                                                     ((0.6, 1.7), None)])
def test_antialiased_interpolate_by_scale_factor_as_torch(scale_factor, recompute):
    """With scale_factor the taps use 1 / scale_factor (unless recompute_scale_factor)."""
    x = torch.randn((1, 2, 11, 8), dtype=torch.float64,
                    generator=torch.Generator().manual_seed(2))
    kwargs = dict(scale_factor=scale_factor, mode="bicubic", antialias=True,
                  recompute_scale_factor=recompute)
    want = torch.nn.functional.interpolate(x, **kwargs).numpy()
    got = tg.nn.functional.interpolate(_tg(x), **kwargs).numpy()
    np.testing.assert_allclose(got, want, **close("float64", n_ops=300, scale=4))


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_antialiased_interpolate_gradchecks_and_compiles(mode):
    x = tg.tensor(np.random.default_rng(3).standard_normal((1, 2, 7, 9)), requires_grad=True)

    def down(t):
        return tg.nn.functional.interpolate(t, size=(3, 4), mode=mode, antialias=True)
    assert tg.autograd.gradcheck(down, (x,))
    np.testing.assert_allclose(_compiled(down, x.detach()).numpy(), down(x).detach().numpy(),
                               **close("float64", n_ops=4))


def test_antialias_needs_bilinear_or_bicubic_on_4d_as_torch():
    for args in (((1, 1, 8), "linear"), ((1, 1, 8, 8), "nearest")):
        with pytest.raises(ValueError, match="Anti-alias option is restricted"):
            tg.nn.functional.interpolate(tg.zeros(args[0]), size=args[0][2:],
                                         mode=args[1], antialias=True)
