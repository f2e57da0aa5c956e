"""The simplify pass: each rewrite pinned as IR text on a small graph, the rewrites that must
not fire, the simplified graph evaluated against the original, and compiled functions
that exercise each rewrite against eager (values and gradients, float32 and float64)."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad import dtypes
from tracegrad.ir import SHORT, Graph, Namer, Node, Value, evaluate, infer_aval, print_graph, verify
from tracegrad.ops.core import Aval
from tracegrad.passes import pipeline
from tracegrad.passes.dce import dce
from tracegrad.passes.simplify import simplify

from tolerances import close, ulps

_DTYPES = {short: dt for dt, short in SHORT.items()}


class _G:
    """A graph built by hand: ``g = _G("x:f32[3], b:f32[]")``, ``y = g("exp", g.x)``."""

    def __init__(self, signature):
        self.inputs, self.nodes = [], []
        for item in signature.split(", "):
            name, _, ty = item.partition(":")
            short, _, dims = ty[:-1].partition("[")
            shape = tuple(int(d) for d in dims.split(",") if d)
            self.inputs.append(Value(Aval(shape, _DTYPES[short]), name))
            setattr(self, name, self.inputs[-1])

    def __call__(self, op, *ins, **params):
        out = Value(infer_aval(op, ins, params))
        self.nodes.append(Node(op, ins, params, out))
        return out

    def graph(self, *outputs):
        return verify(Graph(self.inputs, self.nodes, outputs))


def _simplified(graph):
    """``graph`` through simplify and dce, checked: verified, outputs of the same avals, and
    a fixed point (simplifying again changes nothing)."""
    out = verify(dce(verify(simplify(graph))))
    assert [v.aval for v in out.outputs] == [v.aval for v in graph.outputs]
    assert str(dce(simplify(out))) == str(out)
    return out


def _text(graph):
    return str(_simplified(graph))


def _arrays(graph, seed=0, special=False):
    """Inputs for ``graph``; with ``special``, floats include -0.0, inf, nan and the largest
    finite value."""
    rng = np.random.default_rng(seed)
    out = []
    for v in graph.inputs:
        dt = v.dtype.np
        if v.dtype.is_floating_point:
            a = rng.standard_normal(v.shape).astype(dt)
            if special and a.size >= 6:
                a.reshape(-1)[:6] = [-0.0, 0.0, np.inf, -np.inf, np.nan, np.finfo(dt).max]
        else:
            a = rng.integers(-5, 6, v.shape).astype(dt)
        out.append(a)
    return out


def _same_values(graph, exact=True, special=False, seed=0, n_ops=2):
    """The simplified graph computes what ``graph`` computes (the eager ops run both): bit
    for bit where the rewrite is exact in IEEE arithmetic (the eager op computes the same
    products), else within the ulps of the ``n_ops`` roundings by which the two differ."""
    args = _arrays(graph, seed, special)
    with np.errstate(all="ignore"):
        want = evaluate(graph, [tg.tensor(a) for a in args])
        got = evaluate(_simplified(graph), [tg.tensor(a) for a in args])
    for w, g in zip(want, got):
        w, g = w._data, g._data
        assert w.shape == g.shape and w.dtype == g.dtype
        if not exact:
            np.testing.assert_allclose(g, w, rtol=ulps(w.dtype, n_ops))
            continue
        np.testing.assert_array_equal(g, w)
        if w.dtype.kind == "f":      # bit for bit: the sign of a zero too
            ok = ~np.isnan(w)
            np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


# a sum of repeated values ------------------------------------------------------------------

def test_sum_over_the_axes_a_broadcast_added_is_a_multiplication():
    g = _G("x:f32[3]")
    b = g("broadcast_to", g.x, shape=(4, 3))
    graph = g.graph(g("sum", b, dims=(0,), keepdim=False))
    assert _text(graph) == """graph(x:f32[3]) {
  a:f32[3] = mul x 4
  return (a)
}"""
    _same_values(graph)          # four equal terms: the pairwise sum is exact too


def test_sum_of_a_broadcast_reshapes_to_the_sums_rank():
    g = _G("x:f32[1,3]")
    b = g("broadcast_to", g.x, shape=(2, 4, 3))
    flat = g("sum", b, dims=(0, 1), keepdim=False)
    kept = g("sum", b, dims=(0, 1), keepdim=True)
    graph = g.graph(g("exp", flat), g("exp", kept))
    assert _text(graph) == """graph(x:f32[1,3]) {
  a:f32[1,3] = mul x 8
  b:f32[3] = reshape a  shape=(3,)
  c:f32[1,3] = mul x 8
  d:f32[1,1,3] = reshape c  shape=(1,1,3)
  e:f32[3] = exp b
  f:f32[1,1,3] = exp d
  return (e, f)
}"""
    # 8 x rounds once where a sum of 8 copies rounds up to 3 times, and exp multiplies its
    # argument's relative error by the argument, |8 x| < 20 here
    _same_values(graph, exact=False, n_ops=3 * 20)
    # results: the mul comes last, so that a result is an array of its own
    assert _text(g.graph(flat, kept)) == """graph(x:f32[1,3]) {
  a:f32[3] = reshape x  shape=(3,)
  b:f32[3] = mul a 8
  c:f32[1,1,3] = reshape x  shape=(1,1,3)
  d:f32[1,1,3] = mul c 8
  return (b, d)
}"""


def test_sum_over_some_broadcast_axes_broadcasts_the_product():
    g = _G("x:f32[1,1]")
    b = g("broadcast_to", g.x, shape=(4, 3))
    s = g("sum", b, dims=(0,), keepdim=True)
    inside = g.graph(g("exp", s))
    assert _text(inside) == """graph(x:f32[1,1]) {
  a:f32[1,1] = mul x 4
  b:f32[1,3] = broadcast_to a  shape=(1,3)
  c:f32[1,3] = exp b
  return (c)
}"""
    _same_values(inside, exact=False, n_ops=3 * 20)    # as above, with 4 copies
    # a result is never a read-only broadcast: the mul comes last and makes a new array
    assert _text(g.graph(s)) == """graph(x:f32[1,1]) {
  a:f32[1,3] = broadcast_to x  shape=(1,3)
  b:f32[1,3] = mul a 4
  return (b)
}"""


def test_sum_over_axes_of_size_one_is_a_reshape():
    g = _G("x:f32[3,1]")
    y = g("exp", g.x)
    flat = g("neg", g("sum", y, dims=(1,), keepdim=False))
    kept = g("neg", g("sum", y, dims=(1,), keepdim=True))
    graph = g.graph(flat, kept)
    assert _text(graph) == """graph(x:f32[3,1]) {
  a:f32[3,1] = exp x
  b:f32[3] = reshape a  shape=(3,)
  c:f32[3] = neg b
  d:f32[3,1] = neg a
  return (c, d)
}"""
    _same_values(graph)


def test_integer_sums_of_a_broadcast_keep_the_int64_result():
    g = _G("i:i64[3], m:bool[3]")
    graph = g.graph(*[g("sum", g("broadcast_to", v, shape=(5, 3)), dims=(0,), keepdim=False)
                      for v in (g.i, g.m)])
    assert _text(graph) == """graph(i:i64[3], m:bool[3]) {
  a:i64[3] = mul i 5
  b:i64[3] = mul m 5
  return (a, b)
}"""
    _same_values(graph)


@pytest.mark.parametrize("case", [
    "int32 sums to int64", "a dim the broadcast did not add", "dtype=f64", "empty",
    "size 1 of an input", "size 1 into a result", "a float16 count past 2048"])
def test_sums_that_stay_sums(case):
    x = {"int32 sums to int64": "x:i32[3]", "a dim the broadcast did not add": "x:f32[4,3]",
         "empty": "x:f32[1,3]", "a float16 count past 2048": "x:f16[3]"}.get(case, "x:f32[3,1]")
    g = _G(x)
    src = g.x
    if case == "a float16 count past 2048":      # 2049 is no float16: x * 2049 would round it
        s = g("sum", g("broadcast_to", g.x, shape=(2049, 3)), dims=(0,), keepdim=False)
    elif case in ("int32 sums to int64", "dtype=f64"):
        src = g("broadcast_to", g.x, shape=(2,) + g.x.shape)
        s = g("sum", src, dims=(0,), keepdim=False, dtype=dtypes.float64 if case == "dtype=f64"
              else None)
    elif case == "a dim the broadcast did not add":
        s = g("sum", g("broadcast_to", g.x, shape=(2, 4, 3)), dims=(0, 1), keepdim=False)
    elif case == "empty":      # x * 0 would turn inf into nan where the sum gives 0
        s = g("sum", g("broadcast_to", g.x, shape=(0, 3)), dims=(0,), keepdim=False)
    elif case == "size 1 of an input":     # a view of an input would see its write-back
        s = g("neg", g("sum", g.x, dims=(1,), keepdim=False))
    else:                                   # a result is an array of its own, as eager gives
        s = g("sum", g("exp", g.x), dims=(1,), keepdim=False)
    graph = g.graph(s)
    assert _text(graph) == str(dce(graph))


# negation and the identities ---------------------------------------------------------------

def test_multiplying_by_minus_one_is_a_negation():
    g = _G("x:f32[6], y:f64[6], i:i64[6]")
    graph = g.graph(g("mul", g.x, -1), g("mul", -1, g.y), g("mul", g.i, -1), g("mul", g.x, -1.0))
    assert _text(graph) == """graph(x:f32[6], y:f64[6], i:i64[6]) {
  a:f32[6] = neg x
  b:f64[6] = neg y
  c:i64[6] = neg i
  d:f32[6] = neg x
  return (a, b, c, d)
}"""
    _same_values(graph, special=True)


def test_negations_fold_into_add_and_sub():
    g = _G("x:f32[6], y:f32[6]")
    ny = g("neg", g.y)
    graph = g.graph(g("sub", g.x, ny), g("add", g.x, ny), g("add", ny, g.x),
                    g("neg", g("neg", g.x)), g("sub", g.x, g("mul", g.y, -1)))
    assert _text(graph) == """graph(x:f32[6], y:f32[6]) {
  a:f32[6] = add x y
  b:f32[6] = sub x y
  c:f32[6] = sub x y
  d:f32[6] = add x y
  return (a, b, c, x, d)
}"""
    _same_values(graph, special=True)


def test_identities_return_their_operand():
    g = _G("x:f32[6], i:i64[6]")
    graph = g.graph(g("mul", g.x, 1), g("mul", 1, g.x), g("add", g.x, -0.0), g("sub", g.x, 0),
                    g("sub", g.x, 0.0), g("div", g.x, 1), g("add", g.i, 0), g("add", 0, g.i),
                    g("pow_scalar", g.x, exponent=1))
    assert _text(graph) == """graph(x:f32[6], i:i64[6]) {
  return (x, x, x, x, x, x, i, i, x)
}"""
    _same_values(graph, special=True)


def test_rewrites_that_would_change_a_bit_or_a_dtype_do_not_fire():
    g = _G("x:f32[6]")
    floats = g.graph(
        g("add", g.x, 0),            # -0.0 + 0 is +0.0
        g("add", g.x, 0.0),
        g("sub", g.x, -0.0),         # -0.0 - -0.0 is +0.0
        g("sub", 0, g.x))            # 0 - 0.0 is +0.0, neg 0.0 is -0.0
    assert _text(floats) == str(floats)
    _same_values(floats, special=True)
    g = _G("u:u8[6], m:bool[6], i:i64[6]")
    others = g.graph(
        g("mul", g.u, -1),           # unsigned: NumPy refuses -1
        g("mul", g.m, -1),           # bool * -1 is int64
        g("mul", g.i, 1.0),          # int64 * 1.0 is float32
        g("div", g.i, 1))            # true division: float32
    assert _text(others) == str(others)


# transposes and reshapes -----------------------------------------------------------------------

def test_transposes_that_cancel_are_dropped():
    g = _G("w:f32[3,4], x:f32[2,3,4]")
    wt = g("permute", g.w, dims=(1, 0))
    xt = g("permute", g.x, dims=(2, 0, 1))
    graph = g.graph(g("permute", wt, dims=(1, 0)), g("permute", xt, dims=(1, 2, 0)),
                    g("reshape", g("reshape", g.w, shape=(12,)), shape=(3, 4)))
    assert _text(graph) == """graph(w:f32[3,4], x:f32[2,3,4]) {
  return (w, x, w)
}"""


def test_a_transpose_through_a_reshape_of_unit_axes_is_a_reshape():
    g = _G("x:f32[3,4], v:f32[5,1]")
    t = g("reshape", g("permute", g.x, dims=(1, 0)), shape=(4, 1, 3))
    back = g("permute", t, dims=(2, 1, 0))                       # (3, 1, 4): x's order again
    row = g("permute", g.v, dims=(1, 0))                         # moves only a unit axis
    flat = g("reshape", g("reshape", g.x, shape=(12,)), shape=(2, 6))
    graph = g.graph(g("exp", back), g("exp", row), g("exp", flat))
    assert _text(graph) == """graph(x:f32[3,4], v:f32[5,1]) {
  a:f32[3,1,4] = reshape x  shape=(3,1,4)
  b:f32[1,5] = reshape v  shape=(1,5)
  c:f32[2,6] = reshape x  shape=(2,6)
  d:f32[3,1,4] = exp a
  e:f32[1,5] = exp b
  f:f32[2,6] = exp c
  return (d, e, f)
}"""
    _same_values(graph)


def test_transposes_that_reorder_elements_stay():
    g = _G("x:f32[3,4]")
    t = g("permute", g.x, dims=(1, 0))
    graph = g.graph(g("reshape", t, shape=(12,)),                     # a real transpose
                    g("permute", g("reshape", t, shape=(2, 6)), dims=(1, 0)))
    assert _text(graph) == str(graph)


# powers ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("short", ["f32", "f64", "f16"])
def test_small_powers_are_multiplications(short):
    g = _G(f"x:{short}[6]")
    graph = g.graph(*[g("pow_scalar", g.x, exponent=e) for e in (2, 3, 4, 0.5, -1, 2.0)])
    assert _text(graph) == f"""graph(x:{short}[6]) {{
  a:{short}[6] = mul x x
  b:{short}[6] = mul x x
  c:{short}[6] = mul b x
  d:{short}[6] = mul x x
  e:{short}[6] = mul d d
  f:{short}[6] = sqrt x
  g:{short}[6] = div 1 x
  h:{short}[6] = mul x x
  return (a, c, e, f, g, h)
}}"""
    # 2, 3 and 0.5 are what the eager implementation computes; -1 is NumPy's correctly
    # rounded reciprocal; 4 rounds twice where np.power rounds once
    _same_values(g.graph(*[graph.outputs[k] for k in (0, 1, 3, 5)]), special=True)
    _same_values(g.graph(graph.outputs[2], graph.outputs[4]), exact=False)


def test_powers_that_stay_powers():
    g = _G("x:f32[6], i:i64[6]")
    graph = g.graph(g("pow_scalar", g.i, exponent=2),        # ints are left alone
                    g("pow_scalar", g.i, exponent=0.5),      # int ** 0.5 computes in float64
                    g("pow_scalar", g.x, exponent=5),
                    g("pow_scalar", g.x, exponent=1.5),
                    g("pow_scalar", g.x, exponent=-2))
    assert _text(graph) == str(graph)


# broadcasts folded into their elementwise consumer ---------------------------------------------

def test_an_elementwise_op_reads_the_broadcast_input_directly():
    g = _G("x:f32[4,3], b:f32[3], c:f32[4,1], m:bool[3]")
    bb = g("broadcast_to", g.b, shape=(4, 3))
    cb = g("broadcast_to", g.c, shape=(4, 3))
    graph = g.graph(g("add", bb, g.x),
                    g("mul", bb, cb),                      # both: (3,) with (4,1) is (4,3)
                    g("where", g("broadcast_to", g.m, shape=(4, 3)), g.x, bb))
    assert _text(graph) == """graph(x:f32[4,3], b:f32[3], c:f32[4,1], m:bool[3]) {
  a:f32[4,3] = add b x
  d:f32[4,3] = mul b c
  e:f32[4,3] = where m x b
  return (a, d, e)
}"""
    _same_values(graph)


def test_broadcasts_that_stay():
    g = _G("b:f32[3], c:f32[3], s:f64[], x:f32[3]")
    bb = g("broadcast_to", g.b, shape=(4, 3))
    cb = g("broadcast_to", g.c, shape=(4, 3))
    sb = g("broadcast_to", g.s, shape=(3,))
    graph = g.graph(g("mul", bb, cb),          # one stays: b * c alone would be [3]
                    g("exp", bb),              # unary: the shape is its operand's
                    g("add", sb, g.x),         # a 0-d f64 would promote to f32, not f64
                    bb)                        # read elsewhere: the broadcast stays
    assert _text(graph) == """graph(b:f32[3], c:f32[3], s:f64[], x:f32[3]) {
  a:f32[4,3] = broadcast_to b  shape=(4,3)
  d:f32[4,3] = broadcast_to c  shape=(4,3)
  e:f64[3] = broadcast_to s  shape=(3,)
  f:f32[4,3] = mul b d
  g:f32[4,3] = exp a
  h:f64[3] = add e x
  return (f, g, h, a)
}"""
    _same_values(graph)


# the joint graph of a traced function ---------------------------------------------------------

@pytest.fixture
def simplified(monkeypatch):
    """The graphs the pipeline's simplify returns while the test runs (after dce)."""
    seen = []
    real, real_autodiff = pipeline.simplify, pipeline.autodiff

    def spy(graph):
        out = real(graph)
        seen.append(verify(dce(out)))
        return out

    def hints(*args, **kwargs):         # the gradient names autodiff finds (d_x for x)
        joint, where, found = real_autodiff(*args, **kwargs)
        HINTS.update(found)
        return joint, where, found
    HINTS.clear()
    monkeypatch.setattr(pipeline, "simplify", spy)
    monkeypatch.setattr(pipeline, "autodiff", hints)
    return seen


