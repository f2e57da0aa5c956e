"""Forward-mode AD (``tracegrad.autograd.forward_ad``) and the transforms built on it.

The API and its errors against PyTorch's; for every differentiable entry of the op table
the JVP against central finite differences and against the transpose identity
<v, J u> == <J^T v, u> with the existing reverse mode; forward-over-reverse and
reverse-over-forward Hessian-vector products of a small MLP against PyTorch;
``autograd.functional.jvp``/``jacobian``/``hessian`` in forward mode and ``func.jvp`` /
``jacfwd`` against PyTorch; and that ``bind`` does nothing new while no level is open.
"""
import zlib

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.autograd.forward_ad as fwAD

from op_table import TABLE
from test_ops import LIB, _entry_tol, _outputs, _tg_inputs

# entries whose forward-mode check fails for a reason of their own: test -> reason
XFAIL = {}


def _rng(name):
    return np.random.default_rng(zlib.crc32(("fwd:" + name).encode()))


def _np(t):
    return t.detach().numpy()


# the API and its errors, against PyTorch -----------------------------------------------------

def _both(fn):
    """``fn(lib, fwAD)`` in PyTorch and in tracegrad: (torch's, ours) result or exception."""
    torch = pytest.importorskip("torch")
    import torch.autograd.forward_ad as t_fwAD
    res = []
    for lib, mod in ((torch, t_fwAD), (tg, fwAD)):
        try:
            res.append(("ok", fn(lib, mod)))
        except Exception as e:     # noqa: BLE001 - the type and message are compared
            res.append((type(e), str(e)))
        finally:
            while mod._current_level >= 0:      # a failed case must not leave a level open
                mod.exit_dual_level()
    return res


def _x(lib, n=3, dtype="float64"):
    return lib.arange(1.0, n + 1, dtype=getattr(lib, dtype))


ERRORS = {
    "make_dual outside a level": lambda L, m: m.make_dual(_x(L), _x(L)),
    "exit with no level": lambda L, m: m.exit_dual_level(),
    "nested dual_level": lambda L, m: [m.dual_level().__enter__(), m.dual_level().__enter__()],
    "nested enter_dual_level": lambda L, m: [m.enter_dual_level(), m.enter_dual_level()],
    "exit another level": lambda L, m: [m.enter_dual_level(), m.exit_dual_level(level=3)],
    "tangent of another size": lambda L, m: [m.enter_dual_level(),
                                             m.make_dual(_x(L), _x(L, 4))],
    "integer primal": lambda L, m: [m.enter_dual_level(),
                                    m.make_dual(L.arange(3), _x(L))],
    "integer tangent": lambda L, m: [m.enter_dual_level(), m.make_dual(_x(L), L.arange(3))],
    "make_dual of a dual": lambda L, m: [m.enter_dual_level(),
                                         m.make_dual(m.make_dual(_x(L), _x(L)), _x(L))],
    "make_dual at another level": lambda L, m: [m.enter_dual_level(),
                                                m.make_dual(_x(L), _x(L), level=5)],
    "unpack_dual of a dual at another level": lambda L, m: [
        m.enter_dual_level(), m.unpack_dual(m.make_dual(_x(L), _x(L)), level=5)],
    "unpack_dual of a number": lambda L, m: [m.enter_dual_level(), m.unpack_dual(3.0)],
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors_as_pytorch(case):
    theirs, ours = _both(ERRORS[case])
    assert theirs[0] != "ok", "PyTorch accepts it"
    assert ours == (theirs[0], theirs[1].replace("torch.", "tracegrad."))


def test_api_as_pytorch():
    def run(L, m):
        x, t = _x(L), _x(L) * 0.5
        seen = [m.unpack_dual(x).tangent is None]
        with m.dual_level() as level:
            seen.append(level)
            d = m.make_dual(x, t)
            up = m.unpack_dual(d)
            seen += [type(up).__name__, up._fields, up.tangent is t, up.primal is not x,
                     d is not x, d.requires_grad, m.unpack_dual(x).tangent is None,
                     m.unpack_dual(up.primal).tangent is None,
                     m.unpack_dual(d.detach()).tangent is None,
                     m.unpack_dual(x, level=5).tangent is None]
            y = d * d + d.sin()
            seen.append(m.unpack_dual(y).tangent.tolist())
            seen.append(m.unpack_dual(d > 2).tangent is None)      # no tangent for a bool
            z = L.zeros(3, dtype=L.float64)
            z.mul_(2).add_(d)                                         # in place
            seen.append(m.unpack_dual(z).tangent.tolist())
            seen.append(m.unpack_dual(d.float()).tangent.dtype == L.float32)
        seen.append(m.unpack_dual(d).tangent is None)                 # dropped on exit
        level = m.enter_dual_level()
        seen.append(level)
        m.exit_dual_level(level=level)
        return seen
    theirs, ours = _both(run)
    assert theirs[0] == "ok", theirs
    got, want = ours[1], theirs[1]
    assert got[:-7] == want[:-7]
    np.testing.assert_allclose(got[-7], want[-7], rtol=1e-15)
    assert got[-6:] == want[-6:]


def test_dual_level_decorates():
    @fwAD.dual_level()
    def f(x):
        d = fwAD.make_dual(x, tg.ones_like(x))
        return fwAD.unpack_dual(d.exp()).tangent
    np.testing.assert_allclose(_np(f(tg.zeros(2))), [1.0, 1.0])
    assert fwAD._current_level == -1


def test_make_dual_is_backward_differentiable():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, tg.ones(2))
        p, t = fwAD.unpack_dual(d * 3)
        p.sum().backward()
    np.testing.assert_allclose(_np(x.grad), [3.0, 3.0])
    np.testing.assert_allclose(_np(t), [3.0, 3.0])


