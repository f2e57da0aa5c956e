"""What generated modules import besides NumPy: guard failures and primitive
implementations for ops that have no one-line NumPy template."""
from tracegrad import dtypes  # noqa: F401 - generated code names dtypes in params
from tracegrad.ops.core import PRIMITIVES
from tracegrad.ops.elementwise import _erf  # noqa: F401 - the erf template calls it


class GuardFailure(Exception):
    """A data-dependent guard of a compiled variant did not hold: retrace."""

    def __init__(self, index):
        super().__init__(index)
        self.index = index


class _Primitives:
    """``P.gather`` is the primitive named "gather" (a live view: custom ones appear too)."""

    def __getattr__(self, name):
        try:
            return PRIMITIVES[name]
        except KeyError:
            raise AttributeError(name) from None


P = _Primitives()
