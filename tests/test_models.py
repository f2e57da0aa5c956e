"""tracegrad.models: torchvision's ResNets (architecture, init, state_dict) checked against a
torch reference written out here (torchvision is not a dependency), the LeNet of PyTorch's
"Neural Networks" tutorial, and compiled convnets (eager agreement, fused groups)."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.models import BasicBlock, Bottleneck, ResNet, resnet18, resnet34, resnet50

from tolerances import ulps

# float32 through a convnet, compared normwise (_rel). A sum of n products rounds, in any
# order, within about sqrt(n) ulps of its terms' scale (rounding errors add like a random
# walk: Higham and Mary's probabilistic bound; the worst case n is never approached), and
# the stages add up. ResNet-18: 20 stages (conv, batch norm, relu) forward and 20 back, the
# widest conv summing 512 x 9 = 4608 products: 40 x sqrt(4608) = 40 x 68 ulps; its running
# stats are a forward's 20 stages deep. LeNet: 5 layers, the widest summing 16 x 5 x 5 = 400
# products: 10 x 20 ulps for the gradients, 5 x 20 for the loss.
RESNET = ulps("float32", n_ops=40 * 68, factor=1)
RESNET_STATS = ulps("float32", n_ops=20 * 68, factor=1)
LENET = ulps("float32", n_ops=10 * 20, factor=1)
LENET_LOSS = ulps("float32", n_ops=5 * 20, factor=1)


def _rel(got, ref):
    """max|got - ref| / max|ref|."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


# a torchvision-equivalent ResNet in torch.nn, for the comparisons -----------------------------

def _torch_resnet(torch, block_name, layers, num_classes=1000):
    tnn = torch.nn

    def conv3x3(i, o, stride=1):
        return tnn.Conv2d(i, o, 3, stride=stride, padding=1, bias=False)

    def conv1x1(i, o, stride=1):
        return tnn.Conv2d(i, o, 1, stride=stride, bias=False)

    class Basic(tnn.Module):
        expansion = 1

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = conv3x3(inplanes, planes, stride)
            self.bn1 = tnn.BatchNorm2d(planes)
            self.relu = tnn.ReLU(inplace=True)
            self.conv2 = conv3x3(planes, planes)
            self.bn2 = tnn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            identity = x if self.downsample is None else self.downsample(x)
            return self.relu(out + identity)

    class Bottle(tnn.Module):
        expansion = 4

        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = conv1x1(inplanes, planes)
            self.bn1 = tnn.BatchNorm2d(planes)
            self.conv2 = conv3x3(planes, planes, stride)
            self.bn2 = tnn.BatchNorm2d(planes)
            self.conv3 = conv1x1(planes, planes * 4)
            self.bn3 = tnn.BatchNorm2d(planes * 4)
            self.relu = tnn.ReLU(inplace=True)
            self.downsample = downsample

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            identity = x if self.downsample is None else self.downsample(x)
            return self.relu(out + identity)

    block = {"basic": Basic, "bottleneck": Bottle}[block_name]

    class Net(tnn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = 64
            self.conv1 = tnn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
            self.bn1 = tnn.BatchNorm2d(64)
            self.relu = tnn.ReLU(inplace=True)
            self.maxpool = tnn.MaxPool2d(3, stride=2, padding=1)
            self.layer1 = self._make_layer(64, layers[0])
            self.layer2 = self._make_layer(128, layers[1], 2)
            self.layer3 = self._make_layer(256, layers[2], 2)
            self.layer4 = self._make_layer(512, layers[3], 2)
            self.avgpool = tnn.AdaptiveAvgPool2d((1, 1))
            self.fc = tnn.Linear(512 * block.expansion, num_classes)

        def _make_layer(self, planes, blocks, stride=1):
            down = None
            if stride != 1 or self.inplanes != planes * block.expansion:
                down = tnn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                      tnn.BatchNorm2d(planes * block.expansion))
            mods = [block(self.inplanes, planes, stride, down)]
            self.inplanes = planes * block.expansion
            mods += [block(self.inplanes, planes) for _ in range(1, blocks)]
            return tnn.Sequential(*mods)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return Net()


