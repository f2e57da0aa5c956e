"""Symbolic sizes: the dims a compiled function keeps dynamic.

A dynamic dim of an argument is traced as a ``SymInt``: an ``int`` whose value is the
size seen in this trace (its *hint*, so NumPy and every shape rule compute as before)
and which also remembers its expression over the dynamic sizes ``s0, s1, ...``, a
polynomial (``Poly``). Arithmetic on sizes keeps the expression (``x.shape[0] * 4``
is ``4*s0``; ``x.numel() // 784`` is ``s0``), so reshape targets, broadcast shapes,
the counts of means and the shapes of every value in the IR are written in terms of
the inputs' sizes, and the generated code reads them from its inputs
(``s0 = x.shape[0]``) instead of baking them.

Decisions on sizes during a trace (``if x.shape[0] > 16``, a shape rule asking
whether a dim is 1) are settled by what is known of the symbols where possible: every
dynamic size is at least 2 (sizes 0 and 1 are always specialised, as PyTorch does), so
``s0 == 1`` is False and ``2*s0 >= 4`` True without a guard. Otherwise the hint decides,
and the relation is recorded in the trace's ``ShapeEnv`` as a guard (``s0 > 16``) that
each later call checks. A decision that makes two different expressions *equal*
(``s0 == 32``, ``s0 == s1``) specialises instead: the trace stops with ``Specialize``
(its ``equal`` says which expression was 0) and is made again with the two dims sharing
one symbol, or with those dims static for calls of these sizes (``runtime/dynamic.py``).

Sizes that leave tracegrad's reach become plain numbers: ``float(n)``, ``n / 2`` and
``n * 0.5`` specialise (a ``Specialize``, as above); ``int(n)``, ``len(t)``,
``range(n)`` and NumPy calls on a size read the hint silently. The runtime therefore
checks a dynamic trace against a trace of another size before it trusts it for other
sizes (``runtime/compiled.py``).

Outside a trace (the passes, codegen) ``==`` compares expressions: ``s0 == s1`` is
False, whatever the hints; orderings use the hints, which only steer heuristics
(whether to run in chunks, on threads).

This module holds ``SymInt``, the trace's ``ShapeEnv`` and the helpers over sizes; the
expressions are ``expr``'s and the user's marks ``marks``'s.
"""
import threading

from .expr import _OPS, Poly, _decide, base_symbols

__all__ = ["SymInt", "ShapeEnv", "Specialize", "symbols_in", "substitute", "concrete",
           "slice_length", "deciding_nothing", "inactive"]


class Specialize(BaseException):
    """A trace needs the sizes of ``symbols`` as constants (raised through the user's
    code: a BaseException so that ``except Exception`` there does not swallow it)."""

    def __init__(self, symbols, why, equal=None):
        super().__init__(why)
        self.symbols, self.why = frozenset(symbols), why
        self.equal = equal      # the Poly ``d`` when the trace relied on ``d == 0``, else None


# the trace's record of decisions ------------------------------------------------------------

class _State(threading.local):
    env = None


_state = _State()


class ShapeEnv:
    """The dynamic sizes of one trace and the relations it relied on.

    ``symbols``: name -> hint; ``relations``: ``[(Poly d, op, expected)]`` meaning
    ``(d op 0) is expected`` held when traced, where ``op`` is one of ``== != < <= > >=``.
    """

    def __init__(self, same=None):
        self.symbols = {}
        self.relations = []
        self._seen = set()
        self._dims = {}         # symbol name -> the dims ``new_symbol`` gave it
        self._same = same       # (dim, [dims]) -> whether a dim joins those dims' symbol

    def new_symbol(self, hint, where=None):
        """The symbol for a size of ``hint``, the dim ``where`` (any hashable). Sizes of one
        value share their symbol, as PyTorch's duck sizing does (the runtime checks they
        stay equal), unless ``same(where, dims of that symbol)`` says they are apart."""
        for name, h in self.symbols.items():
            if h == hint and (self._same is None or where is None
                              or self._same(where, self._dims[name])):
                self._dims.setdefault(name, []).append(where)
                return SymInt(Poly.symbol(name), hint)
        name = f"s{len(self.symbols)}"
        self.symbols[name] = hint
        self._dims[name] = [where]
        return SymInt(Poly.symbol(name), hint)

    def record(self, d, op, result):
        key = (d, op)
        if key not in self._seen:
            self._seen.add(key)
            self.relations.append((d, op, result))

    def active(self):
        return _Active(self)


class _Active:
    def __init__(self, env):
        self.env = env

    def __enter__(self):
        self.prev, _state.env = _state.env, self.env
        return self.env

    def __exit__(self, *exc):
        _state.env = self.prev


def deciding_nothing():
    """From here to the end of the trace's ``active`` block, decisions on sizes record
    nothing: the trace was abandoned and the rest of the call runs eagerly."""
    _state.env = None


def inactive():
    """A block where size decisions record nothing (the tracer's own bookkeeping)."""
    return _Active(None)


