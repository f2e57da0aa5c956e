"""Higher-order gradients: differentiate a gradient again.

``create_graph=True`` makes the backward pass record its own graph, so the
gradients it returns can be differentiated like any other result: second
derivatives, gradient penalties, Hessian-vector products. ``autograd.functional``
wraps the common cases (``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``vhp``).

    python samples/higher_order.py
"""
import tracegrad as torch
from tracegrad.autograd import grad, gradgradcheck
from tracegrad.autograd.functional import hessian, jacobian


def main():
    # y = x^3 + b: dy/dx = 3x^2 = 12 and d2y/dx2 = 6x = 12 at x = 2
    x = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(1.0, requires_grad=True)
    y = x ** 3 + b
    dy_dx, = grad(y, x, create_graph=True)
    d2y_dx2, = grad(dy_dx, x, create_graph=True)
    d3y_dx3, = grad(d2y_dx2, x)
    print("dy/dx =", dy_dx, " d2y/dx2 =", d2y_dx2, " d3y/dx3 =", d3y_dx3)

    # the same through .backward(): the first-order grad keeps a graph
    x.grad = None
    (x ** 3).backward(create_graph=True)
    first = x.grad
    x.grad = None
    first.backward()
    print("backward twice: first", first, "second", x.grad)

    # a gradient penalty: the loss includes the norm of a gradient (as in WGAN-GP)
    torch.manual_seed(0)
    w = torch.randn(3, requires_grad=True)
    inp = torch.randn(4, 3, requires_grad=True)
    out = torch.tanh(inp @ w).sum()
    g_inp, = grad(out, inp, create_graph=True)
    penalty = ((g_inp.norm(dim=1) - 1) ** 2).mean()
    penalty.backward()
    print("gradient penalty", round(penalty.item(), 4), "-> d penalty / dw:", w.grad)

    # Hessian-vector product without forming the Hessian
    z = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    f = (z ** 2).sum() * z.sum()
    g, = grad(f, z, create_graph=True)
    v = torch.tensor([1.0, 0.0, 0.0])
    hvp, = grad(g, z, grad_outputs=v)
    print("Hessian-vector product H @ e0:", hvp)

    # the full Hessian and a Jacobian, by autograd.functional
    def func(t):
        return (t ** 2).sum() * t.sum()
    H = hessian(func, z.detach())
    print("hessian:\n", H)
    assert (H[:, 0] - hvp).abs().max().item() < 1e-5
    J = jacobian(lambda t: t ** 2 * 3, torch.tensor([1.0, 2.0]))
    print("jacobian of 3 t^2:\n", J)

    # gradgradcheck verifies second derivatives against finite differences (float64)
    t = torch.randn(3, dtype=torch.float64, requires_grad=True)
    print("gradgradcheck(sin(t) * t^2):", gradgradcheck(lambda t: torch.sin(t) * t ** 2, (t,)))


if __name__ == "__main__":
    main()
