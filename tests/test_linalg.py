"""``tracegrad.linalg`` beyond the op table: degenerate inputs, modes, errors, result
types, batched gradients and compiled use, against PyTorch."""
import math

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

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


def _check(fn, a, rtol=1e-10, atol=1e-12):
    (to, go), (tgr, ggr) = _grads(fn, a)
    np.testing.assert_allclose(go, to, rtol=rtol, atol=atol)
    np.testing.assert_allclose(ggr, tgr, rtol=rtol, atol=atol)


RNG = np.random.default_rng(3)
A33 = RNG.standard_normal((3, 3))
A43 = RNG.standard_normal((4, 3))


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
    np.testing.assert_allclose(_np(g.U @ g.U.mT), np.eye(4), atol=1e-12)


def test_det_of_singular_matrix_gradient_is_the_adjugate():
    a = tg.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=tg.float64, requires_grad=True)
    tg.linalg.det(a).backward()
    np.testing.assert_allclose(_np(a.grad), [[4.0, -2.0], [-2.0, 1.0]], atol=1e-12)
    # PyTorch's create_graph path is SVD-based too, and agrees
    t = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64, requires_grad=True)
    (gt,) = torch.autograd.grad(torch.linalg.det(t), t, create_graph=True)
    np.testing.assert_allclose(_np(a.grad), gt.detach().numpy(), atol=1e-12)
    z = tg.zeros(3, 3, dtype=tg.float64, requires_grad=True)
    tg.linalg.det(z).backward()
    assert (z.grad == 0).all().item()


def test_det_of_identity_batched_and_logdet():
    eye = tg.eye(3, dtype=tg.float64).expand(2, 3, 3).clone().requires_grad_(True)
    tg.linalg.det(eye).sum().backward()
    np.testing.assert_allclose(_np(eye.grad), np.broadcast_to(np.eye(3), (2, 3, 3)))
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
    np.testing.assert_allclose(np.abs(_np(r)), np.abs(tr.numpy()), atol=1e-12)
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
    np.testing.assert_allclose(_np(g.solution), t.solution.numpy(), atol=1e-12)
    assert g.rank.item() == t.rank.item() and g.rank.dtype is tg.int64
    assert tuple(g.residuals.shape) == tuple(t.residuals.shape)
    assert tuple(g.singular_values.shape) == tuple(t.singular_values.shape)
    # vector right-hand side, batched
    a2 = RNG.standard_normal((2, 4, 3))
    b2 = RNG.standard_normal((2, 4))
    t2 = torch.linalg.lstsq(torch.tensor(a2), torch.tensor(b2)).solution
    np.testing.assert_allclose(_np(tg.linalg.lstsq(tg.tensor(a2), tg.tensor(b2)).solution),
                               t2.numpy(), atol=1e-12)
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
        np.testing.assert_allclose(_np(gg), tt.numpy(), rtol=1e-6)
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
    for r in results[1:]:
        np.testing.assert_allclose(r[0], results[0][0], rtol=1e-10)
        np.testing.assert_allclose(r[1], results[0][1], rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(r[2], results[0][2], rtol=1e-10, atol=1e-12)
    assert compiled.stats["compiles"] == 1 and compiled.stats["cache_hits"] == 1


def test_matrix_power_zero_is_the_identity_whatever_a_holds():
    a = tg.tensor([[[float("nan"), 1.0], [2.0, float("inf")]]] * 2)
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
