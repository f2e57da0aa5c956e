"""What a declaration puts in place: Tensor methods, and the check of a VJP rule's reads.

``method`` declares a hand-written function a ``Tensor`` method where the function is
defined (``Primitive(..., method=True)`` does the same for a generated one), so there
is no second list of methods to keep in step::

    @method                         # Tensor.sum
    def sum(input, dim=None, keepdim=False, *, dtype=None): ...

    @method("add_")                 # Tensor.add_, a hand-written in-place method
    def _add_(self, other, *, alpha=1): ...

``check_vjp_reads`` reads each VJP rule's bytecode at declaration, so a rule that reads
what eager autograd does not save fails there instead of in someone's backward pass.
"""
import dis
import functools
import inspect

from ..tensor import Tensor

TENSOR_METHODS = {}     # name -> what ``method`` (or a primitive's method=) put on Tensor


def method(*names):
    """Install the decorated function (or property) on ``Tensor``.

    ``@method`` uses the function's own name; ``@method("T", ...)`` the names given.
    Returns what it decorates, unchanged.
    """
    if len(names) == 1 and callable(names[0]):
        install_method(names[0].__name__, names[0])
        return names[0]

    def decorate(fn):
        for name in names:
            install_method(name, fn)
        return fn
    return decorate


def install_method(name, fn):
    """``Tensor.<name> = fn``, refusing to replace what the ``Tensor`` class itself defines or
    what another declaration put there (the same function declared again, as a reloaded
    module does, replaces it)."""
    if name in vars(Tensor) and name not in TENSOR_METHODS:
        raise TypeError(f"Tensor.{name} is defined by the Tensor class; a declared method may "
                        f"not replace it (pick another name)")
    old = TENSOR_METHODS.get(name)
    if old is not None and _origin(old) != _origin(fn):
        raise TypeError(f"Tensor.{name} is declared twice: by {'.'.join(_origin(old))} and by "
                        f"{'.'.join(_origin(fn))} (pick another name)")
    setattr(Tensor, name, fn)
    TENSOR_METHODS[name] = fn


def _origin(obj):
    f = getattr(obj, "fget", obj)       # a property: its getter
    return (str(getattr(f, "__module__", None)), str(getattr(f, "__qualname__", None)))


# reads of a rule ---------------------------------------------------------------------

# Loads of a local (a parameter). LOAD_CLOSURE, and LOAD_FAST building a closure tuple on
# 3.13+, count too: a nested function or comprehension that captures a parameter reads it.
_LOADS = {"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_DEREF", "LOAD_CLOSURE", "LOAD_FAST_BORROW",
          "LOAD_FAST_LOAD_FAST", "LOAD_FAST_BORROW_LOAD_FAST_BORROW"}
_STORES = {"STORE_FAST", "STORE_DEREF", "STORE_FAST_STORE_FAST", "DELETE_FAST", "DELETE_DEREF"}


def reads(fn):
    """The local names ``fn`` reads before it assigns them (so its parameters it reads),
    or None when ``fn`` has no Python code to look at.

    One pass in instruction order: a load before any store of the name is a read. So a
    comprehension variable that shadows a parameter (inlined on 3.12+, where it is saved by
    LOAD_FAST_AND_CLEAR, stored, then loaded) is not taken for the parameter.
    """
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    seen, read = set(), set()
    for ins in dis.get_instructions(code):
        op, val = ins.opname, ins.argval
        if op == "STORE_FAST_LOAD_FAST":        # 3.13+: store the first, load the second
            seen.add(val[0])
            val, op = (val[1],), "LOAD_FAST"
        names = val if isinstance(val, tuple) else (val,)
        if op in _LOADS:
            read.update(n for n in names if n not in seen)
        elif op in _STORES:
            seen.update(names)
    return read


def _input_params(rule, n):
    """The names under which ``rule(g, *inputs, out=..., **params)`` receives each of its
    ``n`` inputs (None where it takes them through ``*rest``), and its ``*rest`` name."""
    code = rule.__code__
    positional = code.co_varnames[:code.co_argcount]
    star = None
    if code.co_flags & 0x04:               # CO_VARARGS: the name after the named params
        star = code.co_varnames[code.co_argcount + code.co_kwonlyargcount]
    return [positional[1 + i] if 1 + i < len(positional) else None for i in range(n)], star


