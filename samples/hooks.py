"""Hooks: look at (or change) gradients, activations and saved tensors as they flow.

- ``Tensor.register_hook(fn)``: ``fn(grad)`` runs when that tensor's gradient is
  computed; returning a tensor replaces the gradient.
- ``Tensor.register_post_accumulate_grad_hook(fn)``: ``fn(param)`` runs after a
  leaf's ``.grad`` was updated (a place to step an optimizer per parameter).
- ``Module.register_forward_pre_hook`` / ``register_forward_hook``: see (or
  replace) a layer's inputs and output, e.g. to record activations.
- ``autograd.graph.saved_tensors_hooks(pack, unpack)``: decide how the tensors
  that backward needs are stored between forward and backward.

Every ``register_*`` returns a handle whose ``remove()`` takes the hook out.

    python samples/hooks.py
"""
import tracegrad as torch
from tracegrad import nn


def tensor_hooks():
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x + 2
    z = torch.mean(torch.pow(y, 2))

    def print_grad(grad):
        print("  grad reaching y:", grad)           # 2 * y / 3

    handle = y.register_hook(print_grad)
    z.backward(retain_graph=True)
    handle.remove()

    # a hook may return a new gradient: clip what flows back through y
    y.register_hook(lambda grad: grad.clamp(max=2.0))
    x.grad = None
    z.backward()
    print("  x.grad with y's gradient clipped at 2:", x.grad)

    # intermediate gradients are not kept unless asked for
    w = torch.tensor([1.0, -1.0], requires_grad=True)
    h = w * 3
    h.retain_grad()
    (h * h).sum().backward()
    print("  retained h.grad:", h.grad)


def post_accumulate_hook():
    w = torch.tensor([1.0, 2.0], requires_grad=True)

    def sgd_in_hook(param):
        with torch.no_grad():                       # update as soon as the grad is ready
            param -= 0.1 * param.grad
        param.grad = None

    w.register_post_accumulate_grad_hook(sgd_in_hook)
    (w * w).sum().backward()
    print("  w after a step taken inside the hook:", w)


def module_hooks():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    activations = {}

    def save_output(name):
        def hook(module, args, output):
            activations[name] = output.detach()
        return hook

    handles = [model[i].register_forward_hook(save_output(f"layer{i}")) for i in range(3)]

    def scale_input(module, args):
        return (args[0] * 0.5,)                     # a pre-hook may replace the inputs

    handles.append(model.register_forward_pre_hook(scale_input))
    out = model(torch.ones(3, 4))
    for name, act in activations.items():
        print(f"  {name}: shape {tuple(act.shape)}, mean {act.mean().item():+.4f}")
    for h in handles:
        h.remove()
    assert model(torch.ones(3, 4)).shape == out.shape


def saved_tensor_hooks():
    packed = []

    def pack(t):
        packed.append(tuple(t.shape))
        return t.clone()        # store a copy; a real hook might compress or move it

    def unpack(t):
        return t

    x = torch.randn(5, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = (x.exp() * x).sum()                     # exp saves its result, mul both inputs
    y.backward()
    print("  shapes packed for backward:", packed)
    expected = (x.exp() * (x + 1)).detach()
    assert (x.grad - expected).abs().max().item() < 1e-5


def main():
    print("tensor hooks:")
    tensor_hooks()
    print("post-accumulate-grad hook:")
    post_accumulate_hook()
    print("module forward hooks:")
    module_hooks()
    print("saved-tensor hooks:")
    saved_tensor_hooks()


if __name__ == "__main__":
    main()
