"""tracegrad.nn.utils against PyTorch: gradient clipping and parameter/vector conversion.

The clipping tests give both libraries the same grads (set from NumPy arrays) and compare
the returned total norm and the clipped grads; the rest check the in-place contract: the
grad tensors keep their identity and no autograd history is recorded.
"""
import math

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.nn.utils import (
    clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_, get_total_norm,
    parameters_to_vector, vector_to_parameters,
)

from tolerances import close, ulps

SHAPES = [(3, 4), (5,), (), (2, 1, 3)]
# A total norm over at most 24 entries (a power, a sum and a root; a non-integer order's
# power is an exp and a log) and the clipped grads' one product with max_norm / (norm + eps):
# about 32 roundings, on standard normal grads (times 3 at most).
TOL = {dtype: close(dtype, n_ops=32, scale=4) for dtype in (np.float32, np.float64)}


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)    # tiny tensors: threads only add contention
    return torch


def _grads(dtype, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s) * scale).astype(dtype) for s in SHAPES]


def _params(grads, lib, skip=()):
    """One leaf parameter per grad array in ``lib``; those in ``skip`` get no grad."""
    params = []
    for i, g in enumerate(grads):
        p = lib.nn.Parameter(lib.zeros(g.shape, dtype=getattr(lib, g.dtype.name)))
        if i not in skip:
            p.grad = lib.tensor(g.copy())
        params.append(p)
    return params


def _assert_grads_equal(tg_params, th_params, dtype):
    for p, q in zip(tg_params, th_params):
        if q.grad is None:
            assert p.grad is None
        else:
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), **TOL[dtype])


# clip_grad_norm_ ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm_type", [1, 2.0, 3.5, math.inf, "inf"])
@pytest.mark.parametrize("max_norm", [0.5, 1e3])    # below and above the total norm
def test_clip_grad_norm_matches_torch(dtype, norm_type, max_norm):
    torch = _torch()
    grads = _grads(dtype)
    tg_params, th_params = _params(grads, tg, skip={1}), _params(grads, torch, skip={1})
    tg_ids = [id(p.grad) for p in tg_params]
    n_tg = clip_grad_norm_(tg_params, max_norm, norm_type)
    n_th = torch.nn.utils.clip_grad_norm_(th_params, max_norm, norm_type)
    assert n_tg.shape == () and n_tg.dtype is getattr(tg, np.dtype(dtype).name)
    assert not n_tg.requires_grad
    np.testing.assert_allclose(n_tg.numpy(), n_th.numpy(), **TOL[dtype])
    _assert_grads_equal(tg_params, th_params, dtype)
    assert [id(p.grad) for p in tg_params] == tg_ids


@pytest.mark.parametrize("norm_type", [0, -math.inf])
def test_clip_grad_norm_degenerate_orders(norm_type):
    torch = _torch()
    grads = _grads(np.float64)
    grads[0][1] = 0.0
    tg_params, th_params = _params(grads, tg), _params(grads, torch)
    n_tg = clip_grad_norm_(tg_params, 1.0, norm_type)
    n_th = torch.nn.utils.clip_grad_norm_(th_params, 1.0, norm_type)
    np.testing.assert_allclose(n_tg.numpy(), n_th.numpy(), **TOL[np.float64])
    _assert_grads_equal(tg_params, th_params, np.float64)


def test_clip_grad_norm_single_tensor_and_generator():
    torch = _torch()
    grads = _grads(np.float32, seed=1, scale=3.0)
    tg_params, th_params = _params(grads, tg), _params(grads, torch)
    n_tg = clip_grad_norm_(tg_params[0], 1.0)
    n_th = torch.nn.utils.clip_grad_norm_(th_params[0], 1.0)
    np.testing.assert_allclose(n_tg.numpy(), n_th.numpy(), **TOL[np.float32])
    # a generator is consumed once but clipped with the norm of all its items
    n_tg = clip_grad_norm_((p for p in tg_params), 2.0, norm_type=1)
    n_th = torch.nn.utils.clip_grad_norm_((p for p in th_params), 2.0, norm_type=1)
    np.testing.assert_allclose(n_tg.numpy(), n_th.numpy(), **TOL[np.float32])
    _assert_grads_equal(tg_params, th_params, np.float32)
    # 2.0 up to the clip's eps (1e-6 on a norm of about 50) and the float32 rounding of the
    # 24 clipped grads and their sum
    total = sum(np.abs(p.grad.numpy()).sum() for p in tg_params)
    np.testing.assert_allclose(total, 2.0, rtol=ulps(np.float32, 32))


