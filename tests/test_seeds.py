"""The user's examples from shared/seeds/, run with ``import tracegrad as torch``.

Each test is the seed's code as written (the import being the only change),
followed by the checks of what the seed prints. Examples that use nn,
utils.data or the profiler are at the bottom; ``.cuda()`` examples run only
where a GPU is present.
"""
import warnings

import numpy as np
import pytest

import tracegrad as torch
from tracegrad.autograd import Function, Variable, gradcheck

from tolerances import close

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (CuPy)")


def test_000_custom_exp_function(capsys):
    # 000: the seed writes `result = Exp.apply(a)  // forward`, a C++-style comment that is a
    # syntax error in Python too; the comment marker is the one change besides the import.
    class Exp(Function):
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            result, = ctx.saved_tensors
            return grad_output * result

    a = torch.tensor([1.], requires_grad=True)
    result = Exp.apply(a)  # forward
    result.backward()
    print(a.grad)
    assert capsys.readouterr().out.strip() == "tensor([2.7183])"


def test_000_dummy_bn_forward():
    def dummy_bn_forward(x, bn_weight, bn_bias, eps, mean_val=None, var_val=None):
        if mean_val is None:
            mean_val = x.mean([0, 2, 3])
        if var_val is None:
            var_val = x.var([0, 2, 3], unbiased=False)

        x = x - mean_val[None, ..., None, None]
        x = x / torch.sqrt(var_val[None, ..., None, None] + eps)
        x = x * bn_weight[..., None, None] + bn_bias[..., None, None]
        return mean_val, var_val, x

    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 3, 5, 5))
    x = torch.tensor(data, requires_grad=True)
    w = torch.tensor(rng.standard_normal(3), requires_grad=True)
    b = torch.tensor(rng.standard_normal(3), requires_grad=True)
    mean_val, var_val, y = dummy_bn_forward(x, w, b, 1e-5)
    m = data.mean(axis=(0, 2, 3))
    v = data.var(axis=(0, 2, 3))
    ref = (data - m[None, :, None, None]) / np.sqrt(v[None, :, None, None] + 1e-5)
    ref = ref * w.detach().numpy()[:, None, None] + b.detach().numpy()[:, None, None]
    # float64 means and variances over 100 elements, by two formulas: 2 x 128 roundings
    tol = close("float64", n_ops=256, scale=4)
    np.testing.assert_allclose(y.detach().numpy(), ref, **tol)
    np.testing.assert_allclose(var_val.detach().numpy(), v, **tol)
    assert gradcheck(lambda x, w, b: dummy_bn_forward(x[:2, :, :2, :2], w, b, 1e-5)[2],
                     (x, w, b))


def test_000_tensor_hook(capsys):
    C = torch.tensor([1.0, 2.0], requires_grad=True) * 2   # the seed leaves C undefined

    def variable_hook(grad):
        print('the gradient of C is：', grad)

    D = C.exp()
    D.register_hook(variable_hook)
    D.sum().backward()
    assert "the gradient of C is： tensor([1., 1.])" in capsys.readouterr().out


def test_002_saved_tensors():
    x = torch.randn(5, requires_grad=True)
    y = x.pow(2)
    assert x.equal(y.grad_fn._saved_self)      # the same tensor: equal to the bit
    assert x is y.grad_fn._saved_self

    x = torch.randn(5, requires_grad=True)
    y = x.exp()
    assert y.equal(y.grad_fn._saved_result)    # a saved copy of the same values
    assert y is not y.grad_fn._saved_result


def test_002_local_disabling():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert not y.requires_grad

    with torch.set_grad_enabled(False):
        y = x * 2
    assert not y.requires_grad
    assert torch.is_grad_enabled()

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)
    x.requires_grad = False
    z = x * y
    z.sum().backward()
    assert x.grad is None
    assert y.grad.tolist() == [1.0, 2.0, 3.0]


def test_003_cube_plus_bias(capsys):
    x_1 = torch.tensor(2.0, requires_grad=True)
    b_1 = torch.tensor(1.0, requires_grad=True)
    y_1 = x_1 ** 3 + b_1
    y_1.backward()
    print(y_1, x_1.grad, b_1.grad)
    assert capsys.readouterr().out.strip() == \
        "tensor(9., grad_fn=<AddBackward0>) tensor(12.) tensor(1.)"

    x_2 = torch.tensor(2.0, requires_grad=True)
    b_2 = torch.tensor(1.0, requires_grad=True)
    y_2 = x_2 ** 3 + b_2
    grads = torch.autograd.grad(y_2, inputs=[x_2, b_2])
    print(grads)
    assert capsys.readouterr().out.strip() == "(tensor(12.), tensor(1.))"


def test_003_grad_outputs(capsys):
    a = torch.tensor([[2.0, 3.0], [4.0, 5.0]], requires_grad=True)
    b = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)  # 2x2
    z = a ** 2 + a * b + b ** 2
    grads = torch.autograd.grad(z, inputs=[a, b], grad_outputs=torch.ones_like(z))
    print(grads)
    print(grads[0].shape, grads[1].shape)
    assert capsys.readouterr().out == (
        "(tensor([[ 5.,  8.],\n        [11., 14.]]), tensor([[ 4.,  7.],\n"
        "        [10., 13.]]))\n"
        "tracegrad.Size([2, 2]) tracegrad.Size([2, 2])\n")