# every entry of the op table -----------------------------------------------------------------

def _floats(outs):
    return [(k, o) for k, o in enumerate(outs) if o.dtype.is_floating_point]


def _jvp(entry, arrays, us):
    """The entry's outputs and their tangents (zeros where none) from forward mode. The
    primals require grad, as gradcheck's do (entries that differentiate inside, such as
    tanh's derivative, then run forward over reverse)."""
    xs = _tg_inputs(arrays, requires_grad=True)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(x, tg.tensor(u)) for x, u in zip(xs, us)]
        outs = _outputs(entry.fn(LIB, *duals))
        res = []
        for k, o in _floats(outs):
            t = fwAD.unpack_dual(o).tangent
            res.append((k, _np(o), np.zeros(o.shape) if t is None else _np(t)))
    return res


def _params(test):
    """The differentiable entries, with their known failures: an entry whose VJP rule is by
    design not the derivative (gradcheck's xfail) gives a JVP that is not either, but that
    still transposes to the VJP."""
    def reason(e):
        if "gradcheck" in e.xfail:
            # embedding declares its JVP (linear in the weight: the derivative), so with
            # padding or frequency scaling its VJP, by design, is not that JVP's transpose
            if e.name.startswith("embedding") != (test == "fd"):
                return e.xfail["gradcheck"]
        return XFAIL.get(test, {}).get(e.name)
    return [pytest.param(e, id=e.name, marks=[pytest.mark.xfail(reason=reason(e), strict=True)]
                         if reason(e) else [])
            for e in TABLE if e.grad]


@pytest.mark.parametrize("entry", _params("fd"))
def test_jvp_against_finite_differences(entry):
    """J u against (f(x + h u) - f(x - h u)) / 2h in float64, to gradcheck's tolerances
    (its eps, atol and rtol, as the entry sets them)."""
    arrays = entry.sample()
    rng = _rng(entry.name)
    us = [rng.standard_normal(a.shape) for a in arrays]
    h = entry.gc.get("eps", 1e-6)
    atol, rtol = entry.gc.get("atol", 1e-5), entry.gc.get("rtol", 1e-3)
    jv = _jvp(entry, arrays, us)
    with tg.no_grad():
        plus = _outputs(entry.fn(LIB, *_tg_inputs([a + h * u for a, u in zip(arrays, us)])))
        minus = _outputs(entry.fn(LIB, *_tg_inputs([a - h * u for a, u in zip(arrays, us)])))
    for k, _, t in jv:
        fd = (_np(plus[k]) - _np(minus[k])) / (2 * h)
        np.testing.assert_allclose(t, fd, rtol=rtol, atol=atol, err_msg=f"output {k}")


