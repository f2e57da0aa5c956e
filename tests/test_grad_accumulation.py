"""How gradients land in a leaf's ``.grad``, as PyTorch's AccumulateGrad does it.

Without ``create_graph``: a first gradient that nothing else holds becomes ``.grad``
without a copy; one that something else holds (another leaf, a hook's caller, the
caller's ``gradient=``) is copied; later gradients are added in place, so ``.grad``
stays the same tensor over the same buffer. With ``create_graph``: ``.grad`` is a
new tensor each time, part of the graph.

Comparisons that state no tolerance are on small integers and halves, on which every
operation here (products, sums, scaling by 2, 3, 0.5 or 10) is exact in float32: both
libraries must agree to the bit, and assert_allclose's default 1e-7 is below an ulp.
"""
import numpy as np
import pytest

import tracegrad as tg

from tolerances import close


def _libs():
    """tracegrad, and torch where installed (each test then checks both the same way)."""
    try:
        import torch
    except ImportError:
        return [tg]
    return [tg, torch]


def _values(t):
    return np.array(t.detach().numpy(), dtype=np.float64)


def _leaf(lib, values):
    return lib.tensor(values, requires_grad=True)


def _passing(lib, record, keep=None):
    """A Function whose backward makes a new gradient, records its data pointer and, with
    ``keep``, holds on to it."""
    class Double(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            r = g * 2
            record.append(r.data_ptr())
            if keep is not None:
                keep.append(r)
            return r
    return Double


# in place ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_later_gradients_are_added_into_the_same_grad(lib):
    w = _leaf(lib, [1.0, 2.0, 3.0])
    x = lib.tensor([[1.0, 0.5, -1.0], [2.0, 0.0, 1.0]])
    (x @ w).tanh().sum().backward()
    first, ptr, version = w.grad, w.grad.data_ptr(), w.grad._version
    once = _values(first)
    (x @ w).tanh().sum().backward()
    assert w.grad is first and w.grad.data_ptr() == ptr
    assert w.grad._version == version + 1       # an in-place change, seen by saved tensors
    np.testing.assert_allclose(_values(w.grad), 2 * once, rtol=1e-6)


@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_a_grad_the_user_assigned_is_updated_in_place(lib):
    w = _leaf(lib, [1.0, 2.0])
    mine = lib.tensor([10.0, 20.0])
    w.grad = mine
    (w * w).sum().backward()
    assert w.grad is mine
    np.testing.assert_allclose(_values(mine), [12.0, 24.0])


def test_a_read_only_grad_is_replaced_instead():
    w = _leaf(tg, [1.0, 2.0])
    w.grad = tg.tensor(1.0).expand(2)      # a broadcast view: NumPy cannot write into it
    (w * w).sum().backward()
    np.testing.assert_allclose(_values(w.grad), [3.0, 5.0])


# the first gradient -------------------------------------------------------------------------------

@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_a_first_gradient_nothing_else_holds_is_taken_without_a_copy(lib):
    ptrs = []
    w = _leaf(lib, [1.0, 2.0])
    _passing(lib, ptrs).apply(w).sum().backward()
    assert w.grad.data_ptr() == ptrs[0]
    np.testing.assert_allclose(_values(w.grad), [2.0, 2.0])
    _passing(lib, ptrs).apply(w).sum().backward()
    assert w.grad.data_ptr() == ptrs[0]     # and then added into
    np.testing.assert_allclose(_values(w.grad), [4.0, 4.0])


@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_a_first_gradient_something_else_holds_is_copied(lib):
    ptrs, kept = [], []
    w = _leaf(lib, [1.0, 2.0])
    _passing(lib, ptrs, kept).apply(w).sum().backward()
    assert w.grad.data_ptr() != ptrs[0]
    _passing(lib, ptrs, kept).apply(w).sum().backward()
    np.testing.assert_allclose(_values(kept[0]), [2.0, 2.0])     # what backward made is intact
    np.testing.assert_allclose(_values(w.grad), [4.0, 4.0])


@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_leaves_that_receive_one_gradient_get_a_buffer_each(lib):
    a, b = _leaf(lib, [1.0, 2.0]), _leaf(lib, [3.0, 4.0])
    (a + b).backward(lib.tensor([1.0, 1.0]))
    assert a.grad.data_ptr() != b.grad.data_ptr()
    (a * 3 + b).sum().backward()
    np.testing.assert_allclose(_values(a.grad), [4.0, 4.0])
    np.testing.assert_allclose(_values(b.grad), [2.0, 2.0])


@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_the_callers_gradient_is_not_taken(lib):
    w = _leaf(lib, [1.0, 2.0])
    g = lib.tensor([0.5, 0.25])
    w.backward(g)
    assert w.grad.data_ptr() != g.data_ptr()
    w.backward(g)
    np.testing.assert_allclose(_values(g), [0.5, 0.25])
    np.testing.assert_allclose(_values(w.grad), [1.0, 0.5])


@pytest.mark.parametrize("build", [
    lambda a, b: (a + b).sum(),                                 # one gradient, two leaves
    lambda a, b: (a.reshape(2, 2) * b.reshape(2, 2)).sum(),     # gradients through views
    lambda a, b: (a.expand(3, 4) * b).sum(),                    # a broadcast view of a
    lambda a, b: (a[1:] * 2).sum() + (b[:2] + a[:2]).sum(),     # slices of one leaf
    lambda a, b: ((a + b) * (a - b)).sum() + a.sum(),           # a leaf reached by paths
    lambda a, b: (a.reshape(4) + 0 * b).sum() + a.reshape(2, 2).sum(),
], ids=["add", "reshape", "expand", "slices", "paths", "reshapes"])
def test_gradients_never_alias_each_other(build):
    """Whatever the graph hands each leaf, two backwards give twice one, and no leaf's .grad
    shares memory with another's."""
    a, b = _leaf(tg, [1.0, 2.0, 3.0, 4.0]), _leaf(tg, [0.5, -1.0, 2.0, 3.0])
    build(a, b).backward()
    once = [_values(a.grad), _values(b.grad)]
    assert not np.shares_memory(a.grad._data, b.grad._data)
    build(a, b).backward()
    for t, g in zip((a, b), once):       # g + g is 2 * g exactly
        np.testing.assert_allclose(_values(t.grad), 2 * g, rtol=1e-6)
    torch = pytest.importorskip("torch")
    at, bt = (torch.tensor(t.detach().numpy(), requires_grad=True) for t in (a, b))
    build(at, bt).backward()
    for g, t in zip(once, (at, bt)):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-6)


