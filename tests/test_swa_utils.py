"""``optim.swa_utils`` against PyTorch's from the same weights: the running mean, the EMA
(both the per-tensor and the in-place forms), buffers copied or averaged, ``update_bn``
and the ``SWALR`` schedule; and ``tracegrad.random.fork_rng``."""
import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")


def _pair():
    """The same small net in both libraries (BatchNorm gives it buffers)."""
    nets = []
    for lib in (tg, torch):
        nets.append(lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.BatchNorm1d(4),
                                      lib.nn.Linear(4, 2)))
    nets[0].load_state_dict({k: tg.tensor(v.numpy()) for k, v in nets[1].state_dict().items()})
    return nets


@pytest.mark.parametrize("kind", ["swa", "ema avg_fn", "ema multi", "buffers"])
def test_averaged_model_matches_torch(kind):
    from torch.optim import swa_utils as tsu
    from tracegrad.optim import swa_utils as su
    nets = _pair()
    avgs = []
    for lib, sw, net in ((tg, su, nets[0]), (torch, tsu, nets[1])):
        kw = {"ema avg_fn": {"avg_fn": sw.get_ema_avg_fn(0.9)},
              "ema multi": {"multi_avg_fn": sw.get_ema_multi_avg_fn(0.9)},
              "buffers": {"use_buffers": True}}.get(kind, {})
        avgs.append(sw.AveragedModel(net, **kw))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    for step in range(4):
        for lib, net, avg in ((tg, nets[0], avgs[0]), (torch, nets[1], avgs[1])):
            net.train()
            with lib.no_grad():
                for p in net.parameters():
                    p.mul_(0.5).add_(float(step))
                net(lib.tensor(x))          # moves the BN statistics
            avg.update_parameters(net)
    for (k, a), (_, b) in zip(avgs[0].state_dict().items(), avgs[1].state_dict().items()):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert int(avgs[0].n_averaged) == 4
    avgs[0].eval()
    avgs[1].eval()
    np.testing.assert_allclose(avgs[0](tg.tensor(x)).detach().numpy(),
                               avgs[1](torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_update_bn_and_swalr_match_torch():
    from torch.optim import swa_utils as tsu
    from tracegrad.optim import swa_utils as su
    nets = _pair()
    x = np.random.default_rng(1).standard_normal((8, 3)).astype(np.float32)
    for lib, sw, net in ((tg, su, nets[0]), (torch, tsu, nets[1])):
        net.eval()
        sw.update_bn([(lib.tensor(x[:4]), 0), (lib.tensor(x[4:]), 1)], net)
        assert not net.training and net[1].momentum == 0.1
    np.testing.assert_allclose(nets[0][1].running_var.numpy(), nets[1][1].running_var.numpy(),
                               rtol=1e-5)
    for strategy, epochs in (("cos", 3), ("linear", 2), ("cos", 0)):
        lrs = []
        for lib, sw, net in ((tg, su, nets[0]), (torch, tsu, nets[1])):
            opt = lib.optim.SGD(net.parameters(), lr=1.0)
            sched = sw.SWALR(opt, swa_lr=0.05, anneal_epochs=epochs, anneal_strategy=strategy)
            got = []
            for _ in range(5):
                opt.step()
                sched.step()
                got.append(sched.get_last_lr()[0])
            lrs.append(got)
        np.testing.assert_allclose(lrs[0], lrs[1], rtol=1e-12)
    with pytest.raises(ValueError, match="anneal_strategy must be one of"):
        su.SWALR(tg.optim.SGD(nets[0].parameters(), lr=1.0), 0.1, anneal_strategy="exp")
    with pytest.raises(ValueError, match=r"Invalid decay value 1.5"):
        su.get_ema_multi_avg_fn(1.5)


def test_fork_rng_gives_the_generator_back():
    tg.cuda.manual_seed(0)      # a cuda generator made (without a GPU it is never drawn from)
    tg.manual_seed(0)
    with tg.random.fork_rng():
        inside = tg.rand(3)
    after = tg.rand(3)
    np.testing.assert_array_equal(inside.numpy(), after.numpy())
    with tg.random.fork_rng(enabled=False):
        tg.rand(3)
    assert not np.array_equal(tg.rand(3).numpy(), after.numpy())
    state = tg.random.get_rng_state()
    a = tg.rand(2)
    tg.random.set_rng_state(state)
    np.testing.assert_array_equal(tg.rand(2).numpy(), a.numpy())


def test_is_contiguous_takes_a_memory_format_as_torch():
    for lib in (tg, torch):
        x = lib.ones(2, 3, 4, 5)
        assert x.is_contiguous() and x.is_contiguous(memory_format=lib.contiguous_format)
        assert not x.is_contiguous(memory_format=lib.channels_last)
        assert lib.ones(2, 3, 1, 1).is_contiguous(memory_format=lib.channels_last)
        assert lib.ones(2, 1, 4, 5).is_contiguous(memory_format=lib.channels_last)
        assert not lib.ones(2, 3).is_contiguous(memory_format=lib.channels_last)
        assert not lib.ones(2, 3, 4, 5, 6).is_contiguous(memory_format=lib.channels_last_3d)
        assert x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2).is_contiguous(
            memory_format=lib.channels_last)
