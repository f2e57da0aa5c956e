"""Many small GEMMs as one: per-step and per-batch-entry products stacked into one GEMM.

A recurrent layer applied step by step gets, in its backward, one weight gradient per
step, summed: ``dW = sum_t h_t^T @ g_t`` (and the bias's ``sum_t sum(g_t, 0)``). Each
term is a small GEMM (16 rows for a batch of 16); the same sum is one GEMM over the
stacked steps, ``[h_1; ...; h_T]^T @ [g_1; ...; g_T]``, with the same multiply-adds, one
call instead of ``T`` and no ``T - 1`` additions of full weight-sized arrays. A bias's
per-step column sums likewise become one column sum of the stacked steps.

The pass looks for trees of ``add`` (each inner add read only by the next) whose terms
are such products: ``matmul(permute(a), b)`` of 2-D ``a``, ``b`` (``stop_gradient``
between them is seen through), or its ``permute`` (the gradient of a weight used as
``x @ W.T``, then computed as ``b^T @ a``, contiguous, instead of a transposed copy).
Three or more terms of one kind (``a``'s and ``b``'s column counts and dtypes) become
one product of ``cat``'s; other terms are added to it as before.

Before::                                    After (then ``cse``, ``dce``)::

    graph(a0:f32[4,3], a1:f32[4,3],             ...
          b0:f32[4,5], b1:f32[4,5], ...) {        A:f32[12,3] = cat a0 a1 a2  dim=0
      p0:f32[3,4] = permute a0  dims=(1,0)        B:f32[12,5] = cat b0 b1 b2  dim=0
      m0:f32[3,5] = matmul p0 b0                  P:f32[3,12] = permute A  dims=(1,0)
      ... (m1, m2 likewise)                       s:f32[3,5] = matmul P B
      s1:f32[3,5] = add m0 m1
      s:f32[3,5] = add s1 m2

The same holds for the batch of one product: the gradient of a weight that multiplies a
batch, ``sum(a^T @ b, 0)`` over ``a:[B,T,M]``, ``b:[B,T,N]`` (``B`` GEMMs of ``T`` rows and a
``[B,M,N]`` temporary summed), is one GEMM of the rows stacked, ``reshape(a, (B*T, M))^T @
reshape(b, (B*T, N))``; transposed after (``x @ W.T``'s weight), it is ``b^T @ a``. A
traced training step's backward of ``x @ W.T`` sums the batch's products transposed,
``sum((g^T @ x)^T, 0)^T``: the two transposes cancel, and it is ``g^T @ x`` of the rows (the
LSTM language model's decoder: one [1000, 512] x [512, 128] GEMM instead of 32 GEMMs into a
16 MB [32, 1000, 128] temporary and its sum).

A batch of matrices times one matrix (a Linear over ``[B, T, K]``) is one GEMM of the
``B * T`` rows, reshaped back: NumPy's matmul runs it as ``B`` GEMMs of ``T`` rows. Its
bias, where the batch is then viewed as rows (``decoder(x).view(-1, N)``), is added to the
rows, so that it fuses into what reads them.

A transposed matrix that many GEMMs of few rows read (an LSTM's ``h_t @ W_hh.T``, step after
step) is copied once into its own layout: NumPy's GEMM of 16 rows by a transposed [128, 512]
matrix takes 42 us against 25 us by a contiguous one (OpenBLAS, one thread), and the copy
costs about four of those differences.

Sums round differently: one GEMM's accumulation order instead of ``T`` GEMMs and a chain
of additions (float rounding, as any BLAS's blocking changes it).
"""
from ..ir import Graph, Node, Value, infer_aval
from .rewrite import read_counts

MIN_TERMS = 3       # fewer terms than this are left as they are


