"""``tracegrad.linalg`` beyond the op table: degenerate inputs, modes, errors, result
types, batched gradients and compiled use, against PyTorch."""
import math

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

from tolerances import close, ulps

torch = pytest.importorskip("torch")


def _np(t):
    return t.detach().numpy()


def _pair(a, grad=True):
    return (torch.tensor(a, dtype=torch.float64, requires_grad=grad),
            tg.tensor(a, dtype=tg.float64, requires_grad=grad))


def _grads(fn, a):
    """fn's output and the gradient of a fixed weighting of it, in both libraries."""
    t, g = _pair(a)
    to, go = fn(torch, t), fn(tg, g)
    w = np.linspace(0.5, 1.5, int(np.prod(to.shape))).reshape(tuple(to.shape))
    (to * torch.tensor(w)).sum().backward()
    (go * tg.tensor(w)).sum().backward()
    return (_np(to), _np(go)), (_np(t.grad), _np(g.grad))


RNG = np.random.default_rng(3)
A33 = RNG.standard_normal((3, 3))
A43 = RNG.standard_normal((4, 3))

# PyTorch's LAPACK and NumPy's are each backward stable: a decomposition or solve of an
# n x n matrix (n <= 4 here) is exact for an input a few n ulps away, so the results differ
# by that times the condition number (47 at most, A33), and gradients, which solve again or
# divide by gaps between eigenvalues or singular values (all > 0.6 here), by its square;
# entries are of order one, up to the tens after a solve.
COND = np.linalg.cond(A33)
LINALG = close("float64", n_ops=4 * 4, factor=4 * COND ** 2, scale=10)


def _check(fn, a, rtol=LINALG["rtol"], atol=LINALG["atol"]):
    (to, go), (tgr, ggr) = _grads(fn, a)
    np.testing.assert_allclose(go, to, rtol=rtol, atol=atol)
    np.testing.assert_allclose(ggr, tgr, rtol=rtol, atol=atol)


def test_result_fields_match_torch():
    a, ta = tg.tensor(A33 + A33.T), torch.tensor(A33 + A33.T)
    b, tb = tg.tensor(A43[:, :1]), torch.tensor(A43[:, :1])
    for name, fields in (("eigh", ("eigenvalues", "eigenvectors")), ("svd", ("U", "S", "Vh")),
                         ("qr", ("Q", "R")), ("slogdet", ("sign", "logabsdet"))):
        g, t = getattr(tg.linalg, name)(a), getattr(torch.linalg, name)(ta)
        for k, f in enumerate(fields):
            assert tuple(getattr(g, f).shape) == tuple(getattr(t, f).shape)
            assert getattr(g, f) is g[k]
    g, t = tg.linalg.lstsq(tg.tensor(A43), b), torch.linalg.lstsq(torch.tensor(A43), tb)
    for f in ("solution", "residuals", "rank", "singular_values"):
        assert tuple(getattr(g, f).shape) == tuple(getattr(t, f).shape)


def test_eigh_reads_one_triangle_like_torch():
    for uplo in ("L", "U"):
        _check(lambda lib, x: lib.linalg.eigh(x, UPLO=uplo).eigenvalues, A33)


def test_cholesky_gradient_is_symmetric_like_torch():
    spd = A33 @ A33.T + np.eye(3)
    _check(lambda lib, x: lib.linalg.cholesky(x), spd)
    _check(lambda lib, x: lib.linalg.cholesky(x, upper=True), spd)


def test_svd_full_matrices_gradient_matches_torch():
    """With full_matrices the extra columns of U are not unique; both ignore them."""
    def f(lib, x):
        u, s, vh = lib.linalg.svd(x, full_matrices=True)
        return (u[:, :3] * u[:1, :3].sign()).sum(0) + s
    _check(f, A43)
    t, g = torch.linalg.svd(torch.tensor(A43)), tg.linalg.svd(tg.tensor(A43))
    assert tuple(g.U.shape) == tuple(t.U.shape) == (4, 4)
    # Householder reflections are orthogonal to a few ulps per column
    np.testing.assert_allclose(_np(g.U @ g.U.mT), np.eye(4), **close("float64", n_ops=16))


