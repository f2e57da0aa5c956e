"""LBFGS against PyTorch's, step by step, with and without the strong-Wolfe line search.

Both libraries start from the same parameters and take the same number of
``step(closure)`` calls on a Rosenbrock function and on a small least-squares
problem; after each step the returned loss, the parameters and the state's
``func_evals``/``n_iter`` must agree.

PyTorch's ``add_(..., alpha=t)`` rounds once (a fused multiply-add) where ours
rounds twice, and its dot products sum in an order that depends on the CPU's
kernels, so the runs part by an ulp or so at the first update. Least squares
forgets that; Rosenbrock amplifies it by up to about twofold per iteration once
in the curved valley (measured on AVX-512, AVX2 and the default kernels: at most
0.45 ulp times 2**n_iter), so the tolerance after ``n_iter`` iterations is
4 ulps times 2**n_iter (:func:`tolerances.amplified`), taken norm-wise since the
update mixes the parameters. Its step-by-step runs take ``max_iter=5``
iterations per step (30 in all: 1e-6 in float64); the default ``max_iter=20``
is compared where the line search has converged.
"""
import copy

import numpy as np
import pytest

import tracegrad as tg
from tracegrad.optim.lbfgs import LBFGS, _cubic_interpolate

from tolerances import amplified, assert_close_normwise, ulps

STEPS = 6
MAX_ITER = {"rosenbrock": 5, "least_squares": 20}
# The loss itself is up to 32 operations deep (least squares: a 4-term matmul, a square, a sum
# of 24), evaluated on parameters that have parted by the amplified ulps.
LOSS_OPS = 32
# Rosenbrock's minimum (1, 1, 1): the smallest eigenvalue of the Hessian there.
HESSIAN_MIN_EIGENVALUE = 0.475


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)    # tiny tensors: threads only add contention on a busy machine
    return torch


def rosenbrock(params):
    (x,) = params
    return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(2))


def least_squares_data(dtype):
    rng = np.random.default_rng(0)
    return rng.standard_normal((8, 4)).astype(dtype), rng.standard_normal((8, 3)).astype(dtype)


def least_squares(lib, dtype):
    a, b = (lib.tensor(v) for v in least_squares_data(dtype))

    def loss(params):
        w, bias, _unused = params     # a parameter without a gradient counts as zeros
        return ((a @ w + bias - b) ** 2).sum() / 8
    return loss


def problem(name, lib, dtype):
    """Initial parameters and the loss, as a function of the parameter list."""
    if name == "rosenbrock":
        return [np.array([-1.5, 2.0, 0.5], dtype=dtype)], rosenbrock
    rng = np.random.default_rng(1)
    init = [rng.standard_normal((4, 3)).astype(dtype), np.zeros(3, dtype),
            np.ones((2,), dtype)]
    return init, least_squares(lib, dtype)


def run(lib, cls, name, dtype, kw, steps=STEPS):
    """Per step: the returned loss, the parameters, and the state's counters."""
    init, loss_fn = problem(name, lib, dtype)
    params = [lib.tensor(v, requires_grad=True) for v in init]
    opt = cls(params, **kw)

    def closure():
        opt.zero_grad()
        loss = loss_fn(params)
        loss.backward()
        return loss

    trace = []
    for _ in range(steps):
        loss = float(opt.step(closure).detach())
        state = opt.state[params[0]]
        trace.append((loss, [p.detach().numpy().copy() for p in params],
                      state["func_evals"], state["n_iter"]))
    return trace


def assert_same_trace(ours, theirs, dtype):
    """The loss returned by step i is evaluated after the previous steps' iterations, the
    parameters after this step's: each within the amplified ulps of its iteration count."""
    n_before = 0
    for i, (o, t) in enumerate(zip(ours, theirs, strict=True)):
        assert o[2:] == t[2:], f"func_evals/n_iter, step {i}"
        np.testing.assert_allclose(o[0], t[0], rtol=amplified(dtype, n_before, n_ops=LOSS_OPS),
                                   err_msg=f"loss, step {i}")
        for po, pt in zip(o[1], t[1], strict=True):
            assert po.dtype == pt.dtype
            assert_close_normwise(po, pt, amplified(dtype, t[3]), err_msg=f"params, step {i}")
        n_before = t[3]


