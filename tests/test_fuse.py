"""The fuse pass, fused NumPy kernels, chunked runs and the memory plan.

Fusion decisions are pinned as text; every fused program is checked against
eager (values and gradients) over shapes with broadcasts and non-contiguous
inputs, with chunking forced on around its threshold.
"""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen import fused
from tracegrad.codegen.support import Workspace
from tracegrad.ir import Graph, Node, Value, verify
from tracegrad.ops.core import Aval
from tracegrad.passes.fuse import can_fuse, fuse, start


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdim=True)
    d = x - mu
    var = (d * d).mean(-1, keepdim=True)
    y = d / tg.sqrt(var + 1e-5) * g + b
    return (y * y).sum(0)


def lse(x):
    return tg.logsumexp(x, 0)


def mlp(x, w):
    h = tg.tanh(x * 2 + 1)
    y = h @ w
    return tg.exp(y - 1).sum()


def gelu_sum(x, a, b):
    u = x * a + b
    y = 0.5 * u * (1 + tg.tanh(0.7978845608 * (u + 0.044715 * u ** 3)))
    return y.sum()


def _forward_graph(fn, *shapes):
    c = tg.compile(fn)
    with tg.no_grad():
        c(*[tg.randn(*s) for s in shapes])
    return c.graph


# decisions, pinned -----------------------------------------------------------------------------

def test_row_reductions_and_their_consumers_make_one_pass():
    assert _forward_graph(layer_norm, (4, 6), (6,), (6,)) == """forward(x:f32[4,6], g:f32[6], b:f32[6]) {
  fused0 reduction [4,6] (x, g, b) -> (out) {
    t0:f32[4,1] = sum x  dims=(1,) dtype=None keepdim=True
    mu:f32[4,1] = div t0 6
    d:f32[4,6] = sub x mu
    t1:f32[4,6] = mul d d
    t2:f32[4,1] = sum t1  dims=(1,) dtype=None keepdim=True
    var:f32[4,1] = div t2 6
    t3:f32[4,1] = add var 1e-05
    t4:f32[4,1] = sqrt t3
    t5:f32[4,6] = div d t4
    t6:f32[4,6] = mul t5 g
    y:f32[4,6] = add t6 b
    t7:f32[4,6] = mul y y
    out:f32[6] = sum t7  dims=(0,) dtype=None keepdim=False
  }
  return (out)
}"""


def test_a_reduction_over_rows_ends_the_pass_and_its_epilogue_follows():
    assert _forward_graph(lse, (5, 3)) == """forward(x:f32[5,3]) {
  fused0 reduction [5,3] (x) -> (t3) {
    t0:f32[1,3] = amax x  dims=(0,) keepdim=True
  } then {
    t1:f32[1,3] = stop_gradient t0
    t2:bool[1,3] = isinf t1
    t3:f32[1,3] = where t2 0.0 t1
  }
  fused1 reduction [5,3] (x, t3) -> (t8) {
    t4:f32[5,3] = sub x t3
    t5:f32[5,3] = exp t4
    t6:f32[1,3] = sum t5  dims=(0,) dtype=None keepdim=True
  } then {
    t7:f32[1,3] = log t6
    t8:f32[1,3] = add t7 t3
  }
  out:f32[3] = reshape t8  shape=(3,)
  return (out)
}"""


def test_matmul_splits_groups():
    assert _forward_graph(mlp, (4, 3), (3, 2)) == """forward(x:f32[4,3], w:f32[3,2]) {
  fused0 elementwise [4,3] (x) -> (h) {
    t0:f32[4,3] = mul x 2
    t1:f32[4,3] = add t0 1
    h:f32[4,3] = tanh t1
  }
  y:f32[4,2] = matmul h w
  fused1 reduction [4,2] (y) -> (out) {
    t2:f32[4,2] = sub y 1
    t3:f32[4,2] = exp t2
    out:f32[] = sum t3  dims=(0,1) dtype=None keepdim=False
  }
  return (out)
}"""


def _node(op, inputs, params, shape, dtype=tg.float32):
    return Node(op, inputs, params, Value(Aval(shape, dtype)))


def test_can_fuse_is_the_one_predicate():
    x, y = Value(Aval((4, 3), tg.float32)), Value(Aval((3,), tg.float32))
    a = _node("exp", [x], {}, (4, 3))
    draft = start(a)
    assert can_fuse(draft, _node("mul", [a.out, y], {}, (4, 3))) == "loop"     # y broadcasts
    rows = _node("sum", [a.out], {"dims": (1,), "keepdim": True}, (4, 1))
    assert can_fuse(draft, rows) == "loop"                  # per row: later ops may read it
    cols = _node("sum", [a.out], {"dims": (0,), "keepdim": True}, (1, 3))
    assert can_fuse(draft, cols) == "loop"
    after = draft.join(cols, "loop")
    assert can_fuse(after, _node("log", [cols.out], {}, (1, 3))) == "after"     # the epilogue
    # a full-size op on a result over every row starts a new pass instead
    assert can_fuse(after, _node("sub", [a.out, cols.out], {}, (4, 3))) is None
    assert can_fuse(draft, _node("matmul", [a.out, Value(Aval((3, 2), tg.float32))], {},
                                 (4, 2))) is None
    assert can_fuse(draft, _node("exp", [x], {}, (4, 3))) is None    # shares no value


