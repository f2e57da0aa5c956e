"""Identifiers for generated code: the user's variable names where known,
unique, and never a keyword, a builtin or a name the module itself uses."""
import builtins
import keyword

from tracegrad.ir import Namer

RESERVED = frozenset(keyword.kwlist) | frozenset(dir(builtins)) | {
    "np", "P", "dtypes", "forward", "backward", "GuardFailure", "self", "ws",
    "Workspace", "run_chunks"}


class CodeNamer(Namer):
    """``Namer`` for code: hint-less values are ``t0``, ``t1``, ..."""

    def __init__(self, taken=(), hints=None):
        super().__init__(RESERVED | set(taken), hints)

    def _fresh(self, hint):
        if hint:
            return super()._fresh(hint)
        while True:
            name = f"t{self.counter}"
            self.counter += 1
            if name not in self.used:
                self.used.add(name)
                return name
