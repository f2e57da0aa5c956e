"""Higher-level derivatives: ``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``vhp``, ``hvp``.

Each is built from ``autograd.grad``; ``jvp`` uses the double-vjp trick (the
vjp of a vjp is linear in its cotangent, so differentiating it again against
``v`` gives J v).
"""
from .engine import grad


def _as_tuple(x):
    return ((x,), False) if not isinstance(x, (tuple, list)) else (tuple(x), True)


def _prepare(inputs, create_graph):
    """Inputs that require grad, connected to the caller's graph only with create_graph."""
    out = []
    for x in inputs:
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))
        else:
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _finish(x, create_graph):
    if x is None:
        return None
    return x if create_graph else x.detach()


def _check_v(vs, refs):
    """``v`` must match, one tensor for one, the tensors it multiplies."""
    if len(vs) != len(refs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got "
                           f"{len(vs)}.")
    for v, r in zip(vs, refs):
        if v.shape != r.shape:
            raise RuntimeError(f"v has invalid size: should be {r.shape} but got {v.shape}.")


def _finish_or_zeros(grads, like, create_graph):
    """Each gradient finished, or zeros shaped like its tensor where none flowed."""
    from ..creation import zeros_like
    return tuple(_finish(g, create_graph) if g is not None else zeros_like(x)
                 for g, x in zip(grads, like))


def _check_independent(grads, strict, out_idx, what="Output"):
    if strict:
        for i, g in enumerate(grads):
            if g is None:
                raise RuntimeError(f"{what} {out_idx} of the user-provided function is independent "
                                   f"of input {i}. This is not allowed in strict mode.")


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """d outputs / d inputs, each block of shape ``output.shape + input.shape``."""
    from ..creation import zeros
    from ..ops import stack
    inputs, in_tuple = _as_tuple(inputs)
    inputs = _prepare(inputs, create_graph)
    outputs, out_tuple = _as_tuple(func(*inputs))
    blocks = []
    for k, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        flat = out.reshape(-1)
        for m in range(flat.numel()):
            gs = (grad(flat[m], inputs, retain_graph=True, create_graph=create_graph,
                       allow_unused=True) if out.requires_grad else (None,) * len(inputs))
            _check_independent(gs, strict, k)
            for i, (x, g) in enumerate(zip(inputs, gs)):
                rows[i].append(g if g is not None else zeros(x.shape, dtype=x.dtype))
        block = []
        for x, r in zip(inputs, rows):
            j = stack(r).reshape(out.shape + x.shape) if r else zeros(out.shape + x.shape,
                                                                         dtype=x.dtype)
            block.append(_finish(j, create_graph))
        blocks.append(tuple(block))
    return _nest(blocks, out_tuple, in_tuple)


def _nest(blocks, out_tuple, in_tuple):
    if out_tuple and in_tuple:
        return tuple(blocks)
    if out_tuple:
        return tuple(b[0] for b in blocks)
    if in_tuple:
        return blocks[0]
    return blocks[0][0]


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """Second derivatives of a function returning one element."""
    inputs_t, in_tuple = _as_tuple(inputs)

    def scalar_func(*xs):
        out = func(*xs)
        if isinstance(out, (tuple, list)) or out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.reshape(())

    def jac_func(*xs):
        return jacobian(scalar_func, xs, create_graph=True, strict=strict)

    res = jacobian(jac_func, inputs_t, create_graph=create_graph, strict=strict)
    if in_tuple:
        return res
    return res[0][0]


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T J)``."""
    inputs, in_tuple = _as_tuple(inputs)
    inputs = _prepare(inputs, create_graph)
    outputs, out_tuple = _as_tuple(func(*inputs))
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        vs = (None,)
    else:
        vs, _ = _as_tuple(v)
        _check_v(vs, outputs)
    diff = [o for o in outputs if o.requires_grad]
    gs = grad([o for o in diff], inputs, [g for o, g in zip(outputs, vs) if o.requires_grad],
              create_graph=create_graph, allow_unused=True) if diff else (None,) * len(inputs)
    _check_independent(gs, strict, 0, "Output")
    res = _finish_or_zeros(gs, inputs, create_graph)
    outs = tuple(_finish(o, create_graph) for o in outputs)
    return (outs if out_tuple else outs[0]), (res if in_tuple else res[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), J v)`` by the double-vjp trick."""
    from ..creation import zeros_like
    inputs, in_tuple = _as_tuple(inputs)
    inputs = _prepare(inputs, create_graph)
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        from ..creation import ones_like
        vs = (ones_like(inputs[0]),)
    else:
        vs, _ = _as_tuple(v)
        _check_v(vs, inputs)
    outputs, out_tuple = _as_tuple(func(*inputs))
    cotangents = tuple(zeros_like(o).requires_grad_(True) for o in outputs)
    gs = grad(outputs, inputs, cotangents, create_graph=True, allow_unused=True)
    pairs = [(g, vv) for g, vv in zip(gs, vs) if g is not None and g.requires_grad]
    if pairs:
        res = grad([g for g, _ in pairs], cotangents, [vv for _, vv in pairs],
                   create_graph=create_graph, allow_unused=True)
    else:
        res = (None,) * len(outputs)
    res = _finish_or_zeros(res, outputs, create_graph)
    outs = tuple(_finish(o, create_graph) for o in outputs)
    return (outs if out_tuple else outs[0]), (res if out_tuple else res[0])


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(inputs), v^T H)``."""
    inputs_t, in_tuple = _as_tuple(inputs)

    def grad_func(*xs):
        out = func(*xs)
        return grad(out, xs, create_graph=True, allow_unused=True)

    if v is None:
        if len(inputs_t) != 1 or inputs_t[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        from ..creation import ones_like
        v = ones_like(inputs_t[0])
    _check_v(_as_tuple(v)[0], inputs_t)
    xs = _prepare(inputs_t, create_graph)
    with_graph = func(*xs)
    _, res = vjp(lambda *a: tuple(grad_func(*a)), xs, v, create_graph=create_graph, strict=strict)
    out = _finish(with_graph, create_graph)
    return out, res if in_tuple else (res[0] if isinstance(res, tuple) else res)


hvp = vhp   # the Hessian of a scalar function is symmetric
