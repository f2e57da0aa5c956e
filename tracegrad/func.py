"""``tracegrad.func``: PyTorch's ``torch.func`` transforms, on tracegrad's autograd.

``grad``, ``grad_and_value``, ``vjp``, ``jacrev`` differentiate with ``autograd.grad``
(``jacrev``: one backward pass, vmapped over the rows of the identity, as torch.func's);
``jvp`` and ``jacfwd`` take forward derivatives in forward mode (``autograd.forward_ad``:
the function runs once on dual tensors per JVP). Forward mode has one level at a time, so a
``jvp`` nested inside another (``jacfwd(jacfwd(f))``), or inside ``vmap``, takes the
double-vjp identity
instead (J u is the gradient, with respect to a cotangent v, of <J^T v, u>: the VJP is
linear in v), through which the outer level's tangents flow; ``hessian`` is
``jacfwd(jacrev(f))``: forward over reverse. Transforms nest (``grad(grad(f))``,
``jacrev(jacrev(f))``): every level keeps its graph (``create_graph``) and the outermost one
hands back detached results, as torch.func does. ``functional_call`` runs a module with
other parameters and buffers; ``stack_module_state`` stacks an ensemble's.

``vmap`` maps ``func`` over a batch dimension by batching rules (``tracegrad._vmap``): each
primitive runs once over the whole batch; it composes with the other transforms and with
``compile``.
"""
import contextlib

from . import autograd
from .autograd import forward_ad
from .autograd.grad_mode import enable_grad
from .tensor import Tensor
from ._vmap import autograd_grad as _vmap_grad, track as _vmap_track, vmap as _vmap
from ._vmap.batched import levels as _vmap_levels

_state = {"level": 0}


# pytrees: tensors in (nested) tuples, lists and dicts ----------------------------------------

def _flatten(tree):
    """``(leaves, rebuild)``: the tensors of ``tree`` in order, and the function that puts
    a list of the same length back in its place."""
    if isinstance(tree, Tensor):
        return [tree], lambda xs: xs[0]
    if isinstance(tree, (tuple, list)):
        parts = [_flatten(t) for t in tree]
        sizes = [len(p[0]) for p in parts]

        def rebuild(xs):
            out, k = [], 0
            for (_, fn), n in zip(parts, sizes):
                out.append(fn(xs[k:k + n]))
                k += n
            return type(tree)(out) if not hasattr(tree, "_fields") else type(tree)(*out)
        return [x for p in parts for x in p[0]], rebuild
    if isinstance(tree, dict):
        keys = list(tree)
        leaves, rebuild_values = _flatten([tree[k] for k in keys])
        return leaves, lambda xs: dict(zip(keys, rebuild_values(xs)))
    return [], lambda xs: tree


@contextlib.contextmanager
def _level():
    _state["level"] += 1
    try:
        yield _state["level"] == 1
    finally:
        _state["level"] -= 1


def _track(x):
    """``x`` as a tensor this level differentiates with respect to: a fresh leaf, or, where
    an outer level tracks ``x``, a view of it (so the outer level still sees the path). In
    an open dual level a view too, a leaf of its own: ``detach`` would drop its tangent."""
    if _vmap_levels():      # inside vmap: batched at every level, a leaf per example
        return _vmap_track(x, _unwrapped(x).requires_grad or forward_ad._current_level >= 0)
    if x.requires_grad:
        return x.view_as(x)
    if forward_ad._current_level >= 0:
        return x.view_as(x).requires_grad_(True)
    return x.detach().requires_grad_(True)


def _unwrapped(x):
    while hasattr(x, "_value"):
        x = x._value
    return x


def _grad(outputs, inputs, grad_outputs=None, **kwargs):
    """``autograd.grad``; inside vmap, of the physical tensors (per-example gradients)."""
    if _vmap_levels():
        outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
        if isinstance(grad_outputs, Tensor):
            grad_outputs = [grad_outputs]
        return _vmap_grad(outputs, list(inputs), grad_outputs, **kwargs)
    return autograd.grad(outputs, inputs, grad_outputs, **kwargs)


def _finish(tree, outermost):
    if not outermost:
        return tree
    leaves, rebuild = _flatten(tree)
    return rebuild([t.detach() for t in leaves])


