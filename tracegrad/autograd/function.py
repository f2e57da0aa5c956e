"""Custom differentiable functions: ``Function`` with ``forward(ctx, ...)``/``backward(ctx, ...)``.

The ``ctx`` a forward receives is the backward node itself (a
``<Name>Backward`` instance), as in PyTorch: it saves tensors with version
checks, knows which inputs need gradients, and is what ``grad_fn`` shows.
"""
import functools

from .. import _hooks
from . import forward_ad, grad_mode
from .graph import FREED_ERROR, Node, SavedTensor, _seq

_gm = grad_mode._state

# ``_vmap.functions.apply``: a Function called on a vmap level's batched tensors that need a
# gradient (NotImplemented for any other call); ``vmap`` sets it while it runs.
batched_apply = None


class FunctionCtx:
    """What ``forward`` can tell ``backward`` through ``ctx``."""

    def save_for_backward(self, *tensors):
        self._to_save = tensors

    def save_for_forward(self, *tensors):
        self._to_save_forward = tensors

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        self._materialize = bool(value)

    @property
    def saved_tensors(self):
        saved = self._saved
        if saved is None:
            raise RuntimeError(FREED_ERROR)
        return tuple(s.unpack(self) if isinstance(s, SavedTensor) else s for s in saved)

    saved_variables = saved_tensors


class BackwardCFunction(Node, FunctionCtx):
    """The node (and ctx) of one ``Function.apply``."""
    _forward_cls = None

    def __init__(self):
        super().__init__((), ())
        self._to_save = ()
        self._dirty = self._non_differentiable = ()
        self._materialize = True
        self._saved = ()
        self._in_meta = ()
        self.needs_input_grad = ()

    def apply(self, grads):
        backward = self._forward_cls.backward
        res = backward(self, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(self.next_functions)
        if len(res) != n:
            if len(res) > n and all(r is None for r in res[n:]):
                res = res[:n]
            else:
                raise RuntimeError(f"function {self.name()} returned an incorrect number of "
                                   f"gradients (expected {n}, got {len(res)})")
        return [self._check_grad(i, r) for i, r in enumerate(res)]

    def _check_grad(self, i, g):
        from ..tensor import Tensor
        meta = self._in_meta[i]
        if g is None:
            return None
        if meta is None:
            raise RuntimeError(f"function {self.name()} returned a gradient different than None "
                               f"at position {i + 1}, but the corresponding forward input was not "
                               f"a Variable")
        if not isinstance(g, Tensor):
            raise RuntimeError(f"expected Variable or None (got {type(g).__name__})")
        if self.next_functions[i][0] is None:
            return None
        shape, dt = meta
        if g.shape != shape:
            from ..ops import sum_to_shape
            from ..ops.rules import broadcast
            try:
                ok = broadcast(shape, g.shape) == tuple(g.shape)
            except RuntimeError:
                ok = False
            if not ok:
                raise RuntimeError(f"Function {self.name()} returned an invalid gradient at index "
                                   f"{i} - got {list(g.shape)} but expected shape compatible with "
                                   f"{list(shape)}")
            g = sum_to_shape(g, shape)
        if g.dtype is not dt:
            g = g.to(dt)
        return g

    def release(self):
        self._saved = None


class FunctionMeta(type):
    """Gives every Function subclass its own ``<Name>Backward`` node class."""

    def __init__(cls, name, bases, attrs):
        cls._backward_cls = type(name + "Backward", (BackwardCFunction,), {"_forward_cls": cls})
        super().__init__(name, bases, attrs)


class Function(metaclass=FunctionMeta):
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please use new-"
            "style autograd function with static forward method.")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for your "
                                  "custom autograd.Function to use it with backward mode AD.")

    vjp = backward

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError

    @classmethod
    def apply(cls, *args, **kwargs):
        if _hooks.tracer is not None:       # inside tracegrad.compile
            return _hooks.tracer.custom_function(cls, args, kwargs,
                                                 lambda: cls._apply(*args, **kwargs))
        if batched_apply is not None:
            out = batched_apply(cls, args, kwargs)
            if out is not NotImplemented:
                return out
        return cls._apply(*args, **kwargs)

    @classmethod
    def _run_forward(cls, ctx, args, kwargs):
        """The forward's outputs, ``ctx`` set up by it (or by ``setup_context``)."""
        if cls.setup_context is not Function.setup_context:
            outputs = cls.forward(*args, **kwargs)
            cls.setup_context(ctx, args, outputs)
            return outputs
        return cls.forward(ctx, *args, **kwargs)

    @classmethod
    def _apply(cls, *args, **kwargs):
        from ..tensor import Tensor
        ctx = cls._backward_cls()
        is_tensor = [isinstance(a, Tensor) for a in args]
        ctx.needs_input_grad = tuple(t and a._requires_grad for t, a in zip(is_tensor, args))
        record = _gm.grad_enabled and any(ctx.needs_input_grad)
        tangents = forward_ad.input_tangents(args)     # None: no dual input at an open level
        with grad_mode.no_grad(), forward_ad.propagation(tangents is None):
            outputs = cls._run_forward(ctx, args, kwargs)
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        _check_ctx(ctx, outs)
        if record:
            outs = _connect(ctx, args, is_tensor, outs)
        else:
            for t in ctx._dirty:        # PyTorch bumps a dirty tensor's version once more
                t._vc.value += 1
                if t._base is not None:
                    t._view_version = t._vc.value
        ctx._saved = tuple(_save(t, outs) for t in ctx._to_save)
        ctx._to_save = ()
        if tangents is not None:
            forward_ad.function_jvp(cls.jvp, ctx, args, tangents, outs)
        return outs[0] if single else outs


