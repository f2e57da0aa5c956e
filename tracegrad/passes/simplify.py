"""Algebraic simplification and constant folding.

Identities that compute nothing new (``x * 1`` (a constant 1 reshaped or broadcast too),
``x / 1``, ``x - 0``,
``neg(neg x)``, reshapes, broadcasts and converts that change nothing),
rewrites into cheaper nodes, and folding of nodes whose inputs are all small
constants:

- ``x ** 2``, ``** 3``, ``** 4`` become multiplications, ``** 0.5`` a sqrt and
  ``** -1`` a division (floating dtypes), so a fusion pass sees plain ``mul``;
- ``x * -1`` is ``neg x``; ``x + neg y`` is ``x - y`` and ``x - neg y`` is ``x + y``;
- a chain of permutes and reshapes that keeps the order of its source's
  elements is one reshape of that source (transposes that cancel);
- the transpose of a product ``(a @ b)^T`` is ``b^T @ a^T`` (a weight's gradient made in its
  own layout; BLAS may round it apart from the product it replaces, as eager's does);
- a sum over axes along which its input repeats (a broadcast's added or
  expanded axes, or axes of size 1) is the repeated value times the count;
- an elementwise op reads a broadcast's input directly when its own
  broadcasting gives the same result shape;
- the summed gradients of slices that tile a tensor side by side are their ``cat``.

Every rewrite keeps the shape and dtype of the value it replaces, and never
makes a result (a graph output, or what one is a view of) a view where it was
an array of its own. Values stay bit for bit, except where noted at the rule:
a sum of ``n`` equal terms becomes one multiplication by ``n`` (one rounding
instead of up to ``n - 1``), and ``x ** 4`` rounds twice where ``np.power``
rounds once.

Before::                                    After (then ``dce``)::

    graph(x:f32[3], b:f32[]) {                  graph(x:f32[3], b:f32[]) {
      a:f32[3] = mul x 1                          a:f32[3] = mul x x
      c:f32[3] = pow_scalar a  exponent=2         c:f32[3] = sub a b
      d:f32[3] = broadcast_to b  shape=(3,)       return (c)
      e:f32[3] = neg d                          }
      f:f32[3] = add c e
      return (f)
    }
"""
import math

import numpy as np

from ..ir import Const, Graph, Node, Value, infer_aval
from ..symbolic import symbols_in
from ..ops.rules import broadcast
from ..ops.slice_grads import joined
from .rewrite import read_counts, resolve, substitute

FOLD_LIMIT = 4096       # constants up to this many elements are folded
_CHAIN_LIMIT = 16       # how far back a chain of permutes and reshapes is followed


def simplify(graph):
    sub, nodes, defs = {}, [], {}
    inputs, exposed = set(graph.inputs), _exposed(graph)
    uses = read_counts(graph)

    def emit(n):
        n = substitute(n, sub)
        new = _identity(n, defs)
        if new is not None and n.out in exposed and not n.prim.view \
                and _aliases(new, defs, inputs):
            new = None      # a result must stay an array of its own, as eager gives
        if new is None:
            new = _rewrite(n, defs, inputs, exposed, uses)
        if type(new) is Value:
            sub[n.out] = resolve(new, sub)
            return
        if new is not None:         # new nodes, the last defining n.out: simplify them too
            for m in new:
                emit(m)
            return
        folded = _fold(n, defs)
        if folded is not None:
            n = folded
        defs[n.out] = n
        nodes.append(n)

    for n in graph.nodes:
        emit(n)
    return Graph(graph.inputs, nodes, [resolve(v, sub) for v in graph.outputs])


def _exposed(graph):
    """The graph's outputs and the values they are views of."""
    out = set(graph.outputs)
    for n in reversed(graph.nodes):
        if n.out in out and n.prim.view:
            out.add(n.inputs[0])
    return out


def _aliases(v, defs, inputs):
    """Whether ``v`` is a view of a broadcast (read-only memory) or of a graph input."""
    view = False
    while v not in inputs:
        d = defs.get(v)
        if d is None or not d.prim.view:
            return False
        if d.op == "broadcast_to":
            return True
        v, view = d.inputs[0], True
    return view


def _is(x, number):
    return type(x) in (int, float) and x == number and not (number == 0 and type(x) is float
                                                            and np.signbit(x))