def _randomised_torch_resnet18(torch, num_classes=10):
    """A reference whose BatchNorm affine parameters and running stats are not the defaults,
    so that copying them is tested too."""
    torch.manual_seed(0)
    ref = _torch_resnet(torch, "basic", [2, 2, 2, 2], num_classes)
    with torch.no_grad():
        for m in ref.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return ref


def _as_numpy(state):
    """A torch state_dict as tracegrad tensors over its NumPy arrays (as a checkpoint saved
    with numpy arrives)."""
    return {k: tg.from_numpy(v.detach().cpu().numpy().copy()) for k, v in state.items()}


# architecture, state_dict, init -------------------------------------------------------------

@pytest.mark.parametrize("build,block,layers", [(resnet18, "basic", [2, 2, 2, 2]),
                                                (resnet34, "basic", [3, 4, 6, 3]),
                                                (resnet50, "bottleneck", [3, 4, 6, 3])])
def test_state_dict_keys_and_shapes_are_torchvisions(build, block, layers):
    torch = pytest.importorskip("torch")
    ref = {k: tuple(v.shape) for k, v in _torch_resnet(torch, block, layers).state_dict().items()}
    got = {k: tuple(v.shape) for k, v in build().state_dict().items()}
    assert list(got) == list(ref)
    assert got == ref


def test_resnet18_state_dict_names():
    keys = list(resnet18().state_dict())
    assert keys[:6] == ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
                        "bn1.running_var", "bn1.num_batches_tracked"]
    assert keys[6] == "layer1.0.conv1.weight"
    assert "layer2.0.downsample.0.weight" in keys and "layer2.0.downsample.1.running_var" in keys
    assert "layer1.0.downsample.0.weight" not in keys      # 64 -> 64 at stride 1: no shortcut conv
    assert keys[-2:] == ["fc.weight", "fc.bias"]
    assert len(keys) == 122
    n_params = sum(p.numel() for p in resnet18().parameters())
    assert n_params == 11689512         # torchvision's ResNet-18 count


def test_num_classes_blocks_and_layers():
    m = resnet50(num_classes=7)
    assert tuple(m.fc.weight.shape) == (7, 2048)
    assert isinstance(m.layer3[0], Bottleneck) and len(m.layer3) == 6
    assert isinstance(resnet34().layer2[3], BasicBlock)
    assert isinstance(m, ResNet)
    assert sum(p.numel() for p in m.parameters()) == 23522375      # torchvision's, 7 classes
    x = tg.randn(1, 3, 32, 32)
    m.eval()
    with tg.no_grad():
        assert tuple(m(x).shape) == (1, 7)


def test_init_follows_torchvision():
    tg.manual_seed(0)
    m = resnet18()
    w = m.layer3[0].conv1.weight.detach().numpy()      # 256 x 128 x 3 x 3, fan_out 256*9
    assert abs(w.mean()) < 1e-3
    assert abs(w.std() / np.sqrt(2.0 / (256 * 9)) - 1) < 0.02
    # the batch norms' init writes constants: exact
    np.testing.assert_array_equal(m.layer2[1].bn1.weight.detach().numpy(), 1)
    np.testing.assert_array_equal(m.layer2[1].bn1.bias.detach().numpy(), 0)
    assert m.layer4[1].bn2.weight.detach().numpy().min() == 1
    z = resnet18(zero_init_residual=True)
    for layer in (z.layer1, z.layer2, z.layer3, z.layer4):
        for blk in layer:
            np.testing.assert_array_equal(blk.bn2.weight.detach().numpy(), 0)
            np.testing.assert_array_equal(blk.bn1.weight.detach().numpy(), 1)
    zb = resnet50(zero_init_residual=True)
    np.testing.assert_array_equal(zb.layer1[0].bn3.weight.detach().numpy(), 0)
    np.testing.assert_array_equal(zb.layer1[0].bn2.weight.detach().numpy(), 1)


