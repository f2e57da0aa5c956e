"""``optim.Muon`` against PyTorch 2.13's, step for step, and the names
``optim.lr_scheduler`` re-exports (``Optimizer``, ``bisect_right``)."""
import numpy as np
import pytest

import tracegrad

torch = pytest.importorskip("torch")
if not hasattr(torch.optim, "Muon"):
    pytest.skip("this PyTorch has no optim.Muon", allow_module_level=True)

LR = 0.02


def _train(lib, steps=3, **kw):
    """A two-layer tanh network's weights after ``steps`` Muon steps from fixed values."""
    rng = np.random.default_rng(0)
    w1 = lib.tensor(rng.standard_normal((8, 5)).astype(np.float32), requires_grad=True)
    w2 = lib.tensor(rng.standard_normal((3, 8)).astype(np.float32), requires_grad=True)
    x = lib.tensor(rng.standard_normal((16, 5)).astype(np.float32))
    opt = lib.optim.Muon([w1, w2], lr=LR, **kw)
    for _ in range(steps):
        opt.zero_grad()
        loss = ((lib.tanh(x @ w1.T) @ w2.T) ** 2).mean()
        loss.backward()
        opt.step()
    return [w.detach().numpy() for w in (w1, w2)], opt


@pytest.mark.parametrize("kw", [
    {}, {"nesterov": False, "weight_decay": 0.0}, {"adjust_lr_fn": "match_rms_adamw"},
    {"adjust_lr_fn": "original", "momentum": 0.5, "ns_steps": 3},
    {"ns_coefficients": (2.0, -1.5, 0.5)},
])
def test_muon_matches_torch(kw):
    steps = 3
    ours, opt = _train(tracegrad, steps, **kw)
    theirs, ref = _train(torch, steps, **kw)
    for a, b, shape in zip(ours, theirs, ((8, 5), (3, 8))):
        # The orthogonalisation runs in bfloat16 in both; where float32 accumulation in
        # another order crosses a bfloat16 rounding boundary an entry of the update (below 2)
        # moves by one bfloat16 ulp (2**-7), times the adjusted learning rate, per step.
        ratio = 0.2 * max(shape) ** 0.5 if kw.get("adjust_lr_fn") == "match_rms_adamw" \
            else max(1, shape[0] / shape[1]) ** 0.5
        np.testing.assert_allclose(a, b, rtol=0, atol=steps * LR * ratio * 2 ** -7)
    sd, ref_sd = opt.state_dict(), ref.state_dict()
    assert sorted(sd["state"][0]) == sorted(ref_sd["state"][0]) == ["momentum_buffer"]
    assert sd["param_groups"][0].keys() == ref_sd["param_groups"][0].keys()


def test_newton_schulz_matches_torch_on_a_tall_matrix():
    from torch.optim._muon import _zeropower_via_newtonschulz as theirs

    from tracegrad.optim.muon import _zeropower_via_newtonschulz as ours
    g = np.random.default_rng(1).standard_normal((7, 4)).astype(np.float32)
    args = ((3.4445, -4.7750, 2.0315), 5, 1e-7)
    a = ours(tracegrad.tensor(g), *args).numpy()
    b = theirs(torch.tensor(g), *args).float().numpy()
    assert a.shape == b.shape == (7, 4)
    np.testing.assert_allclose(a, b, rtol=0, atol=2 ** -7)   # one bfloat16 ulp below 2
    assert np.mean(a == b) > 0.9        # bfloat16 values, nearly all the same ones


def test_bf16_rounding_is_to_nearest():
    from tracegrad.optim.muon import _round_bf16
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32) * 100
    ours = _round_bf16(tracegrad.tensor(x)).numpy()
    theirs = torch.tensor(x).bfloat16().float().numpy()
    np.testing.assert_array_equal(ours, theirs)     # no ties among random float32 values


def test_bf16_rounding_survives_compilation(backend):
    """The split must not be simplified away (c - (c - x) is x under reassociation) or
    contracted into a fused multiply-add by a compiled tier."""
    from tracegrad.optim.muon import _round_bf16
    x = np.random.default_rng(3).standard_normal(4096).astype(np.float32) * 100
    got = tracegrad.compile(lambda t: _round_bf16(t * 1.0))(tracegrad.tensor(x)).numpy()
    np.testing.assert_array_equal(got, torch.tensor(x).bfloat16().float().numpy())