def test_003_no_grad_and_detach():
    x = torch.ones(5)
    w = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    z = torch.matmul(x, w) + b
    assert z.requires_grad
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    assert not z.requires_grad
    z = torch.matmul(x, w) + b
    z_det = z.detach()
    assert not z_det.requires_grad


def test_004_variable_graph(capsys):
    a = Variable(torch.Tensor([1]), requires_grad=True)
    b = Variable(torch.Tensor([2]), requires_grad=True)
    c = Variable(torch.Tensor([3]), requires_grad=True)
    d = a + 2*b
    e = d + c
    e.backward()
    print(a.grad, b.grad, c.grad)
    assert capsys.readouterr().out.strip() == "tensor([1.]) tensor([2.]) tensor([1.])"
    with pytest.warns(UserWarning):
        assert d.grad is None
    assert a.grad_fn is None
    assert type(e.grad_fn).__name__ == "AddBackward0"


def test_004_requires_grad_and_volatile():
    a = Variable(torch.Tensor([1]), requires_grad=False)
    b = Variable(torch.Tensor([2]), requires_grad=True)
    c = a+b
    c.backward()
    assert a.grad is None
    assert b.grad.tolist() == [1.0]

    with pytest.warns(UserWarning, match="volatile"):
        a = Variable(torch.Tensor([1]), volatile=True)
    b = Variable(torch.Tensor([2]), requires_grad=True)
    c = a+b
    assert c.requires_grad                # volatile has no effect, as in PyTorch since 0.4
    c.backward()                          # the notebook's In [17]: runs without an error
    assert b.grad.tolist() == [1.0]


def test_004_print_grad_hook(capsys):
    def print_grad(grad):
        print(grad)

    x = Variable(torch.randn([1]), requires_grad=True)
    y = x+2
    z = torch.mean(torch.pow(y, 2))
    y.register_hook(print_grad)
    z.backward()
    expected = 2 * (x.item() + 2)
    assert capsys.readouterr().out.strip() == repr(torch.tensor([expected]))
    assert type(y.grad_fn).__name__ == "AddBackward0"


def test_004_custom_add_and_gradcheck():
    class custom_add(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input, input2):
            ctx.save_for_backward(input, input2)
            output = input + input2
            return output

        @staticmethod
        def backward(ctx, grad_output):
            input1, input2 = ctx.saved_tensors
            grad_input = grad_output.clone()
            return grad_input, grad_input

    new_add = custom_add.apply
    a = Variable(torch.Tensor([1]), requires_grad=True)
    b = Variable(torch.Tensor([2]), requires_grad=True)
    c = new_add(a, b)
    assert repr(c) == "tensor([3.], grad_fn=<custom_addBackward>)"
    c.backward()
    assert a.grad.tolist() == [1.0]

    input = (Variable(torch.Tensor([2]).double(), requires_grad=True),
             Variable(torch.Tensor([3]).double(), requires_grad=True),)
    test = gradcheck(custom_add.apply, input, eps=1e-6, atol=1e-4)
    assert test is True


@needs_gpu
def test_004_variable_cuda():
    a = Variable(torch.Tensor([1]), requires_grad=True).cuda()
    assert repr(a) == "tensor([1.], device='cuda:0', grad_fn=<ToCopyBackward0>)"
    assert repr(a.cpu().data) == "tensor([1.])"


def test_cuda_without_gpu_is_a_clear_error():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="cuda"):
        torch.Tensor([1]).cuda()


# Examples that use nn, utils.data and the profiler.

def test_003_binary_cross_entropy_with_logits(capsys):
    x = torch.ones(5)               # input tensor
    y = torch.zeros(3)              # expected output
    w = torch.randn(5, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    print('Gradient function for z =', z.grad_fn)
    loss.backward()
    print(w.grad)
    print(b.grad)
    # PyTorch names the loss's node BinaryCrossEntropyWithLogitsBackward0; tracegrad builds the
    # loss from primitives, so its grad_fn is the last of them (the mean's division).
    out = capsys.readouterr().out
    assert out.startswith("Gradient function for z = <AddBackward0 object at 0x")
    zd = z.detach().numpy()
    np.testing.assert_allclose(loss.item(), np.mean(np.log1p(np.exp(zd))), rtol=1e-6)
    expected = 1 / (1 + np.exp(-zd)) / 3          # (sigmoid(z) - y) / 3, y = 0
    np.testing.assert_allclose(b.grad.numpy(), expected, rtol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), np.tile(expected, (5, 1)), rtol=1e-5)
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    assert not z.requires_grad


def _seed_mlp():
    from tracegrad import nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Linear(8, 12)  # Hidden layer
            self.act = nn.ReLU()
            self.output = nn.Linear(12, 4)  # Output layer

        def forward(self, x):
            a = self.act(self.hidden(x))
            return self.output(a)
    return MLP()


