"""Custom autograd functions: write forward and backward yourself, then check them.

A ``tracegrad.autograd.Function`` subclass gives a new differentiable op:
``forward(ctx, ...)`` computes the result and stores what backward needs on
``ctx``; ``backward(ctx, grad_output)`` returns one gradient per input.
``gradcheck`` compares that backward with finite differences (in float64),
``gradgradcheck`` does the same for the backward of the backward.

    python samples/custom_function.py
"""
import tracegrad as torch
from tracegrad.autograd import Function, gradcheck, gradgradcheck


class Exp(Function):
    """e^x, saving its result: d/dx e^x = e^x."""

    @staticmethod
    def forward(ctx, i):
        result = i.exp()
        ctx.save_for_backward(result)     # tensors go through save_for_backward
        return result

    @staticmethod
    def backward(ctx, grad_output):
        result, = ctx.saved_tensors
        return grad_output * result


class ScaledAdd(Function):
    """a + alpha * b, with a non-tensor argument kept on ctx (it gets no gradient)."""

    @staticmethod
    def forward(ctx, a, b, alpha):
        ctx.alpha = alpha                 # plain Python values can live on ctx directly
        return a + alpha * b

    @staticmethod
    def backward(ctx, grad_output):
        # skip work for inputs that do not need a gradient
        grad_a = grad_output if ctx.needs_input_grad[0] else None
        grad_b = grad_output * ctx.alpha if ctx.needs_input_grad[1] else None
        return grad_a, grad_b, None       # None for the alpha argument


class Cube(Function):
    """x^3, written so that its backward is itself differentiable (for gradgradcheck)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x * x

    @staticmethod
    def backward(ctx, grad_output):
        x, = ctx.saved_tensors
        return grad_output * 3 * x * x    # tracegrad ops: a create_graph backward records them


def main():
    a = torch.tensor([1.], requires_grad=True)
    result = Exp.apply(a)
    result.backward()
    print("Exp:", result, "grad", a.grad)         # e and e
    print("grad_fn name:", result.grad_fn.name())  # ExpBackward

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0])                    # no grad wanted: needs_input_grad is False
    out = ScaledAdd.apply(x, y, 0.5)
    out.sum().backward()
    print("ScaledAdd:", out, "grad", x.grad)

    # gradcheck wants float64 inputs that require grad; it raises on a mismatch
    inputs = (torch.randn(3, dtype=torch.float64, requires_grad=True),)
    print("gradcheck Exp:", gradcheck(Exp.apply, inputs, eps=1e-6, atol=1e-4))
    pair = (torch.randn(2, 2, dtype=torch.float64, requires_grad=True),
            torch.randn(2, 2, dtype=torch.float64, requires_grad=True))
    print("gradcheck ScaledAdd:", gradcheck(lambda a, b: ScaledAdd.apply(a, b, 2.0), pair))
    print("gradgradcheck Cube:", gradgradcheck(Cube.apply, inputs))

    # a wrong backward is caught, with both Jacobians in the error
    class BadSquare(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad_output):
            x, = ctx.saved_tensors
            return grad_output * x           # forgot the factor 2

    ok = gradcheck(BadSquare.apply, inputs, raise_exception=False)
    print("gradcheck of a wrong backward:", ok)
    assert not ok


if __name__ == "__main__":
    main()