def out_is_positional(prim):
    """Whether every VJP rule of ``prim`` takes ``out`` as the positional parameter after the
    inputs (``lambda g, a, b, out: ...``): eager backward then passes it by position, which
    is cheaper than by keyword."""
    if prim.vjp is None or callable(prim.vjp):
        return False
    n = 1 + len(prim.args)
    for rule in prim.vjp:
        if rule is None:
            continue
        try:
            ps = list(inspect.signature(rule).parameters.values())
        except (TypeError, ValueError):
            return False
        if any(a.startswith("*") for a in prim.args) or len(ps) <= n or ps[n].name != "out" \
                or any(q.kind not in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)
                       for q in ps[:n + 1]):
            return False
    return True


def check_vjp_reads(prim):
    """Raise TypeError when a VJP rule of ``prim`` reads what eager autograd does not give it.

    In eager the ``out`` slot is None unless ``"result"`` is in ``saves``, and an elementwise
    primitive's rules get None for an unsaved tensor input (other kinds get an ``Aval`` with
    its shape and dtype, which rules may read). A compiled backward would still work, so
    the mistake would show only in eager: it is caught here, at declaration.
    """
    if prim.vjp is None:
        return
    rules = [(None, prim.vjp)] if callable(prim.vjp) else list(zip(prim.args, prim.vjp))
    for wrt, rule in rules:
        if rule is None:
            continue
        read = reads(rule)
        if read is None:
            continue
        which = f"the VJP rule for {wrt!r}" if wrt else "the VJP rule"
        if "out" in read and not prim.saves_result:
            raise TypeError(
                f"Primitive {prim.name!r}: {which} reads its parameter 'out' (the result), but "
                f"saves={prim.saves!r} has no 'result', so eager backward would pass None: add "
                f"'result' to saves")
        if prim.kind != "elementwise":
            continue
        params, star = _input_params(rule, len(prim.args))
        for arg, param in zip(prim.args, params):
            if arg.startswith("*"):
                param = star
            if param is not None and param in read and arg not in prim.saves:
                raise TypeError(
                    f"Primitive {prim.name!r}: {which} reads its parameter {param!r} (input "
                    f"{arg!r}), but saves={prim.saves!r} does not save it, so eager backward "
                    f"would pass None: add {arg!r} to saves")


__all__ = ["method", "install_method", "TENSOR_METHODS", "reads", "check_vjp_reads"]


_RENAMED = {}       # (node class, name) -> its subclass of that name


# ``collapse._active`` and ``collapse._run``, which a collapsed composite calls: ``collapse``
# sets them when it is imported, as it sits above the engine whose helpers it runs (and so
# above every op). Until then a composite runs as its primitives.
collapse_active = lambda: False  # noqa: E731
collapse_run = None


def backward_name(name, collapse=True):
    """Make a composite's result show PyTorch's node for it: ``F.mse_loss(...).grad_fn`` is a
    ``MseLossBackward0`` as in PyTorch, not the node of the composite's last primitive.

    ``name``: the node's name, or ``name(*args, **kwargs)`` choosing it from the call
    (``mean`` is ``MeanBackward0`` over every element, ``MeanBackward1`` over dims).
    In eager mode with grad, the composite runs as one node of that name whose
    ``next_functions`` are its floating tensor arguments' edges, as PyTorch's
    (``collapse.py``). ``collapse=False`` is for a function of one primitive (``t`` is a
    permute): its node just takes the name, as a subclass of the primitive's node class,
    which ``grad_fn``, ``name()`` and the profiler's backward rows show.
    """
    def decorate(fn):
        if collapse:
            params = list(inspect.signature(fn).parameters)
            # an in-place call (``inplace=True``) writes into its argument: no node of its own
            at = params.index("inplace") if "inplace" in params else None

            @functools.wraps(fn)
            def collapsed(*args, **kwargs):
                if not collapse_active() or at is not None and (
                        kwargs.get("inplace") or len(args) > at and args[at]):
                    return fn(*args, **kwargs)
                label = name if type(name) is str else name(*args, **kwargs)
                return collapse_run(label, fn, args, kwargs)
            return collapsed

        @functools.wraps(fn)
        def named(*args, **kwargs):
            out = fn(*args, **kwargs)
            node = out._grad_fn if type(out) is Tensor else None
            if node is not None and not any(type(a) is Tensor and a._grad_fn is node
                                            for a in args):
                rename_node(node, name if type(name) is str else name(*args, **kwargs))
            return out
        return named
    return decorate


def rename_node(node, label):
    """Show ``node`` under PyTorch's name ``label`` (as a subclass of its class, made once
    per class and name): a function of one primitive whose PyTorch overload has a node name
    of its own (``sum`` over dims is ``SumBackward1``)."""
    cls = type(node)
    if cls.__name__ != label:
        sub = _RENAMED.get((cls, label))
        if sub is None:
            sub = _RENAMED[(cls, label)] = type(label, (cls,), {"__slots__": ()})
        node.__class__ = sub