def stack_steps(graph):
    """``graph`` with the four rewrites of the module docstring (the same graph when none
    applies); the replaced terms are left for ``dce``."""
    defs = {n.out: n for n in graph.nodes}
    uses = read_counts(graph)
    inner = {v for n in graph.nodes if _plain_add(n)
             for v in n.inputs if _inner_add(v, defs, uses)}
    replaced = {}
    for n in graph.nodes:
        if _plain_add(n) and n.out not in inner:
            new = _stacked(n, _terms(n, defs, uses), defs, uses)
            if new is not None:
                replaced[n] = new
    claimed = set()
    for n in reversed(graph.nodes):     # outermost first: a match claims its inner nodes
        if n.op in ("permute", "reshape", "sum") and n.out not in claimed:
            found = _batched_product(n, defs, uses)
            if found is not None:
                replaced[n] = _flattened(n, *found)
                claimed.update(found[3])
    readers = graph.users()
    for n in graph.nodes:
        if n.op == "matmul" and _batch_by_matrix(n):
            replaced[n] = _rows_stacked(n)
            _bias_on_rows(n, replaced, readers, uses)
    _copy_shared_transposes(graph, replaced, readers)
    if not replaced:
        return graph
    nodes = [m for n in graph.nodes for m in replaced.get(n, (n,))]
    return Graph(graph.inputs, nodes, graph.outputs)


def _plain_add(n):
    """An add of two values of its own shape and dtype (no broadcasting, no scalars)."""
    return n.op == "add" and all(type(v) is Value and v.aval == n.out.aval for v in n.inputs)


def _inner_add(v, defs, uses):
    n = defs.get(v)
    return n is not None and _plain_add(n) and uses[v] == 1


def _terms(root, defs, uses):
    """The terms of the add tree rooted at ``root``, left to right."""
    out, stack = [], list(reversed(root.inputs))
    while stack:
        v = stack.pop()
        if _inner_add(v, defs, uses):
            stack.extend(reversed(defs[v].inputs))
        else:
            out.append(v)
    return out


def _seen_through(v, defs):
    n = defs.get(v)
    while n is not None and n.op == "stop_gradient":
        v = n.inputs[0]
        n = defs.get(v)
    return v, n


def _transpose_of(v, defs, dims=(1, 0)):
    """``x`` where ``v`` is ``permute(x, dims)`` (through stop_gradient), else None."""
    v, n = _seen_through(v, defs)
    if n is not None and n.op == "permute" and tuple(n.params["dims"]) == dims:
        return n.inputs[0]
    return None


def _product(v, defs, uses):
    """``(kind, a, b)`` where ``v`` is ``a^T @ b`` (kind ``"ab"``) or its transpose (kind
    ``"ba"``), read by nothing else; None otherwise."""
    if uses[v] != 1:
        return None
    kind, m = "ab", v
    outer = _transpose_of(v, defs)
    if outer is not None:
        kind, m = "ba", outer
    else:
        m, _ = _seen_through(v, defs)
    if m is not v and uses[m] != 1:
        return None
    n = defs.get(m)
    if n is None or n.op != "matmul":
        return None
    a, b = _transpose_of(n.inputs[0], defs), n.inputs[1]
    if a is None or a.ndim != 2 or b.ndim != 2 or not _static(a) or not _static(b):
        return None
    return kind, a, b


def _batched_product(n, defs, uses):
    """``(kind, a, b, inner)`` where ``n`` is ``sum(a^T @ b, 0)`` over a batch of 3-D ``a``,
    ``b`` (the gradient of a weight that multiplies a batch), possibly reshaped, or the
    transpose of that (kind ``"ba"``); ``inner``: the values of the chain below ``n``. The
    batch's matrices may be transposed before the sum (``permute`` of dims ``(0, 2, 1)``, as
    the traced backward of ``x @ W.T`` gives ``sum((g^T @ x)^T, 0)^T``), and ``stop_gradient``
    between the nodes is seen through."""
    inner, outer = [], n.op == "permute"
    if outer:
        if tuple(n.params["dims"]) != (1, 0):
            return None
        n = _only_use(n.inputs[0], defs, uses, inner)
        if n is None or n.op != "reshape":
            return None
    if n.op == "reshape":
        n = _only_use(n.inputs[0], defs, uses, inner)
    if n is None or n.op != "sum" or tuple(n.params.get("dims") or ()) != (0,) \
            or n.params.get("dtype") is not None:
        return None
    summed = n.out.shape[-2:]       # the (rows, columns) of the batch's matrices summed
    m = _only_use(n.inputs[0], defs, uses, inner, through=True)
    flips = int(outer)
    if m is not None and m.op == "permute" and tuple(m.params["dims"]) == (0, 2, 1):
        flips, m = flips + 1, _only_use(m.inputs[0], defs, uses, inner, through=True)
    if m is None or m.op != "matmul" or m.out.ndim != 3:
        return None
    a, b = _transpose_of(m.inputs[0], defs, (0, 2, 1)), m.inputs[1]
    if a is None or a.ndim != 3 or b.ndim != 3 or not _static(a) or not _static(b) \
            or a.shape[:2] != b.shape[:2]:
        return None
    if outer and inner[0].shape != summed:
        return None     # the reshape below the transpose must be the summed matrix
    return ("ab" if flips % 2 == 0 else "ba"), a, b, inner