def _v(x):
    """The plain value of a size or an int (never specialises)."""
    return int.__int__(x) if type(x) is not bool else int(x)


class SymInt(int):
    """A size: an int (the hint) with its expression ``poly`` (see the module docstring)."""

    def __new__(cls, poly, hint):
        c = poly.constant()
        if c is not None:
            return c
        self = int.__new__(cls, hint)
        self.poly = poly
        return self

    def __reduce__(self):
        return (SymInt, (self.poly, _v(self)))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    # arithmetic keeps the expression --------------------------------------------------------
    def _binary(self, other, fn, pfn):
        if isinstance(other, SymInt):
            return SymInt(pfn(self.poly, other.poly), fn(_v(self), _v(other)))
        if isinstance(other, int) and not isinstance(other, bool):
            return SymInt(pfn(self.poly, Poly.const(_v(other))), fn(_v(self), _v(other)))
        return NotImplemented

    def __add__(self, other):
        return self._binary(other, int.__add__, Poly.__add__) if isinstance(other, int) \
            else self._escape(other, "+", lambda a: a + other)

    def __radd__(self, other):
        return self._binary(other, lambda a, b: b + a, lambda a, b: b + a) \
            if isinstance(other, int) else self._escape(other, "+", lambda a: other + a)

    def __sub__(self, other):
        return self._binary(other, int.__sub__, Poly.__sub__) if isinstance(other, int) \
            else self._escape(other, "-", lambda a: a - other)

    def __rsub__(self, other):
        return self._binary(other, lambda a, b: b - a, lambda a, b: b - a) \
            if isinstance(other, int) else self._escape(other, "-", lambda a: other - a)

    def __mul__(self, other):
        return self._binary(other, int.__mul__, Poly.__mul__) if isinstance(other, int) \
            else self._escape(other, "*", lambda a: a * other)

    def __rmul__(self, other):
        return self._binary(other, lambda a, b: b * a, lambda a, b: b * a) \
            if isinstance(other, int) else self._escape(other, "*", lambda a: other * a)

    def __floordiv__(self, other):
        if isinstance(other, int) and _v(other) > 0:
            return self._binary(other, int.__floordiv__, Poly.floordiv)
        return self._escape(other, "//", lambda a: a // other)

    def __rfloordiv__(self, other):
        if isinstance(other, int):
            return self._binary(other, lambda a, b: b // a, lambda a, b: b.floordiv(a))
        return self._escape(other, "//", lambda a: other // a)

    def __mod__(self, other):
        if isinstance(other, int) and _v(other) > 0:
            return self._binary(other, int.__mod__, Poly.mod)
        return self._escape(other, "%", lambda a: a % other)

    def __neg__(self):
        return SymInt(-self.poly, -_v(self))

    def __pos__(self):
        return self

    def __abs__(self):
        return self if _decide(self.poly, ">=") else self._escape(None, "abs", abs)

    def __pow__(self, other, mod=None):
        if mod is None and type(other) is int and 0 <= other <= 4:
            out = 1
            for _ in range(other):
                out = out * self
            return out
        return self._escape(other, "**", lambda a: pow(a, other, mod))

    # what becomes a plain number specialises ---------------------------------------------------
    def __truediv__(self, other):
        return self._escape(other, "/", lambda a: a / other)

    def __rtruediv__(self, other):
        return self._escape(other, "/", lambda a: other / a)

    def __float__(self):
        return self._escape(None, "float()", float)

    # int(n), range(n), len(...), NumPy and bitwise operators read the plain value: inside a
    # trace that specialises (tracegrad's own code hands NumPy plain sizes, see ``concrete``)
    def __int__(self):
        return self._escape(None, "int()", int.__int__)

    def __index__(self):
        return self._escape(None, "an index (range(), NumPy, ...)", int.__int__)

    def __and__(self, other):
        return self._escape(other, "&", lambda a: a & other)

    def __rand__(self, other):
        return self._escape(other, "&", lambda a: other & a)

    def __or__(self, other):
        return self._escape(other, "|", lambda a: a | other)

    def __ror__(self, other):
        return self._escape(other, "|", lambda a: other | a)

    def __xor__(self, other):
        return self._escape(other, "^", lambda a: a ^ other)

    def __rxor__(self, other):
        return self._escape(other, "^", lambda a: other ^ a)

    def __lshift__(self, other):
        return self._escape(other, "<<", lambda a: a << other)

    def __rlshift__(self, other):
        return self._escape(other, "<<", lambda a: other << a)

    def __rshift__(self, other):
        return self._escape(other, ">>", lambda a: a >> other)

    def __rrshift__(self, other):
        return self._escape(other, ">>", lambda a: other >> a)

    def __rmod__(self, other):
        if isinstance(other, int):
            return self._binary(other, lambda a, b: b % a, lambda a, b: b.mod(a))
        return self._escape(other, "%", lambda a: other % a)

    def __divmod__(self, other):
        return (self // other, self % other)

    def __rdivmod__(self, other):
        return (other // self, other % self)

    def __invert__(self):
        return self._escape(None, "~", lambda a: ~a)

    def __round__(self, ndigits=None):
        return self

    def __trunc__(self):
        return self

    def __floor__(self):
        return self

    def __ceil__(self):
        return self

    def __complex__(self):
        return self._escape(None, "complex()", complex)

    def _escape(self, other, what, fn):
        env = _state.env
        if env is not None:
            symbols = base_symbols(self.poly)
            if isinstance(other, SymInt):
                symbols |= base_symbols(other.poly)
            raise Specialize(symbols, f"the size {self.poly} was used as a number ({what})")
        return fn(int.__int__(self))

    # comparisons -----------------------------------------------------------------------------
    def _compare(self, other, op):
        if isinstance(other, SymInt):
            d = self.poly - other.poly
            hint = _v(self) - _v(other)
        elif isinstance(other, int):
            d = self.poly - Poly.const(_v(other))
            hint = _v(self) - _v(other)
        else:
            return NotImplemented
        known = _decide(d, op)
        if known is not None:
            return known
        env = _state.env
        if env is None:     # outside a trace: expressions (==), hints (orderings)
            if op in ("==", "!="):
                return op == "!="
            return _OPS[op](hint)
        result = _OPS[op](hint)
        if (op == "==" and result) or (op == "!=" and not result):
            raise Specialize(base_symbols(d), f"the trace relied on {d} == 0", equal=d)
        env.record(d, op, result)
        return result

    def __eq__(self, other):
        return self._compare(other, "==")

    def __ne__(self, other):
        return self._compare(other, "!=")

    def __lt__(self, other):
        return self._compare(other, "<")

    def __le__(self, other):
        return self._compare(other, "<=")

    def __gt__(self, other):
        return self._compare(other, ">")

    def __ge__(self, other):
        return self._compare(other, ">=")

    __hash__ = int.__hash__

    # printing: the expression (generated code and the IR printer rely on it) ---------------
    def __repr__(self):
        return str(self.poly)

    __str__ = __repr__

    def __format__(self, spec):
        """In f-strings (generated code), a compound size is parenthesised: ``(784*s0)``."""
        if spec:
            return format(_v(self), spec)
        text = str(self.poly)
        return text if text.isidentifier() else f"({text})"


def symbols_in(obj):
    """The size symbols in ``obj``: a size, or tuples, lists and dicts of them."""
    out = set()
    stack = [obj]
    while stack:
        x = stack.pop()
        if type(x) is SymInt:
            out |= base_symbols(x.poly)
        elif isinstance(x, (tuple, list)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
    return out


def substitute(obj, values):
    """``obj`` with every size evaluated at ``values`` (symbol -> int)."""
    if type(obj) is SymInt:
        return obj.poly.evaluate(values)
    if type(obj) is tuple:
        return tuple(substitute(x, values) for x in obj)
    if type(obj) is list:
        return [substitute(x, values) for x in obj]
    if type(obj) is dict:
        return {k: substitute(v, values) for k, v in obj.items()}
    return obj


def _poly(x):
    return x.poly if type(x) is SymInt else Poly.const(_v(x))


def _known(a, op, b):
    """``a op b`` for sizes: settled by what is known of the symbols, else inside a trace by
    the sizes of this call (recorded as a guard, as any decision there), else None."""
    d = _poly(a) - _poly(b)
    known = _decide(d, op)
    if known is not None or _state.env is None:
        return known
    return SymInt(d, _v(a) - _v(b))._compare(0, op) if type(a) is SymInt or \
        type(b) is SymInt else None


def slice_length(n, start, stop, step):
    """The length of ``range(n)[start:stop:step]`` for sizes that may be symbolic, or None
    when it depends on more than the symbols' bounds (a step < 1, a start past the end)."""
    step = 1 if step is None else step
    if not isinstance(step, int) or type(step) is SymInt or step < 1:
        return None

    def bound(x, default):
        if x is None:
            return default
        if _known(x, "<", 0):           # from the end
            x = n + x
            if _known(x, "<", 0):
                return 0
            if not _known(x, ">=", 0):
                return None
        elif not _known(x, ">=", 0):
            return None
        if _known(x, ">=", n):
            return n
        return x if _known(x, "<=", n) else None
    lo, hi = bound(start, 0), bound(stop, n)
    if lo is None or hi is None:
        return None
    if _known(hi, "<=", lo):
        return 0
    if not _known(hi, ">=", lo):
        return None
    length = hi - lo
    return length if step == 1 else (length + step - 1) // step


def concrete(obj):
    """``obj`` with every size made its plain value (what NumPy computes with)."""
    if type(obj) is SymInt:
        return _v(obj)
    if type(obj) in (tuple, list):
        if not any(type(x) is SymInt or type(x) in (tuple, list, dict) for x in obj):
            return obj
        return type(obj)(concrete(x) for x in obj)
    if type(obj) is dict:
        return {k: concrete(v) for k, v in obj.items()}
    return obj