def _precision(entry, arrays):
    """The narrowest float dtype any op of the entry computes in (``float()`` rounds to
    float32 on the way, whatever the inputs and outputs)."""
    from tracegrad import _hooks
    seen = {np.float64}

    def hook(prim, args, params, inner):
        out = inner(prim, args, params)
        if out.dtype.is_floating_point:
            seen.add(out._data.dtype.type)
        return out
    with _hooks.bind_hook_installed(hook), tg.no_grad():
        entry.fn(LIB, *_tg_inputs(arrays))
    return min(seen, key=lambda d: np.finfo(d).bits)


@pytest.mark.parametrize("entry", _params("transpose"))
def test_jvp_transposes_to_vjp(entry):
    """<v, J u> from forward mode equals <J^T v, u> from reverse mode, to what rounding
    allows: each side is a sum of products as deep as a second derivative of the entry."""
    arrays = entry.sample()
    rng = _rng(entry.name)
    us = [rng.standard_normal(a.shape) for a in arrays]
    jv = _jvp(entry, arrays, us)
    xs = _tg_inputs(arrays, requires_grad=True)
    outs = _outputs(entry.fn(LIB, *xs))
    vs = {k: rng.standard_normal(o.shape) for k, o in _floats(outs)}
    fwd = sum(float(np.sum(vs[k] * t)) for k, _, t in jv)
    fwd_mag = sum(float(np.sum(np.abs(vs[k] * t))) for k, _, t in jv)
    used = [(o, vs[k]) for k, o in _floats(outs) if o.requires_grad]
    if used:
        gs = tg.autograd.grad([o for o, _ in used], xs, [tg.tensor(v) for _, v in used],
                              allow_unused=True)
    else:
        gs = [None] * len(xs)
    rev = sum(float(np.sum(_np(g) * u)) for g, u in zip(gs, us) if g is not None)
    rev_mag = sum(float(np.sum(np.abs(_np(g) * u))) for g, u in zip(gs, us) if g is not None)
    tol = _entry_tol(entry, arrays, _precision(entry, arrays), orders=2)
    n = sum(a.size for a in arrays) + sum(v.size for v in vs.values())
    bound = tol["rtol"] * n * max(fwd_mag, rev_mag) + tol["atol"]
    assert abs(fwd - rev) <= bound, f"<v, J u> = {fwd!r}, <J^T v, u> = {rev!r}"


# second order: Hessian-vector products of a small MLP ----------------------------------------

def _mlp_data(seed=0):
    rng = np.random.default_rng(seed)
    return dict(w1=rng.standard_normal((4, 5)) * 0.5, b1=rng.standard_normal(5) * 0.1,
                w2=rng.standard_normal((5, 3)) * 0.5, x=rng.standard_normal((6, 4)),
                y=rng.integers(0, 3, 6), v1=rng.standard_normal((4, 5)),
                vb=rng.standard_normal(5), v2=rng.standard_normal((5, 3)))


def _mlp_loss(L, w1, b1, w2, x, y):
    h = L.tanh(x @ w1 + b1)
    return L.nn.functional.cross_entropy(L.relu(h) @ w2 + h @ w2 * 0.5, y)


def _hvp_torch(d):
    torch = pytest.importorskip("torch")
    ps = [torch.tensor(d[k], requires_grad=True) for k in ("w1", "b1", "w2")]
    loss = _mlp_loss(torch, *ps, torch.tensor(d["x"]), torch.tensor(d["y"]))
    gs = torch.autograd.grad(loss, ps, create_graph=True)
    dot = sum((g * torch.tensor(d[k])).sum() for g, k in zip(gs, ("v1", "vb", "v2")))
    return [p.numpy() for p in torch.autograd.grad(dot, ps)]


