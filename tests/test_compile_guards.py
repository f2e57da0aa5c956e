"""No stale results from Python values read outside the arguments: globals, closure
variables and module attributes are guarded; each test changes the value between calls
and compares compiled against eager every time."""
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn

SCALE = 2.0
POWERS = (1, 2)


def _scaled(x):
    return (x * SCALE).sum()


def test_a_global_float_is_read_again_not_baked():
    global SCALE
    f = tg.compile(_scaled)
    x = tg.ones(3)
    try:
        for value in (2.0, 5.0, 5.0, -1.5, 2.0):
            SCALE = value
            assert f(x).item() == _scaled(x).item() == 3 * value
    finally:
        SCALE = 2.0
    assert f.stats["compiles"] == 3 and f.stats["cache_hits"] == 2    # 2.0 came back: a hit
    assert f.stats["retrace_reasons"][0] == "the global SCALE changed: 2.0 -> 5.0"
    assert "guard: the global SCALE == 2.0 (read in test_compile_guards.py" in f.explain()


def test_a_global_tuple_read_inside_a_lambda_and_a_loop():
    global POWERS

    def f(x):
        terms = map(lambda p: x ** p, POWERS)
        return sum(t.sum() for t in terms)
    c = tg.compile(f)
    x = tg.tensor([1.0, 2.0])
    try:
        for powers in ((1, 2), (1, 2, 3), (3,)):
            POWERS = powers
            assert c(x).item() == f(x).item()
    finally:
        POWERS = (1, 2)
    assert c.stats["compiles"] == 3


def test_a_closure_variable():
    def make():
        shift = 1.0

        def f(x):
            return (x + shift).exp().sum()

        def set_shift(v):
            nonlocal shift
            shift = v
        return f, set_shift
    f, set_shift = make()
    c = tg.compile(f)
    x = tg.zeros(2)
    for v in (1.0, 0.0, 3.0):
        set_shift(v)
        np.testing.assert_allclose(c(x).item(), f(x).item(), rtol=1e-6)
    assert c.stats["compiles"] == 3
    assert "the closure variable shift changed: 1.0 -> 0.0" in c.stats["retrace_reasons"]


def test_module_attributes_dropout_p_and_eps():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5))
    compiled = tg.compile(model)
    x = tg.randn(8, 4)
    model.eval()
    for eps in (1e-5, 1e-1, 10.0):
        model[1].eps = eps
        with tg.no_grad():
            np.testing.assert_allclose(compiled(x).numpy(), model(x).numpy(), rtol=1e-5,
                                       atol=1e-6)
    model.train()
    for p in (0.5, 0.0):
        model[2].p = p
        tg.manual_seed(3)
        want = model(x)
        tg.manual_seed(3)
        got = compiled(x)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    reasons = compiled.stats["retrace_reasons"]
    assert "the attribute 1.eps of BatchNorm1d changed: 1e-05 -> 0.1" in reasons
    assert "the attribute 2.p of Dropout changed: 0.5 -> 0.0" in reasons


def test_a_value_that_changes_every_call_ends_in_eager_with_a_warning_naming_it():
    global SCALE
    f = tg.compile(_scaled, max_variants=3)
    x = tg.ones(2)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in range(6):
                SCALE = float(step)
                assert f(x).item() == 2 * step
    finally:
        SCALE = 2.0
    assert any("the global SCALE changed" in str(w.message) for w in caught)


@pytest.mark.parametrize("value", [None, "mean", (1, (2.0, "a")), 3 + 1j, np.float32(0.5),
                                   [1, 2], {"lr": 0.1, "steps": (1, 2)}])
def test_plain_values_of_every_kind_are_guarded(value):
    from tracegrad.runtime.guards import plain
    assert plain(value)
    assert not plain(tg.ones(1)) and not plain(np.ones(2)) and not plain([tg.ones(1)])


CONFIG = {"scale": 2.0, "terms": [1, 2]}