@pytest.mark.parametrize("history_size", [3, 100])
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("name", ["rosenbrock", "least_squares"])
def test_matches_torch(name, line_search_fn, history_size):
    torch = _torch()
    kw = dict(max_iter=MAX_ITER[name], history_size=history_size,
              line_search_fn=line_search_fn)
    assert_same_trace(run(tg, LBFGS, name, "float64", kw),
                      run(torch, torch.optim.LBFGS, name, "float64", kw), "float64")


@pytest.mark.parametrize("history_size", [3, 100])
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("name", ["rosenbrock", "least_squares"])
def test_float32_close_to_torch(name, line_search_fn, history_size):
    """float32 starts an ulp apart (the fused multiply-add; least squares' matmul sums in
    another order) and the iteration amplifies it, Rosenbrock to 1e-3 within 12 iterations:
    3 steps of 3 iterations (6 counted: the last evaluation is skipped) stay within 3e-5."""
    torch = _torch()
    kw = dict(max_iter=3, history_size=history_size, line_search_fn=line_search_fn)
    assert_same_trace(run(tg, LBFGS, name, "float32", kw, steps=3),
                      run(torch, torch.optim.LBFGS, name, "float32", kw, steps=3), "float32")


def test_the_bound_still_catches_a_step_off_by_a_millionth():
    """The amplified ulps stay far below a real error: a learning rate off by one part in
    a million (where a wrong formula is off by its own size) fails at the first step."""
    torch = _torch()
    kw = dict(max_iter=MAX_ITER["rosenbrock"], history_size=3)
    theirs = run(torch, torch.optim.LBFGS, "rosenbrock", "float64", kw)
    ours = run(tg, LBFGS, "rosenbrock", "float64", dict(kw, lr=1 + 1e-6))
    with pytest.raises(AssertionError, match="params, step 0"):
        assert_same_trace(ours, theirs, "float64")


@pytest.mark.parametrize("history_size", [3, 100])
def test_rosenbrock_default_max_iter_converges_as_torch(history_size):
    """Default ``max_iter=20`` with the line search: counters at every step, the losses
    while the amplified ulps still bound them, and the converged parameters, match (the
    path between wanders by the amplified ulp)."""
    torch = _torch()
    kw = dict(history_size=history_size, line_search_fn="strong_wolfe")
    ours = run(tg, LBFGS, "rosenbrock", "float64", kw, steps=4)
    theirs = run(torch, torch.optim.LBFGS, "rosenbrock", "float64", kw, steps=4)
    n_before = 0
    for i, (o, t) in enumerate(zip(ours, theirs)):
        assert o[2:] == t[2:], f"func_evals/n_iter, step {i}"
        if amplified("float64", n_before) < 1e-6:    # past ~30 iterations it bounds nothing
            np.testing.assert_allclose(o[0], t[0],
                                       rtol=amplified("float64", n_before, n_ops=LOSS_OPS),
                                       err_msg=f"loss, step {i}")
        n_before = t[3]
    # The runs stop once the loss changes by less than tolerance_change=1e-9, so the loss
    # left above the minimum is about that, and on the quadratic bowl there
    # (f - f* ~ lambda_min |x - x*|**2 / 2 along the flattest direction) x is within
    # sqrt(2e-9 / lambda_min) = 6.5e-5 of (1, 1, 1); both runs, so of each other too.
    bound = np.sqrt(2 * 1e-9 / HESSIAN_MIN_EIGENVALUE)
    for lib, trace in (("tracegrad", ours), ("torch", theirs)):
        np.testing.assert_allclose(trace[-1][1][0], 1.0, rtol=0, atol=bound, err_msg=lib)
        assert trace[-1][0] < 1e-9, lib


def test_small_max_iter_and_state_keys():
    """``max_iter=3``: the fixed-step path skips its last evaluation; the state has PyTorch's
    keys and history lengths."""
    torch = _torch()
    kw = dict(max_iter=3, history_size=2)
    ours = run(tg, LBFGS, "rosenbrock", "float64", kw)
    theirs = run(torch, torch.optim.LBFGS, "rosenbrock", "float64", kw)
    for i, (o, t) in enumerate(zip(ours, theirs)):
        assert o[2:] == t[2:]
        assert_close_normwise(o[1][0], t[1][0], amplified("float64", t[3]), err_msg=f"step {i}")

    x = tg.tensor([-1.5, 2.0, 0.5], dtype=tg.float64, requires_grad=True)
    xt = torch.tensor([-1.5, 2.0, 0.5], dtype=torch.float64, requires_grad=True)
    states = []
    for lib, cls, p in [(tg, LBFGS, x), (torch, torch.optim.LBFGS, xt)]:
        opt = cls([p], **kw)

        def closure(opt=opt, p=p):
            opt.zero_grad()
            loss = rosenbrock([p])
            loss.backward()
            return loss
        for _ in range(3):
            opt.step(closure)
        states.append(opt.state_dict()["state"][0])
    assert sorted(states[0]) == sorted(states[1])
    for key in ("old_dirs", "old_stps", "ro"):
        assert len(states[0][key]) == len(states[1][key]) == 2