def _argnums(argnums, n):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not -n <= a < n:
            raise RuntimeError(f"Got argnums={argnums} but only {n} positional inputs")
    return tuple(a % n for a in nums)


def _zeros_for(grads, inputs):
    from .creation import zeros_like
    return [zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


# grad, grad_and_value, vjp ----------------------------------------------------------------

def grad_and_value(func, argnums=0, has_aux=False):
    """``f -> (gradient of f's scalar output w.r.t. the arguments at argnums, value)``; with
    ``has_aux``, f returns ``(value, aux)`` and the result is ``(grads, (value, aux))``."""
    def wrapper(*args, **kwargs):
        with _level() as outermost, enable_grad():
            nums = _argnums(argnums, len(args))
            args = list(args)
            tracked = {}
            for i in nums:
                leaves, rebuild = _flatten(args[i])
                tracked[i] = ([_track(x) for x in leaves], rebuild)
                args[i] = rebuild(tracked[i][0])
            out = func(*args, **kwargs)
            value, aux = out if has_aux else (out, None)
            if not isinstance(value, Tensor) or value.numel() != 1:
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a "
                                   "scalar Tensor, got tensor with shape "
                                   f"{getattr(value, 'shape', None)}")
            flat = [x for i in nums for x in tracked[i][0]]
            grads = _zeros_for(_grad(value, flat, create_graph=True,
                                             allow_unused=True), flat)
            per_arg, k = [], 0
            for i in nums:
                n = len(tracked[i][0])
                per_arg.append(tracked[i][1](grads[k:k + n]))
                k += n
            g = per_arg[0] if isinstance(argnums, int) else tuple(per_arg)
            result = (g, (value, aux)) if has_aux else (g, value)
            return _finish(result, outermost)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """``f -> the gradient of f``'s scalar output (``(grads, aux)`` with ``has_aux``)."""
    inner = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, rest = inner(*args, **kwargs)
        return (g, rest[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """``(f(*primals), vjp_fn)`` (and aux): ``vjp_fn(cotangents)`` gives the vector-Jacobian
    products, one per primal."""
    with _level() as outermost, enable_grad():
        leaves_per, rebuilds = [], []
        for p in primals:
            leaves, rebuild = _flatten(p)
            leaves_per.append([_track(x) for x in leaves])
            rebuilds.append(rebuild)
        args = [rb(lv) for rb, lv in zip(rebuilds, leaves_per)]
        out = func(*args)
        value, aux = out if has_aux else (out, None)
    flat_in = [x for lv in leaves_per for x in lv]
    out_leaves, _ = _flatten(value)

    def vjp_fn(cotangents, *, retain_graph=True, create_graph=None):
        ct_leaves, _ = _flatten(cotangents)
        if len(ct_leaves) != len(out_leaves):
            raise RuntimeError("vjp_fn: Expected the cotangents to have the same structure "
                               "as the primals' outputs")
        with enable_grad():
            grads = _zeros_for(_grad(out_leaves, flat_in, ct_leaves,
                                             retain_graph=True, create_graph=True,
                                             allow_unused=True), flat_in)
        res, k = [], 0
        for lv, rb in zip(leaves_per, rebuilds):
            res.append(rb(grads[k:k + len(lv)]))
            k += len(lv)
        return _finish(tuple(res), outermost and _state["level"] == 0)
    value_out = _finish(value, outermost)
    return (value_out, vjp_fn, aux) if has_aux else (value_out, vjp_fn)


# jvp, jacrev, jacfwd, hessian ---------------------------------------------------------------

_JVP = "jvp(f, primals, tangents)"


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``(f(*primals), J tangents)`` (and aux), in forward mode (by the double-vjp identity
    inside an open dual level)."""
    from .creation import zeros_like
    if not isinstance(primals, tuple):
        raise RuntimeError(f"{_JVP}: Expected primals to be a tuple. E.g. it should be valid "
                           f"to call f(*primals).")
    p_leaves, p_rebuild = _flatten(list(primals))
    t_leaves, _ = _flatten(tangents)
    if not isinstance(tangents, tuple) or len(primals) != len(tangents) or \
            len(p_leaves) != len(t_leaves):
        raise RuntimeError(f"{_JVP}: Expected primals and tangents to have the same python "
                           f"structure. For example, if primals is a tuple of 3 tensors, "
                           f"tangents also must be.")
    if forward_ad._current_level < 0 and not _vmap_levels():
        return _jvp_forward(func, p_leaves, p_rebuild, t_leaves, has_aux)
    with _level() as outermost, enable_grad():
        tracked = [_track(x) for x in p_leaves]
        out = func(*p_rebuild(tracked))
        value, aux = out if has_aux else (out, None)
        out_leaves, out_rebuild = _flatten(value)
        dummies = [_track(zeros_like(o)) if _vmap_levels() else
                   zeros_like(o).requires_grad_(True) for o in out_leaves]
        vjps = _grad(out_leaves, tracked, dummies, create_graph=True,
                             allow_unused=True)
        used = [(v, t) for v, t in zip(vjps, t_leaves) if v is not None]
        if used:
            jv = _grad([v for v, _ in used], dummies, [t for _, t in used],
                               create_graph=True, allow_unused=True)
        else:
            jv = [None] * len(dummies)
        jv = _zeros_for(jv, out_leaves)
        result = (out_rebuild(out_leaves), out_rebuild(jv))
        result = _finish(result, outermost)
        if has_aux:
            return result + (_finish(aux, outermost),)
        return result


def _jvp_forward(func, p_leaves, p_rebuild, t_leaves, has_aux):
    from .creation import zeros_like
    with _level() as outermost, enable_grad(), forward_ad.dual_level():
        duals = [forward_ad.make_dual(p, t) for p, t in zip(p_leaves, t_leaves)]
        out = func(*p_rebuild(duals))
        if has_aux and not (isinstance(out, tuple) and len(out) == 2):
            raise RuntimeError(f"{_JVP}: output of function f should be a tuple: (output, aux) "
                               f"if has_aux is True")
        value, aux = out if has_aux else (out, None)
        out_leaves, out_rebuild = _flatten(value)
        unpacked = [forward_ad.unpack_dual(o) for o in out_leaves]
        primals_out = [p for p, _ in unpacked]
        tangents_out = [t if t is not None else zeros_like(p) for p, t in unpacked]
    result = _finish((out_rebuild(primals_out), out_rebuild(tangents_out)), outermost)
    if has_aux:
        return result + (_finish(aux, outermost),)
    return result


def _jacobian_rows(o, inputs, chunk_size):
    """The Jacobian blocks of ``o`` with respect to each of ``inputs``: the VJPs of the rows
    of the identity, as one backward pass vmapped over them (``chunk_size`` rows at a time)."""
    from .creation import eye
    from .ops import reshape
    flat = o.reshape(-1)
    n = flat.shape[0]
    if n == 0 or not _unwrapped(flat).requires_grad:    # no element, or none depends on x
        from .creation import zeros
        return [zeros(tuple(o.shape) + tuple(x.shape), dtype=o.dtype, device=o.device)
                for x in inputs]

    def row(ct):
        return tuple(_zeros_for(_grad([flat], inputs, [ct], retain_graph=True,
                                      create_graph=True, allow_unused=True), inputs))
    rows = vmap(row, chunk_size=chunk_size)(eye(n, dtype=o.dtype, device=o.device))
    return [reshape(r, tuple(o.shape) + tuple(x.shape)) for r, x in zip(rows, inputs)]


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """``f -> the Jacobian of f`` (output dims, then input dims): the VJPs of every output
    element at once, vmapped over the rows of the identity (``chunk_size`` at a time)."""
    def wrapper(*args):
        with _level() as outermost, enable_grad():
            nums = _argnums(argnums, len(args))
            args = list(args)
            for i in nums:
                args[i] = _track(args[i])
            out = func(*args)
            value, aux = out if has_aux else (out, None)
            outs, rebuild = _flatten(value)
            inputs = [args[i] for i in nums]
            jac_per_out = []
            for o in outs:
                jacs = _jacobian_rows(o, inputs, chunk_size)
                jac_per_out.append(jacs[0] if isinstance(argnums, int) else tuple(jacs))
            result = rebuild(jac_per_out) if len(outs) != 1 or not isinstance(
                value, Tensor) else jac_per_out[0]
            result = _finish(result, outermost)
            return (result, _finish(aux, outermost)) if has_aux else result
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``f -> the Jacobian of f``, one JVP per input element (the same matrix as ``jacrev``):
    per output, the block of each argument at ``argnums`` (a tuple of them for a tuple of
    argnums), shaped ``output.shape + input.shape``."""
    def wrapper(*args):
        from .creation import zeros_like
        from .ops import reshape, stack
        nums = _argnums(argnums, len(args))
        per_input, aux, value = [], None, None
        for i in nums:
            x = args[i]
            cols = []
            for k in range(x.numel()):
                t = zeros_like(x).reshape(-1)
                t[k] = 1.0
                tangents = [zeros_like(a) if isinstance(a, Tensor) else a for a in args]
                tangents[i] = t.reshape(x.shape)
                res = jvp(func, tuple(args), tuple(tangents), has_aux=has_aux)
                value, aux = res[0], (res[2] if has_aux else None)
                cols.append(_flatten(res[1])[0])
            per_input.append((x, cols))
        if value is None:           # no input element: the outputs from one plain call
            out = func(*args)
            value, aux = out if has_aux else (out, None)
        out_leaves, rebuild = _flatten(value)
        blocks = []
        for m, o in enumerate(out_leaves):
            jacs = [reshape(stack([c[m] for c in cols], -1), tuple(o.shape) + tuple(x.shape))
                    if cols else zeros_like(o).reshape(tuple(o.shape) + tuple(x.shape))
                    for x, cols in per_input]
            blocks.append(jacs[0] if isinstance(argnums, int) else tuple(jacs))
        result = rebuild(blocks)
        return (result, aux) if has_aux else result
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of a scalar function: ``jacfwd(jacrev(f))``."""
    return jacfwd(jacrev(func, argnums), argnums)


# modules: functional_call, stack_module_state -----------------------------------------------

@contextlib.contextmanager
def _swapped(module, tensors, strict):
    names = dict(module.named_parameters(remove_duplicate=False))
    names.update(dict(module.named_buffers(remove_duplicate=False)))
    unknown = [k for k in tensors if k not in names]
    if unknown:
        raise RuntimeError(f"functional_call: unexpected key(s): {', '.join(unknown)}")
    if strict:
        missing = [k for k in names if k not in tensors]
        if missing:
            raise RuntimeError(f"functional_call: missing key(s): {', '.join(missing)}")
    saved = []
    for key, value in tensors.items():
        *path, leaf = key.split(".")
        owner = module
        for p in path:
            owner = getattr(owner, p)
        store = owner._parameters if leaf in owner._parameters else owner._buffers
        saved.append((store, leaf, store[leaf]))
        store[leaf] = value
    try:
        yield
    finally:
        for store, leaf, old in reversed(saved):
            store[leaf] = old


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *,
                    tie_weights=True, strict=False):
    """``module(*args, **kwargs)`` with its parameters and buffers replaced by the tensors of
    the dict (or dicts) given, the module's own restored afterwards."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, (list, tuple)):
        merged = {}
        for d in dicts:
            overlap = set(merged) & set(d)
            if overlap:
                raise ValueError(f"{', '.join(sorted(overlap))} appeared in multiple "
                                 "dictionaries; behavior of functional call is ambiguous")
            merged.update(d)
        dicts = merged
    args = args if isinstance(args, tuple) else (args,)
    with _swapped(module, dict(dicts), strict):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """``(params, buffers)``: each name's tensors of the (same-shaped) models stacked on a new
    first dim; the stacked parameters are new leaves that require grad."""
    from .ops import stack
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    params = {k: stack([dict(m.named_parameters())[k].detach() for m in models])
              .requires_grad_(True) for k, _ in models[0].named_parameters()}
    buffers = {k: stack([dict(m.named_buffers())[k] for m in models])
               for k, _ in models[0].named_buffers()}
    return params, buffers


# vmap ---------------------------------------------------------------------------------------

def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a batch dimension of its inputs, as ``torch.func.vmap``:
    ``in_dims`` an int, None for an input that is not batched, or a tuple (one entry per
    positional input, each an int, None or a pytree of them); the results' batch dims go to
    ``out_dims``. Each primitive runs once over the batch, by its batching rule (a primitive
    without one runs once per element, with one warning naming it). ``randomness``: 'error'
    (a random op raises), 'same' (one draw for the batch) or 'different' (one per element);
    ``chunk_size``: at most that many elements at a time."""
    return _vmap(func, in_dims, out_dims, randomness, chunk_size=chunk_size)


__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "stack_module_state", "vmap"]
