"""``einsum``: an equation reduced to ``diagonal`` (repeated labels), ``sum`` (labels that
appear once and not in the output), ``permute``, ``reshape`` and one batched ``matmul`` per
pair of operands, left to right; no Python loop over elements, and every step a tracegrad
op, so gradients of any order follow.
"""
import builtins
import math

from .core import bind, op_error
from .diagonals import diagonal_p
from .linalg import matmul
from .reduce_ops import sum
from .shape_ops import expand, permute, reshape


def _parse_einsum(equation, operands):
    """Each operand's labels (one character each; an ellipsis becomes labels ``0``, ``1``,
    ... right-aligned over its dims) and the output's labels."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise op_error("einsum", "einsum(): more operands were provided than specified in the "
                                 "equation" if len(operands) > len(terms) else
                       "einsum(): fewer operands were provided than specified in the equation")
    for k, ch in enumerate(eq):     # PyTorch's subscripts: letters (and "...", ",", "->")
        if not (ch.isascii() and ch.isalpha()) and ch not in ".,->":
            raise op_error("einsum", f"einsum(): invalid subscript given at index {k} in the "
                                     "equation string, subscripts must be in [a-zA-Z]")
    ell_n = 0
    labels = []
    for term, op in zip(terms, operands):
        if "..." in term:
            pre, _, post = term.partition("...")
            n = op.ndim - len(pre) - len(post)
            if n < 0:
                raise op_error("einsum", f"einsum(): the number of subscripts in the equation "
                                         f"({len(pre) + len(post)}) is more than the number of "
                                         f"dimensions ({op.ndim}) for operand")
            ell_n = max(ell_n, n)
            labels.append(list(pre) + [None] * n + list(post))
        else:
            if len(term) != op.ndim:
                raise op_error("einsum", f"einsum(): the number of subscripts in the equation "
                                         f"({len(term)}) does not match the number of dimensions "
                                         f"({op.ndim}) for operand and no ellipsis was given")
            labels.append(list(term))
    for term, labs in zip(terms, labels):      # ellipsis dims, right-aligned across operands
        k = builtins.sum(1 for v in labs if v is None)
        it = iter(str(ell_n - k + j) for j in range(k))
        labs[:] = [next(it) if v is None else v for v in labs]
    ell = [str(j) for j in range(ell_n)]
    for labs in labels:
        for v in labs:
            if not (v.isdigit() or v.isalpha()):
                raise op_error("einsum", "einsum(): invalid subscript given at index in the "
                                         "equation string, subscripts must be in [a-zA-Z]")
    if arrow:
        if "..." in rhs:
            pre, _, post = rhs.partition("...")
            out = list(pre) + ell + list(post)
        else:
            out = list(rhs)
        seen = {v for labs in labels for v in labs}
        for v in out:
            if v not in seen:
                raise op_error("einsum", f"einsum(): output subscript {v} does not appear in the "
                                         f"equation for any input operand")
        if len(set(out)) != len(out):
            raise op_error("einsum", "einsum(): output subscript appears more than once in the "
                                     "output")
    else:
        counts = {}
        for labs in labels:
            for v in labs:
                counts[v] = counts.get(v, 0) + 1
        out = ell + sorted(v for v, c in counts.items() if c == 1 and not v.isdigit())
    return labels, out


def _take_diagonals(x, labs):
    """Repeated labels within one operand select its diagonal (``ii->i``)."""
    labs = list(labs)
    while True:
        dup = next((v for v in labs if labs.count(v) > 1), None)
        if dup is None:
            return x, labs
        i = labs.index(dup)
        j = labs.index(dup, i + 1)
        x = bind(diagonal_p, x, offset=0, dim1=i, dim2=j)
        labs = [v for k, v in enumerate(labs) if k not in (i, j)] + [dup]


def _sum_labels(x, labs, drop):
    dims = tuple(i for i, v in enumerate(labs) if v in drop)
    if not dims:
        return x, labs
    return sum(x, dims), [v for v in labs if v not in drop]


def _contract(a, la, b, lb, keep):
    """``a`` and ``b`` multiplied over shared labels, summed over shared labels not in
    ``keep``: a batched matmul over [batch, left, contracted] x [batch, contracted, right]."""
    batch = [v for v in la if v in lb and v in keep]
    con = [v for v in la if v in lb and v not in keep]
    left = [v for v in la if v not in lb]
    right = [v for v in lb if v not in la]
    size = dict(zip(la, a.shape))
    size.update(zip(lb, b.shape))
    pa = permute(a, tuple(la.index(v) for v in batch + left + con))
    pb = permute(b, tuple(lb.index(v) for v in batch + con + right))
    nb = math.prod(size[v] for v in batch)
    nl, nc = math.prod(size[v] for v in left), math.prod(size[v] for v in con)
    nr = math.prod(size[v] for v in right)
    out = matmul(reshape(pa, (nb, nl, nc)), reshape(pb, (nb, nc, nr)))
    return reshape(out, tuple(size[v] for v in batch + left + right)), batch + left + right


def einsum(equation, *operands):
    """Einstein summation over any equation PyTorch accepts: explicit or implicit output,
    ``...`` (broadcast across operands), repeated labels within an operand (diagonals and
    traces). Operands contract left to right, each pair as one batched matmul. The sublist
    form ``einsum(a, [0, 1], b, [1, 2], [0, 2])`` is accepted too."""
    if not isinstance(equation, str):
        equation, operands = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    if not operands:
        raise op_error("einsum", "einsum(): must provide at least one operand")
    labels, out = _parse_einsum(equation, operands)
    # a label's size: dims of size 1 broadcast against the others (as PyTorch's ellipsis do)
    size = {}
    for op_, labs in zip(operands, labels):
        for v, n in zip(labs, op_.shape):
            if size.get(v, 1) != 1 and n not in (1, size[v]):
                raise op_error("einsum", "einsum(): operands do not broadcast with remapped "
                                         "shapes (original->remapped)")
            size[v] = n if size.get(v, 1) == 1 else size[v]
    terms = []
    for op_, labs in zip(operands, labels):
        x, labs = _take_diagonals(op_, labs)
        full = tuple(size[v] for v in labs)
        if tuple(x.shape) != full:
            x = expand(x, *full)
        terms.append((x, labs))
    x, labs = terms[0]
    for k in range(1, len(terms)):
        y, ly = terms[k]
        rest = {v for _, ls in terms[k + 1:] for v in ls} | set(out)
        # labels that only one side holds and nobody needs later are summed first
        x, labs = _sum_labels(x, labs, {v for v in labs if v not in rest and v not in ly})
        y, ly = _sum_labels(y, ly, {v for v in ly if v not in rest and v not in labs})
        x, labs = _contract(x, labs, y, ly, rest)
    x, labs = _sum_labels(x, labs, {v for v in labs if v not in out})
    if labs != out:
        x = permute(x, tuple(labs.index(v) for v in out))
    return x


def _sublist_equation(args):
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

    def term(sub):
        return "".join("..." if s is Ellipsis else letters[s] for s in sub)
    ops, terms = [], []
    args = list(args)
    while len(args) >= 2:
        ops.append(args.pop(0))
        terms.append(term(args.pop(0)))
    eqn = ",".join(terms) + ("->" + term(args[0]) if args else "")
    return eqn, tuple(ops)


__all__ = ["einsum"]
