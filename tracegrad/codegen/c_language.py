"""The language objects of the C-like renderers, and the C prelude.

``Language`` holds what C and CUDA share: the C types of the dtypes, literals, the
``code_for_op`` table (each elementwise primitive's one C expression,
``Primitive.c_template``) and the names a user's variable is renamed away from;
``declarations`` writes the includes and helpers a C source of kernels starts with. A kernel
that a language cannot render raises ``Unsupported``.
"""
import math

import numpy as np

from tracegrad import dtypes


def signature(head, params, width=100):
    """``head(params)``: on one line where it fits in ``width`` columns (with the `` {`` that
    opens the body), else with the parameters wrapped under the opening parenthesis."""
    line = f"{head}({', '.join(params)})"
    if len(line) + 2 <= width:
        return line
    indent, lines, cur = " " * (len(head) + 1), [], f"{head}("
    for i, p in enumerate(params):
        piece = p + ("," if i < len(params) - 1 else ")")
        if not cur.endswith("(") and len(cur) + 1 + len(piece) + 2 > width:
            lines.append(cur)
            cur = indent + piece
        else:
            cur += piece if cur.endswith("(") else " " + piece
    return "\n".join(lines + [cur])


class Unsupported(Exception):
    """The kernel has something this language does not render; it stays on NumPy."""


_C_KEYWORDS = frozenset("""auto break case char const continue default do double else enum
extern float for goto if inline int long register restrict return short signed sizeof static
struct switch typedef union unsigned void volatile while bool true false int64_t NAN INFINITY
exp log log1p expm1 sqrt sin cos tanh erf fabs floor ceil trunc rint pow isnan isinf j o
nt tid i n y0 y1 j0 j1 yn jn gamma lgamma tgamma fmax fmin""".split())


class Language:
    """A C-like target: type names, literals, the op table, and the kernel walk."""
    types = {dtypes.float32: "float", dtypes.float64: "double", dtypes.bool: "bool"}
    keywords = _C_KEYWORDS      # names a user's variable is renamed away from
    # a costly point value a later loop of the same row reads again is kept in a per-thread
    # row buffer (C); CUDA keeps it in registers where a row's length allows (``cuda.py``)
    row_buffers = True

    def ctype(self, dtype):
        try:
            return self.types[dtype]
        except KeyError:
            raise Unsupported(f"dtype {dtype.name}") from None

    def array_type(self, dtype):
        """The element type of a kernel's array argument of ``dtype``."""
        return self.ctype(dtype)

    def literal(self, value, dtype):
        """The C source of ``value`` as a ``dtype`` scalar, exactly the value NumPy computes
        with (``np.float32(value)``): the float32 value's shortest decimal with ``f`` (a
        decimal rounded once, to float, as NumPy rounds the double once), a double's
        ``repr`` (17 significant digits at most: it reads back exactly); infinities and NaN
        by ``<math.h>``'s names, their sign kept; a negative value (``-0.0`` too) in
        parentheses, so that no template writes ``a--0.0f``; integers with C's suffixes."""
        if dtype is dtypes.bool:
            return "true" if value else "false"
        if dtype is not None and not dtype.is_floating_point:
            return _int_literal(int(value), dtype)
        v = float(value)
        if dtype is dtypes.float32:
            with np.errstate(over="ignore"):    # past float32's range: inf, as in NumPy
                v = float(np.float32(v))
        negative, ctype = math.copysign(1.0, v) < 0, self.ctype(dtype or dtypes.float64)
        if math.isnan(v):
            text = f"({ctype})NAN"
        elif math.isinf(v):
            text = f"({ctype})INFINITY"
        else:
            text = str(np.float32(abs(v))) + "f" if dtype is dtypes.float32 else repr(abs(v))
        return f"(-{text})" if negative else text

    def template(self, prim):
        return prim.c_template

    def code_for_op(self, op, args):
        """One C expression computing ``op`` from ``args`` (names or rendered literals)."""
        t = self.template(op.prim)
        if t is None:
            raise Unsupported(f"{op.op} has no C form")
        slots = dict(zip(op.prim.args, args))
        for k, v in op.params.items():
            slots[k] = (self.literal(v, op.dtype) if isinstance(v, (int, float))
                        and not isinstance(v, bool) else v)
        expr = t(**slots) if callable(t) else t.format(**slots)
        if expr is None:
            raise Unsupported(f"{op.op} with {op.params} has no C form")
        return expr


def _int_literal(v, dtype):
    """C source of the integer ``v`` as a ``dtype``: an unsuffixed literal is an ``int``, so
    one past int32's range takes ``LL`` (``ULL`` unsigned); int64's minimum is no literal
    (its magnitude overflows before the minus applies) and is written as an expression."""
    if v == -2 ** 63:
        return "(-9223372036854775807LL - 1)"
    suffix = "" if -2 ** 31 < v < 2 ** 31 else ("ULL" if v > 0 and not dtype.is_signed
                                                  else "LL")
    return f"({v}{suffix})" if v < 0 else f"{v}{suffix}"


_FLOAT_MATH = {"expf", "logf", "sinf", "cosf", "tanhf", "erff", "log1pf", "expm1f", "powf"}


def declarations(kernels, lang, simd_math):
    """The preamble one library's kernels share: includes, the vector math that
    libmvec provides (``simd_math``), and the NaN-propagating max/min reductions."""
    lines = ["#include <math.h>", "#include <stdbool.h>", "#include <stdint.h>",
             "#include <stdlib.h>", "#include <omp.h>", ""]
    if simd_math:       # before <tgmath.h>, whose macros would rewrite these names
        lines.append("// vector variants from glibc's libmvec")
        for fn in ("expf", "logf", "sinf", "cosf", "tanhf", "erff", "log1pf", "expm1f",
                   "powf", "exp", "log", "sin", "cos", "tanh", "erf", "log1p", "expm1", "pow"):
            ftype = "float" if fn in _FLOAT_MATH else "double"
            args = ", ".join([ftype] * (2 if fn.startswith("pow") else 1))
            lines.append(f"#pragma omp declare simd notinbranch\n{ftype} ({fn})({args});")
        lines.append("")
    lines += ["#include <tgmath.h>", ""]
    for ufunc, cmp in (("maximum", ">"), ("minimum", "<")):
        for ctype, ident in (("float", "INFINITY"), ("double", "INFINITY")):
            start = f"-{ident}" if ufunc == "maximum" else ident
            lines.append(f"#pragma omp declare reduction(tg_{ufunc}_{ctype} : {ctype} : "
                         f"omp_out = (omp_out {cmp} omp_in || isnan(omp_out) ? omp_out : "
                         f"omp_in)) initializer(omp_priv = {start})")
    return "\n".join(lines) + "\n"