def test_det_of_singular_matrix_gradient_is_the_adjugate():
    a = tg.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=tg.float64, requires_grad=True)
    tg.linalg.det(a).backward()
    # through an SVD of a matrix with a zero singular value: a few ulps of its largest, 5
    np.testing.assert_allclose(_np(a.grad), [[4.0, -2.0], [-2.0, 1.0]],
                               **close("float64", n_ops=16, scale=5))
    # PyTorch's create_graph path is SVD-based too, and agrees
    t = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.linalg.det(t), t, create_graph=True)
    np.testing.assert_allclose(_np(a.grad), gt.detach().numpy(),
                               **close("float64", n_ops=16, scale=5))
    z = tg.zeros(3, 3, dtype=tg.float64, requires_grad=True)
    tg.linalg.det(z).backward()
    assert (z.grad == 0).all().item()


def test_det_of_identity_batched_and_logdet():
    eye = tg.eye(3, dtype=tg.float64).expand(2, 3, 3).clone().requires_grad_(True)
    tg.linalg.det(eye).sum().backward()
    np.testing.assert_allclose(_np(eye.grad), np.broadcast_to(np.eye(3), (2, 3, 3)), **LINALG)
    m = np.diag([-1.0, 2.0, 3.0])
    t, g = _pair(m, grad=False)
    assert math.isnan(tg.logdet(g).item()) and math.isnan(torch.logdet(t).item())
    s, l = tg.linalg.slogdet(tg.zeros(2, 2))
    assert s.item() == 0.0 and l.item() == -math.inf


def test_slogdet_and_inverse_methods():
    _check(lambda lib, x: x.slogdet()[1] + x.det() + x.inverse().sum(), A33 + 3 * np.eye(3))


def test_qr_modes():
    q, r = tg.linalg.qr(tg.tensor(A43), mode="r")
    tq, tr = torch.linalg.qr(torch.tensor(A43), mode="r")
    assert tuple(q.shape) == tuple(tq.shape) == (0,)
    np.testing.assert_allclose(np.abs(_np(r)), np.abs(tr.numpy()), **LINALG)
    q, r = tg.linalg.qr(tg.tensor(A43), mode="complete")
    assert tuple(q.shape) == (4, 4) and tuple(r.shape) == (4, 3)
    x = tg.tensor(A43, requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable"):
        tg.linalg.qr(x, mode="complete").Q.sum().backward()
    with pytest.raises(RuntimeError, match="mode='r'"):
        tg.linalg.qr(tg.tensor(A43, requires_grad=True), mode="r").R.sum().backward()
    with pytest.raises(RuntimeError, match="unrecognized mode"):
        tg.linalg.qr(x, mode="full")


def test_lstsq_matches_torch():
    b = RNG.standard_normal((4, 2))
    t = torch.linalg.lstsq(torch.tensor(A43), torch.tensor(b))
    g = tg.linalg.lstsq(tg.tensor(A43), tg.tensor(b))
    np.testing.assert_allclose(_np(g.solution), t.solution.numpy(), **LINALG)
    assert g.rank.item() == t.rank.item() and g.rank.dtype is tg.int64
    assert tuple(g.residuals.shape) == tuple(t.residuals.shape)
    assert tuple(g.singular_values.shape) == tuple(t.singular_values.shape)
    # vector right-hand side, batched
    a2 = RNG.standard_normal((2, 4, 3))
    b2 = RNG.standard_normal((2, 4))
    t2 = torch.linalg.lstsq(torch.tensor(a2), torch.tensor(b2)).solution
    np.testing.assert_allclose(_np(tg.linalg.lstsq(tg.tensor(a2), tg.tensor(b2)).solution),
                               t2.numpy(), **LINALG)
    _check(lambda lib, x: lib.linalg.lstsq(x, x[..., :1] + 1.0).solution, a2)


def test_matrix_rank_matches_torch():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]])
    assert tg.linalg.matrix_rank(tg.tensor(a)).item() == torch.linalg.matrix_rank(
        torch.tensor(a)).item() == 2


@pytest.mark.parametrize("ord", [2, 1, math.inf, 3])
def test_vector_norm_at_zero_has_zero_gradient_like_torch(ord):
    _check(lambda lib, x: lib.linalg.vector_norm(x, ord), np.zeros(3))
    _check(lambda lib, x: lib.linalg.vector_norm(x, ord, dim=1), np.array([[0.0, 0.0],
                                                                         [1.0, -2.0]]))