def _constant_one(v, defs):
    """Whether ``v`` is a constant 1, reshaped or broadcast (the seed of a gradient taken
    inside the graph, ``ones_like(loss)`` spread over the elements by ``sum``'s backward):
    multiplying by it changes nothing, and left in place it is a full array to read."""
    for _ in range(_CHAIN_LIMIT):
        d = defs.get(v) if type(v) is Value else None
        if d is None:
            return False
        if d.op == "constant":
            a = d.params["value"].array
            return a.size == 1 and a.dtype.kind in "fiu" and a.reshape(()) == 1
        if d.op not in ("reshape", "broadcast_to"):
            return False
        v = d.inputs[0]
    return False


def _adds_nothing(z, aval):
    """``x + z == x`` bit for bit: for floats only ``-0.0`` (``-0.0 + 0.0`` is ``+0.0``)."""
    if type(z) not in (int, float) or z != 0:
        return False
    return not aval.dtype.is_floating_point or (type(z) is float and bool(np.signbit(z)))


def _identity(n, defs):
    """The value ``n`` is equal to, when it computes nothing new."""
    op, ins, p, aval = n.op, n.inputs, n.params, n.out.aval

    def keeps(v):
        return type(v) is Value and v.aval == aval
    if op == "mul":
        if (_is(ins[1], 1) or _constant_one(ins[1], defs)) and keeps(ins[0]):
            return ins[0]
        if (_is(ins[0], 1) or _constant_one(ins[0], defs)) and keeps(ins[1]):
            return ins[1]
    if op == "add":
        if _adds_nothing(ins[1], aval) and keeps(ins[0]):
            return ins[0]
        if _adds_nothing(ins[0], aval) and keeps(ins[1]):
            return ins[1]
    if op in ("sub", "div") and _is(ins[1], 0 if op == "sub" else 1) and keeps(ins[0]):
        return ins[0]
    if op == "neg":
        inner = defs.get(ins[0])
        if inner is not None and inner.op == "neg" and keeps(inner.inputs[0]):
            return inner.inputs[0]
    if op in ("reshape", "broadcast_to", "stop_gradient") and keeps(ins[0]) \
            and (op != "stop_gradient" or not aval.dtype.is_floating_point):
        return ins[0]
    if op == "pow_scalar" and _is(p["exponent"], 1) and keeps(ins[0]):
        return ins[0]
    if op == "convert" and keeps(ins[0]) and not p.get("copy") and p.get("device") is None:
        return ins[0]
    return None


class _Build:
    """New nodes standing for ``n``, each with ``n``'s site; ``finish(v)`` makes ``v`` the
    value of ``n.out`` (the nodes, or ``v`` itself when no node was needed), or None when
    ``v`` would not have ``n``'s shape and dtype."""

    def __init__(self, n):
        self.n, self.nodes = n, []

    def __call__(self, op, *ins, **params):
        out = Value(infer_aval(op, ins, params))
        self.nodes.append(Node(op, ins, params, out, self.n.site))
        return out

    def finish(self, v):
        if v.aval != self.n.out.aval:
            return None
        if not self.nodes:
            return v
        last = self.nodes[-1]
        assert last.out is v
        self.nodes[-1] = Node(last.op, last.inputs, last.params, self.n.out, last.site)
        return self.nodes


def _rewrite(n, defs, inputs, exposed, uses):
    """Cheaper nodes computing ``n.out`` (a list, the last defining it), a value equal to it,
    or None."""
    op = n.op
    if op == "pow_scalar":
        return _power(n)
    if op == "mul":
        for x, k in ((n.inputs[0], n.inputs[1]), (n.inputs[1], n.inputs[0])):
            if _is(k, -1) and type(x) is Value and x.aval == n.out.aval \
                    and x.dtype.np.kind in "fi":       # unsigned ints refuse -1
                return [Node("neg", [x], {}, n.out, n.site)]
    if op in ("add", "sub"):
        new = _fold_negation(n, defs)
        if new is not None:
            return new
    if op == "sum":
        return _sum_of_repeats(n, defs, inputs, exposed)
    if op == "permute":
        new = _transposed_product(n, defs, uses)
        if new is not None:
            return new
    if op in ("permute", "reshape"):
        return _view_chain(n, defs)
    if n.prim.kind == "elementwise" and n.prim.shape is broadcast:
        return _unbroadcast(n, defs)
    if op == "index_backward_sum":
        return _joined_slices(n)
    return None


def _joined_slices(n):
    """The gradients of slices that tile a tensor side by side (an LSTM's four gates,
    ``unbind``'s steps) as one ``cat`` (``stack`` for int indices): the same copy, without
    the cost of ``index_backward_sum``'s general call (9 us of 11 for an LSTM's gates)."""
    found = joined(n.params["specs"], tuple(n.params["shape"]))
    if found is None or len({v.dtype for v in n.inputs}) != 1:
        return None
    axis, order, stacked = found
    b = _Build(n)
    return b.finish(b("stack" if stacked else "cat", *[n.inputs[i] for i in order], dim=axis))


