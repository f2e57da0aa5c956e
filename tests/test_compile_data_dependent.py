"""Ops whose result's size depends on the data, inside ``tracegrad.compile``.

``nonzero``, ``argwhere``, ``unique``, ``masked_select``, ``x[mask]``,
``repeat_interleave`` with a tensor of counts and ``where(cond)`` end the graph where they
are called: the rest of that call runs eagerly, and so does every later call, with one
line in ``explain()`` naming the op and the line (``ops/data_dependent.py``). No variant
may replay the size, or the result, of the call it was traced on: every test changes the
data between calls and compares each call with eager.
"""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tracegrad as tg


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _same(got, want):
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert got.dtype is want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12,
                               equal_nan=True)


def test_compiled_nonzero_gives_each_calls_own_result():
    """The issue's case: the first call's ``[[0], [2]]`` came back for the second call."""
    f = tg.compile(lambda x: tg.nonzero(x))
    assert f(tg.tensor([1., 0., 2.])).tolist() == [[0], [2]]
    assert f(tg.tensor([0., 0., 4.])).tolist() == [[2]]
    assert f(tg.tensor([0., 0., 0.])).shape == (0, 1)
    text = f.explain()
    assert "nonzero at " in text and "test_compile_data_dependent.py" in text
    assert "now running eagerly" in text and f.stats["compiles"] == 0


def test_the_code_before_the_op_runs_once_per_call():
    """The trace run computed everything up to the op for real: the call goes on eagerly from
    there, so what came before is not run a second time."""
    log = []

    def f(x):
        log.append(len(log))
        y = x * 2
        return y[y > 0].sum()
    c = tg.compile(f)
    for data in ([1., -1.], [2., 3.], [-1., -2.]):
        assert c(tg.tensor(data)).item() == f(tg.tensor(data)).item()
    assert log == list(range(6))


OPS = {
    "nonzero": lambda x: tg.nonzero(x > 0),
    "nonzero(as_tuple=True)": lambda x: x[tg.nonzero(x > 0, as_tuple=True)] * 2,
    "argwhere": lambda x: tg.argwhere(x > 0),
    "where(cond)": lambda x: tg.where(x > 0)[0] + 1,
    "unique": lambda x: tg.unique((x * 2).round(), return_inverse=True, return_counts=True),
    "masked_select": lambda x: tg.masked_select(x, x > 0) * 3,
    "x[mask]": lambda x: x[x > 0].exp(),
    "x[mask] of rows": lambda x: x.reshape(-1, 2)[x.reshape(-1, 2).sum(1) > 0],
    "repeat_interleave": lambda x: tg.repeat_interleave(x, (x > 0).long() * 2),
    "Tensor.unique": lambda x: x.round().unique(),
}


@pytest.mark.parametrize("name", list(OPS))
def test_each_data_dependent_op_follows_the_data(name):
    fn = OPS[name]
    c = tg.compile(fn)
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = tg.tensor(rng.standard_normal(6))
        _same(c(x), fn(x))
    assert c.stats["compiles"] == 0
    lines = [ln for ln in c.explain().splitlines() if "depends on the values" in ln]
    assert lines and all("test_compile_data_dependent.py" in ln for ln in lines)


@pytest.mark.parametrize("reduce", ["sum", "mean", "backward through masked_select"])
def test_downstream_of_a_mask_gives_eagers_values_and_gradients(reduce):
    W = tg.tensor(np.linspace(-1, 1, 12).reshape(3, 4), requires_grad=True)

    def f(x):
        h = (x @ W).tanh()
        if reduce == "sum":
            return h[h > 0].sum()
        if reduce == "mean":
            return h[h > 0].mean() + h.mean()       # the count is this call's
        return tg.masked_select(h, h < 0).square().sum()
    c = tg.compile(f)
    rng = np.random.default_rng(0)
    for n in (4, 4, 7, 2):
        x = tg.tensor(rng.standard_normal((n, 3)), requires_grad=True)
        got, want = c(x), f(x)
        _same(got, want)
        for a, b in zip(tg.autograd.grad(got, [x, W]), tg.autograd.grad(want, [x, W])):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)


def test_a_variant_compiled_before_the_op_is_reached_is_left_for_eager():
    """The op sits behind a flag: the variant traced without it serves nothing once the
    function has met the op (the flag is a guarded argument); every call is still right."""
    def f(x, flag):
        y = x * 2
        return y[y > 1].sum() if flag else y.sum()
    c = tg.compile(f)
    rng = np.random.default_rng(1)
    for flag in (False, False, True, False, True):
        x = tg.tensor(rng.standard_normal(5))
        _same(c(x, flag), f(x, flag))
    assert c.stats["compiles"] == 1 and "now running eagerly" in c.explain()


def test_a_dynamic_trace_ends_at_the_op_too(backend):
    def f(x):
        n = x.shape[0]          # a symbolic size, still used after the graph ended
        return x[x > 0].sum() * n + x.mean()
    c = tg.compile(f, dynamic=True)
    rng = np.random.default_rng(2)
    for n in (3, 5, 8, 5):
        x = tg.tensor(rng.standard_normal((n, 2)))
        _same(c(x), f(x))