def test_groups_never_make_a_cycle():
    # b = f(a) joins a's group only if nothing outside the group stands between them
    x = Value(Aval((8,), tg.float32))
    a = _node("exp", [x], {}, (8,))
    s = _node("sum", [a.out], {"dims": (0,), "keepdim": True}, (1,))
    r = _node("reshape", [a.out], {"shape": (2, 4)}, (2, 4))
    m = _node("reshape", [r.out], {"shape": (8,)}, (8,))
    b = _node("mul", [a.out, m.out], {}, (8,))
    g = Graph([x], [a, s, r, m, b], [s.out, b.out])
    f = fuse(g)
    verify(f)
    assert [len(grp.nodes) for grp in f.groups] == [2]
    assert b not in f.groups[0].nodes


# fused against eager, over shapes ------------------------------------------------------------

BACKENDS = ["numpy", "c"]


def _has_compiler():
    """Without a C compiler the C tier warns and keeps NumPy (tested in test_kernels)."""
    from tracegrad.codegen import build
    try:
        build.toolchain()
        return True
    except build.BuildError:
        return False


def _check(fn, arrays, requires_grad=True, rtol=1e-5, backend="numpy"):
    want_in = [tg.tensor(a, requires_grad=requires_grad) for a in arrays]
    got_in = [tg.tensor(a, requires_grad=requires_grad) for a in arrays]
    want = fn(*want_in)
    c = tg.compile(fn, backend=backend)
    got = c(*got_in)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=rtol,
                               atol=1e-6)
    if requires_grad:
        gw = tg.autograd.grad(want.sum(), want_in)
        gg = tg.autograd.grad(got.sum(), got_in)
        for a, b in zip(gg, gw):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=rtol, atol=1e-5)
    return c


def _programs():
    def chain(x, y):
        return tg.exp(tg.tanh(x * y + 1) - y) * 0.5 + x ** 2

    def rows(x, y):
        return (x - x.amax(-1, keepdim=True)) * y / (x * x).sum(-1, keepdim=True).sqrt()

    def cols(x, y):
        return tg.sigmoid(x + y).sum(0) * 2 - (x * y).mean(0)

    def mixed(x, y):
        s = (x * y).sum(-1, keepdim=True)
        return tg.relu(x - s) + tg.where(x > 0, x, y * 3)
    return {"chain": chain, "rows": rows, "cols": cols, "mixed": mixed}


SHAPES = [((7,), (7,)), ((5, 3), (3,)), ((5, 3), (5, 1)), ((4, 1), (1, 6)), ((3, 2, 5), (2, 5))]


@pytest.mark.parametrize("name", list(_programs()))
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("backend", BACKENDS)
def test_fused_groups_match_eager(name, shapes, dtype, backend):
    rng = np.random.default_rng(0)
    fn = _programs()[name]
    xs, ys = shapes
    if name in ("rows", "cols", "mixed") and len(xs) < 2:
        xs = (3,) + xs
    arrays = [rng.standard_normal(xs).astype(dtype), rng.standard_normal(ys).astype(dtype) + 1.5]
    c = _check(fn, arrays, rtol=1e-4 if dtype == np.float32 else 1e-9, backend=backend)
    if backend == "c" and _has_compiler():     # every kernel of these runs on the C tier
        assert all(k.name in c._last.c_kernels for k in c.kernels), str(c.kernels)


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_contiguous_inputs(backend):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 4)).T            # (4, 6), transposed strides
    y = rng.standard_normal((6, 8))[:, ::2].T    # (4, 6), a strided view
    for fn in _programs().values():
        _check(fn, [x, y], rtol=1e-9, backend=backend)


# chunks --------------------------------------------------------------------------------------

@pytest.fixture
def small_chunks(monkeypatch):
    """Chunking from 64 elements on, 16 elements a chunk, on 2 threads."""
    monkeypatch.setattr(fused, "CHUNK_MIN", 64)
    monkeypatch.setattr(fused, "CHUNK_ELEMS", 16)
    monkeypatch.setattr(fused, "THREADS", 2)


@pytest.mark.parametrize("n", [63, 64, 65, 100, 257])
def test_chunked_path_around_its_threshold(small_chunks, n):
    rng = np.random.default_rng(n)
    arrays = [rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(1)]
    c = _check(gelu_sum, arrays, rtol=1e-9)
    assert ("run_chunks(" in c.code) == (n >= 64)