def test_pretrained_weights_are_a_clear_error():
    with pytest.raises(ValueError, match="cannot be downloaded.*load_state_dict"):
        resnet18(weights="IMAGENET1K_V1")
    with pytest.raises(ValueError, match="resnet50"):
        resnet50(weights="DEFAULT")


def test_load_state_dict_of_numpy_arrays_from_torch():
    torch = pytest.importorskip("torch")
    ref = _randomised_torch_resnet18(torch)
    m = resnet18(num_classes=10)
    result = m.load_state_dict(_as_numpy(ref.state_dict()))
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    for k, v in ref.state_dict().items():
        got = m.state_dict()[k]
        assert got.dtype == (tg.int64 if k.endswith("num_batches_tracked") else tg.float32)
        np.testing.assert_array_equal(got.numpy(), v.numpy(), err_msg=k)     # copied: exact
    # bare ndarrays are refused as PyTorch refuses them, naming the entry
    arrays = {k: v.numpy() for k, v in _as_numpy(ref.state_dict()).items()}
    with pytest.raises(RuntimeError, match="named \"conv1.weight\", expected tracegrad.Tensor"):
        resnet18(num_classes=10).load_state_dict(arrays)
    with pytest.raises(RuntimeError, match="Missing key"):
        resnet18(num_classes=10).load_state_dict(
            {k: v for k, v in _as_numpy(ref.state_dict()).items() if k != "fc.bias"})


# ResNet-18 against torch: outputs, input and parameter gradients, running stats -----------------

@pytest.mark.parametrize("mode", ["train", "eval"])
def test_resnet18_matches_torch(mode):
    torch = pytest.importorskip("torch")
    ref = _randomised_torch_resnet18(torch)
    m = resnet18(num_classes=10)
    m.load_state_dict(_as_numpy(ref.state_dict()))
    getattr(ref, mode)()
    getattr(m, mode)()
    # training at 64x64 leaves layer4 2x2 positions: at 1x1, a training BatchNorm over two
    # values amplifies float32 rounding ~1000-fold (float64 agrees to 1e-12 there)
    size = 64 if mode == "train" else 32
    data = np.random.default_rng(1).standard_normal((2, 3, size, size), dtype=np.float32)
    xr = torch.tensor(data, requires_grad=True)
    x = tg.tensor(data, requires_grad=True)
    wr = torch.linspace(-1, 1, 20).reshape(2, 10)      # a loss that weighs each logit
    yr = ref(xr)
    y = m(x)
    assert _rel(y.detach().numpy(), yr.detach().numpy()) < RESNET
    (yr * wr).sum().backward()
    (y * tg.tensor(wr.numpy())).sum().backward()
    assert _rel(x.grad.numpy(), xr.grad.numpy()) < RESNET
    got = dict(m.named_parameters())
    for name, p in ref.named_parameters():
        assert _rel(got[name].grad.numpy(), p.grad.numpy()) < RESNET, name
    state = m.state_dict()
    for name, b in ref.named_buffers():
        if name.endswith("num_batches_tracked"):
            assert int(state[name].item()) == int(b.item()) == (1 if mode == "train" else 0)
        else:
            assert _rel(state[name].numpy(), b.numpy()) < RESNET_STATS, name


# LeNet from PyTorch's "Neural Networks" tutorial, with `import tracegrad as torch` ------------

def _lenet_module():
    import tracegrad as torch
    import tracegrad.nn as nn
    import tracegrad.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            # 1 input image channel, 6 output channels, 5x5 square convolution kernel
            self.conv1 = nn.Conv2d(1, 6, 5)
            self.conv2 = nn.Conv2d(6, 16, 5)
            # an affine operation: y = Wx + b
            self.fc1 = nn.Linear(16 * 5 * 5, 120)  # 5*5 from image dimension
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            # Max pooling over a (2, 2) window
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            # If the size is a square, you can specify with a single number
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = torch.flatten(x, 1)  # flatten all dimensions except the batch dimension
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            x = self.fc3(x)
            return x

    return Net


