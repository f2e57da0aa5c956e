"""``linalg.ldl_factor``/``ldl_factor_ex``/``ldl_solve``, ``householder_product``
(``orgqr``), ``geqrf``, ``ormqr`` and ``LinAlgError`` against PyTorch: LAPACK's outputs,
errors, and which of them PyTorch differentiates. (Forward values and gradients of the
differentiable ones are also in the op table, ``tests/op_table_linalg_ldl.py``.)"""
import pickle

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
pytest.importorskip("scipy")


def _symmetric(shape, seed=0):
    a = np.random.default_rng(seed).standard_normal(shape)
    a = a + np.swapaxes(a, -1, -2)
    # a small leading diagonal entry makes Bunch-Kaufman take 2x2 pivots (negative pivots)
    a[..., 0, 0] = 1e-3
    return a


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ldl_factor_ex_is_lapacks_as_torchs(dtype):
    a = _symmetric((3, 5, 5)).astype(dtype)
    a[..., 0, 3] = 7.0     # the upper triangle is not read
    ours = tg.linalg.ldl_factor_ex(tg.tensor(a))
    theirs = torch.linalg.ldl_factor_ex(torch.tensor(a))
    assert (theirs.pivots < 0).any()        # the case with 2x2 blocks is exercised
    np.testing.assert_array_equal(ours.pivots.numpy(), theirs.pivots.numpy())
    np.testing.assert_array_equal(ours.info.numpy(), theirs.info.numpy())
    assert ours.pivots.dtype == tg.int32 and ours.info.dtype == tg.int32
    # the same LAPACK routine on the same values; its blocking may follow another workspace
    # size, which reorders float32 sums: a few ulps of the factor's entries
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(ours.LD.numpy(), theirs.LD.numpy(), rtol=tol, atol=tol)
    LD, pivots = tg.linalg.ldl_factor(tg.tensor(a), hermitian=True)
    np.testing.assert_array_equal(LD.numpy(), ours.LD.numpy())


def test_ldl_factor_singular_reports_info_and_raises():
    z = np.zeros((2, 2))
    ours = tg.linalg.ldl_factor_ex(tg.tensor(z))
    theirs = torch.linalg.ldl_factor_ex(torch.tensor(z))
    assert int(ours.info) == int(theirs.info) == 1
    np.testing.assert_array_equal(ours.pivots.numpy(), theirs.pivots.numpy())
    for call in (lambda: tg.linalg.ldl_factor(tg.tensor(z)),
                 lambda: tg.linalg.ldl_factor_ex(tg.tensor(z), check_errors=True)):
        with pytest.raises(tg.linalg.LinAlgError, match=r"D\[1, 1\] is exactly zero"):
            call()


@pytest.mark.parametrize("b_shape", [(3, 5, 2), (5, 2), (2, 1, 5, 1)])
@pytest.mark.parametrize("index_dtype", ["int32", "int64"])
def test_ldl_solve_matches_torch(b_shape, index_dtype):
    a = _symmetric((3, 5, 5), seed=1)
    b = np.random.default_rng(2).standard_normal(b_shape)
    LD, pivots = tg.linalg.ldl_factor(tg.tensor(a))
    x = tg.linalg.ldl_solve(LD, pivots.to(getattr(tg, index_dtype)), tg.tensor(b))
    want = np.linalg.solve(a, b)            # broadcasting over the batch as torch does
    assert tuple(x.shape) == want.shape
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-9, atol=1e-9)
    if b_shape != (2, 1, 5, 1):             # PyTorch 2.13 aborts broadcasting B's batch
        tLD, tp = torch.linalg.ldl_factor(torch.tensor(a))
        theirs = torch.linalg.ldl_solve(tLD, tp.to(getattr(torch, index_dtype)),
                                        torch.tensor(b))
        np.testing.assert_allclose(x.numpy(), theirs.numpy(), rtol=1e-10, atol=1e-10)


def _message(lib, fn):
    with pytest.raises((RuntimeError, IndexError, NotImplementedError)) as info:
        fn(lib)
    return str(info.value).splitlines()[0], type(info.value)