HINTS = {}


def _named(graph):
    """The graph printed with the names autodiff hinted (d_x), as .graph shows them."""
    return print_graph(graph, "graph", Namer(hints=HINTS))


def test_joint_graph_of_a_cube_and_a_bias(simplified):
    def f(x, b):
        y = (x + b) ** 3
        return (-y).sum()

    tg.compile(f)(tg.randn(4, 3, requires_grad=True), tg.randn(3, requires_grad=True))
    assert _named(simplified[-1]) == """graph(x:f32[4,3], b:f32[3], d_out:f32[]) {
  a:f32[4,3] = add x b
  c:f32[4,3] = mul a a
  y:f32[4,3] = mul c a
  d:f32[4,3] = neg y
  out:f32[] = sum d  dims=(0,1) dtype=None keepdim=False
  e:f32[1,1] = reshape d_out  shape=(1,1)
  f:f32[4,3] = broadcast_to e  shape=(4,3)
  d_y:f32[4,3] = neg f
  g:f32[4,3] = mul a a
  h:f32[4,3] = mul g 3
  d_x:f32[4,3] = mul d_y h
  i:f32[1,3] = sum d_x  dims=(0,) dtype=None keepdim=True
  d_b:f32[3] = reshape i  shape=(3,)
  return (out, d_x, d_b)
}"""