def _only_use(v, defs, uses, inner, through=False):
    """The node defining ``v`` where nothing else reads ``v`` (noted in ``inner``); with
    ``through``, the node below any ``stop_gradient`` read by nothing else either."""
    if uses[v] != 1 or v not in defs:
        return None
    inner.append(v)
    n = defs[v]
    if through and n.op == "stop_gradient":
        return _only_use(n.inputs[0], defs, uses, inner, through)
    return n


def _flattened(n, kind, a, b, inner):
    """Nodes computing ``n.out`` as one GEMM over the batch's rows stacked."""
    nodes = []

    def emit(op, ins, **params):
        out = Value(infer_aval(op, ins, params))
        nodes.append(Node(op, ins, params, out, n.site))
        return out

    rows = a.shape[0] * a.shape[1]
    a2 = emit("reshape", [a], shape=(rows, a.shape[2]))
    b2 = emit("reshape", [b], shape=(rows, b.shape[2]))
    first, second = (a2, b2) if kind == "ab" else (b2, a2)
    total = emit("matmul", [emit("permute", [first], dims=(1, 0)), second])
    if total.shape != n.out.shape:
        total = emit("reshape", [total], shape=n.out.shape)
    last = nodes[-1]
    nodes[-1] = Node(last.op, last.inputs, last.params, n.out, last.site)
    return nodes


def _batch_by_matrix(n):
    """A batch of matrices times one matrix (``x @ W.T`` of a Linear over [B, T, K])."""
    a, w = n.inputs
    return a.ndim >= 3 and w.ndim == 2 and _static(a) and _static(w)


def _rows_stacked(n):
    """``n``'s product as one GEMM of the batch's rows stacked: NumPy runs a batch by one
    matrix as one small GEMM per batch entry."""
    a, w = n.inputs
    rows = 1
    for d in a.shape[:-1]:
        rows *= d
    flat = Value(infer_aval("reshape", [a], {"shape": (rows, a.shape[-1])}))
    prod = Value(infer_aval("matmul", [flat, w], {}))
    return [Node("reshape", [a], {"shape": (rows, a.shape[-1])}, flat, n.site),
            Node("matmul", [flat, w], {}, prod, n.site),
            Node("reshape", [prod], {"shape": n.out.shape}, n.out, n.site)]


def _copy_shared_transposes(graph, replaced, readers):
    """Add to ``replaced``: a ``clone`` after each 2-D ``permute`` that ``MIN_TERMS`` or more
    GEMMs of few rows (fewer than either side of the matrix) read as their right operand,
    and those GEMMs reading the clone instead."""
    for n in graph.nodes:
        if n.op != "permute" or n in replaced or tuple(n.params["dims"]) != (1, 0) \
                or not _static(n.out):
            continue
        few = [m for m in readers.get(n.out, ()) if m.op == "matmul" and m not in replaced
               and m.inputs[1] is n.out and m.inputs[0] is not n.out and m.inputs[0].ndim == 2
               and _static(m.inputs[0]) and m.inputs[0].shape[0] < min(n.out.shape)]
        if len(few) < MIN_TERMS:
            continue
        copy = Value(infer_aval("clone", [n.out], {}))
        replaced[n] = [n, Node("clone", [n.out], {}, copy, n.site)]
        for m in few:
            replaced[m] = [Node(m.op, [m.inputs[0], copy], m.params, m.out, m.site)]