def _check_ctx(ctx, outs):
    """What forward told ctx must make sense, as PyTorch checks it."""
    from ..tensor import Tensor
    for i, t in enumerate(ctx._to_save):
        if t is not None and not isinstance(t, Tensor):
            raise TypeError(f"save_for_backward can only save variables, but argument {i} is of "
                            f"type {type(t).__name__}")
    out_ids = {id(o) for o in outs}
    if any(id(t) not in out_ids for t in ctx._dirty):
        raise RuntimeError("Some elements marked as dirty during the forward method were not "
                           "returned as output. The inputs that are modified inplace must all be "
                           "outputs of the Function.")


def _connect(ctx, args, is_tensor, outs):
    from ..ops.core import _rebase_view, check_inplace
    from ..tensor import Tensor
    ctx.next_functions = tuple(a._grad_edge() if t else (None, 0) for t, a in zip(is_tensor, args))
    ctx._seq = next(_seq)    # newer than any AccumulateGrad just made for its inputs
    ctx._in_meta = tuple((a.shape, a.dtype) if t else None for t, a in zip(is_tensor, args))
    dirty = {id(t) for t in ctx._dirty}
    non_diff = {id(t) for t in ctx._non_differentiable}
    inputs = {id(a) for a, t in zip(args, is_tensor) if t}
    result, meta = [], []
    for i, o in enumerate(outs):
        if not isinstance(o, Tensor):
            result.append(o)
            meta.append(((), None, None))
            continue
        meta.append((o._data.shape, o._data.dtype, None))
        marked = id(o) in non_diff      # read before an input returned is made an alias
        if id(o) in dirty:
            check_inplace(o, ctx.name())    # the forward wrote into this input
            o._vc.value += 1                # PyTorch bumps a dirty tensor's version once more
        elif id(o) in inputs:
            o = Tensor._make(o._data, vc=o._vc)    # an input returned unchanged: a new alias
        if marked or not o.is_floating_point():
            o._requires_grad = o._requires_grad and id(o) in dirty
        elif id(o) in dirty and o._base is not None:
            # written through a view: the base gets a CopySlices history, as in core.inplace
            new = Tensor._make(o._data, grad_fn=ctx, output_nr=i)
            _rebase_view(o, new)
            o._view_version = o._vc.value
        else:
            o._grad_fn, o._output_nr, o._requires_grad = ctx, i, True
        result.append(o)
    ctx._out_meta = tuple(meta)
    return tuple(result)


def _save(t, outs):
    if t is None:
        return None
    is_output = any(t is o for o in outs)
    return SavedTensor(t, is_output=is_output and t._grad_fn is not None)


class Error(Node):
    """Backward of a ``once_differentiable`` result: differentiating it raises (PyTorch's name)."""
    __slots__ = ()

    def apply(self, grads):
        raise RuntimeError("trying to differentiate twice a function that was marked with "
                           "@once_differentiable")


def once_differentiable(fn):
    """Run a ``backward`` without building a graph; its results refuse a second derivative."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        from ..tensor import Tensor
        with grad_mode.no_grad():
            outputs = fn(ctx, *args)
        if not _gm.grad_enabled:
            return outputs
        needs = [a for a in args if isinstance(a, Tensor) and a._requires_grad]
        if not needs:
            return outputs
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        node = Error(tuple(a._grad_edge() for a in needs),
                     tuple((a._data.shape, a._data.dtype, None) for a in needs))
        wrapped = tuple(Tensor._make(o._data, grad_fn=node) if isinstance(o, Tensor) else o
                        for o in outs)
        return wrapped[0] if single else wrapped
    return wrapper