def test_joint_graph_of_a_transposed_weight(simplified):
    """``w``'s gradient is ``d^T x``, made in ``w``'s layout, not ``(x^T d)^T``: a transposed
    view that ``.grad`` would copy across the rows."""
    def f(x, w):
        return (x @ w.t()).sum()

    tg.compile(f)(tg.randn(4, 3, requires_grad=True), tg.randn(5, 3, requires_grad=True))
    assert _named(simplified[-1]) == """graph(x:f32[4,3], w:f32[5,3], d_out:f32[]) {
  a:f32[3,5] = permute w  dims=(1,0)
  b:f32[4,5] = matmul x a
  out:f32[] = sum b  dims=(0,1) dtype=None keepdim=False
  c:f32[1,1] = reshape d_out  shape=(1,1)
  d:f32[4,5] = broadcast_to c  shape=(4,5)
  d_x:f32[4,3] = matmul d w
  e:f32[5,4] = permute d  dims=(1,0)
  d_w:f32[5,3] = matmul e x
  return (out, d_x, d_w)
}"""


# compiled against eager ------------------------------------------------------------------------

def _sum_of_broadcasts(x, b):
    return b.expand(4, 3).sum(0) + b.expand(2, 4, 3).sum((0, 1), keepdim=True)[0] + x.sum(0)


