"""The guard on a module's state: what a trace of a call into it baked besides its tensors.

A trace runs each module's ``forward`` as it is now and keeps none of the Python it ran:
``Dropout.p``, ``BatchNorm2d.eps``, ``training``, which child ``self.act`` is, and whether
hooks wrap the call are baked into the graph. So every module the function called (and,
for a compiled module, every module of its tree) gets a ``ModuleGuard``, checked before the
variant runs; a change retraces, and the reason names it:

- ``training`` (``model.eval()`` after a training step was traced in train mode);
- each public plain attribute (``p``, ``eps``, ``negative_slope``, a config field);
- which module each child is (``model.act = nn.Tanh()``, ``seq[1] = ...``);
- which tensor each parameter and buffer is (``head.weight = Parameter(...)``, which
  unties a tied weight: the captured tensor, still the embedding's, would not see it);
- which object each other public attribute is: a function (``self.act_fn = ACT2FN[...]``),
  an enum member, a tensor kept as a plain attribute (a rotary ``cos_cached``);
- which hooks are registered (forward, forward pre-, full backward and backward pre-).
"""
import operator

from .values import _MISSING, _PLAIN, freeze, plain

_HOOKS = (("_forward_pre_hooks", "forward pre-hooks"), ("_forward_hooks", "forward hooks"),
          ("_backward_hooks", "backward hooks"), ("_backward_pre_hooks", "backward pre-hooks"))


class ModuleGuard:
    """``module`` (``path`` in the compiled tree, or its type's name) as traced.

    ``changed`` runs before every reuse, for every module, so its usual answer (nothing
    changed) is one ``itemgetter`` over ``training``, the attributes that compare by value,
    the children and the hook dicts, one tuple comparison, and an identity scan of the
    parameters and of the buffers, all in C. Only a mismatch, an attribute kept by content
    (a list, a small array: it may change in place) or one kept by identity takes the slow
    path that names the change."""
    __slots__ = ("module", "name", "training", "attrs", "children", "hooks", "_get",
                 "_values", "_by_content", "objects", "tensors", "_kept", "_slow")

    def __init__(self, path, module):
        d = module.__dict__
        kind = type(module).__name__
        self.module = module
        self.name = f"{path} ({kind})" if path else kind
        self.training = d.get("training")
        # (attr, value, frozen copy, what): what a retrace reason calls it
        self.attrs = [(attr, value, freeze(value),
                       f"the attribute {path}.{attr} of {kind}" if path else
                       f"the attribute {attr} of {kind}")
                      for attr, value in d.items()
                      if not attr.startswith("_") and attr != "training" and plain(value)]
        self.children = tuple(d.get("_modules", {}).items())
        self.hooks = tuple(tuple(d.get(store) or ()) for store, _ in _HOOKS)
        # (attr, object, what): public attributes compared by identity (``is``: a tensor's == is
        # elementwise)
        self.objects = [(attr, value, f"the attribute {path}.{attr} of {kind}" if path else
                         f"the attribute {attr} of {kind}") for attr, value in d.items()
                        if not attr.startswith("_") and attr != "training" and not plain(value)
                        and not isinstance(value, (dict, list, tuple))]
        # the parameters and buffers, held (their ids stay theirs) and compared by id
        self.tensors = (tuple(d["_parameters"].items()), tuple(d["_buffers"].items()))
        self._kept = tuple(t for _, t in self.tensors[0]), tuple(
            t for _, t in self.tensors[1])
        self._index()

    def _index(self):
        by_value = [a for a in self.attrs if type(a[1]) in _PLAIN]
        self._by_content = [a for a in self.attrs if type(a[1]) not in _PLAIN]
        self._slow = bool(self._by_content or self.objects)
        self._get = operator.itemgetter("training", *[a[0] for a in by_value], "_modules",
                                        *[store for store, _ in _HOOKS])
        d = self.module.__dict__
        # the children and hooks as copies of their dicts: == compares them by identity
        self._values = (self.training, *[a[1] for a in by_value], dict(self.children),
                        *[dict(d.get(store) or {}) for store, _ in _HOOKS])

    def drop(self, unwritten):
        """Stop checking the attributes for which ``unwritten(what)`` holds (state a replayed
        store writes at every call, which the graph never reads)."""
        self.attrs = [a for a in self.attrs if not unwritten(a[3])]
        self.objects = [o for o in self.objects if not unwritten(o[2])]
        self._index()

    def changed(self):
        """Why the variant no longer fits, or None."""
        d = self.module.__dict__
        try:
            if (self._get(d) == self._values and not self._slow
                    and _same(d["_parameters"], self._kept[0])
                    and _same(d["_buffers"], self._kept[1])):
                return None
        except KeyError:        # an attribute deleted: the slow path names it
            pass
        return self._why(d)

    def _why(self, d):
        if d.get("training") is not self.training:
            return f"{self.name}.training changed: {self.training} -> {d.get('training')}"
        for attr, value, frozen, what in self.attrs:
            now = d.get(attr, _MISSING)
            if now is value and type(now) in _PLAIN:
                continue
            if now is not _MISSING:
                again = freeze(now)
                if type(again) is type(frozen) and again == frozen:
                    continue
            shown = "<deleted>" if now is _MISSING else repr(now)
            return f"{what} changed: {value!r} -> {shown}"
        for attr, obj, _ in self.objects:
            if d.get(attr, _MISSING) is not obj:
                return f"the attribute {attr} of {self.name} was replaced by another object"
        for store, kept in zip(("_parameters", "_buffers"), self.tensors):
            now = d.get(store, {})
            for name, t in kept:
                if now.get(name, _MISSING) is not t:
                    return f"the {store[1:-1]} {name} of {self.name} was replaced or removed"
            if len(now) != len(kept):
                return f"a {store[1:-1]} was added to {self.name}"
        children = d.get("_modules", {})
        if tuple(children.items()) != self.children:
            was = dict(self.children)
            name = next((n for n in children if was.get(n, _MISSING) is not children[n]),
                        next(iter(was), ""))
            return f"the child {name!r} of {self.name} was replaced or removed"
        for (store, label), keys in zip(_HOOKS, self.hooks):
            if tuple(d.get(store) or ()) != keys:
                return f"the {label} of {self.name} changed"
        return None

    def describe(self):
        return (f"{self.name}: training={self.training}, {len(self.attrs)} setting(s), "
                f"{len(self.children)} child(ren) and its hooks as traced")


def _same(now, kept):
    """Whether the dict ``now`` holds the objects of the tuple ``kept``, in order (by
    identity, in C: a tensor's == is elementwise)."""
    return len(now) == len(kept) and all(map(operator.is_, now.values(), kept))


def module_guards(module, called):
    """A ``ModuleGuard`` for each module of ``module``'s tree (None: no compiled module)
    and each of ``called``, once each."""
    guards, seen = [], set()
    tree = module.named_modules() if module is not None else ()
    for path, m in [*tree, *(("", m) for m in called)]:
        if id(m) not in seen:
            seen.add(id(m))
            guards.append(ModuleGuard(path, m))
    return guards