def test_a_compiled_module_with_a_mask_in_its_forward():
    class Masked(tg.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = tg.nn.Linear(3, 3)

        def forward(self, x):
            h = self.lin(x)
            return h[h > 0].sum()
    tg.manual_seed(0)
    m = Masked()
    cm = tg.compile(m)
    rng = np.random.default_rng(4)
    for n in (2, 5, 3):
        x = tg.tensor(rng.standard_normal((n, 3)).astype(np.float32))
        got, want = cm(x), m(x)
        _same(got, want)
        for a, b in zip(tg.autograd.grad(got, list(m.parameters())),
                        tg.autograd.grad(want, list(m.parameters()))):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-6)


def test_unique_and_argwhere_match_pytorch():
    torch = pytest.importorskip("torch")
    data = np.array([[3., 1., 3.], [2., 1., 0.]])
    for kwargs in ({}, {"return_inverse": True}, {"return_counts": True},
                   {"return_inverse": True, "return_counts": True}, {"dim": 0},
                   {"dim": 1, "return_inverse": True, "return_counts": True}):
        got = tg.unique(tg.tensor(data), **kwargs)
        want = torch.unique(torch.tensor(data), **kwargs)
        got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy())
            assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
    np.testing.assert_array_equal(tg.argwhere(tg.tensor(data) > 1).numpy(),
                                  torch.argwhere(torch.tensor(data) > 1).numpy())
    with pytest.raises(IndexError, match="unique: Dimension out of range"):
        tg.unique(tg.tensor(data), dim=2)


# the property test ---------------------------------------------------------------------------

PREFIX = {
    "x": lambda x, w: x,
    "x * w": lambda x, w: x * w,
    "tanh(x) - 0.2": lambda x, w: x.tanh() - 0.2,
    "(x @ x.T)[0]": lambda x, w: (x.reshape(-1, 1) @ w.reshape(1, -1)).sum(0),
}
SELECT = {      # from h (1-D), a value of a size the data decides
    "h[h > t]": lambda h, t: h[h > t],
    "masked_select": lambda h, t: tg.masked_select(h, h < t),
    "h[nonzero]": lambda h, t: h[tg.nonzero(h > t).squeeze(1)],
    "h[nonzero(as_tuple)]": lambda h, t: h[tg.nonzero(h > t, as_tuple=True)],
    "h[where(cond)]": lambda h, t: h[tg.where(h <= t)],
    "h[argwhere]": lambda h, t: h[tg.argwhere(h > t)[:, 0]],
    "repeat_interleave": lambda h, t: tg.repeat_interleave(h, (h > t).long() + 1),
    "unique counts": lambda h, t: tg.unique((h * 2).round(), return_counts=True)[1].double()
    * h.sum(),
}
SUFFIX = {
    "sum": lambda s: s.sum(),
    "mean": lambda s: s.mean(),
    "square().sum()": lambda s: s.square().sum(),
    "as it is * 2": lambda s: s * 2,
    "size as a number": lambda s: s.sum() + s.shape[0],
}


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(prefix=st.sampled_from(list(PREFIX)), select=st.sampled_from(list(SELECT)),
       suffix=st.sampled_from(list(SUFFIX)), n=st.integers(1, 6),
       t=st.sampled_from([-0.5, 0.0, 0.3]),
       seeds=st.lists(st.integers(0, 2 ** 16), min_size=3, max_size=3),
       gated=st.booleans())
def test_programs_with_data_dependent_sizes_match_eager_on_every_call(prefix, select, suffix,
                                                                      n, t, seeds, gated):
    """A prefix, a data-dependent op, a suffix, optionally behind a flag that the first call
    leaves off (so a variant exists before the op is met); every call has new data, and
    each result and gradient must be eager's."""
    w = tg.tensor(np.linspace(0.5, 1.5, n), requires_grad=True)

    def program(x, on):
        h = PREFIX[prefix](x, w)
        if gated and not on:
            return h.sum()
        return SUFFIX[suffix](SELECT[select](h, t))
    c = tg.compile(program)
    for k, seed in enumerate(seeds):
        x = tg.tensor(np.random.default_rng(seed).uniform(-1, 1, n), requires_grad=True)
        on = not gated or k > 0
        got, want = c(x, on), program(x, on)
        _same(got, want)
        if want.requires_grad:
            g = tg.autograd.grad(got.sum(), [x, w], allow_unused=True)
            e = tg.autograd.grad(want.sum(), [x, w], allow_unused=True)
            for a, b in zip(g, e):
                assert (a is None) == (b is None)
                if a is not None:
                    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12)
    assert c.stats["compiles"] == (1 if gated else 0)


def test_item_of_a_one_element_tensor_of_any_rank_is_guarded_as_a_scalar():
    """.item() of shape (1,) or (1, 1) reads the one value: the guard compares that number
    (it compared the nested list [2.5] with 2.5 and failed on the traced call itself)."""
    f = tg.compile(lambda x: x.item() * 2 if x.item() > 0 else 0.0)
    assert f(tg.tensor([2.5])) == 5.0 and f(tg.tensor([2.5])) == 5.0
    assert f.stats["compiles"] == 1 and f.stats["cache_hits"] == 1
    assert f(tg.tensor([[3.5]])) == 7.0 and f(tg.tensor([-1.0])) == 0.0
