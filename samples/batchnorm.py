"""BatchNorm by hand and by ``nn.BatchNorm2d``: the same numbers, train and eval.

BatchNorm normalises each channel (dim 1) over the batch and spatial dims,
then scales and shifts it with the learned ``weight`` and ``bias``:

- training: the batch's mean and *biased* variance normalise; the running
  estimates move towards the batch's mean and *unbiased* variance by
  ``momentum``: ``running = (1 - momentum) * running + momentum * batch``.
- eval: the running estimates normalise, and nothing is updated.

``dummy_bn_forward`` below is the hand-written version from the notes this
sample follows; the module must agree with it, values and gradients.

    python samples/batchnorm.py
"""
import tracegrad as torch
from tracegrad import nn


def dummy_bn_forward(x, bn_weight, bn_bias, eps, mean_val=None, var_val=None):
    if mean_val is None:
        mean_val = x.mean([0, 2, 3])
    if var_val is None:
        # torch.var is unbiased by default; normalisation uses the biased variance
        var_val = x.var([0, 2, 3], unbiased=False)

    x = x - mean_val[None, ..., None, None]         # per channel: mean_val.shape == [C]
    x = x / torch.sqrt(var_val[None, ..., None, None] + eps)
    x = x * bn_weight[..., None, None] + bn_bias[..., None, None]
    return mean_val, var_val, x


def max_diff(a, b):
    return (a - b).abs().max().item()


def main():
    torch.manual_seed(0)
    channels, momentum = 3, 0.1
    bn = nn.BatchNorm2d(channels, momentum=momentum)
    with torch.no_grad():                           # a non-trivial affine part
        bn.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        bn.bias.copy_(torch.tensor([0.0, -1.0, 1.0]))
    print(bn)

    running_mean = torch.zeros(channels)
    running_var = torch.ones(channels)
    for step in range(3):
        x = torch.randn(8, channels, 5, 5) * (step + 1) + step
        x_hand = x.clone().requires_grad_()
        x_mod = x.clone().requires_grad_()

        mean, var, y_hand = dummy_bn_forward(x_hand, bn.weight, bn.bias, bn.eps)
        y_mod = bn(x_mod)

        n = x.numel() / channels
        with torch.no_grad():
            running_mean = (1 - momentum) * running_mean + momentum * mean
            running_var = (1 - momentum) * running_var + momentum * var * n / (n - 1)

        grad_out = torch.randn(y_mod.shape)
        y_hand.backward(grad_out)
        y_mod.backward(grad_out)
        print(f"train step {step}: |y diff| {max_diff(y_hand, y_mod):.1e}  "
              f"|dx diff| {max_diff(x_hand.grad, x_mod.grad):.1e}  "
              f"|running_mean diff| {max_diff(running_mean, bn.running_mean):.1e}  "
              f"|running_var diff| {max_diff(running_var, bn.running_var):.1e}")
        assert max_diff(y_hand, y_mod) < 1e-4 and max_diff(x_hand.grad, x_mod.grad) < 1e-4
        assert max_diff(running_var, bn.running_var) < 1e-4

    print("batches tracked:", bn.num_batches_tracked.item())

    bn.eval()                                       # normalise with the running estimates
    x = torch.randn(4, channels, 5, 5)
    _, _, y_hand = dummy_bn_forward(x, bn.weight, bn.bias, bn.eps,
                                    bn.running_mean, bn.running_var)
    y_mod = bn(x)
    print(f"eval: |y diff| {max_diff(y_hand, y_mod):.1e} (running stats unchanged: "
          f"{bn.num_batches_tracked.item()} batches)")
    assert max_diff(y_hand, y_mod) < 1e-4


if __name__ == "__main__":
    main()