def test_hvp_forward_over_reverse_against_torch():
    """H v as the JVP of a create_graph gradient: tangents flow through the backward pass."""
    d = _mlp_data()
    want = _hvp_torch(d)
    with fwAD.dual_level():
        ps = [fwAD.make_dual(tg.tensor(d[k]), tg.tensor(d[v])).requires_grad_(True)
              for k, v in (("w1", "v1"), ("b1", "vb"), ("w2", "v2"))]
        loss = _mlp_loss(tg, *ps, tg.tensor(d["x"]), tg.tensor(d["y"]))
        gs = tg.autograd.grad(loss, ps, create_graph=True)
        got = [_np(fwAD.unpack_dual(g).tangent) for g in gs]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


def test_hvp_reverse_over_forward_against_torch():
    """H v as the gradient of the loss's tangent <grad f, v>: tangents keep their history."""
    d = _mlp_data(1)
    want = _hvp_torch(d)
    ps = [tg.tensor(d[k], requires_grad=True) for k in ("w1", "b1", "w2")]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, tg.tensor(d[v])) for p, v in zip(ps, ("v1", "vb", "v2"))]
        loss = _mlp_loss(tg, *duals, tg.tensor(d["x"]), tg.tensor(d["y"]))
        got = tg.autograd.grad(fwAD.unpack_dual(loss).tangent, ps)
    for g, w in zip(got, want):
        np.testing.assert_allclose(_np(g), w, rtol=1e-10, atol=1e-12)


# autograd.functional and func in forward mode -------------------------------------------------

def _f2(L):
    return lambda x, y: (L.sin(x) * y.sum(), (x[:, None] * y[:2]).exp())


def _same(ours, theirs):
    ours = ours if isinstance(ours, (tuple, list)) else (ours,)
    theirs = theirs if isinstance(theirs, (tuple, list)) else (theirs,)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(b, (tuple, list)):
            _same(a, b)
            continue
        assert tuple(a.shape) == tuple(b.shape)
        np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-12, atol=1e-14)


X, Y = np.array([0.3, -1.2, 0.7]), np.array([1.1, 0.4, -0.5])

FUNCTIONAL = {
    "jvp": lambda L, x, y: L.autograd.functional.jvp(_f2(L), (x, y), (y, x)),
    "jvp[one input]": lambda L, x, y: L.autograd.functional.jvp(lambda a: a.exp() * a, x, y),
    "jacobian[forward-mode]": lambda L, x, y: L.autograd.functional.jacobian(
        _f2(L), (x, y), vectorize=True, strategy="forward-mode"),
    "jacobian[forward-mode, one]": lambda L, x, y: L.autograd.functional.jacobian(
        lambda a: a.tanh() * a.sum(), x, vectorize=True, strategy="forward-mode"),
    "hessian[forward-mode]": lambda L, x, y: L.autograd.functional.hessian(
        lambda a, b: (a.sin() * b).sum() * a[0], (x, y), vectorize=True,
        outer_jacobian_strategy="forward-mode"),
    "func.jvp": lambda L, x, y: L.func.jvp(_f2(L), (x, y), (y, x)),
    "func.jvp[has_aux]": lambda L, x, y: L.func.jvp(lambda a: (a.exp(), a.cos()), (x,), (y,),
                                                    has_aux=True),
    "func.jacfwd": lambda L, x, y: L.func.jacfwd(_f2(L), argnums=(0, 1))(x, y),
    "func.jacfwd[jacrev]": lambda L, x, y: L.func.jacfwd(L.func.jacrev(
        lambda a: (a.sin() * a).sum() * a[0]))(x),
    "func.hessian": lambda L, x, y: L.func.hessian(lambda a: (a.exp() * a).sum() * a[1])(x),
    # nested forward transforms: the inner one in the outer's level (the double-vjp identity)
    "func.jacfwd[jacfwd]": lambda L, x, y: L.func.jacfwd(L.func.jacfwd(
        lambda a: a.sin() * a.sum()))(x),
    "func.jvp[jvp]": lambda L, x, y: L.func.jvp(
        lambda a: L.func.jvp(lambda b: b.exp() * b, (a,), (y,))[1], (x,), (y * 2,)),
    "functional.jvp in a level": lambda L, x, y: _in_level(L, lambda: L.autograd.functional.jvp(
        lambda a: a.tanh() * a, x, y)),
}


