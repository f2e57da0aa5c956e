"""``nn.utils.weight_norm`` and ``nn.utils.spectral_norm`` against PyTorch's from the same
weights (and, for spectral norm, the same power-method vectors): forwards in train and
eval mode, gradients, the buffers the power method refines, removal, and a compiled model
against eager."""
import warnings

import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")


def _copy_into(ours, theirs):
    """Every parameter and buffer of ``theirs`` into ``ours``, by state-dict key."""
    state = {k: tg.tensor(v.detach().numpy().copy()) for k, v in theirs.state_dict().items()}
    ours.load_state_dict(state)


def _make(lib, kind):
    return {"linear": lambda: lib.nn.Linear(5, 4),
            "conv": lambda: lib.nn.Conv2d(2, 3, 3),
            "convT": lambda: lib.nn.ConvTranspose2d(3, 2, 3)}[kind]()


def _input(kind):
    rng = np.random.default_rng(0)
    shape = {"linear": (6, 5), "conv": (2, 2, 5, 5), "convT": (2, 3, 4, 4)}[kind]
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("kind", ["linear", "conv"])
@pytest.mark.parametrize("dim", [0, None, 1])
def test_weight_norm_matches_torch(kind, dim):
    mods = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        for lib in (torch, tg):
            mods.append(lib.nn.utils.weight_norm(_make(lib, kind), dim=dim))
    _copy_into(mods[1], mods[0])
    assert list(mods[1].state_dict()) == list(mods[0].state_dict())
    x = _input(kind)
    got = []
    for lib, m in zip((torch, tg), mods):
        y = m(lib.tensor(x))
        (y * y).sum().backward()
        got.append([y.detach().numpy(), m.weight_g.grad.numpy(), m.weight_v.grad.numpy()])
    for a, b in zip(*got):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    for lib, m in zip((torch, tg), mods):
        lib.nn.utils.remove_weight_norm(m)
    assert list(mods[1].state_dict()) == list(mods[0].state_dict())
    np.testing.assert_allclose(mods[1].weight.detach().numpy(),
                               mods[0].weight.detach().numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
        tg.nn.utils.remove_weight_norm(mods[1])


@pytest.mark.parametrize("kind", ["linear", "conv", "convT"])
def test_spectral_norm_matches_torch_through_training(kind):
    mods = [lib.nn.utils.spectral_norm(_make(lib, kind)) for lib in (torch, tg)]
    _copy_into(mods[1], mods[0])
    assert list(mods[1].state_dict()) == list(mods[0].state_dict())
    opts = [torch.optim.SGD(mods[0].parameters(), lr=0.1),
            tg.optim.SGD(mods[1].parameters(), lr=0.1)]
    x = _input(kind)
    for step in range(3):
        got = []
        for lib, m, opt in zip((torch, tg), mods, opts):
            opt.zero_grad()
            y = m(lib.tensor(x))
            (y * y).mean().backward()
            opt.step()
            got.append([y.detach().numpy(), m.weight_orig.grad.numpy(),
                        m.weight_u.numpy().copy(), m.weight_v.numpy().copy()])
        for a, b in zip(*got):
            np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-5)
    for lib, m in zip((torch, tg), mods):        # eval: the vectors stay
        m.eval()
    u_before = mods[1].weight_u.numpy().copy()
    np.testing.assert_allclose(mods[1](tg.tensor(x)).detach().numpy(),
                               mods[0](torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(mods[1].weight_u.numpy(), u_before)
    for lib, m in zip((torch, tg), mods):
        lib.nn.utils.remove_spectral_norm(m)
    np.testing.assert_allclose(mods[1].weight.detach().numpy(),
                               mods[0].weight.detach().numpy(), rtol=1e-4, atol=1e-6)
    with pytest.raises(RuntimeError, match="Cannot register two spectral_norm hooks"):
        tg.nn.utils.spectral_norm(tg.nn.utils.spectral_norm(tg.nn.Linear(2, 2)))


def test_a_compiled_spectral_norm_discriminator_follows_eager():
    # the power method's in-place buffer updates and the train/eval switch, compiled
    def net(lib):
        sn = lib.nn.utils.spectral_norm
        return lib.nn.Sequential(sn(lib.nn.Conv2d(2, 4, 3)), lib.nn.LeakyReLU(0.2),
                                 lib.nn.Flatten(), sn(lib.nn.Linear(36, 1)))
    eager, model = net(tg), net(tg)
    model.load_state_dict(eager.state_dict())
    compiled = tg.compile(model)
    x = tg.tensor(_input("conv"))
    for mode in ("train", "train", "eval", "train"):
        for m in (eager, model):
            getattr(m, mode)()
        want, got = eager(x), compiled(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
        for (k, a), (_, b) in zip(eager.state_dict().items(), model.state_dict().items()):
            np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert compiled.stats["fallbacks"] == 0
