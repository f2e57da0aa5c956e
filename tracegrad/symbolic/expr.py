"""Size expressions: the integer polynomials over size symbols that ``SymInt`` carries.

A ``Poly`` is a sum of monomials over *atoms*: a size symbol (``s0``) or a floor division
or remainder that did not divide out, kept whole as one atom (``(s0 + 1)//2``; ``ATOMS``
maps its name to how to compute it). Polynomials are immutable and hashable; two are equal
when their terms are, so equal expressions compare equal whatever the sizes.

What the expressions alone settle is decided here: every dynamic size is at least 2
(sizes 0 and 1 are always specialised), so ``bounds()`` gives the range a polynomial
without atoms can take, and ``_decide(d, op)`` answers ``d op 0`` from it, or None when
only the sizes of a call can (``symbolic.SymInt`` then asks its trace's ``ShapeEnv``).
Nothing here knows about traces or tensors.
"""
import math


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


# what the bounds alone settle -------------------------------------------------------------

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