def _powers(x, b):
    return x ** 2 + x ** 3 + x ** 4 + (b.abs() + 1) ** 0.5 + (x.abs() + 1) ** -1


def _negations(x, b):
    return (x * -1) - (-b) + (x + (-b)) + -(-x) + (-b + x) + (-1 * x)


def _identities(x, b):
    return (x * 1) + (1 * b) + (x + -0.0) + (x - 0) + (x / 1) + x ** 1


def _transposes(x, b):
    w = x.t().t()
    v = b.unsqueeze(-1).t().reshape(3, 1).t()
    return (x.t().t().t() @ w).sum(0) + v.squeeze(0) + (x @ b.unsqueeze(1)).t().t().sum()


def _broadcast_operands(x, b):
    return tg.tanh(x * b.expand(4, 3) + b) * tg.where(b.expand(4, 3) > 0, x, b.expand(4, 3))


def _scalars(n):
    return [v for v in n.inputs if type(v) is not Value]


# per program: what its simplified joint graph no longer has, as a test on a node
# (``op_of(v)`` is the op that defines ``v``)
_GONE = {
    _sum_of_broadcasts: lambda n, op_of: n.op == "sum" and op_of(n.inputs[0]) == "broadcast_to",
    _powers: lambda n, op_of: n.op == "pow_scalar" and n.params["exponent"] in (2, 3, 4, 0.5, -1),
    _negations: lambda n, op_of: (
        (n.op == "mul" and -1 in _scalars(n)) or (n.op == "neg" and op_of(n.inputs[0]) == "neg")
        or (n.op == "add" and "neg" in map(op_of, n.inputs))
        or (n.op == "sub" and op_of(n.inputs[1]) == "neg")),
    _identities: lambda n, op_of: (
        (n.op in ("mul", "div") and 1 in _scalars(n))
        or (n.op in ("add", "sub") and 0 in _scalars(n))
        or (n.op == "pow_scalar" and n.params["exponent"] == 1)),
    _transposes: lambda n, op_of: n.op == "permute" and op_of(n.inputs[0]) == "permute",
    _broadcast_operands: lambda n, op_of: (
        n.op in ("mul", "add", "where", "tanh_backward")
        and "broadcast_to" in map(op_of, n.inputs)),
}


