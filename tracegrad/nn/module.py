"""``nn.Module``: the base class of layers, with PyTorch's registration rules.

Assigning a ``Parameter`` or a ``Module`` to an attribute registers it (in
``_parameters`` / ``_modules``, in definition order); ``register_buffer``
registers a tensor that is state but not a parameter. Every traversal
(``named_parameters``, ``named_buffers``, ``named_modules``, ``state_dict``)
walks those dicts in order, prefixes names with the dotted path and visits a
shared tensor or module once. ``__call__`` runs the forward pre-hooks,
``forward`` and the forward hooks.

``to``/``float``/``double``/``cuda`` convert parameters in place (assigning
``.data``, as PyTorch does) so an optimizer built before the move keeps
updating the same objects; buffers are replaced by their converted values.

The state-dict methods are ``module_state``'s, the full backward hooks ``module_hooks``'s.
"""
from .. import _hooks
from ..autograd.grad_mode import no_grad
from ..autograd.graph import _HookDict
from ..tensor import Tensor, parse_to_args
from .module_hooks import _add_hook, _BackwardHooks
from .module_state import StateDictMixin, _IncompatibleKeys  # noqa: F401 - PyTorch's name
from .parameter import Parameter


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


def _typename(obj):
    return obj.type() if isinstance(obj, Tensor) else type(obj).__name__


def zero_grads(params, set_to_none=True):
    """``zero_grad`` of modules and optimisers: drop each ``.grad``, or zero it in place
    (detached first, as PyTorch does)."""
    tracing = _hooks.tracer is not None
    for p in params:
        if p.grad is None:
            if tracing and set_to_none:     # recorded: a variant clears it whatever it finds
                p.grad = None
            continue
        if set_to_none:
            p.grad = None
        else:
            if p.grad.grad_fn is not None:
                p.grad.detach_()
            else:
                p.grad.requires_grad_(False)
            p.grad.zero_()