def test_cubic_interpolate_matches_torch():
    torch = _torch()
    from torch.optim.lbfgs import _cubic_interpolate as theirs
    cases = [(0.0, 1.0, -2.0, 1.0, 0.5, 1.0, None),        # interior minimum
             (0.0, 1.0, -2.0, 1.0, 0.5, -1.0, (1.01, 10.0)),  # extrapolation, clamped
             (1.0, 0.5, 1.0, 0.0, 1.0, -2.0, None),         # x1 > x2
             (0.0, 0.0, 2.0, 1.0, 4 / 3, 2.0, None)]        # no real minimum: midpoint
    for x1, f1, g1, x2, f2, g2, bounds in cases:
        args_t = [torch.tensor(v, dtype=torch.float64) for v in (f1, g1)]
        args_g = [tg.tensor(v, dtype=tg.float64) for v in (f1, g1)]
        want = theirs(x1, *args_t, x2, f2, g2, bounds)
        got = _cubic_interpolate(x1, *args_g, x2, f2, g2, bounds)
        # a closed form of about 20 operations (a square root among them)
        np.testing.assert_allclose(float(got), float(want), rtol=ulps("float64", 20))
    assert _cubic_interpolate(0.0, 0.0, 2.0, 1.0, 4 / 3, 2.0) == 0.5


def test_state_dict_round_trip_resumes_as_uninterrupted():
    """A second optimizer loading the first's state dict after 2 steps continues exactly as
    the first does (history, ``d``, ``t``, ``H_diag`` and the counters all carried)."""
    def fresh():
        x = tg.tensor([-1.5, 2.0, 0.5], dtype=tg.float64, requires_grad=True)
        opt = LBFGS([x], max_iter=4, history_size=3, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = rosenbrock([x])
            loss.backward()
            return loss
        return x, opt, closure

    x, opt, closure = fresh()
    for _ in range(2):
        opt.step(closure)
    y, opt2, closure2 = fresh()
    with tg.no_grad():
        y.copy_(x)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    for _ in range(2):
        opt.step(closure)
        opt2.step(closure2)
    # Bit for bit: the same code on the same state and inputs, in one process, performs
    # the same roundings; any difference is state that the dict failed to carry.
    np.testing.assert_array_equal(x.detach().numpy(), y.detach().numpy())
    for key in ("func_evals", "n_iter"):
        assert opt2.state[y][key] == opt.state[x][key]


def test_errors():
    a = tg.zeros(2, requires_grad=True)
    b = tg.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        LBFGS([{"params": [a]}, {"params": [b]}])
    with pytest.raises(ValueError, match="Invalid learning rate: -1"):
        LBFGS([a], lr=-1)
    with pytest.raises(ValueError, match="Tensor lr must be 1-element"):
        LBFGS([a], lr=tg.tensor([1.0, 2.0]))
    opt = LBFGS([a], line_search_fn="backtracking")

    def closure():
        opt.zero_grad()
        loss = ((a - 1) ** 2).sum()
        loss.backward()
        return loss
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        opt.step(closure)
    assert LBFGS([a], max_iter=8).param_groups[0]["max_eval"] == 10


def test_closure_runs_with_grad_and_converged_step_returns_first_loss():
    a = tg.tensor([1.0, 1.0], requires_grad=True)
    opt = LBFGS([a])
    seen = []

    def closure():
        seen.append(tg.is_grad_enabled())
        opt.zero_grad()
        loss = ((a - 1) ** 2).sum()
        loss.backward()
        return loss
    loss = opt.step(closure)
    assert float(loss) == 0.0 and seen == [True]    # gradient already zero: one evaluation
    assert opt.state[a]["func_evals"] == 1 and opt.state[a]["n_iter"] == 0