def _bias_on_rows(n, replaced, readers, uses):
    """Where ``n``'s product (just stacked by rows) is only read by an elementwise op with an
    operand that varies along the last axis alone (a Linear's bias), itself only reshaped to
    the stacked rows (a language model's logits viewed as [B * T, N] for its loss), add to
    ``replaced`` that op on the stacked product, defining the reshape's value: no reshapes
    between the product, the op and what reads it, so the op fuses into its reader's loop
    (the loss's softmax) instead of a NumPy pass over the batch of its own."""
    ew = _only_reader(n.out, readers, uses)
    if ew is None or ew.prim.kind != "elementwise" or len(ew.inputs) != 2 or ew in replaced:
        return
    view = _only_reader(ew.out, readers, uses)
    prod = replaced[n][-2].out      # the stacked GEMM's [B * T, N]
    if view is None or view.op != "reshape" or view in replaced \
            or view.out.shape != prod.shape or ew.out.shape != n.out.shape:
        return
    other = ew.inputs[1] if ew.inputs[0] is n.out else ew.inputs[0]
    new = []
    if type(other) is Value:
        if other is n.out or any(d != 1 for d in other.shape[:-1]) or not _static(other):
            return
        if other.ndim > 1:
            flat = Value(infer_aval("reshape", [other], {"shape": other.shape[-1:]}))
            new.append(Node("reshape", [other], {"shape": other.shape[-1:]}, flat, ew.site))
            other = flat
    ins = [prod if v is n.out else other for v in ew.inputs]
    if infer_aval(ew.op, ins, ew.params) != view.out.aval:
        return
    replaced[ew] = []
    replaced[view] = new + [Node(ew.op, ins, ew.params, view.out, ew.site)]


def _only_reader(v, readers, uses):
    """The one node that reads ``v``, where nothing else (nor the outputs) does."""
    found = readers.get(v, ())
    return found[0] if uses[v] == 1 and len(found) == 1 else None


def _column_sum(v, defs, uses):
    """``x`` where ``v`` is ``sum(x, 0)`` of a 2-D ``x`` (kept dim, or reshaped away),
    read by nothing else; None otherwise."""
    if uses[v] != 1:
        return None
    n = defs.get(v)
    if n is not None and n.op == "reshape" and uses[n.inputs[0]] == 1:
        n = defs.get(n.inputs[0])
    if n is None or n.op != "sum" or tuple(n.params.get("dims") or ()) != (0,) \
            or n.params.get("dtype") is not None:
        return None
    x = n.inputs[0]
    return x if x.ndim == 2 and _static(x) else None


def _static(v):
    return all(type(d) is int for d in v.shape)


def _stacked(root, terms, defs, uses):
    """Nodes computing ``root.out`` with the stackable terms stacked, or None."""
    groups, kept = {}, set()
    for v in terms:
        prod = _product(v, defs, uses)
        x = _column_sum(v, defs, uses) if prod is None else None
        if prod is not None:
            kind, a, b = prod
            groups.setdefault((kind, a.shape[1], b.shape[1], a.dtype, b.dtype), []).append(
                (v, (a, b)))
        elif x is not None:
            groups.setdefault(("sum", x.shape[1], x.dtype), []).append((v, (x,)))
        else:
            kept.add(v)
    if not any(len(g) >= MIN_TERMS for g in groups.values()):
        return None
    nodes, parts = [], []

    def emit(op, ins, **params):
        out = Value(infer_aval(op, ins, params))
        nodes.append(Node(op, ins, params, out, root.site))
        return out

    for key, members in groups.items():
        if len(members) < MIN_TERMS:
            kept.update(v for v, _ in members)
            continue
        cats = [emit("cat", list(col), dim=0) for col in zip(*(m for _, m in members))]
        if key[0] == "sum":
            total = emit("sum", cats, dims=(0,), dtype=None, keepdim=False)
        else:
            a, b = cats if key[0] == "ab" else reversed(cats)
            total = emit("matmul", [emit("permute", [a], dims=(1, 0)), b])
        parts.append(total if total.shape == root.out.shape
                     else emit("reshape", [total], shape=root.out.shape))
    parts += [v for v in terms if v in kept]
    return _chain(root, parts, nodes)


def _chain(root, parts, nodes):
    """``parts`` added left to right, the last add defining ``root.out``."""
    acc = parts[0]
    for k, v in enumerate(parts[1:], 1):
        out = root.out if k == len(parts) - 1 else Value(root.out.aval)
        nodes.append(Node("add", [acc, v], {}, out, root.site))
        acc = out
    if acc is not root.out:         # one part: name it root.out
        last = nodes[-1]
        nodes[-1] = Node(last.op, last.inputs, last.params, root.out, last.site)
    return nodes