@pytest.mark.parametrize("dtype", [tg.float32, tg.float64], ids=["float32", "float64"])
@pytest.mark.parametrize("fn", list(_GONE), ids=lambda f: f.__name__.strip("_"))
def test_compiled_matches_eager(fn, dtype, simplified):
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((4, 3)), rng.standard_normal(3)]
    compiled = tg.compile(fn)
    # the rewrites change at most a few roundings (4 x for a sum of 4 copies, x * x * x for
    # x ** 3) ahead of a tanh and the backward's products: 8 roundings, on values of order 1
    tol = close(dtype, n_ops=8, scale=4)
    for call in range(2):            # the second from the cache
        ins = [[tg.tensor(a * (call + 1), dtype=dtype, requires_grad=True) for a in arrays]
               for _ in range(2)]
        want, got = fn(*ins[0]), compiled(*ins[1])
        assert got.dtype is want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **tol)
        weight = tg.tensor(rng.standard_normal(want.shape), dtype=dtype)
        (want * weight).sum().backward()
        (got * weight).sum().backward()
        for a, b in zip(ins[0], ins[1]):
            np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), **tol)
    joint = simplified[0]
    defs = joint.producers()

    def op_of(v):
        return defs[v].op if type(v) is Value and v in defs else None
    assert not [n for n in joint.nodes if _GONE[fn](n, op_of)], str(joint)


