"""Higher-level derivatives: ``jacobian``, ``hessian``, ``vjp``, ``jvp``, ``vhp``, ``hvp``.

Each is built from ``autograd.grad``, or from forward mode (``forward_ad``): ``jvp`` runs
the function once on dual tensors, and ``jacobian(..., strategy="forward-mode",
vectorize=True)`` and ``hessian(..., outer_jacobian_strategy="forward-mode",
vectorize=True)`` take one JVP per input element (PyTorch batches them with vmap; here they
run one after another). Inside an open dual level, where forward mode does not nest,
``jvp`` takes the double-vjp trick instead (the vjp of a vjp is linear in its cotangent,
so differentiating it again against ``v`` gives J v).
"""
from . import forward_ad
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
    if strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError(
            'Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
            'function has more outputs than inputs, "forward-mode" tends to be more performant. '
            'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "torch.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either set '
                '`create_graph=False` or `strategy="reverse-mode"`.')
        return _jacfwd(func, inputs, strict, vectorize)
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


def _jacfwd(func, inputs, strict, vectorize):
    """The Jacobian by forward mode: one JVP per input element, each a column of every
    block. PyTorch's messages (and its typo) for what it does not support."""
    from ..creation import zeros_like
    from ..ops import stack
    if strict:
        raise RuntimeError('torch.autograd.functional.jacobian: `strict=True` and '
                           '`strategy="forward-mode"` are not supported together (yet). Please '
                           'either set `strict=False` or `strategy="reverse-mode"`.')
    if not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                  "Hessian isonly implemented for `vectorize=True`.")
    inputs, in_tuple = _as_tuple(inputs)
    out_tuple, outputs, columns = False, None, []     # columns[i][k]: per output, J e_k
    with forward_ad.dual_level():
        for i, x in enumerate(inputs):
            cols = []
            for k in range(x.numel()):
                basis = zeros_like(x).reshape(-1)
                basis[k] = 1
                duals = [forward_ad.make_dual(y, basis.reshape(x.shape) if j == i else
                                              zeros_like(y)) for j, y in enumerate(inputs)]
                outs, out_tuple = _as_tuple(func(*duals))
                unpacked = [forward_ad.unpack_dual(o) for o in outs]
                outputs = [p for p, _ in unpacked]
                cols.append([t if t is not None else zeros_like(p) for p, t in unpacked])
            columns.append(cols)
    if outputs is None:     # no input element at all: the outputs from one plain call
        outputs, out_tuple = _as_tuple(func(*inputs))
    blocks = []
    for k, out in enumerate(outputs):
        block = []
        for x, cols in zip(inputs, columns):
            if cols:
                j = stack([c[k] for c in cols], -1).reshape(tuple(out.shape) + tuple(x.shape))
            else:
                j = zeros_like(out).reshape(tuple(out.shape) + tuple(x.shape))
            block.append(j)
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
    """Second derivatives of a function returning one element; with
    ``outer_jacobian_strategy="forward-mode"``, forward over reverse."""
    inputs_t, in_tuple = _as_tuple(inputs)
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def scalar_func(*xs):
        out = func(*xs)
        if isinstance(out, (tuple, list)) or out.numel() != 1:
            raise RuntimeError("The Tensor returned by the function given to hessian should "
                               "contain a single element")
        return out.reshape(())

    def jac_func(*xs):
        if outer_jacobian_strategy == "forward-mode":   # dual inputs: kept, not detached
            xs = tuple(x.requires_grad_(True) for x in xs)
        return jacobian(scalar_func, xs, create_graph=True, strict=strict)

    res = jacobian(jac_func, inputs_t, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
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
    """``(func(inputs), J v)`` by forward mode (the double-vjp trick in an open level)."""
    from ..creation import zeros_like
    inputs, in_tuple = _as_tuple(inputs)
    forward = forward_ad._current_level < 0
    inputs = _prepare(inputs, create_graph) if create_graph or not forward else tuple(
        x.detach() for x in inputs)
    if v is None:
        if len(inputs) != 1 or inputs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        from ..creation import ones_like
        vs = (ones_like(inputs[0]),)
    else:
        vs, _ = _as_tuple(v)
        _check_v(vs, inputs)
    if forward:
        return _jvp_forward(func, inputs, vs, create_graph)
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


def _jvp_forward(func, inputs, vs, create_graph):
    from ..creation import zeros_like
    with forward_ad.dual_level():
        duals = [forward_ad.make_dual(x, vv) for x, vv in zip(inputs, vs)]
        outputs, out_tuple = _as_tuple(func(*duals))
        unpacked = [forward_ad.unpack_dual(o) for o in outputs]
    outs = tuple(_finish(p, create_graph) for p, _ in unpacked)
    res = tuple(_finish(t, create_graph) if t is not None else zeros_like(p)
                for p, t in unpacked)
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