def test_lenet_tutorial_runs():
    import tracegrad as torch
    import tracegrad.nn as nn
    import tracegrad.optim as optim

    torch.manual_seed(0)
    net = _lenet_module()()
    params = list(net.parameters())
    assert len(params) == 10 and tuple(params[0].size()) == (6, 1, 5, 5)

    input = torch.randn(1, 1, 32, 32)
    out = net(input)
    assert tuple(out.shape) == (1, 10)
    net.zero_grad()
    out.backward(torch.randn(1, 10))
    assert net.conv1.bias.grad is not None

    output = net(input)
    target = torch.randn(10)  # a dummy target, for example
    target = target.view(1, -1)  # make it the same shape as output
    criterion = nn.MSELoss()
    loss = criterion(output, target)
    assert loss.grad_fn.name() == "MseLossBackward0"

    net.zero_grad()  # zeroes the gradient buffers of all parameters
    assert net.conv1.bias.grad is None or float(net.conv1.bias.grad.abs().sum()) == 0
    loss.backward()
    assert float(net.conv1.bias.grad.abs().sum()) > 0

    optimizer = optim.SGD(net.parameters(), lr=0.01)
    before = loss.item()
    for _ in range(5):
        optimizer.zero_grad()  # zero the gradient buffers
        output = net(input)
        loss = criterion(output, target)
        loss.backward()
        optimizer.step()  # Does the update
    assert loss.item() < before


def test_lenet_tutorial_grad_fn_chain():
    import tracegrad as torch
    import tracegrad.nn as nn

    torch.manual_seed(0)
    net = _lenet_module()()
    output = net(torch.randn(1, 1, 32, 32))
    loss = nn.MSELoss()(output, torch.randn(10).view(1, -1))
    assert loss.grad_fn.next_functions[0][0].name() == "AddmmBackward0"  # Linear
    # the tutorial prints <AccumulateGrad object at ...> (name() is PyTorch's qualified one)
    assert type(loss.grad_fn.next_functions[0][0].next_functions[0][0]).__name__ \
        == "AccumulateGrad"


def test_lenet_matches_torch():
    torch = pytest.importorskip("torch")
    net = _lenet_module()()
    tnn, F = torch.nn, torch.nn.functional

    class Ref(tnn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = tnn.Conv2d(1, 6, 5), tnn.Conv2d(6, 16, 5)
            self.fc1, self.fc2, self.fc3 = (tnn.Linear(400, 120), tnn.Linear(120, 84),
                                            tnn.Linear(84, 10))

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            x = torch.flatten(F.max_pool2d(F.relu(self.conv2(x)), 2), 1)
            return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))

    ref = Ref()
    net.load_state_dict(_as_numpy(ref.state_dict()))
    data = np.random.default_rng(2).standard_normal((4, 1, 32, 32), dtype=np.float32)
    target = np.random.default_rng(3).standard_normal((4, 10), dtype=np.float32)
    lr = F.mse_loss(ref(torch.tensor(data)), torch.tensor(target))
    lr.backward()
    loss = tg.nn.functional.mse_loss(net(tg.tensor(data)), tg.tensor(target))
    loss.backward()
    assert abs(loss.item() - lr.item()) <= LENET_LOSS * abs(lr.item())
    got = dict(net.named_parameters())
    for name, p in ref.named_parameters():
        assert _rel(got[name].grad.numpy(), p.grad.numpy()) < LENET, name


# compiled convnets ------------------------------------------------------------------------------