def test_compiled_exact_rewrites_are_bit_for_bit():
    def f(x, y):
        return x ** 2, x ** 3, (x * -1) - (-y), x + (-y), x ** 0.5, x * 1

    x = tg.tensor([-0.0, 0.0, np.inf, -np.inf, np.nan, 1e30, 1.5, -2.25], dtype=tg.float32)
    y = tg.tensor([0.0, -0.0, 1.0, np.inf, 2.0, -1e30, 0.1, 3.0], dtype=tg.float32)
    with np.errstate(all="ignore"):
        want, got = f(x, y), tg.compile(f)(x, y)
    # bit for bit: each rewrite computes what the eager op computes (x * x for x ** 2, a
    # negation for * -1, sqrt for ** 0.5), with the same NumPy calls on the same values
    for w, g in zip(want, got):
        w, g = w.numpy(), g.numpy()
        np.testing.assert_array_equal(g, w)
        ok = ~np.isnan(w)
        np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


def test_results_stay_arrays_of_their_own():
    """An identity or a folded sum never hands the caller a read-only broadcast."""
    @tg.compile
    def f(b):
        return b.expand(2, 3) * 1, b.reshape(1, 3).expand(4, 3).sum(0, keepdim=True)

    b = tg.tensor([1.0, 2.0, 3.0])
    ones, fours = f(b)
    ones.add_(1)
    fours.add_(1)
    # small integers: exact
    np.testing.assert_array_equal(ones.numpy(), np.full((2, 3), 1.0) + b.numpy())
    np.testing.assert_array_equal(fours.numpy(), [4 * b.numpy() + 1])


