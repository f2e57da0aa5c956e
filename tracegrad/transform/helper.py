"""``__tracegrad__``: the object a rewritten function calls (through a closure cell) to name
its values, record its impure calls and replay its writes to outside state."""
from .. import _hooks
from ..tensor import Tensor
from .impure import ImpureCall


HELPER = "__tracegrad__"


class _Helper:
    """What the rewritten function calls (reached through a closure cell); ``sites``: its
    impure call sites (``ImpureSite``), by index."""

    def __init__(self, sites, stores=()):
        self.sites, self.stores = sites, stores

    def store(self, index, objs, args):
        """Before a write to outside state (``stores.py``), with the objects it writes to and
        the locals it reads: a trace records the store, for the variant to make again after
        each run with that run's tensors; one it cannot replay (the function reads the state
        it writes, or passes tensors inside containers) stops the recording here, and the
        store and the rest of the call run eagerly."""
        tracer = _hooks.tracer
        if tracer is None or getattr(tracer, "symbolic", True) or (
                objs and all(isinstance(o, Tensor) for o in objs)):
            return      # not tracing, or a tensor written in place: the trace records that
        site = self.stores[index]
        why = None
        if site.replay is None or site.conflict:
            why = f"writes to {site}, and the function reads {site.conflict or 'it'} too"
        elif any(_holds_tensor(a) for a in args
                 if not isinstance(a, Tensor) and not any(a is o for o in objs)):
            why = f"writes to {site} a container of tensors"
        if why is not None:     # state made on a first call stops that call only
            tracer.abandon(why, for_good="again")
        else:
            tracer.replay_store(str(site), site.replay, args, site.keys)

    def impure(self, index, fn):
        """``fn``, which records each call on the active tracer (a plain call otherwise)."""
        tracer = _hooks.tracer
        calls = getattr(tracer, "impure", None) if tracer is not None else None
        if calls is None:
            return fn
        site = self.sites[index]

        def recorded(*args, **kwargs):
            before = _shallow(args, kwargs)
            result = fn(*args, **kwargs)
            try:
                mutated = bool(before != _shallow(args, kwargs))
            except Exception:       # noqa: BLE001 - an argument that cannot be compared
                mutated = True
            calls.append(ImpureCall(site, args, kwargs, result, mutated))
            return result
        return recorded

    @staticmethod
    def name(value, name):
        tracer = _hooks.tracer
        if tracer is None:
            return
        for t, n in _named(value, name):
            v = tracer.env.get(id(t))
            if v is not None and v[1].name is None:     # the first assignment names it
                tracer.names.setdefault(v[1], n)


def _holds_tensor(x, depth=0):
    if isinstance(x, Tensor):
        return True
    if depth < 3 and isinstance(x, (list, tuple, set, frozenset)):
        return any(_holds_tensor(e, depth + 1) for e in x)
    if depth < 3 and isinstance(x, dict):
        return any(_holds_tensor(e, depth + 1) for e in x.values())
    return False


def _shallow(args, kwargs):
    """Top-level copies of the containers among the arguments: a call that changes one in
    place (``random.shuffle(xs)``) is told apart by comparing before and after."""
    def copy(a):
        return list(a) if type(a) is list else dict(a) if type(a) is dict else a
    return [copy(a) for a in args], {k: copy(a) for k, a in kwargs.items()}


def _named(value, name):
    if isinstance(value, Tensor):
        yield value, name
    elif isinstance(value, (tuple, list)) and len(value) <= 16:
        for i, x in enumerate(value):
            if isinstance(x, Tensor):
                yield x, f"{name}_{i}"
