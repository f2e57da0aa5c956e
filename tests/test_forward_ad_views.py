"""Tangents shared between views under forward-mode AD, as PyTorch's: a view's tangent is
the same view of its base's tangent (made on first read where the view has none of its
own), and an in-place op updates the tangent in place, so every alias sees it (the user's
tangent given to ``make_dual`` included)."""
import numpy as np
import pytest

import tracegrad as tg


def _scenario(lib):
    """A log of tangents (as arrays) through views and in-place writes, in ``lib``."""
    fw = lib.autograd.forward_ad
    log = []

    def tan(t):
        got = fw.unpack_dual(t).tangent
        log.append(None if got is None else got.detach().numpy().copy())

    p, t = lib.arange(4.), lib.ones(4)
    with fw.dual_level():
        x = fw.make_dual(p.clone(), t)
        v = x[1:3]
        tan(v)
        x.mul_(2)                       # the base's tangent doubles: so does the view's
        tan(v)
        log.append(t.numpy().copy())    # and the user's tangent, updated in place
        v.add_(fw.make_dual(lib.zeros(2), lib.full((2,), 5.)))
        tan(x)                          # a write through the view reaches the base
        b = lib.zeros(4)                # a base without a tangent, a view given one
        w = b[:2]
        w.copy_(fw.make_dual(lib.ones(2), lib.full((2,), 3.)))
        tan(b)
        w2 = b[2:]                      # a view made after: reads its base's tangent
        tan(w2)
        b.add_(fw.make_dual(lib.zeros(4), lib.full((4,), 1.)))
        tan(w)
        tan(w2)
        m = lib.arange(6.).reshape(2, 3)
        d = fw.make_dual(m, lib.ones(2, 3))
        col = d.t()[1]                  # a view of a view: transpose, then a row
        col.mul_(lib.tensor([10., 20.]))
        tan(d)
        p2 = lib.zeros(3)
        y = fw.make_dual(p2, lib.ones(3))
        p2.mul_(3)                      # the primal's own base has no tangent
        tan(y)
    return log


def test_views_share_tangents():
    log = _scenario(tg)
    np.testing.assert_array_equal(log[1], [2, 2])
    np.testing.assert_array_equal(log[3], [2, 7, 7, 2])
    np.testing.assert_array_equal(log[6], [4, 4])
    np.testing.assert_array_equal(log[7], [1, 1])


def test_views_share_tangents_as_pytorch():
    torch = pytest.importorskip("torch")
    ours, theirs = _scenario(tg), _scenario(torch)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_a_tangent_with_history_is_replaced_not_written():
    """A tangent that requires grad keeps its reverse-mode history: an in-place op gives
    the target a new tangent, and the gradient through it is right."""
    fw = tg.autograd.forward_ad
    u = tg.ones(3, requires_grad=True)
    with fw.dual_level():
        x = fw.make_dual(tg.arange(3.), u * 1)
        x.mul_(tg.tensor([1., 2., 3.]))
        t = fw.unpack_dual(x).tangent
        (g,) = tg.autograd.grad(t.sum(), u)
    np.testing.assert_array_equal(g.numpy(), [1, 2, 3])
    np.testing.assert_array_equal(u.detach().numpy(), [1, 1, 1])