def _in_level(L, fn):
    with L.autograd.forward_ad.dual_level():
        return fn()


@pytest.mark.parametrize("case", list(FUNCTIONAL))
def test_functional_forward_mode_against_torch(case):
    torch = pytest.importorskip("torch")
    theirs = FUNCTIONAL[case](torch, torch.tensor(X), torch.tensor(Y))
    ours = FUNCTIONAL[case](tg, tg.tensor(X), tg.tensor(Y))
    _same(ours, theirs)


FUNCTIONAL_ERRORS = {
    "jacobian[forward-mode] needs vectorize": lambda L: L.autograd.functional.jacobian(
        lambda a: a.exp(), L.ones(2), strategy="forward-mode"),
    "jacobian[forward-mode] with create_graph": lambda L: L.autograd.functional.jacobian(
        lambda a: a.exp(), L.ones(2), strategy="forward-mode", vectorize=True,
        create_graph=True),
    "jacobian[forward-mode] with strict": lambda L: L.autograd.functional.jacobian(
        lambda a: a.exp(), L.ones(2), strategy="forward-mode", vectorize=True, strict=True),
    "jacobian[bad strategy]": lambda L: L.autograd.functional.jacobian(
        lambda a: a.exp(), L.ones(2), strategy="sideways"),
    "hessian[forward-mode] needs vectorize": lambda L: L.autograd.functional.hessian(
        lambda a: a.exp().sum(), L.ones(2), outer_jacobian_strategy="forward-mode"),
    "hessian[bad strategy]": lambda L: L.autograd.functional.hessian(
        lambda a: a.exp().sum(), L.ones(2), outer_jacobian_strategy="sideways"),
    "func.jvp primals not a tuple": lambda L: L.func.jvp(lambda a: a, L.ones(2), L.ones(2)),
    "func.jvp tangent of another size": lambda L: L.func.jvp(lambda a: a, (L.ones(2),),
                                                             (L.ones(3),)),
}


@pytest.mark.parametrize("case", list(FUNCTIONAL_ERRORS))
def test_functional_errors_as_pytorch(case):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as theirs:
        FUNCTIONAL_ERRORS[case](torch)
    with pytest.raises(Exception) as ours:
        FUNCTIONAL_ERRORS[case](tg)
    assert ours.type is theirs.type
    assert str(ours.value) == str(theirs.value)


# the hot path ------------------------------------------------------------------------------

def test_no_level_leaves_bind_alone():
    """Outside a level no hook is installed and in-place ops take their plain path."""
    from tracegrad import _hooks
    from tracegrad.ops import inplace_views
    n = _hooks.INSTALLED.n
    with fwAD.dual_level():
        assert _hooks.INSTALLED.n == n + 1 and inplace_views.forward_inplace is not None
    assert _hooks.INSTALLED.n == n and inplace_views.forward_inplace is None


def test_tangents_go_with_their_arrays():
    """A level's table keeps no array alive: entries leave with their arrays."""
    with fwAD.dual_level():
        d = fwAD.make_dual(tg.ones(3), tg.ones(3))
        for _ in range(50):
            d.exp()
        assert len(fwAD._table) < 10
    assert not fwAD._table


def test_functional_jvp_create_graph_against_torch():
    """With create_graph the forward-mode JVP keeps its history: reverse over forward."""
    torch = pytest.importorskip("torch")
    res = []
    for L in (torch, tg):
        x = L.tensor(X, requires_grad=True)
        _, u = L.autograd.functional.jvp(lambda t: t ** 2 * t.sin(), x, L.tensor(Y),
                                         create_graph=True)
        (gu,) = L.autograd.grad(u.sum(), x)
        _, plain = L.autograd.functional.jvp(lambda t: t ** 2, x, L.tensor(Y))
        assert not plain.requires_grad
        res.append(gu.detach().numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-12, atol=1e-14)