def test_norm_forms_and_dtypes_match_torch():
    x = RNG.standard_normal((2, 3))
    for fn in (lambda lib, t: lib.linalg.norm(t), lambda lib, t: lib.linalg.norm(t, math.inf),
               lambda lib, t: lib.linalg.norm(t, dim=(0, 1), keepdim=True),
               lambda lib, t: lib.linalg.norm(t, -1, dim=1),
               lambda lib, t: lib.linalg.vector_norm(t, dtype=lib.float64),
               lambda lib, t: lib.linalg.matrix_norm(t, -math.inf, keepdim=True)):
        tt, gg = fn(torch, torch.tensor(x, dtype=torch.float32)), fn(tg, tg.tensor(x,
                                                                                 dtype=tg.float32))
        assert str(tt.dtype).split(".")[-1] == gg.dtype.name
        assert tuple(tt.shape) == tuple(gg.shape)
        # float32 norms of 6 entries: a sum of 6 squares and a root (or a max: exact)
        np.testing.assert_allclose(_np(gg), tt.numpy(), rtol=ulps("float32", 8))
    with pytest.raises(RuntimeError):
        tg.linalg.vector_norm(tg.tensor([1, 2]))
    with pytest.raises(RuntimeError):
        tg.linalg.norm(tg.ones(2, 2, 2), 2)


@pytest.mark.parametrize("fn,shape", [
    (lambda A: tg.linalg.inv(A), (2, 3)),
    (lambda A: tg.linalg.det(A), (2, 3)),
    (lambda A: tg.linalg.cholesky(A), (2, 3)),
    (lambda A: tg.linalg.solve(A, tg.ones(3, 1)), (3, 4)),
    (lambda A: tg.linalg.eigh(A), (2, 3)),
], ids=["inv", "det", "cholesky", "solve", "eigh"])
def test_non_square_inputs_raise(fn, shape):
    with pytest.raises(RuntimeError, match="square"):
        fn(tg.ones(*shape))