# hooks ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_a_tensor_hooks_result_is_copied_if_the_hook_keeps_it(lib):
    w = _leaf(lib, [1.0, 2.0])
    kept = []

    def hook(g):
        r = g * 2
        kept.append(r)
        return r
    h = w.register_hook(hook)
    (w * w).sum().backward()
    assert w.grad.data_ptr() != kept[0].data_ptr()
    first, ptr = w.grad, w.grad.data_ptr()
    (w * w).sum().backward()
    assert w.grad is first and w.grad.data_ptr() == ptr
    np.testing.assert_allclose(_values(kept[0]), [4.0, 8.0])
    np.testing.assert_allclose(_values(w.grad), [8.0, 16.0])
    h.remove()


@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_post_accumulate_hooks_see_one_grad_tensor(lib):
    w = _leaf(lib, [1.0, 2.0])
    seen = []
    h = w.register_post_accumulate_grad_hook(
        lambda t: seen.append((t.grad, t.grad.data_ptr(), _values(t.grad))))
    (w * w).sum().backward()
    (w * w).sum().backward()
    h.remove()
    assert seen[0][0] is seen[1][0] is w.grad and seen[0][1] == seen[1][1]
    np.testing.assert_allclose(seen[0][2], [2.0, 4.0])
    np.testing.assert_allclose(seen[1][2], [4.0, 8.0])


# create_graph ---------------------------------------------------------------------------------

@pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph=True")
@pytest.mark.parametrize("lib", _libs(), ids=lambda m: m.__name__)
def test_create_graph_makes_a_new_grad_each_time(lib):
    w = _leaf(lib, [1.0, 2.0])
    (w ** 3).sum().backward(create_graph=True)
    first = w.grad
    assert first.requires_grad and first.grad_fn is not None
    (w ** 3).sum().backward(create_graph=True)
    assert w.grad is not first and w.grad.grad_fn is not None
    np.testing.assert_allclose(_values(first), [3.0, 12.0])
    np.testing.assert_allclose(_values(w.grad), [6.0, 24.0])
    (gw,) = lib.autograd.grad(w.grad.sum(), w)      # the accumulated grad is differentiable
    np.testing.assert_allclose(_values(gw), [12.0, 24.0])
    # then a plain backward adds in place, even into a grad that is part of a graph
    second, ptr = w.grad, w.grad.data_ptr()
    (w ** 3).sum().backward()
    assert w.grad is second and w.grad.data_ptr() == ptr
    np.testing.assert_allclose(_values(w.grad), [9.0, 36.0])


def test_create_graph_first_grad_does_not_alias_the_gradient():
    a, b = _leaf(tg, [1.0, 2.0]), _leaf(tg, [3.0, 4.0])
    (a * b).sum().backward(create_graph=True)
    (a + b).sum().backward(create_graph=True)
    assert a.grad is not b.grad and not np.shares_memory(a.grad._data, b.grad._data)
    np.testing.assert_allclose(_values(a.grad), [4.0, 5.0])
    np.testing.assert_allclose(_values(b.grad), [2.0, 3.0])


# compiled functions -----------------------------------------------------------------------------

def _mlp(x, W1, b1, W2, b2):
    return (tg.relu(x @ W1 + b1) @ W2 + b2).tanh().sum()


def _mlp_params():
    rng = np.random.default_rng(0)
    shapes = [(4, 8), (8,), (8, 3), (3,)]
    return [tg.tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
            for s in shapes]


def test_compiled_backward_accumulates_in_place():
    x = tg.tensor(np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32))
    params = _mlp_params()
    f = tg.compile(_mlp)
    f(x, *params).backward()
    grads = [p.grad for p in params]
    ptrs = [g.data_ptr() for g in grads]
    once = [_values(g) for g in grads]
    f(x, *params).backward()
    for p, g, ptr, v in zip(params, grads, ptrs, once):
        assert p.grad is g and p.grad.data_ptr() == ptr
        np.testing.assert_allclose(_values(p.grad), 2 * v, rtol=1e-6)     # v + v: exact
    for i, p in enumerate(params):
        for q in params[i + 1:]:
            assert not np.shares_memory(p.grad._data, q.grad._data)
    eager = _mlp_params()
    _mlp(x, *eager).backward()
    # float32 through two small layers and back (sums of at most 8 products, a tanh, the
    # batch of 5): the compiled program may fuse and reorder about 32 roundings
    for v, p in zip(once, eager):
        np.testing.assert_allclose(v, _values(p.grad), **close("float32", n_ops=32, scale=4))


def test_compiled_gradients_shared_by_leaves_are_copied():
    f = tg.compile(lambda a, b: (a + b).sum() + (a * 0).sum())
    a, b = _leaf(tg, [1.0, 2.0]), _leaf(tg, [3.0, 4.0])
    f(a, b).backward()
    assert not np.shares_memory(a.grad._data, b.grad._data)
    f(a, b).backward()
    np.testing.assert_allclose(_values(a.grad), [2.0, 2.0])
    np.testing.assert_allclose(_values(b.grad), [2.0, 2.0])


def test_compiled_backward_with_hooks_and_create_graph():
    f = tg.compile(lambda w: (w ** 3).sum())
    w = _leaf(tg, [1.0, 2.0])
    seen = []
    w.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad))
    w.register_hook(lambda g: g * 2)
    f(w).backward()
    f(w).backward()
    assert seen[0] is seen[1] is w.grad
    np.testing.assert_allclose(_values(w.grad), [12.0, 48.0])
    w.grad = None
    f(w).backward(create_graph=True)
    first = w.grad
    f(w).backward(create_graph=True)
    assert w.grad is not first and w.grad.requires_grad
    np.testing.assert_allclose(_values(w.grad), [12.0, 48.0])
    (gw,) = tg.autograd.grad(w.grad.sum(), w)      # w's hook doubles this one too
    np.testing.assert_allclose(_values(gw), [48.0, 96.0])