def test_clip_grad_norm_empty():
    for params in ([], [nn.Parameter(tg.ones(2))]):     # no params, or none with a grad
        n = clip_grad_norm_(params, 1.0)
        assert n.item() == 0.0 and n.shape == () and n.dtype is tg.float32
    with pytest.warns(UserWarning, match="empty generator"):
        clip_grad_norm_((p for p in []), 1.0)


def test_clip_grad_norm_nonfinite():
    torch = _torch()
    grads = _grads(np.float64)
    grads[2] = np.array(np.nan)
    tg_params, th_params = _params(grads, tg), _params(grads, torch)
    with pytest.raises(RuntimeError) as tg_err:
        clip_grad_norm_(tg_params, 1.0, error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as th_err:
        torch.nn.utils.clip_grad_norm_(th_params, 1.0, error_if_nonfinite=True)
    assert str(tg_err.value) == str(th_err.value)
    np.testing.assert_array_equal(tg_params[0].grad.numpy(), grads[0])   # left untouched: exact
    n = clip_grad_norm_(tg_params, 1.0)      # error_if_nonfinite=False scales by nan
    assert math.isnan(n.item()) and np.isnan(tg_params[0].grad.numpy()).all()
    inf_param = _params([np.array([np.inf, 1.0])], tg)
    with pytest.raises(RuntimeError, match="order inf .* non-finite"):
        clip_grad_norm_(inf_param, 1.0, norm_type="inf", error_if_nonfinite=True)


def test_clip_grad_norm_after_backward_is_in_place_and_untracked():
    lin = nn.Linear(4, 3)
    (lin(tg.randn(5, 4)) * 10).sum().backward()
    before = {name: (p.grad, p.grad.numpy().copy()) for name, p in lin.named_parameters()}
    total = clip_grad_norm_(lin.parameters(), 0.1)
    expected = math.sqrt(sum((g ** 2).sum() for _, g in before.values()))
    # float32 against the float64 reference: 15 squares summed, a root, a product
    np.testing.assert_allclose(total.item(), expected, rtol=ulps(np.float32, 32))
    coef = 0.1 / (expected + 1e-6)
    for name, p in lin.named_parameters():
        grad, old = before[name]
        assert p.grad is grad and p.grad.grad_fn is None and not p.grad.requires_grad
        np.testing.assert_allclose(p.grad.numpy(), old * coef, rtol=ulps(np.float32, 32))
    assert total.grad_fn is None


def test_total_norm_and_clip_with_norm_split():
    torch = _torch()
    grads = _grads(np.float32, seed=2)
    tg_params, th_params = _params(grads, tg), _params(grads, torch)
    n_tg = get_total_norm([p.grad for p in tg_params], 3.5)
    n_th = torch.nn.utils.get_total_norm([p.grad for p in th_params], 3.5)
    np.testing.assert_allclose(n_tg.numpy(), n_th.numpy(), **TOL[np.float32])
    clip_grads_with_norm_(tg_params, 0.25, n_tg)
    torch.nn.utils.clip_grads_with_norm_(th_params, 0.25, n_th)
    _assert_grads_equal(tg_params, th_params, np.float32)


def test_clip_grad_norm_mixed_dtypes_promotes_norm():
    torch = _torch()
    grads = [np.full(3, 2.0, np.float32), np.full(2, 3.0, np.float64)]
    tg_params, th_params = _params(grads, tg), _params(grads, torch)
    n_tg = clip_grad_norm_(tg_params, 1.0)
    n_th = torch.nn.utils.clip_grad_norm_(th_params, 1.0)
    assert n_tg.dtype is tg.float64 and n_th.dtype == torch.float64
    np.testing.assert_allclose(n_tg.numpy(), n_th.numpy(), **TOL[np.float64])
    assert [p.grad.dtype for p in tg_params] == [tg.float32, tg.float64]
    _assert_grads_equal(tg_params, th_params, np.float32)


def test_clip_grad_norm_deprecated_alias():
    p = _params([np.array([3.0, 4.0], np.float32)], tg)
    with pytest.warns(FutureWarning):
        n = nn.utils.clip_grad_norm(p, 1.0)
    assert n.item() == pytest.approx(5.0)


# clip_grad_value_ -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_clip_grad_value_matches_torch(dtype):
    torch = _torch()
    grads = _grads(dtype, seed=3)
    tg_params, th_params = _params(grads, tg, skip={0}), _params(grads, torch, skip={0})
    ids = [id(p.grad) for p in tg_params]
    assert clip_grad_value_(tg_params, 0.5) is None
    torch.nn.utils.clip_grad_value_(th_params, 0.5)
    _assert_grads_equal(tg_params, th_params, dtype)
    assert [id(p.grad) for p in tg_params] == ids
    clip_grad_value_(tg_params[1], 0.1)                 # a single tensor
    clip_grad_value_((p for p in tg_params), 0.2)       # a generator
    assert np.abs(tg_params[1].grad.numpy()).max() <= 0.1
    assert all(np.abs(p.grad.numpy()).max() <= 0.2 for p in tg_params[1:])


# parameters_to_vector / vector_to_parameters ----------------------------------------------

def test_parameters_to_vector_matches_torch():
    torch = _torch()
    arrays = _grads(np.float64, seed=4)
    vec = parameters_to_vector([tg.tensor(a) for a in arrays])
    ref = torch.nn.utils.parameters_to_vector([torch.tensor(a) for a in arrays])
    np.testing.assert_array_equal(vec.numpy(), ref.numpy())    # a concatenation: exact


def test_vector_round_trip_keeps_parameters_and_grads():
    lin = nn.Linear(3, 2)
    lin(tg.randn(4, 3)).sum().backward()
    params = list(lin.parameters())
    grads = [p.grad for p in params]
    vec = parameters_to_vector(params)
    assert vec.shape == (8,) and vec.requires_grad      # it is a differentiable op
    new = tg.arange(8, dtype=tg.float32)
    vector_to_parameters(new, lin.parameters())
    assert list(lin.parameters()) == params and [p.grad for p in params] == grads
    # copies of small integers, no arithmetic: exact
    np.testing.assert_array_equal(lin.weight.detach().numpy(), np.arange(6).reshape(2, 3))
    np.testing.assert_array_equal(lin.bias.detach().numpy(), [6, 7])
    assert all(p.is_leaf and p.requires_grad and isinstance(p, nn.Parameter) for p in params)
    np.testing.assert_array_equal(parameters_to_vector(params).detach().numpy(), new.numpy())


def test_vector_to_parameters_without_autograd():
    p = nn.Parameter(tg.zeros(2, 2))
    base = tg.arange(4, dtype=tg.float32, requires_grad=True)
    vector_to_parameters(base * 2, [p])
    assert p.grad_fn is None and p.is_leaf and p.requires_grad
    np.testing.assert_array_equal(p.detach().numpy(), [[0, 2], [4, 6]])     # small integers
    p.sum().backward()
    assert base.grad is None        # the parameter is not connected to the vector's graph
    np.testing.assert_array_equal(p.grad.numpy(), np.ones((2, 2)))


def test_vector_to_parameters_shares_storage_like_torch():
    torch = _torch()
    vec_tg, vec_th = tg.zeros(6), torch.zeros(6)
    p_tg, p_th = [nn.Parameter(tg.ones(2, 3))], [torch.nn.Parameter(torch.ones(2, 3))]
    vector_to_parameters(vec_tg, p_tg)
    torch.nn.utils.vector_to_parameters(vec_th, p_th)
    vec_tg.add_(5.0)
    vec_th.add_(5.0)
    # 0 + 5 in shared storage, no rounding: exact
    np.testing.assert_array_equal(p_tg[0].detach().numpy(), p_th[0].detach().numpy())


def test_vector_to_parameters_rejects_non_tensor():
    torch = _torch()
    for bad in ([1.0, 2.0], np.zeros(2)):
        with pytest.raises(TypeError) as tg_err:
            vector_to_parameters(bad, [nn.Parameter(tg.zeros(2))])
        with pytest.raises(TypeError) as th_err:
            torch.nn.utils.vector_to_parameters(bad, [torch.nn.Parameter(torch.zeros(2))])
        assert str(tg_err.value) == str(th_err.value)