def test_errors_like_torch():
    with pytest.raises(RuntimeError, match="positive-definite"):
        tg.linalg.cholesky(tg.tensor([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(RuntimeError):
        tg.linalg.inv(tg.zeros(2, 2))
    with pytest.raises(RuntimeError, match="floating point"):
        tg.linalg.det(tg.ones(2, 2, dtype=tg.int64))
    with pytest.raises(RuntimeError):
        tg.linalg.solve(tg.eye(2), tg.ones(3, 1))


def test_batched_gradgradcheck_through_decompositions():
    a = tg.tensor(RNG.standard_normal((2, 3, 2)), requires_grad=True)
    f = lambda x: tg.linalg.svdvals(x).sum(-1) + tg.linalg.qr(x).R.sum((-1, -2))  # noqa: E731
    assert gradcheck(f, [a]) and gradgradcheck(f, [a])


def test_linalg_inside_compile_matches_eager():
    def f(a, b):
        spd = a @ a.mT + tg.eye(3, dtype=a.dtype)
        l = tg.linalg.cholesky(spd)
        x = tg.linalg.solve(spd, b)
        w, v = tg.linalg.eigh(spd)
        return (tg.linalg.det(spd) + l.sum() + x.sum() + w.sum()
                + tg.linalg.matrix_norm(a, "nuc") + tg.einsum("ij,jk->", a, b))

    a = RNG.standard_normal((3, 3))
    b = RNG.standard_normal((3, 2))
    compiled = tg.compile(f)
    results = []
    for fn in (f, compiled, compiled):
        ta = tg.tensor(a, requires_grad=True)
        tb = tg.tensor(b, requires_grad=True)
        out = fn(ta, tb)
        out.backward()
        results.append((out.item(), _np(ta.grad), _np(tb.grad)))
    # the compiled code calls the same LAPACK routines, but may group the sums around them
    # differently: the bound against PyTorch holds a fortiori
    for r in results[1:]:
        for got, want in zip(r, results[0]):
            np.testing.assert_allclose(got, want, **LINALG)
    assert compiled.stats["compiles"] == 1 and compiled.stats["cache_hits"] == 1


def test_matrix_power_zero_is_the_identity_whatever_a_holds():
    a = tg.tensor([[[float("nan"), 1.0], [2.0, float("inf")]]] * 2)
    # exact: the identity is built, not computed from a
    np.testing.assert_array_equal(tg.linalg.matrix_power(a, 0).numpy(), np.stack([np.eye(2)] * 2))


def test_vector_norm_dim_empty_ord_zero_and_integer_input_as_torch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    a[0, 0, 0] = 0.0
    assert tg.linalg.vector_norm(tg.tensor(a), dim=()).shape == \
        torch.linalg.vector_norm(torch.tensor(a), dim=()).shape
    x = tg.tensor(a, requires_grad=True)
    n = tg.linalg.vector_norm(x, ord=0)
    assert n.item() == torch.linalg.vector_norm(torch.tensor(a), ord=0).item()
    n.backward()
    assert np.all(x.grad.numpy() == 0)
    with pytest.raises(RuntimeError, match="Expected a floating point"):
        tg.linalg.vector_norm(tg.ones(3, dtype=tg.int64), dtype=tg.float64)


# issue 22: lstsq's outputs per driver, matrix_rank's tolerances, matrix_power(A, 0), norms at 0

@pytest.mark.parametrize("driver", [None, "gels", "gelsy", "gelsd", "gelss"])
@pytest.mark.parametrize("a_shape,b_shape", [((5, 3), (5, 2)), ((2, 5, 3), (2, 5)),
                                             ((3, 5), (3, 2)), ((3, 3), (3, 1))])
def test_lstsq_outputs_are_shaped_as_torchs(driver, a_shape, b_shape):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(a_shape), rng.standard_normal(b_shape)
    t = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
    g = tg.linalg.lstsq(tg.tensor(a), tg.tensor(b), driver=driver)
    for name in ("solution", "residuals", "rank", "singular_values"):
        tv, gv = getattr(t, name), getattr(g, name)
        assert tuple(gv.shape) == tuple(tv.shape), name
        assert gv.dtype.name == str(tv.dtype).split(".")[-1], name
        np.testing.assert_allclose(gv.numpy(), tv.numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=name)


def test_lstsq_rank_deficient_gives_no_residuals_as_torch():
    a = np.random.default_rng(1).standard_normal((5, 3))
    a[:, 2] = a[:, 1]
    r = tg.linalg.lstsq(tg.tensor(a), tg.tensor(np.ones((5, 2))), driver="gelsd")
    assert r.rank.item() == 2 and tuple(r.residuals.shape) == (0,)


@pytest.mark.parametrize("kwargs", [dict(atol=0.5), dict(rtol=0.3), dict(atol=0.5, rtol=0.3),
                                    dict(tol=0.5), dict(atol=0.0), dict(hermitian=True,
                                                                       atol=0.5)])
def test_matrix_rank_tolerances_as_torch(kwargs):
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(2).standard_normal((3, 4, 4))
    a = a + np.swapaxes(a, -1, -2)
    t = torch.linalg.matrix_rank(torch.tensor(a), **kwargs)
    g = tg.linalg.matrix_rank(tg.tensor(a), **kwargs)
    assert g.tolist() == t.tolist() and g.dtype is tg.int64


def test_matrix_rank_tensor_tolerances_broadcast_over_the_batch():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(3).standard_normal((3, 4, 4))
    atol = [0.01, 1.0, 3.0]
    t = torch.linalg.matrix_rank(torch.tensor(a), atol=torch.tensor(atol, dtype=torch.float64))
    g = tg.linalg.matrix_rank(tg.tensor(a), atol=tg.tensor(atol, dtype=tg.float64))
    assert g.tolist() == t.tolist()


def test_matrix_power_zero_requires_grad_with_zero_gradient():
    a = tg.tensor([[1.0, float("nan")], [2.0, 3.0]], dtype=tg.float64, requires_grad=True)
    p = tg.linalg.matrix_power(a, 0)
    assert p.requires_grad and p.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    p.sum().backward()
    assert a.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, -1, -0.5, math.inf, -math.inf])
def test_vector_norm_gradient_with_zeros_matches_torch(ord):
    """A zero vector (and a zero element, for orders below 1) has gradient 0, as PyTorch's."""
    torch = pytest.importorskip("torch")
    x = [[0.0, 0.0, 0.0], [0.0, 1.0, -2.0]]
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    g = tg.tensor(x, dtype=tg.float64, requires_grad=True)
    torch.linalg.vector_norm(t, ord, dim=1).sum().backward()
    tg.linalg.vector_norm(g, ord, dim=1).sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), t.grad.numpy(), rtol=1e-12)
