"""Grad modes: when autograd records, and why ``model.eval()`` is something else.

- ``no_grad()``: nothing is recorded; results have ``requires_grad=False``.
  Use it for optimizer updates and evaluation loops.
- ``enable_grad()``: switches recording back on inside a ``no_grad`` block.
- ``set_grad_enabled(mode)``: the same switch, chosen by a flag (also callable).
- ``inference_mode()``: no_grad that also marks its results as inference
  tensors, which autograd refuses to use later; the fastest mode for pure
  inference.
- ``model.eval()``: changes what layers *compute* (Dropout stops dropping,
  BatchNorm uses running statistics); it does not switch recording off.

All four modes work as context managers and as decorators, and are
thread-local.

    python samples/grad_modes.py
"""
import tracegrad as torch
from tracegrad import nn


def main():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

    with torch.no_grad():
        y = x * 2
    print("no_grad:            y.requires_grad =", y.requires_grad)

    with torch.no_grad():
        with torch.enable_grad():
            y = x * 2
    print("enable_grad inside: y.requires_grad =", y.requires_grad)

    for is_train in (True, False):
        with torch.set_grad_enabled(is_train):
            y = x * 2
        print(f"set_grad_enabled({is_train}): y.requires_grad =", y.requires_grad)
    torch.set_grad_enabled(False)                   # the function form switches it globally
    print("after set_grad_enabled(False): is_grad_enabled() =", torch.is_grad_enabled())
    torch.set_grad_enabled(True)

    @torch.no_grad()
    def evaluate(t):
        return t * 2

    print("@no_grad function:  result requires_grad =", evaluate(x).requires_grad)

    with torch.inference_mode():
        y = x * 2
    print("inference_mode:     y.requires_grad =", y.requires_grad,
          " y.is_inference() =", y.is_inference())
    try:
        (y * x).sum().backward()                    # an inference tensor saved for backward
    except RuntimeError as e:
        print("using it with autograd afterwards raises:", str(e).splitlines()[0][:80], "...")

    # requires_grad on a tensor picks what is recorded, tensor by tensor
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([4.0, 5.0, 6.0], requires_grad=True)
    a.requires_grad = False
    z = a * b
    z.sum().backward()
    print("only b gets a gradient:", a.grad, b.grad)

    # eval() is about layer behaviour, not about recording
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    inp = torch.ones(2, 3)
    model.eval()
    out = model(inp)
    print("eval():   output still requires grad:", out.requires_grad,
          "| dropout inactive:", out.equal(model[0](inp)))
    model.train()
    with torch.no_grad():
        out = model(inp)
    print("no_grad(): output requires grad:", out.requires_grad,
          "| dropout active:", not out.equal(model[0](inp)))


if __name__ == "__main__":
    main()