def _group_ops(compiled):
    """Each fused group's primitive names, forward and backward."""
    return [(where, [n.prim.name for n in g.nodes]) for where, graph in compiled.graph_ir
            for g in graph.groups]


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_compiled_resnet18_step_matches_eager(mode):
    tg.manual_seed(0)
    eager = resnet18(num_classes=10)
    model = resnet18(num_classes=10)
    model.load_state_dict(eager.state_dict())
    getattr(eager, mode)()
    getattr(model, mode)()
    data = np.random.default_rng(4).standard_normal((2, 3, 32, 32), dtype=np.float32)
    labels = tg.tensor([3, 7])
    criterion = nn.CrossEntropyLoss()

    def step(x, y):
        return criterion(model(x), y)
    compiled = tg.compile(step)
    for _ in range(2):          # the trace, then the cached variant
        x, xe = tg.tensor(data, requires_grad=True), tg.tensor(data, requires_grad=True)
        loss = compiled(x, labels)
        loss.backward()
        le = criterion(eager(xe), labels)
        le.backward()
        # the compiled program may fuse and reorder the same sums: the bounds against PyTorch
        assert _rel(loss.item(), le.item()) < RESNET_STATS
        assert _rel(x.grad.numpy(), xe.grad.numpy()) < RESNET
        got = dict(model.named_parameters())
        for name, p in eager.named_parameters():
            assert _rel(got[name].grad.numpy(), p.grad.numpy()) < RESNET, name
        es = eager.state_dict()
        for name, b in model.state_dict().items():       # running stats written back alike
            assert _rel(b.numpy(), es[name].numpy()) < RESNET_STATS, name
    assert compiled.stats["compiles"] == 1 and compiled.stats["cache_hits"] == 1
    assert compiled.stats["fallbacks"] == 0
    assert "fused group(s)" in compiled.explain()

    groups = _group_ops(compiled)
    forward = [ops for where, ops in groups if where == "forward"]
    # in eval mode the group also subtracts the running mean (training takes the centred value
    # from the variance's pass)
    lead = [] if mode == "train" else ["sub"]
    # after a convolution, BatchNorm's normalisation (centred value times rsqrt, times weight,
    # plus bias) and the ReLU run in one group ...
    assert lead + ["mul", "mul", "add", "relu"] in forward
    # ... and at the end of a block with the residual add as well
    assert lead + ["mul", "mul", "add", "add", "relu"] in forward
    # a downsampling block: both BatchNorms (main path and shortcut), the add and the ReLU
    assert 2 * (lead + ["mul", "mul", "add"]) + ["add", "relu"] in forward
    if mode == "train":     # the batch variance: centre, square, reduce, eps, rsqrt in one pass
        assert ["sub", "mul", "sum", "div", "add", "rsqrt"] in forward
    backward = [ops for where, ops in groups if where == "backward"]
    # the backward of relu(bn(.)) recomputes the forward chain, masks by relu's derivative
    # and reduces BatchNorm's per-channel sums in the same pass
    assert any(ops[:4] in (["mul", "mul", "add", "relu"], ["mul", "add", "relu", "le"])
               and "where" in ops and "sum" in ops for ops in backward)


def test_compiled_lenet_training_matches_eager():
    tg.manual_seed(0)
    Net = _lenet_module()
    eager, model = Net(), Net()
    model.load_state_dict(eager.state_dict())
    opt_e = tg.optim.SGD(eager.parameters(), lr=0.05, momentum=0.9)
    opt_c = tg.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    rng = np.random.default_rng(5)
    data = rng.standard_normal((8, 1, 32, 32), dtype=np.float32)
    labels = tg.tensor(rng.integers(0, 10, 8))
    criterion = nn.CrossEntropyLoss()
    compiled = tg.compile(lambda x, y: criterion(model(x), y))
    losses = []
    for _ in range(4):
        for net, opt, fn in ((eager, opt_e, lambda x, y: criterion(eager(x), y)),
                             (model, opt_c, compiled)):
            opt.zero_grad()
            loss = fn(tg.tensor(data), labels)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    # four training steps, each LeNet's forward and backward: 4 x 10 x 20 ulps
    np.testing.assert_allclose(losses[0::2], losses[1::2], rtol=ulps("float32", 4 * 10 * 20, 1))
    assert losses[-1] < losses[0]
    assert compiled.stats["compiles"] == 1
    groups = _group_ops(compiled)
    forward = [ops for where, ops in groups if where == "forward"]
    backward = [ops for where, ops in groups if where == "backward"]
    # each convolution's bias add and ReLU run as one group (which also keeps ReLU's mask),
    # and likewise each hidden linear layer's
    assert forward.count(["add", "relu", "le"]) == 2 and forward.count(["add", "relu"]) == 2
    # backward: ReLU's derivative and the bias gradient's reduction in one pass, per layer
    assert sum(ops[-2:] == ["where", "sum"] for ops in backward) == 4
