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
and is made again with those dims static.

Sizes that leave tracegrad's reach become plain numbers: ``float(n)``, ``n / 2`` and
``n * 0.5`` specialise (a ``Specialize``, as above); ``int(n)``, ``len(t)``,
``range(n)`` and NumPy calls on a size read the hint silently. The runtime therefore
checks a dynamic trace against a trace of another size before it trusts it for other
sizes (``runtime/compiled.py``).

Outside a trace (the passes, codegen) ``==`` compares expressions: ``s0 == s1`` is
False, whatever the hints; orderings use the hints, which only steer heuristics
(whether to run in chunks, on threads).
"""
import math
import threading

__all__ = ["SymInt", "Poly", "ShapeEnv", "Specialize", "symbols_in", "substitute", "concrete",
           "slice_length", "mark_dynamic", "mark_static", "ATOMS"]


class Specialize(BaseException):
    """A trace needs the sizes of ``symbols`` as constants (raised through the user's
    code: a BaseException so that ``except Exception`` there does not swallow it)."""

    def __init__(self, symbols, why):
        super().__init__(why)
        self.symbols, self.why = frozenset(symbols), why


class Poly:
    """An integer polynomial over size symbols: ``{monomial: coefficient}`` where a
    monomial is a sorted tuple of atom names (``()`` is the constant term). An atom is a
    symbol (``s0``) or a floor division / remainder that did not divide out, kept whole
    (``(s0 + 1)//2``, defined in ``ATOMS``)."""
    __slots__ = ("terms", "_hash")

    def __init__(self, terms):
        self.terms = tuple(sorted((m, c) for m, c in terms.items() if c))
        self._hash = hash(self.terms)

    @staticmethod
    def const(c):
        return Poly({(): c})

    @staticmethod
    def symbol(name):
        return Poly({(name,): 1})

    def constant(self):
        """The value when the polynomial is a constant, else None."""
        if not self.terms:
            return 0
        return self.terms[0][1] if len(self.terms) == 1 and self.terms[0][0] == () else None

    def __add__(self, other):
        terms = dict(self.terms)
        for m, c in other.terms:
            terms[m] = terms.get(m, 0) + c
        return Poly(terms)

    def __neg__(self):
        return Poly({m: -c for m, c in self.terms})

    def __sub__(self, other):
        return self + (-other)

    def __mul__(self, other):
        terms = {}
        for m1, c1 in self.terms:
            for m2, c2 in other.terms:
                m = tuple(sorted(m1 + m2))
                terms[m] = terms.get(m, 0) + c1 * c2
        return Poly(terms)

    def floordiv(self, other):
        c = other.constant()
        if c is not None and c > 0 and all(k % c == 0 for _, k in self.terms):
            return Poly({m: k // c for m, k in self.terms})
        if len(other.terms) == 1 and other.terms[0][1] > 0:     # by a monomial that divides
            mono, k = other.terms[0]
            out = {}
            for m, c2 in self.terms:
                rest = _divide_mono(m, mono)
                if rest is None or c2 % k:
                    break
                out[rest] = c2 // k
            else:
                return Poly(out)
        return Poly.symbol(_atom("//", self, other))

    def mod(self, other):
        q = self.floordiv(other)
        if not any(a in ATOMS for a in q.atoms() - self.atoms()):    # divided out exactly
            return Poly.const(0)
        return Poly.symbol(_atom("%", self, other))

    def evaluate(self, values):
        """The value with ``values`` (symbol name -> int) for the symbols."""
        total = 0
        for m, c in self.terms:
            for a in m:
                c *= values[a] if a in values else _atom_value(a, values)
            total += c
        return total

    def atoms(self):
        return {a for m, _ in self.terms for a in m}

    def bounds(self):
        """``(low, high)``: bounds every dynamic size >= 2 implies (None: unbounded)."""
        low = high = 0
        for m, c in self.terms:
            if not m:
                low, high = (None if low is None else low + c), (None if high is None
                                                                else high + c)
                continue
            if any(a in ATOMS for a in m):
                return None, None
            least = c * 2 ** len(m)
            if c > 0:
                low, high = (None if low is None else low + least), None
            else:
                low, high = None, (None if high is None else high + least)
        return low, high

    def __eq__(self, other):
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self):
        return self._hash

    def __str__(self):
        if not self.terms:
            return "0"
        parts = []
        for m, c in reversed(self.terms):       # the highest monomial first, constant last
            body = "*".join(a if a.isidentifier() else f"({a})" for a in m)
            if not m:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            if not parts:
                parts.append(("-" if c < 0 else "") + text)
            else:
                parts.append((" - " if c < 0 else " + ") + text)
        return "".join(parts)

    __repr__ = __str__


def _divide_mono(m, d):
    rest = list(m)
    for a in d:
        if a not in rest:
            return None
        rest.remove(a)
    return tuple(rest)


ATOMS = {}         # name -> (op, Poly, Poly): the floor divisions and remainders kept whole


def _atom(op, a, b):
    name = f"{_wrap(a)}{op}{_wrap(b)}"
    ATOMS.setdefault(name, (op, a, b))
    return name


def _wrap(p):
    s = str(p)
    return s if s.isidentifier() or s.lstrip("-").isdigit() else f"({s})"


def _atom_value(name, values):
    op, a, b = ATOMS[name]
    x, y = a.evaluate(values), b.evaluate(values)
    return x // y if op == "//" else x % y


def base_symbols(poly):
    """The size symbols ``poly`` reads, through its floor divisions too."""
    out, stack = set(), list(poly.atoms())
    while stack:
        a = stack.pop()
        if a in ATOMS:
            _, x, y = ATOMS[a]
            stack.extend(x.atoms() | y.atoms())
        else:
            out.add(a)
    return out


# the trace's record of decisions ------------------------------------------------------------

class _State(threading.local):
    env = None


_state = _State()


class ShapeEnv:
    """The dynamic sizes of one trace and the relations it relied on.

    ``symbols``: name -> hint; ``relations``: ``[(Poly d, op, expected)]`` meaning
    ``(d op 0) is expected`` held when traced, where ``op`` is one of ``== != < <= > >=``.
    """

    def __init__(self):
        self.symbols = {}
        self.relations = []
        self._seen = set()

    def new_symbol(self, hint):
        """The symbol for a size of ``hint`` (sizes of one value share their symbol, as
        PyTorch's duck sizing does; the runtime checks they stay equal)."""
        for name, h in self.symbols.items():
            if h == hint:
                return SymInt(Poly.symbol(name), hint)
        name = f"s{len(self.symbols)}"
        self.symbols[name] = hint
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


def inactive():
    """A block where size decisions record nothing (the tracer's own bookkeeping)."""
    return _Active(None)


_OPS = {"==": lambda d: d == 0, "!=": lambda d: d != 0, "<": lambda d: d < 0,
        "<=": lambda d: d <= 0, ">": lambda d: d > 0, ">=": lambda d: d >= 0}


def _decide(d, op):
    """``d op 0`` when the bounds every dynamic size satisfies settle it, else None."""
    c = d.constant()
    if c is not None:
        return _OPS[op](c)
    low, high = d.bounds()
    lo = -math.inf if low is None else low
    hi = math.inf if high is None else high
    if op in ("==", "!="):
        return (op == "!=") if lo > 0 or hi < 0 else None
    if op in ("<", ">="):
        yes, no = hi < 0, lo >= 0
    else:               # "<=", ">"
        yes, no = hi <= 0, lo > 0
    if op in (">=", ">"):
        yes, no = no, yes
    return True if yes else (False if no else None)


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
            raise Specialize(base_symbols(d), f"the trace relied on {d} == 0")
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



# marks on tensors ----------------------------------------------------------------------------

import weakref  # noqa: E402

# id(tensor) -> (a weak reference to it, {dim: "dynamic" | "static"}); by id, not a
# WeakKeyDictionary, because a tensor's == is elementwise
MARKS = {}


def marks_of(t):
    """``{dim: "dynamic" | "static"}`` set on ``t`` by ``mark_dynamic``/``mark_static``."""
    entry = MARKS.get(id(t))
    return entry[1] if entry is not None and entry[0]() is t else None


def _mark(t, dims, how):
    dims = list(dims)
    for d in dims:          # every dim checked before any is marked
        if not -t.ndim <= d < t.ndim:
            from .ops.core import op_error
            raise op_error(f"mark_{how}", f"Dimension out of range (expected to be in range of "
                                          f"[{-t.ndim}, {t.ndim - 1}], but got {d})", IndexError)
    entry = MARKS.get(id(t))
    if entry is None or entry[0]() is not t:
        key = id(t)
        entry = MARKS[key] = (weakref.ref(t, lambda _, key=key: MARKS.pop(key, None)), {})
    for d in dims:
        entry[1][d % t.ndim] = how


def mark_dynamic(t, index):
    """Compile ``t``'s dim ``index`` (an int or a list) with a symbolic size from the first
    call of a compiled function on it, as PyTorch's ``torch._dynamo.mark_dynamic``."""
    _mark(t, [index] if isinstance(index, int) else index, "dynamic")


def mark_static(t, index=None):
    """Always specialise ``t``'s dim ``index`` (every dim when None), even under
    ``dynamic=True``."""
    dims = range(t.ndim) if index is None else [index] if isinstance(index, int) else index
    _mark(t, dims, "static")
