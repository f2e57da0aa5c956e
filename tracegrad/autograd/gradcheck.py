"""``gradcheck`` and ``gradgradcheck``: analytical against finite-difference Jacobians.

A mismatch raises ``GradcheckError`` naming the output, the input and both
Jacobians, laid out as PyTorch lays them out: row = input element, column =
output element.
"""
import warnings

import numpy as np

from . import grad_mode


class GradcheckError(RuntimeError):
    pass


def _as_tuple(x):
    return x if isinstance(x, tuple) else tuple(x) if isinstance(x, list) else (x,)


def _tensor_outputs(out):
    from ..tensor import Tensor
    return tuple(o for o in _as_tuple(out) if isinstance(o, Tensor))


def _flat_outputs(fn, inputs):
    with grad_mode.no_grad():
        outs = _tensor_outputs(fn(*inputs))
    return [np.array(o.detach().to("cpu")._data, dtype=np.float64).reshape(-1) for o in outs]


def numerical_jacobian(fn, inputs, eps=1e-6):
    """``J[o][i]``: d output o / d input i by central differences, shape (in numel, out numel)."""
    from ..tensor import Tensor
    base = _flat_outputs(fn, inputs)
    jac = [[None] * len(inputs) for _ in base]
    for i, x in enumerate(inputs):
        if not (isinstance(x, Tensor) and x.requires_grad):
            continue
        data = x._data      # perturbed element by element in place, so any layout works
        cols = [np.zeros((x.numel(), b.size)) for b in base]
        for j, pos in enumerate(np.ndindex(*data.shape)):
            orig = data[pos].item()
            data[pos] = orig - eps
            lo = _flat_outputs(fn, inputs)
            data[pos] = orig + eps
            hi = _flat_outputs(fn, inputs)
            data[pos] = orig
            for k in range(len(base)):
                cols[k][j] = (hi[k] - lo[k]) / (2 * eps)
        for k in range(len(base)):
            jac[k][i] = cols[k]
    return jac


def analytical_jacobian(fn, inputs):
    from ..tensor import Tensor
    from .engine import grad
    from ..creation import zeros_like
    diff = [x for x in inputs if isinstance(x, Tensor) and x.requires_grad]
    outs = _tensor_outputs(fn(*inputs))
    jac = []
    for o in outs:
        if not o.requires_grad:
            jac.append(None)     # gradcheck then expects a zero numerical Jacobian
            continue
        rows = [np.zeros((x.numel(), o.numel())) for x in inputs if isinstance(x, Tensor)
                and x.requires_grad]
        if diff:
            for m in range(o.numel()):
                go = zeros_like(o)
                go._data.reshape(-1)[m] = 1
                gs = grad(o, diff, go, retain_graph=True, allow_unused=True)
                for r, g in zip(rows, gs):
                    if g is not None:
                        r[:, m] = np.asarray(g.detach().to("cpu")._data, np.float64).reshape(-1)
        full, it = [], iter(rows)
        for x in inputs:
            full.append(next(it) if isinstance(x, Tensor) and x.requires_grad else None)
        jac.append(full)
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """True when every analytical Jacobian matches finite differences within tolerance."""
    from ..device import CPU, to_device
    from ..tensor import Tensor
    inputs = _as_tuple(inputs)
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and x.dtype.name != "float64":
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          f"point or complex. This check will likely fail if all the inputs are "
                          f"not of double precision floating point or complex.")
    for i, x in enumerate(inputs):
        if isinstance(x, Tensor) and x.requires_grad and x.numel() and not all(
                st > 0 or n <= 1 for st, n in zip(x.stride(), x.shape)):
            raise RuntimeError(f"The {i}th input has a dimension with stride 0. gradcheck only "
                               f"supports inputs that are non-overlapping to be able to compute "
                               f"the numerical gradients correctly. You should call .contiguous "
                               f"on the input before passing it to gradcheck.")
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of the them have requires_grad=True.")
    before = [to_device(x._data, CPU).copy() if isinstance(x, Tensor) else None for x in inputs]
    numerical = numerical_jacobian(func, inputs, eps)
    analytical = analytical_jacobian(func, inputs)
    for x, b in zip(inputs, before):
        if b is not None and not np.array_equal(to_device(x._data, CPU), b, equal_nan=True):
            return _fail("gradcheck: the function modified its input in place", raise_exception)
    for k, (num_row, ana_row) in enumerate(zip(numerical, analytical)):
        if ana_row is None:
            if any(n is not None and not np.allclose(n, 0, atol=atol) for n in num_row):
                return _fail("Numerical gradient for function expected to be zero",
                             raise_exception)
            continue
        for i, (n, a) in enumerate(zip(num_row, ana_row)):
            if n is None:
                continue
            if not np.allclose(a, n, rtol=rtol, atol=atol, equal_nan=True):
                return _fail(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                             f"numerical:{_fmt(n)}\nanalytical:{_fmt(a)}\n", raise_exception)
    return True


def _fmt(a):
    from ..creation import tensor
    return repr(tensor(a, dtype="float64"))


def _fail(msg, raise_exception):
    if raise_exception:
        raise GradcheckError(msg)
    return False


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """gradcheck of the function ``(inputs, grad_outputs) -> d(outputs)/d(inputs) . grad_outputs``."""
    from ..creation import randn
    from ..tensor import Tensor
    from .engine import grad
    inputs = _as_tuple(inputs)
    diff_idx = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if grad_outputs is None:
        outs = _tensor_outputs(func(*inputs))   # with grad on: only differentiable outputs count
        grad_outputs = tuple(randn(o.shape, dtype=o.dtype, device=o.device, requires_grad=True)
                             for o in outs if o.requires_grad)
    grad_outputs = _as_tuple(grad_outputs)
    n_in = len(inputs)

    def first_derivative(*args):
        ins, gos = args[:n_in], args[n_in:]
        with grad_mode.enable_grad():    # finite differences call this under no_grad
            outs = [o for o in _tensor_outputs(func(*ins)) if o.requires_grad]
            gs = grad(outs, [ins[i] for i in diff_idx], gos, create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