def test_a_config_dict_changed_in_place():
    def f(x):
        return sum((x ** p).sum() for p in CONFIG["terms"]) * CONFIG["scale"]
    c = tg.compile(f)
    x = tg.tensor([1.0, 2.0])
    try:
        for scale, extra in ((2.0, None), (3.0, None), (3.0, 3)):
            CONFIG["scale"] = scale
            if extra:
                CONFIG["terms"].append(extra)       # the same list, changed in place
            assert c(x).item() == f(x).item()
    finally:
        CONFIG.update(scale=2.0, terms=[1, 2])
    assert c.stats["compiles"] == 3


def test_compiler_reset_clears_every_cache():
    f = tg.compile(_scaled, max_variants=1)
    g = tg.compile(lambda x: x.exp().sum())
    x = tg.ones(2)
    f(x), g(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f(tg.ones(3))                   # past max_variants: eager from now on
    assert f.stats["fallbacks"] == 1
    tg.compiler.reset()
    f(x), g(x)
    assert f.stats["compiles"] == 2 and g.stats["compiles"] == 2
    assert f._last is not None and not f._eager


# impure calls -------------------------------------------------------------------------------

class DynamicNet(nn.Module):
    """PyTorch's "Control Flow + Weight Sharing" example: a random depth each forward."""

    def __init__(self):
        super().__init__()
        tg.manual_seed(0)
        self.a, self.b, self.c, self.d, self.e = (nn.Parameter(tg.randn(())) for _ in range(5))

    def forward(self, x):
        import random
        y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
        for exp in range(4, random.randint(4, 6)):
            y = y + self.e * x ** exp
        return y


def test_a_random_draw_in_forward_is_never_frozen():
    import random
    x = tg.linspace(-1, 1, 5)
    model = DynamicNet()
    random.seed(0)
    want = [model(x).sum().item() for _ in range(8)]
    compiled = tg.compile(model)
    random.seed(0)
    with pytest.warns(RuntimeWarning, match=r"random.randint at test_compile_guards.py:\d+"):
        got = [compiled(x).sum().item() for _ in range(8)]
    assert got == want and len(set(want)) > 1
    assert "now running eagerly (it calls random.randint at" in compiled.explain()


def test_time_based_branching_follows_the_clock(monkeypatch):
    import time
    clock = iter([10.0, 99.0, 10.0])
    monkeypatch.setattr(time, "time", lambda: next(clock))

    def f(x):
        return x * 2 if time.time() < 50 else x * 3
    with pytest.warns(RuntimeWarning, match="time.time"):
        c = tg.compile(f)
        assert [c(tg.ones(1)).item() for _ in range(3)] == [2.0, 3.0, 2.0]


def _helper(x):
    return x * SCALE


def test_a_global_read_by_a_called_helper():
    global SCALE
    f = tg.compile(lambda x: _helper(x).sum())
    x = tg.ones(2)
    try:
        f(x)
        SCALE = 7.0
        assert f(x).item() == 14.0
    finally:
        SCALE = 2.0


class _Scaled(nn.Module):
    """A user's own module whose forward reads a global and draws a random number."""

    def forward(self, x):
        return x * SCALE


def test_a_user_submodules_forward_is_followed():
    global SCALE
    model = nn.Sequential(nn.Linear(2, 2), _Scaled())
    c = tg.compile(model)
    x = tg.ones(1, 2)
    try:
        for value in (2.0, 3.0):
            SCALE = value
            with tg.no_grad():
                np.testing.assert_allclose(c(x).numpy(), model(x).numpy(), rtol=1e-6)
    finally:
        SCALE = 2.0
    assert "the global SCALE changed: 2.0 -> 3.0" in c.stats["retrace_reasons"]


def _draws():
    import random
    return random.random()


def test_an_impure_call_in_a_helper_is_found():
    with pytest.warns(RuntimeWarning, match=r"random.random at test_compile_guards.py"):
        c = tg.compile(lambda x: x * _draws())
        c(tg.ones(1))
