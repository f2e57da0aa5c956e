"""A custom ``autograd.Function``'s ``jvp`` under forward-mode AD, as PyTorch's: called
after ``forward`` with the inputs' tangents (zeros for an input without one, None with
``set_materialize_grads(False)``), ``ctx.saved_tensors`` holding what ``save_for_forward``
saved, its results set as the outputs' tangents; no ``jvp`` is an error, and ``forward``
runs with forward AD off."""
import numpy as np
import pytest

import tracegrad as tg
import tracegrad.autograd.forward_ad as fwad


def _classes(lib):
    """The same custom Functions, written against ``lib`` (tracegrad or torch)."""
    class MulScale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.save_for_forward(x, y)
            ctx.save_for_backward(x, y)
            ctx.k = k
            return x * y * k, x + 1

        @staticmethod
        def jvp(ctx, tx, ty, tk):
            x, y = ctx.saved_tensors
            ctx.seen = (tx, ty, tk)
            return (tx * y + x * ty) * ctx.k, tx

        @staticmethod
        def backward(ctx, g, h):
            x, y = ctx.saved_tensors
            return g * y * ctx.k + h, g * x * ctx.k, None

    class NoJvp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class Unmaterialized(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.set_materialize_grads(False)
            return x * y

        @staticmethod
        def jvp(ctx, tx, ty):
            ctx.seen = (tx, ty)
            return tx

    class Dirty(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def jvp(ctx, t):
            t.mul_(2)
            return t

    class TooMany(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def jvp(ctx, t):
            return t, t

    class WrongShape(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 3

        @staticmethod
        def jvp(ctx, t):
            return t.sum()

    class Peek(lib.autograd.Function):
        inside = []

        @staticmethod
        def forward(ctx, x):
            Peek.inside.append(lib.autograd.forward_ad.unpack_dual(x).tangent)
            return x * 3

        @staticmethod
        def jvp(ctx, t):
            return t * 3

    return dict(MulScale=MulScale, NoJvp=NoJvp, Unmaterialized=Unmaterialized, Dirty=Dirty,
                TooMany=TooMany, WrongShape=WrongShape, Peek=Peek)


def _np(t):
    return None if t is None else np.asarray(t.detach().cpu().numpy() if hasattr(t, "cpu")
                                             else t.detach().numpy())


def _values(seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal(4), r.standard_normal(4), r.standard_normal(4)


def test_jvp_gives_the_tangents():
    x, y, u = _values()
    F = _classes(tg)["MulScale"]
    with fwad.dual_level():
        d = fwad.make_dual(tg.tensor(x), tg.tensor(u))
        a, b = F.apply(d, tg.tensor(y), 2.0)
        ta, tb = fwad.unpack_dual(a).tangent, fwad.unpack_dual(b).tangent
    np.testing.assert_allclose(_np(ta), u * y * 2.0, rtol=1e-14)
    np.testing.assert_allclose(_np(tb), u, rtol=0)


def test_missing_tangents_are_zeros_or_none():
    x, y, u = _values(1)
    F = _classes(tg)["Unmaterialized"]
    with fwad.dual_level():
        d = fwad.make_dual(tg.tensor(x), tg.tensor(u))
        r = F.apply(d, tg.tensor(y))
        assert fwad.unpack_dual(r).tangent is not None
    G = _classes(tg)["MulScale"]
    seen = {}

    class Spy(G):
        @staticmethod
        def jvp(ctx, tx, ty, tk):
            seen["args"] = (tx, ty, tk)
            return G.jvp(ctx, tx, ty, tk)
    with fwad.dual_level():
        Spy.apply(fwad.make_dual(tg.tensor(x), tg.tensor(u)), tg.tensor(y), 2.0)
    tx, ty, tk = seen["args"]
    np.testing.assert_array_equal(_np(ty), np.zeros(4))     # a tensor input: zeros
    assert tk is None                                      # a number: None


def test_errors_as_pytorch():
    C = _classes(tg)
    x = tg.randn(3)
    with fwad.dual_level():
        d = fwad.make_dual(x, tg.ones(3))
        with pytest.raises(NotImplementedError, match="must implement the jvp function"):
            C["NoJvp"].apply(d)
        with pytest.raises(RuntimeError, match="invalid number of forward gradients "
                                               r"\(expected 1 but got 2\)"):
            C["TooMany"].apply(d)
        with pytest.raises(RuntimeError, match="forward gradient that has a different size"):
            C["WrongShape"].apply(d)
    # without a dual input the Function needs no jvp
    with fwad.dual_level():
        r = C["NoJvp"].apply(x)
        assert fwad.unpack_dual(r).tangent is None


torch_cases = ["MulScale", "Unmaterialized", "Dirty", "Peek"]


def _run(lib, name, x, y, u):
    C = _classes(lib)
    fw = lib.autograd.forward_ad
    F = C[name]
    with fw.dual_level():
        d = fw.make_dual(lib.tensor(x).clone(), lib.tensor(u))
        if name == "MulScale":
            outs = F.apply(d, lib.tensor(y), 2.0)
        elif name == "Unmaterialized":
            outs = (F.apply(d, lib.tensor(y)),)
        else:
            outs = (F.apply(d),)
        res = [(_np(fw.unpack_dual(o).primal), _np(fw.unpack_dual(o).tangent)) for o in outs]
        res.append(("input tangent", _np(fw.unpack_dual(d).tangent)))
        if name == "Peek":
            assert len(F.inside) == 1
            res.append(("inside", F.inside[0]))     # forward AD is off inside forward
    return res


@pytest.mark.parametrize("name", torch_cases)
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    x, y, u = _values(2)
    ours, theirs = _run(tg, name, x, y, u), _run(torch, name, x, y, u)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        for p, q in zip(a, b):
            if isinstance(p, str) or p is None or q is None:
                assert (p is None) == (q is None) and (not isinstance(p, str) or p == q)
            else:
                np.testing.assert_allclose(p, q, rtol=1e-14, atol=0)


def test_jvp_composes_with_func_and_reverse_mode():
    """``func.jvp`` and ``jacfwd`` through a Function use its jvp; the tangents it returns
    keep their reverse-mode history (forward over reverse)."""
    x, y, u = _values(3)
    F = _classes(tg)["MulScale"]

    def f(a):
        return F.apply(a, tg.tensor(y), 2.0)[0]

    _, t = tg.func.jvp(f, (tg.tensor(x),), (tg.tensor(u),))
    np.testing.assert_allclose(_np(t), u * y * 2.0, rtol=1e-14)
    J = tg.func.jacfwd(f)(tg.tensor(x))
    np.testing.assert_allclose(_np(J), np.diag(y * 2.0), rtol=1e-14)
    yt = tg.tensor(y, requires_grad=True)
    with fwad.dual_level():
        out = F.apply(fwad.make_dual(tg.tensor(x), tg.tensor(u)), yt, 2.0)[0]
        tangent = fwad.unpack_dual(out).tangent
        (g,) = tg.autograd.grad(tangent.sum(), yt)
    np.testing.assert_allclose(_np(g), u * 2.0, rtol=1e-14)