def _power(n):
    """``x ** k`` for small k as the products the NumPy template and the eager implementation
    already compute for 2 and 3 (``x * x * x`` associates as ``(x * x) * x``); ``** 0.5`` is the
    sqrt the eager implementation takes; ``** -1`` is ``1 / x``, one correctly rounded division
    as the power is. ``** 4`` as ``t * t`` with ``t = x * x`` rounds twice where ``np.power``
    rounds once (up to 2 ulp apart), and is ~70x faster. Ints are left alone: ``int ** 0.5``
    computes in float64, and ``int ** 2`` gains nothing (the template multiplies already)."""
    x, e = n.inputs[0], n.params["exponent"]
    if type(x) is not Value or not x.dtype.is_floating_point or type(e) not in (int, float):
        return None
    b = _Build(n)
    if e == 2:
        y = b("mul", x, x)
    elif e == 3:
        y = b("mul", b("mul", x, x), x)
    elif e == 4:
        t = b("mul", x, x)
        y = b("mul", t, t)
    elif e == 0.5:
        y = b("sqrt", x)
    elif e == -1:
        y = b("div", 1, x)
    else:
        return None
    return b.finish(y)


def _fold_negation(n, defs):
    """``x + neg y`` and ``neg y + x`` as ``x - y``, ``x - neg y`` as ``x + y`` (IEEE defines
    ``a - b`` as ``a + (-b)``, so the values are the same bits)."""
    a, c = n.inputs

    def negated(v):
        d = defs.get(v) if type(v) is Value else None
        return d.inputs[0] if d is not None and d.op == "neg" else None
    if n.op == "sub" and negated(c) is not None:
        new = ("add", a, negated(c))
    elif n.op == "add" and negated(c) is not None:
        new = ("sub", a, negated(c))
    elif n.op == "add" and negated(a) is not None:
        new = ("sub", c, negated(a))
    else:
        return None
    try:
        if infer_aval(new[0], new[1:], {}) != n.out.aval:
            return None
    except (RuntimeError, TypeError, ValueError):
        return None
    return [Node(new[0], new[1:], {}, n.out, n.site)]


def _sum_of_repeats(n, defs, inputs, exposed):
    """A sum over axes along which its input only repeats one value.

    ``sum(broadcast_to(x, S), dims)``, where every summed axis is one the broadcast added or
    expanded, is ``x * count`` (reshaped, and broadcast again if other axes were expanded);
    a sum over axes of size 1 only is a reshape. ``x * count`` is one rounding where NumPy's
    pairwise sum of ``count`` equal terms may round several times; a reshape keeps ``-0.0``
    where the sum gives ``+0.0``.

    Never a view where a plain array was: for a graph output, or a value an output is a view
    of, the mul comes last (a broadcast is read-only, and a caller may write into a result),
    and no count of 1 makes a view of a graph input (a saved view would see the write-back
    of an input the function mutates).
    """
    v, dims, keepdim = n.inputs[0], n.params["dims"], n.params["keepdim"]
    src = defs.get(v)
    x = src.inputs[0] if src is not None and src.op == "broadcast_to" else v
    shape = v.shape
    full = (1,) * (len(shape) - x.ndim) + x.shape        # x's shape aligned with v's
    if math.prod(shape) == 0 or any(full[d] != 1 for d in dims):
        return None
    count = math.prod(shape[d] for d in dims)
    if v.dtype.is_floating_point and count > 2 ** (np.finfo(v.dtype.np).nmant + 1):
        return None         # the count itself would round (float16: past 2048)
    kept = full if keepdim else tuple(s for i, s in enumerate(full) if i not in dims)
    late = n.out in exposed     # then the mul comes last: the result is an array of its own
    if count == 1 and (late or x in inputs or _aliases(x, defs, inputs)):
        return None
    b = _Build(n)
    y = b("mul", x, count) if count > 1 and not late else x
    if y.shape != kept:
        y = b("reshape", y, shape=kept)
    if kept != n.out.shape:
        y = b("broadcast_to", y, shape=n.out.shape)
    if count > 1 and late:
        y = b("mul", y, count)
    return b.finish(y)