@pytest.mark.parametrize("rows", [9, 16, 33])
def test_chunked_rows_with_reductions_both_ways(small_chunks, rows):
    rng = np.random.default_rng(rows)
    arrays = [rng.standard_normal((rows, 8)), rng.standard_normal(8) + 1, rng.standard_normal(8)]
    c = _check(layer_norm, arrays, rtol=1e-9)
    assert "run_chunks(" in c.code and "step=2" in c.code
    for name, fn in _programs().items():
        _check(fn, [rng.standard_normal((rows, 8)), rng.standard_normal(8) + 1.5], rtol=1e-9)


def test_chunked_results_do_not_depend_on_the_number_of_threads(monkeypatch, small_chunks):
    x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)
    outs = []
    for threads in (1, 2):
        monkeypatch.setattr(fused, "THREADS", threads)
        c = tg.compile(lambda x: (tg.tanh(x) * x).sum(), backend="numpy")
        outs.append(c(tg.tensor(x)).item())
    assert outs[0] == outs[1]


# kernels and buffers -------------------------------------------------------------------------

def test_ops_render_as_ufunc_calls_into_buffers():
    """A primitive's np_out steps write into a buffer that is none of its operands; an
    operand of another dtype is cast by the kernel IR first, never probed."""
    @tg.compile(backend="numpy")
    def f(g, y, i):
        return (tg.ops.elementwise.bind(tg.ops.elementwise.tanh_backward_p, g, y) + i).sum(0)

    with tg.no_grad():
        got = f(tg.ones(4, 3), tg.full((4, 3), 0.5), tg.arange(3))
    np.testing.assert_allclose(got.numpy(), [3 + 0, 3 + 4, 3 + 8])
    code = f.code
    assert ("np.multiply(y, y, out=buf0)\n    np.subtract(1, buf0, out=buf0)\n"
            "    np.multiply(g, buf0, out=buf0)") in code
    assert "np.copyto(buf1, i, casting='unsafe')" in code and "i_float32 = buf1" in code
    assert "i_float32: f32 = convert i  device=None dtype=float32" in str(f.kernels)


def test_fused_kernel_code_is_pinned():
    @tg.compile(backend="numpy")
    def f(x, w):
        hidden = tg.tanh(x * w)
        return hidden.sum()

    with tg.no_grad():
        f(tg.ones(3), tg.ones(3))
    line = f.__wrapped__.__code__.co_firstlineno
    body = f.code[f.code.index("import numpy"):]
    assert body == f'''import numpy as np
from tracegrad.codegen.support import Workspace
_forward_workspace = Workspace(kernels={{'forward_fused0': (1, [((3,), np.float32)])}})


def forward_fused0(x, w, ws):
    """fused0: mul tanh sum; one pass over [3], at once."""
    buf0, = ws.forward_fused0[0]
    # test_fuse.py:{line + 2}: hidden = tg.tanh(x * w)
    t0 = np.multiply(x, w, out=buf0)
    hidden = np.tanh(t0, out=buf0)
    # test_fuse.py:{line + 3}: return hidden.sum()
    out = np.sum(hidden, axis=(0,), keepdims=False)
    return (out,)


def forward(x, w):
    ws = _forward_workspace.take()
    # fused0 (reduction): mul tanh sum  [test_fuse.py:{line + 2}, test_fuse.py:{line + 3}]
    out, = forward_fused0(x, w, ws)
    _forward_workspace.give(ws)
    return (out,)
'''


def test_values_between_groups_live_in_reused_workspace_slots():
    def f(x, w):
        h = tg.tanh(x * 2 + 1)          # read by the matmul only: a slot
        y = h @ w
        z = tg.exp(y * y - 1)           # read by the next matmul only: the same-shape slot
        return (z @ w.T * 3).sum()

    c = tg.compile(f, backend="numpy")
    x, w = tg.randn(4, 4), tg.randn(4, 4)
    with tg.no_grad():
        want = f(x, w)
        got = c(x, w)
        again = c(x, w)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)
    assert again.item() == got.item()
    assert "h = ws.slot0" in c.code and "z = ws.slot0" in c.code


def test_workspace_buffers_are_kept_and_never_shared_by_two_calls_at_once():
    ws = Workspace(kernels={"k": (2, [((8,), np.float32)])}, slots={"slot0": ((3,), np.int64)})
    first = ws.take()
    second = ws.take()                  # taken while the first is in use: its own buffers
    assert first.k[0][0] is not second.k[0][0] and len(first.k) == 2
    ws.give(first)
    assert ws.take() is first           # given back: reused, no new memory
    assert ws.nbytes() == 2 * 8 * 4 + 3 * 8


def test_explain_counts_groups_and_kept_buffers():
    c = tg.compile(mlp)
    c(tg.randn(4, 3), tg.randn(3, 2, requires_grad=True)).backward()
    line = next(ln for ln in c.explain().splitlines() if "fused group(s)" in ln)
    groups = len(c.graph_ir[0][1].groups) + len(c.graph_ir[1][1].groups)
    assert line.strip().startswith(f"{groups} fused group(s)") and "bytes of buffers" in line