def test_a_sum_over_a_unit_axis_of_a_mutated_input_is_not_a_view_of_it():
    def f(x, w):
        s = x.sum(0)
        x.mul_(2)
        return (s * w).sum()

    grads = []
    for fn in (f, tg.compile(f)):
        x = tg.tensor([[1.0, 2.0, 3.0]])
        w = tg.ones(3, requires_grad=True)
        fn(x, w).backward()
        grads.append(w.grad.numpy())
    np.testing.assert_array_equal(grads[1], grads[0])     # sums of small integers: exact


def test_a_broadcast_constant_one_is_not_folded_into_a_full_array():
    """The seed of a gradient taken inside the graph, ``ones_like(loss)`` spread by ``sum``'s
    backward: a constant 1 reshaped and broadcast. Multiplying by it is the identity, and a
    broadcast beyond FOLD_LIMIT elements stays a broadcast (it once became a 40 MB constant
    that W1_10M's whole step read every call)."""
    from tracegrad.ir import Const
    from tracegrad.passes.simplify import FOLD_LIMIT
    n = 4 * FOLD_LIMIT
    g = _G(f"x:f32[{n}]")
    one = g("constant", value=Const(np.array(1.0, np.float32)))
    spread = g("broadcast_to", g("reshape", one, shape=(1,)), shape=(n,))
    y = g("exp", g("mul", spread, g.x))
    z = g("add", spread, g.x)
    out = _simplified(g.graph(y, z))
    assert [m.op for m in out.nodes if m.op in ("mul", "exp")] == ["exp"]
    assert all(m.params["value"].array.size <= FOLD_LIMIT
               for m in out.nodes if m.op == "constant")
    _same_values(g.graph(y, z))