class Module(StateDictMixin):
    """Base class for all neural network modules; subclasses define ``forward``."""

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments; "
                            f"Module.__init__() takes none")
        # object.__setattr__: our own __setattr__ reads these dicts
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", {})
        set_(self, "_buffers", {})
        set_(self, "_non_persistent_buffers_set", set())
        set_(self, "_modules", {})
        set_(self, "_forward_hooks", _HookDict())
        set_(self, "_forward_pre_hooks", _HookDict())
        set_(self, "_backward_hooks", _HookDict())
        set_(self, "_backward_pre_hooks", _HookDict())

    def forward(self, *input):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    # registration ------------------------------------------------------------------------
    def _check_name(self, kind, name, store):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f"{kind} name can't contain \".\", got: {name}")
        if name == "":
            raise KeyError(f"{kind} name can't be empty string \"\"")
        if hasattr(self, name) and name not in store:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Add ``param`` (a ``Parameter`` or None) under ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name("parameter", name, self._parameters)
        if param is None:
            self._parameters[name] = None
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                            f"(tracegrad.nn.Parameter or None required)")
        if param.grad_fn is not None:
            raise ValueError(
                f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must be "
                f"created explicitly. To express '{name}' as a function of another Tensor, "
                f"compute the value in the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Add a tensor that is module state but not a parameter (e.g. BatchNorm's running
        mean); ``persistent=False`` keeps it out of ``state_dict``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            f"(tracegrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Add a child module under ``name`` (None is allowed as a placeholder)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        self._check_name("module", name, self._modules)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, "_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                f"(tracegrad.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            if d.get("_modules") is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, "_modules")
            self._modules[name] = value
        elif d.get("_modules") is not None and name in self._modules:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                f"(tracegrad.nn.Module or None expected)")
            self._modules[name] = None
        elif d.get("_buffers") is not None and name in self._buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                f"(tracegrad Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name, keep):
        """Drop ``name`` from every registry but ``keep``, where it is about to be set: a
        child or parameter replaced keeps its place (a ``Sequential``'s order, the order of
        ``parameters()`` and ``state_dict()``), as PyTorch's does."""
        self.__dict__.pop(name, None)
        for store in ("_parameters", "_buffers", "_modules"):
            if store != keep:
                self.__dict__[store].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name):
        # only called when normal lookup fails: look in the registries
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__.get(store, ()):
                del self.__dict__[store][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(object.__dir__(self)) + list(self._parameters) + list(self._modules) + \
            list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def get_submodule(self, target):
        """The module at dotted path ``target`` ("" is this module)."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    # traversal ----------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, get_members, prefix="", recurse=True, remove_duplicate=True):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None or value in seen:
                    continue
                if remove_duplicate:
                    seen.add(value)
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """``(dotted name, parameter)`` pairs in definition order, each parameter once."""
        yield from self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                       remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                       remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # modes and gradients ------------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first), then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # conversion ---------------------------------------------------------------------------
    def _apply(self, fn):
        for module in self.children():
            module._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                # assign .data so the Parameter object (held by optimizers) stays the same
                p.data = fn(p)
                if p._grad is not None:
                    p._grad.data = fn(p._grad)
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(tensor)``; a dtype
        applies to floating-point parameters and buffers only."""
        device, dtype = parse_to_args(args, kwargs)
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but "
                            f"got desired dtype={dtype}")

        def convert(t):
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None)
        return self._apply(convert)

    def cuda(self, device=None):
        return self.to("cuda" if device is None else
                       f"cuda:{device}" if isinstance(device, int) else device)

    def cpu(self):
        return self.to("cpu")

    def type(self, dst_type):
        return self._apply(lambda t: t.to(dst_type))

    def float(self):
        return self._apply(lambda t: t.float() if t.is_floating_point() else t)

    def double(self):
        return self._apply(lambda t: t.double() if t.is_floating_point() else t)

    def half(self):
        return self._apply(lambda t: t.half() if t.is_floating_point() else t)

    # hooks and calls ----------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` (or ``hook(module, args, kwargs)`` with ``with_kwargs``)
        runs before ``forward``; it may return new args (or ``(args, kwargs)``)."""
        return _add_hook(self._forward_pre_hooks, (hook, with_kwargs, False), prepend)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """``hook(module, args, output)`` (or ``hook(module, args, kwargs, output)``) runs
        after ``forward``; it may return a new output. ``always_call`` runs it even when
        ``forward`` raised."""
        return _add_hook(self._forward_hooks, (hook, with_kwargs, always_call), prepend)

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` runs when the gradients with respect to
        the module's positional tensor inputs are computed; it may return a new
        ``grad_input`` tuple. Entries for inputs that get no gradient are None."""
        return _add_hook(self._backward_hooks, hook, prepend)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` runs when the gradients with respect to the module's
        outputs are known, before the module's backward; it may return a new
        ``grad_output`` tuple."""
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    def __call__(self, *args, **kwargs):
        compiled = self.__dict__.get("_compiled_call")
        if compiled is not None:            # Module.compile(): the compiled forward
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """Compile this module in place (``tracegrad.compile``'s arguments): its calls run
        the compiled forward from now on; everything else about it is unchanged."""
        from .. import compile as compile_
        self.__dict__["_compiled_call"] = compile_(self, *args, **kwargs)._compiled

    def _call_impl(self, *args, **kwargs):
        """A call without compilation: forward pre-hooks, ``forward``, forward hooks."""
        if _hooks.TRACING.n and _hooks.tracer is not None:     # inside tracegrad.compile
            _hooks.tracer.module_called(self)
        backward_hooks = self.__dict__.get("_backward_hooks") or \
            self.__dict__.get("_backward_pre_hooks")
        if not self._forward_pre_hooks and not self._forward_hooks and not backward_hooks:
            return self.forward(*args, **kwargs)
        for hook, with_kwargs, _ in list(self._forward_pre_hooks.values()):
            if with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError(f"forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        if backward_hooks:
            hooks = _BackwardHooks(self)
            args = hooks.wrap_inputs(args)
        try:
            result = self.forward(*args, **kwargs)
        except Exception:
            for hook, with_kwargs, always_call in list(self._forward_hooks.values()):
                if always_call:
                    try:
                        hook(self, args, kwargs, None) if with_kwargs else hook(self, args, None)
                    except Exception:   # noqa: BLE001 - the forward's error is the one to see
                        pass
            raise
        for hook, with_kwargs, _ in list(self._forward_hooks.values()):
            res = hook(self, args, kwargs, result) if with_kwargs else hook(self, args, result)
            if res is not None:
                result = res
        if backward_hooks:
            result = hooks.wrap_outputs(result)
        return result

    # printing -----------------------------------------------------------------------------
    def extra_repr(self):
        """The module's own settings, shown inside its ``repr``; subclasses override it."""
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"