def _transposed_product(n, defs, uses):
    """``(a @ b)^T`` (a permute swapping the last two axes of a product read nowhere else) is
    ``b^T @ a^T``: the product comes out in the layout wanted, and the operands' transposes
    cancel against those already there. A ``Linear`` weight's gradient, ``(h^T g)^T``,
    becomes ``g^T h``: contiguous, as eager's (``ops/linalg._mat2_grad``), where it was a
    transposed view that its ``.grad`` or the optimizer's update read across the rows."""
    dims, k = tuple(n.params["dims"]), len(n.out.shape)
    if k < 2 or dims != tuple(range(k - 2)) + (k - 1, k - 2):
        return None
    d = defs.get(n.inputs[0])
    if d is None or d.op != "matmul" or uses[d.out] != 1:
        return None
    b = _Build(n)

    def t(x):
        r = len(x.shape)
        return b("permute", x, dims=tuple(range(r - 2)) + (r - 1, r - 2))
    return b.finish(b("matmul", t(d.inputs[1]), t(d.inputs[0])))


def _view_chain(n, defs):
    """A permute or reshape at the end of a chain of them that keeps its source's elements in
    order is one reshape of that source (or the source itself): ``permute(permute(w))`` that
    cancels, a transpose moving only axes of size 1, ``reshape(reshape(x))``."""
    chain, v = [n], n.inputs[0]
    while len(chain) < _CHAIN_LIMIT:
        d = defs.get(v)
        if d is None or d.op not in ("permute", "reshape"):
            break
        chain.append(d)
        v = d.inputs[0]
    chain.reverse()
    for k, first in enumerate(chain):       # the farthest source first
        base = first.inputs[0]
        if k == len(chain) - 1 and n.op == "reshape":
            return None         # reshape of its own input: nothing to gain
        if _keeps_order(base.shape, chain[k:]):
            b = _Build(n)
            return b.finish(base if base.shape == n.out.shape
                            else b("reshape", base, shape=n.out.shape))
    return None


def _keeps_order(shape, chain):
    """Whether ``chain`` (permutes and reshapes) keeps a value of ``shape`` in row-major order.

    Each axis of size other than 1 carries a label; a permute moves labels, a reshape that
    only adds or drops axes of size 1 keeps them, and any other reshape is allowed only on
    labels still in order (then its axes get new labels, in order). Labels in increasing
    order mean the elements are in the source's order."""
    axes = [i if s != 1 else None for i, s in enumerate(shape)]
    for m in chain:
        if m.op == "permute":
            axes = [axes[d] for d in m.params["dims"]]
            continue
        labels = [a for a in axes if a is not None]
        out = m.out.shape
        if [s for s in m.inputs[0].shape if s != 1] == [s for s in out if s != 1]:
            it = iter(labels)
            axes = [next(it) if s != 1 else None for s in out]
        elif labels == sorted(labels):
            axes = [i if s != 1 else None for i, s in enumerate(out)]
        else:
            return False
    labels = [a for a in axes if a is not None]
    return labels == sorted(labels)


def _unbroadcast(n, defs):
    """``op(broadcast_to(a, S), b)`` as ``op(a, b)`` when the op's own broadcasting gives the
    same shape and dtype (a 0-d tensor promotes differently from a broadcast one)."""
    ins, changed = list(n.inputs), False
    for i, v in enumerate(ins):
        d = defs.get(v) if type(v) is Value else None
        if d is None or d.op != "broadcast_to":
            continue
        trial = ins[:i] + [d.inputs[0]] + ins[i + 1:]
        try:
            aval = infer_aval(n.op, trial, n.params)
        except (RuntimeError, TypeError, ValueError, IndexError):
            continue
        if aval == n.out.aval:
            ins, changed = trial, True
    return [Node(n.op, ins, n.params, n.out, n.site)] if changed else None


def _fold(n, defs):
    """A constant node for ``n`` when all its inputs are small constants."""
    if n.op in ("constant", "random", "size") or n.out.aval.dtype is None:
        return None
    if not any(type(v) is Value for v in n.inputs):
        return None
    arrays = []
    for v in n.inputs:
        if type(v) is not Value:
            arrays.append(v)
            continue
        d = defs.get(v)
        if d is None or d.op != "constant" or d.params["value"].array.size > FOLD_LIMIT:
            return None
        arrays.append(d.params["value"].array)
    if symbols_in(n.inputs) or symbols_in(n.params):    # it depends on the call's sizes
        return None
    if math.prod(n.out.shape) > FOLD_LIMIT:     # a broadcast of a small constant stays one:
        return None                             # a kernel reads it as a scalar, not an array
    from ..ops.core import Tensor, apply_plain
    with np.errstate(all="ignore"):
        t = apply_plain(n.prim, [Tensor._make(a) if isinstance(a, np.ndarray) else a
                                 for a in arrays], n.params)
    return Node("constant", [], {"value": Const(t._data)}, n.out, n.site)
