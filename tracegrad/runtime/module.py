"""``OptimizedModule``: what ``tracegrad.compile(module)`` returns (PyTorch's name).

A module whose calls run the compiled forward (a ``CompiledFunction`` over the original
module) and whose every other method and attribute is the original's, so a training
script written for an ``nn.Module`` runs unchanged on it.
"""


def _module_class():
    from tracegrad.nn import Module
    return Module


class OptimizedModule(_module_class()):
    """What ``compile(module)`` returns, as PyTorch's: a module whose calls run the compiled
    forward and whose every other method and attribute is the original's (``_orig_mod``),
    so ``SGD(model.parameters())``, ``model.train()`` and ``state_dict()`` (the original's
    keys, no prefix) work on it unchanged. ``code``, ``graph``, ``stats``, ``explain()``
    and ``kernels`` are the compiled forward's."""

    _INSPECTION = frozenset({"code", "graph", "graph_ir", "stats", "explain", "kernels",
                             "backend", "dynamic", "fullgraph", "max_variants", "_last",
                             "_variants"})

    def __init__(self, module, compiled):
        object.__setattr__(self, "_orig_mod", module)
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, *args, **kwargs):
        return self._compiled(*args, **kwargs)

    forward = __call__

    def __getattr__(self, name):
        own = self.__dict__
        if "_orig_mod" not in own:      # being unpickled: nothing to forward to yet
            raise AttributeError(name)
        if name in OptimizedModule._INSPECTION:
            return getattr(own["_compiled"], name)
        return getattr(own["_orig_mod"], name)

    def __getstate__(self):
        return {"_orig_mod": self._orig_mod, "_compiled": self._compiled}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __setattr__(self, name, value):
        setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        delattr(self._orig_mod, name)

    def __dir__(self):
        return sorted(set(dir(self._orig_mod)) | set(OptimizedModule._INSPECTION))

    # dunders skip __getattr__: the containers' own (model[0], len(model), ...)
    def __getitem__(self, key):
        return self._orig_mod[key]

    def __len__(self):
        return len(self._orig_mod)

    def __bool__(self):         # a module is true, as PyTorch's (__len__ would decide it)
        return True

    def __iter__(self):
        return iter(self._orig_mod)

    def __contains__(self, item):
        return item in self._orig_mod

    def __repr__(self):
        inner = repr(self._orig_mod).replace("\n", "\n  ")
        return f"OptimizedModule(\n  (_orig_mod): {inner}\n)"


def _forwarded(name):
    """``Module.<name>`` run on the original; one that returns the original returns the
    wrapper instead (``train()``, ``to()``), as chained calls expect."""
    def method(self, *args, **kwargs):
        out = getattr(self._orig_mod, name)(*args, **kwargs)
        return self if out is self._orig_mod else out
    method.__name__ = name
    method.__doc__ = f"``{name}`` of the original module."
    return method


for _name, _member in vars(_module_class()).items():
    if callable(_member) and not _name.startswith("__") and _name not in (
            "forward", "_call_impl", "compile"):
        setattr(OptimizedModule, _name, _forwarded(_name))
OptimizedModule.training = property(lambda self: self._orig_mod.training)
