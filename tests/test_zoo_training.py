"""The model zoo of benchmarks/models.py at small sizes: training with the whole step
compiled (``tracegrad.compile(train_step)``: forward, backward, optimizer step and
zero_grad in one graph) follows tracegrad eager training step for step, from the same
weights and data, and the compiled step really ran compiled (no eager fallback)."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import tracegrad as tg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import zoo  # noqa: E402 - benchmarks/ is not a package

STEPS = 4


def train(name, how, weights, device="cpu"):
    step, compiled = zoo.program(tg, name, zoo.config(name, "small"), how, weights,
                                 n_batches=STEPS, device=device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = [step(i).item() for i in range(STEPS)]
    fallbacks = [str(w.message) for w in caught if "tracegrad.compile" in str(w.message)]
    params = {f"{k}.{n}": p.detach().cpu().numpy().copy() for k, m in step.models.items()
              for n, p in m.named_parameters()}
    return np.array(losses), params, compiled, fallbacks


@pytest.mark.parametrize("name", zoo.MODELS)
def test_whole_step_training_matches_eager(name, tmp_path):
    weights = tmp_path / "w.pt"
    zoo.save_weights(tg, name, zoo.config(name, "small"), weights)
    eager_losses, eager_params, _, _ = train(name, "eager", weights)
    losses, params, compiled, fallbacks = train(name, "step", weights)
    assert fallbacks == [], fallbacks
    assert len(compiled) == 1 and not compiled[0]._eager
    assert compiled[0].stats["compiles"] >= 1 and compiled[0].stats["cache_hits"] >= 1
    # each step starts from the parameters the previous one wrote: a step that dropped an
    # update or returned a stale loss would show here
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    assert len(set(eager_losses.tolist())) > 1
    for key, want in eager_params.items():
        np.testing.assert_allclose(params[key], want, rtol=1e-4, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("name", ["gpt_small", "lstm_lm", "dcgan"])
@pytest.mark.parametrize("how", ["model", "step"])
def test_training_on_a_cuda_device_matches_the_cpu(name, how, tmp_path, monkeypatch):
    """On the CuPy double (CUDA kernels on the emulation): the compiled model and the whole
    compiled step, CPU scalar tensors such as Adam's step count included, train as eager on
    the CPU does, without retracing. On the H200 the whole step failed here first (a CPU step
    count handed to CuPy)."""
    import fake_cupy
    from cuda_emulation import emulator
    if emulator.CXX is None:
        pytest.skip("g++ (C++20) is not installed")
    weights = tmp_path / "w.pt"
    zoo.save_weights(tg, name, zoo.config(name, "small"), weights)
    eager_losses, eager_params, _, _ = train(name, "eager", weights)
    fake_cupy.install(monkeypatch)
    losses, params, compiled, fallbacks = train(name, how, weights, device="cuda")
    assert fallbacks == [], fallbacks
    assert all(c.stats["compiles"] >= 1 and c.stats["fallbacks"] == 0 for c in compiled)
    if how == "step":   # no step retraced: the CUDA tier once moved the learning rate's host
        # tensor to the GPU, its guard failed at every call, and a step on the H200 took 4 s
        assert compiled[0].stats["retrace_reasons"] == []
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5)
    for key, want in eager_params.items():
        np.testing.assert_allclose(params[key], want, rtol=1e-4, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("name", ["gpt_small", "lstm_lm", "dcgan", "vae", "resnet18"])
def test_a_whole_cuda_step_records_without_host_transfers(name, tmp_path, monkeypatch):
    """A whole compiled step on the GPU is replayed as a CUDA graph from its third call
    (runtime/cuda_graphs.py), and recording refuses any host transfer. On the CuPy double,
    which refuses them as CuPy does while a stream records (and has no graph to replay),
    each model's step records to the end: on the H200 a constant written as a literal (a
    host-to-device copy per call), embedding's range check (a host read), SGD's momentum
    checked inside the step (lstm_lm, resnet18) and max pooling's table of tap offsets (a
    copy over, resnet18) stopped it."""
    import fake_cupy
    from cuda_emulation import emulator
    if emulator.CXX is None:
        pytest.skip("g++ (C++20) is not installed")
    weights = tmp_path / "w.pt"
    zoo.save_weights(tg, name, zoo.config(name, "small"), weights)
    fake_cupy.install(monkeypatch)
    monkeypatch.setattr(fake_cupy.STATE, "record_eagerly", True)
    _, _, compiled, _ = train(name, "step", weights, device="cuda")
    variants = compiled[0]._variants
    offs = [v.forward.off for v in variants]
    assert offs == ["recording failed (RuntimeError: the CuPy double records no graph to "
                    "replay)"] * len(offs)


def test_weights_round_trip_through_torch_save():
    """The benchmark's weight file: saved by PyTorch, loaded by tracegrad, the same values."""
    torch = pytest.importorskip("torch")
    import tempfile
    cfg = zoo.config("gpt_small", "small")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "w.pt")
        zoo.save_weights(torch, "gpt_small", cfg, path)
        ref = torch.load(path)["model"]
        step, _ = zoo.program(tg, "gpt_small", cfg, "eager", path)
    got = step.models["model"].state_dict()
    assert set(got) == set(ref)
    for k, v in ref.items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy(), err_msg=k)
