"""Symbolic sizes: the dims a compiled function keeps dynamic (``tracegrad.symbolic``).

- ``sizes``: ``SymInt`` (an int that remembers its expression over the dynamic sizes
  ``s0, s1, ...``), the trace's ``ShapeEnv`` of guards, ``Specialize``, and the helpers
  over sizes (``symbols_in``, ``substitute``, ``concrete``, ``slice_length``);
- ``expr``: the expressions themselves, polynomials over the symbols (``Poly``);
- ``marks``: the user's ``mark_dynamic``/``mark_static`` on a tensor.
"""
from .expr import _OPS, ATOMS, Poly, base_symbols  # noqa: F401 - _OPS for runtime/dynamic
from .marks import MARKS, mark_dynamic, mark_static, marks_of
from .sizes import (ShapeEnv, Specialize, SymInt, concrete, deciding_nothing, inactive,
                    slice_length, substitute, symbols_in)

__all__ = ["SymInt", "Poly", "ShapeEnv", "Specialize", "symbols_in", "substitute", "concrete",
           "slice_length", "deciding_nothing", "inactive", "base_symbols", "mark_dynamic",
           "mark_static", "marks_of", "MARKS", "ATOMS"]