@pytest.mark.parametrize("fn", [
    lambda lib: lib.linalg.ldl_factor(lib.zeros(2, 3)),
    lambda lib: lib.linalg.ldl_factor(lib.zeros(3)),
    lambda lib: lib.linalg.ldl_factor(lib.zeros(2, 2, dtype=lib.int64)),
    lambda lib: lib.linalg.ldl_factor(lib.zeros(2, 2, dtype=lib.float16)),
    lambda lib: lib.linalg.ldl_solve(*lib.linalg.ldl_factor(lib.eye(3)), lib.ones(4, 1)),
    lambda lib: lib.linalg.ldl_solve(*lib.linalg.ldl_factor(lib.eye(3)),
                                     lib.ones(3, 1, dtype=lib.float64)),
    lambda lib: lib.linalg.ldl_solve(lib.linalg.ldl_factor(lib.eye(3))[0],
                                     lib.linalg.ldl_factor(lib.eye(3))[1][:2], lib.ones(3, 1)),
    lambda lib: lib.linalg.householder_product(lib.zeros(3), lib.zeros(1)),
    lambda lib: lib.linalg.householder_product(lib.zeros(2, 3), lib.zeros(1)),
    lambda lib: lib.linalg.householder_product(lib.zeros(4, 3), lib.zeros(4)),
    lambda lib: lib.linalg.householder_product(lib.zeros(4, 3), lib.zeros(2, 2)),
    lambda lib: lib.linalg.householder_product(lib.zeros(2, 4, 3), lib.zeros(3, 2)),
    lambda lib: lib.linalg.householder_product(lib.zeros(4, 3),
                                               lib.zeros(2, dtype=lib.float64)),
    lambda lib: lib.ormqr(lib.zeros(5, 3), lib.zeros(2), lib.zeros(5, 2)),
    lambda lib: lib.ormqr(lib.zeros(5, 3), lib.zeros(3), lib.zeros(4, 5)),
    lambda lib: lib.ormqr(lib.zeros(5, 3), lib.zeros(3), lib.zeros(2, 4), left=False),
    lambda lib: lib.geqrf(lib.zeros(3)),
], ids=["ldl-rect", "ldl-1d", "ldl-long", "ldl-half", "solve-rows", "solve-dtype",
        "solve-pivots", "hp-1d", "hp-wide", "hp-tau-long", "hp-tau-ndim", "hp-batch",
        "hp-dtype", "ormqr-tau", "ormqr-rows", "ormqr-right", "geqrf-1d"])
def test_errors_as_torch(fn):
    ours, theirs = _message(tg, fn), _message(torch, fn)
    assert ours[1] is theirs[1]
    assert ours[0] == theirs[0]


def test_ldl_solve_rejects_pivots_out_of_range():
    LD, pivots = tg.linalg.ldl_factor(tg.eye(3))
    with pytest.raises(tg.linalg.LinAlgError, match="pivots must be in"):
        tg.linalg.ldl_solve(LD, pivots * 0 + 7, tg.ones(3, 1))    # LAPACK would write past


def test_ldl_is_not_differentiable_as_in_torch():
    for lib in (tg, torch):
        a = lib.tensor(_symmetric((3, 3)), requires_grad=True)
        LD, pivots = lib.linalg.ldl_factor(a)
        assert LD.requires_grad and not pivots.requires_grad
        with pytest.raises(RuntimeError,
                           match="derivative for aten::linalg_ldl_factor_ex is not implemented"):
            LD.sum().backward()
        b = lib.ones(3, 1, dtype=lib.float64, requires_grad=True)
        x = lib.linalg.ldl_solve(LD.detach(), pivots, b)
        assert x.requires_grad
        with pytest.raises(RuntimeError,
                           match="derivative for aten::linalg_ldl_solve is not implemented"):
            x.sum().backward()
        a, tau = lib.geqrf(lib.ones(3, 2, dtype=lib.float64, requires_grad=True))
        assert a.requires_grad and tau.requires_grad
        with pytest.raises(NotImplementedError,
                           match="the derivative for 'geqrf' is not implemented"):
            a.sum().backward()