def test_muon_compiled_step_equals_eager(backend):
    """A compiled training step with a scheduler, as the eager one, step by step."""
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal((6, 4)).astype(np.float32)
    x = tracegrad.tensor(rng.standard_normal((8, 4)).astype(np.float32))
    results = []
    for compiled in (False, True):
        w = tracegrad.tensor(w0.copy(), requires_grad=True)
        opt = tracegrad.optim.Muon([w], lr=0.05)
        sched = tracegrad.optim.lr_scheduler.StepLR(opt, 1, 0.5)

        def step():
            opt.zero_grad()
            (tracegrad.tanh(x @ w.T) ** 2).mean().backward()
            opt.step()
        run = tracegrad.compile(step) if compiled else step
        for _ in range(4):
            run()
            sched.step()
        results.append(w.detach().numpy())
    # the final float32 update may be fused (one rounding less) in compiled code: one ulp of
    # an entry below 4 (2**-21) per step, four steps
    assert np.abs(w0).max() < 3
    np.testing.assert_allclose(results[1], results[0], rtol=0, atol=4 * 2 ** -21)


@pytest.mark.parametrize("kw, message", [
    ({"lr": -1.0}, "Learning rate should be >= 0 but is: -1.0"),
    ({"momentum": -0.1}, "momentum should be >= 0 but is: -0.1"),
    ({"weight_decay": -0.1}, "weight decay should be >= 0 but is: -0.1"),
    ({"adjust_lr_fn": "cubic"}, "Adjust learning rate function cubic is not supported"),
])
def test_muon_errors_as_torch(kw, message):
    for lib in (tracegrad, torch):
        with pytest.raises(ValueError, match=message):
            lib.optim.Muon([lib.zeros(2, 2, requires_grad=True)], **kw)


def test_muon_rejects_non_matrices_and_long_iterations():
    for lib in (tracegrad, torch):
        with pytest.raises(ValueError, match=r"Muon only supports 2D parameters whereas we "
                                             r"found a parameter with size: .*\[3\]"):
            lib.optim.Muon([lib.zeros(3, requires_grad=True)])
        w = lib.ones(2, 2, requires_grad=True)
        opt = lib.optim.Muon([w], ns_steps=100)
        w.sum().backward()
        with pytest.raises(ValueError, match="Number of steps must be less than 100"):
            opt.step()


def test_lr_scheduler_reexports():
    from bisect import bisect_right
    assert tracegrad.optim.lr_scheduler.Optimizer is tracegrad.optim.Optimizer
    assert tracegrad.optim.lr_scheduler.bisect_right is bisect_right
    assert tracegrad.optim.Muon.__module__ == "tracegrad.optim"     # torch.optim.Muon's too


def _swap_run(lib):
    """A live Adam, then a step inside ``swap_in_optimizer_params_and_state`` on copies."""
    rng = np.random.default_rng(3)
    w = lib.tensor(rng.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    opt = lib.optim.Adam([w], lr=0.1)
    (w ** 2).sum().backward()
    opt.step()
    live = w.detach().clone()
    sd = opt.state_dict()
    copy = {"w": w.detach().clone().requires_grad_()}
    osd = {"state": {0: {k: v.clone() for k, v in sd["state"][0].items()}},
           "param_groups": [dict(sd["param_groups"][0], lr=0.5)]}
    (copy["w"] ** 3).sum().backward()
    with lib.optim.swap_in_optimizer_params_and_state(opt, copy, osd):
        assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0]["params"][0] is copy["w"]
        opt.step()
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[0]["params"][0] is w
    assert (w.detach() == live).all()           # the live parameter did not move
    return copy["w"].detach().numpy(), osd["state"][0]["exp_avg"].numpy(), \
        float(osd["state"][0]["step"])


def test_swap_in_optimizer_params_and_state_as_torch():
    ours, theirs = _swap_run(tracegrad), _swap_run(torch)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-6)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6)
    assert ours[2] == theirs[2] == 2.0          # the step count moved in the caller's state


def test_swap_in_optimizer_params_and_state_errors_as_torch():
    for lib in (tracegrad, torch):
        w = lib.zeros(2, requires_grad=True)
        opt = lib.optim.Adam([w])
        with pytest.raises(RuntimeError, match="requires initialized optimizer state"):
            with lib.optim.swap_in_optimizer_params_and_state(opt, {"w": w}, {}):
                pass
        w.sum().backward()
        opt.step()
        with pytest.raises(RuntimeError, match="different number of parameter groups"):
            with lib.optim.swap_in_optimizer_params_and_state(
                    opt, {"w": w}, {"state": {}, "param_groups": []}):
                pass
