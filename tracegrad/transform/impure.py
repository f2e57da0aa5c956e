"""Calls whose result changes from call to call (``random.randint``, ``time.time()``,
``os.environ["X"]``: the modules in ``IMPURE``, and generator objects' draws): which names
are impure, the sites where the source makes such calls, and the calls a trace made, which
the runtime draws again before it reuses a variant (``runtime/guards/impure.py``)."""
import random
import types

import numpy as np


# modules whose functions give a new result each call (``os``: only these attributes)
IMPURE = {"random": None, "time": None, "secrets": None, "uuid": None,
          "os": {"environ", "getenv", "urandom", "getpid"}, "numpy.random": None}


# generator objects whose methods draw: a call of one is impure, as random.random() is
GENERATORS = (random.Random, np.random.Generator, np.random.RandomState)


def impure_name(chain):
    """The dotted name when ``chain`` (loaded names and their objects) reaches into an impure
    module, or a function defined in one; else None."""
    names = [n for n, _ in chain]
    for i, (_, obj) in enumerate(chain):
        if isinstance(obj, GENERATORS) and i + 1 < len(names):
            return ".".join(names[:i + 2])      # rng.random(): a generator object's draw
        module = obj.__name__ if isinstance(obj, types.ModuleType) else None
        if module in IMPURE:
            attrs = IMPURE[module]
            nxt = names[i + 1] if i + 1 < len(names) else None
            if nxt is not None and (attrs is None or nxt in attrs):
                return ".".join(names[:i + 2])
        elif i == len(chain) - 1 and callable(obj) and not isinstance(obj, type) \
                and getattr(obj, "__module__", None) in IMPURE and IMPURE[obj.__module__] \
                is None:
            return f"{obj.__module__}.{names[i]}"      # from random import randint
    return None


class ImpureSite:
    """One impure call in the source: ``name`` (``random.randint``), ``where`` (file:line),
    and ``resolve()``, which evaluates the called expression again (``random.randint``
    as the function's globals hold it now, a monkeypatched ``time.time`` included)."""
    __slots__ = ("name", "where", "resolve")

    def __init__(self, name, where, resolve):
        self.name, self.where, self.resolve = name, where, resolve

    def __str__(self):
        return f"{self.name} at {self.where}"


class ImpureCall:
    """A call the trace made at ``site``: its arguments, its result, and whether it changed
    an argument in place. The runtime adds ``key`` and ``frozen`` (see runtime/guards/impure.py)."""
    __slots__ = ("site", "args", "kwargs", "result", "mutated", "key", "frozen")

    def __init__(self, site, args, kwargs, result, mutated):
        self.site, self.args, self.kwargs, self.result = site, args, kwargs, result
        self.mutated, self.key, self.frozen = mutated, None, None

    def call_text(self):
        args = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.site.name}({', '.join(args)})"

    def describe(self):
        return (f"{self.call_text()} at {self.site.where} returned {self.result!r} when traced "
                "(called again before each reuse)")