def test_003_mlp_module(capsys):
    net = _seed_mlp()
    w1 = net.hidden.weight
    b1 = net.hidden.bias
    print(w1.shape, b1.shape)
    for name, param in net.named_parameters():
        print(name, param.shape)
    w1_grad = net.hidden.weight.grad
    b1_grad = net.hidden.bias.grad
    print(w1_grad, b1_grad)
    print(net.hidden.weight.requires_grad)
    print(net.hidden.bias.requires_grad)
    assert capsys.readouterr().out.splitlines() == [
        "tracegrad.Size([12, 8]) tracegrad.Size([12])",
        "hidden.weight tracegrad.Size([12, 8])",
        "hidden.bias tracegrad.Size([12])",
        "output.weight tracegrad.Size([4, 12])",
        "output.bias tracegrad.Size([4])",
        "None None",
        "True",
        "True",
    ]


def _seed_training_loop(net, on_gpu, capsys):
    data = torch.randn(30, 8)
    label = torch.randn(30, 4)

    dataset = torch.utils.data.TensorDataset(data, label)
    dataloder = torch.utils.data.DataLoader(dataset, batch_size=10, shuffle=True)

    net.train()
    if on_gpu:
        net.cuda()

    for index, (data, label) in enumerate(dataloder):
        if on_gpu:
            data = data.cuda()
            label = label.cuda()
        out = net(data)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(out, label)
        loss.backward()
        print(f"step: {index}, loss: {loss}, "
              f"weight grad for hidden layer: {net.hidden.weight.grad}")
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step")]
    assert [line.split(",")[0] for line in lines] == ["step: 0", "step: 1", "step: 2"]
    assert net.hidden.weight.grad.shape == (12, 8)


def test_003_mlp_training_loop(capsys):
    # the seed's loop without its optional `.cuda()` lines, which need a GPU (below)
    _seed_training_loop(_seed_mlp(), False, capsys)


@needs_gpu
def test_003_mlp_training_loop_cuda(capsys):
    _seed_training_loop(_seed_mlp(), True, capsys)




def test_004_autograd_profiler(capsys):
    x = Variable(torch.randn(1, 1), requires_grad=True)
    with torch.autograd.profiler.profile() as prof:
        y = x ** 2
        y.backward()
    print(prof)
    # The seed shows PyTorch 1.x's table; the columns are today's PyTorch's. One row per event
    # in order: pow, then the backward node with the ops of its derivative, then the leaf's.
    lines = capsys.readouterr().out.rstrip("\n").split("\n")
    assert lines[1].split() == ["Name", "Self", "CPU", "%", "Self", "CPU", "CPU", "total", "%",
                                "CPU", "total", "CPU", "time", "avg", "#", "of", "Calls"]
    names = [line.split()[0] for line in lines[3:-2]]
    assert names[:2] == ["pow", "PowBackward0"]
    assert names[-1] == "torch::autograd::AccumulateGrad"
    assert lines[-1].startswith("Self CPU time total: ")


def test_004_resnet18_profiler(capsys):
    # The seed profiles torchvision's resnet18 over 100 steps at 1x3x224x224; here
    # tracegrad.models.resnet18 (torchvision's architecture) over 2 steps at 1x3x64x64.
    from tracegrad.models import resnet18

    x = torch.randn((1, 3, 64, 64), requires_grad=True)
    model = resnet18()
    with torch.autograd.profiler.profile() as prof:
        for _ in range(2):
            y = model(x)
            y = torch.sum(y)
            y.backward()
    # NOTE: some columns were removed for brevity
    print(prof.key_averages().table(sort_by="self_cpu_time_total"))
    lines = capsys.readouterr().out.rstrip("\n").split("\n")
    assert lines[1].split()[:3] == ["Name", "Self", "CPU"]
    rows = {line.split()[0]: line.split() for line in lines[3:-2]}
    calls = {name: int(row[-1]) for name, row in rows.items()}
    # 20 convolutions a step, each with its backward node, which runs the input gradient (a
    # transposed convolution) and the weight gradient; the first conv's input needs a gradient
    assert calls["conv2d"] == calls["ConvolutionBackward0"] == 40
    assert calls["conv_transpose_nd"] == calls["conv_weight_grad"] == 40
    # 20 BatchNorms a step; batch_norm is a composite shown as PyTorch's one backward node
    assert calls["batch_norm"] == 40 and calls["NativeBatchNormBackward0"] == 40
    assert calls["max_pool2d"] >= 2 and calls["MaxPool2DWithIndicesBackward0"] == 2
    assert calls["torch::autograd::AccumulateGrad"] == 2 * (62 + 1)   # parameters and x
    # sorted by self CPU time, largest first
    scale = {"us": 1e-3, "ms": 1.0, "s": 1e3}
    selfs = [float(rows[name][2].rstrip("mus")) * scale[rows[name][2].lstrip("0123456789.")]
             for name in rows]
    assert selfs == sorted(selfs, reverse=True)
    assert lines[-1].startswith("Self CPU time total: ")