def test_geqrf_then_householder_product_is_qr():
    a = np.random.default_rng(4).standard_normal((2, 6, 4))
    packed, tau = tg.geqrf(tg.tensor(a))
    q = tg.linalg.householder_product(packed, tau).numpy()
    r = np.triu(packed.numpy()[..., :4, :])
    np.testing.assert_allclose(q @ r, a, atol=1e-12)
    tq = torch.linalg.householder_product(*torch.geqrf(torch.tensor(a)))
    np.testing.assert_allclose(q, tq.numpy(), atol=1e-12)
    np.testing.assert_allclose(tg.tensor(a).geqrf()[1].numpy(), tau.numpy())


@pytest.mark.parametrize("shapes", [((5, 3), (2,)), ((2, 4, 4), (2, 4)), ((3, 2), (0,))])
def test_householder_product_gradients(shapes):
    rng = np.random.default_rng(5)
    a = tg.tensor(rng.standard_normal(shapes[0]), requires_grad=True)
    tau = tg.tensor(rng.uniform(0.5, 1.5, shapes[1]), requires_grad=True)
    assert gradcheck(tg.linalg.householder_product, (a, tau))
    assert gradgradcheck(tg.linalg.householder_product, (a, tau))
    ta = torch.tensor(a.detach().numpy(), requires_grad=True)
    tt = torch.tensor(tau.detach().numpy(), requires_grad=True)
    w = rng.standard_normal(shapes[0])
    (tg.linalg.householder_product(a, tau) * tg.tensor(w)).sum().backward()
    (torch.linalg.householder_product(ta, tt) * torch.tensor(w)).sum().backward()
    if shapes[1] == (0,):       # no reflectors: PyTorch leaves both gradients None, ours
        assert ta.grad is None and tt.grad is None      # is A's zero (the identity's where)
        assert tau.grad is None and not a.grad.numpy().any()
        return
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(tau.grad.numpy(), tt.grad.numpy(), atol=1e-12)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("transpose", [True, False])
def test_ormqr_gradients_match_torch(left, transpose):
    rng = np.random.default_rng(6)
    arrays = [rng.standard_normal((5, 3)), rng.uniform(0.5, 1.5, 3),
              rng.standard_normal((5, 2) if left else (2, 5))]
    ours = [tg.tensor(x, requires_grad=True) for x in arrays]
    theirs = [torch.tensor(x, requires_grad=True) for x in arrays]
    assert gradcheck(lambda *xs: tg.ormqr(*xs, left, transpose), ours)
    tg.ormqr(*ours, left, transpose).sum().backward()
    torch.ormqr(*theirs, left, transpose).sum().backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), atol=1e-12)
    assert tg.tensor(arrays[0]).ormqr(tg.tensor(arrays[1]), tg.tensor(arrays[2]), left,
                                      transpose).shape == tuple(theirs[2].shape)


def test_linalg_error_class():
    assert issubclass(tg.linalg.LinAlgError, RuntimeError)
    assert issubclass(torch.linalg.LinAlgError, RuntimeError)
    e = tg.linalg.LinAlgError("linalg.inv: singular")
    assert str(e) == "linalg.inv: singular"
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is tg.linalg.LinAlgError and str(again) == str(e)
    assert str(tg.linalg.LinAlgError("linalg.inv", "singular")) == "linalg.inv: singular"


def test_lapack_failures_of_every_linalg_op_are_linalgerror():
    """PyTorch raises torch.linalg.LinAlgError (a RuntimeError) where LAPACK fails on the
    values: a singular inv or solve is caught by ``except tracegrad.linalg.LinAlgError``."""
    singular = tg.zeros(2, 2)
    for call in (lambda: tg.linalg.inv(singular),
                 lambda: tg.linalg.solve(singular, tg.ones(2)),
                 lambda: tg.linalg.cholesky(-tg.eye(2))):
        with pytest.raises(tg.linalg.LinAlgError) as info:
            call()
        assert isinstance(info.value, RuntimeError)
