"""No stale results from Python values read outside the arguments: globals, closure
variables and module attributes are guarded; each test changes the value between calls
and compares compiled against eager every time."""
import dataclasses
import inspect
import random
import re
import types
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
    assert not plain(tg.ones(1)) and not plain([tg.ones(1)]) and not plain(np.ones(5000))
    assert plain(np.ones(2))             # a small array: guarded by its contents


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


def test_a_random_draw_in_forward_is_drawn_again_each_call_like_eager():
    import random
    x = tg.linspace(-1, 1, 5)
    model = DynamicNet()
    random.seed(0)
    depths = {random.randint(4, 6) for _ in range(20)}
    random.seed(0)
    want = [model(x).sum().item() for _ in range(20)]
    after_eager = random.getstate()
    compiled = tg.compile(model)
    random.seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)      # no eager fallback
        got = [compiled(x).sum().item() for _ in range(20)]
    assert got == want and len(depths) == 3
    assert random.getstate() == after_eager         # the same draws as eager, no more
    assert compiled.stats["compiles"] == 3 and compiled.stats["cache_hits"] == 17
    assert compiled.stats["fallbacks"] == 0
    assert re.search(r"random.randint\(4, 6\) at test_compile_guards.py:\d+ returned \d, not \d "
                     r"as when traced", compiled.stats["retrace_reasons"][0])
    assert re.search(r"guard: random.randint\(4, 6\) at test_compile_guards.py:\d+ returned \d "
                     "when traced", compiled.explain())


def test_a_random_draw_with_gradients_matches_eager():
    import random
    x = tg.linspace(-1, 1, 5)
    model = DynamicNet()
    compiled = tg.compile(model)
    for seed in range(6):
        random.seed(seed)
        model.zero_grad()
        model(x).sum().backward()
        want = [None if p.grad is None else p.grad.item() for p in model.parameters()]
        want_state = random.getstate()
        random.seed(seed)
        model.zero_grad()
        compiled(x).sum().backward()
        got = [None if p.grad is None else p.grad.item() for p in model.parameters()]
        assert [g is None for g in got] == [w is None for w in want]
        np.testing.assert_allclose([g for g in got if g is not None],
                                   [w for w in want if w is not None], rtol=1e-5)
        assert random.getstate() == want_state


def _two_draws(x):
    import random
    n = random.randint(0, 1)
    if n:
        return x * random.random()
    return x - 1


def test_variants_with_different_numbers_of_draws_leave_random_as_eager_does():
    import random
    c = tg.compile(_two_draws)
    x = tg.ones(2)
    for seed in range(12):
        random.seed(seed)
        want = _two_draws(x).numpy()
        want_state = random.getstate()
        random.seed(seed)
        np.testing.assert_allclose(c(x).numpy(), want, rtol=1e-6)
        assert random.getstate() == want_state, seed
    assert c.stats["fallbacks"] == 0


def test_numpy_random_under_a_seed():
    def f(x):
        return x * np.random.randint(1, 4)
    c = tg.compile(f)
    x = tg.ones(2)
    for seed in range(8):
        np.random.seed(seed)
        want = f(x).numpy()
        want_state = np.random.get_state()[1].copy()
        np.random.seed(seed)
        np.testing.assert_array_equal(c(x).numpy(), want)
        np.testing.assert_array_equal(np.random.get_state()[1], want_state)
    assert c.stats["compiles"] == 3 and c.stats["fallbacks"] == 0


def test_time_based_branching_follows_the_clock(monkeypatch):
    import time
    now = [0.0]
    monkeypatch.setattr(time, "time", lambda: now[0])

    def f(x):
        return x * 2 if time.time() < 50 else x * 3
    c = tg.compile(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for t in (10.0, 99.0, 10.0, 20.0, 99.0):
            now[0] = t
            assert c(tg.ones(1)).item() == f(tg.ones(1)).item() == (2.0 if t < 50 else 3.0)
    assert c.stats["compiles"] == 3 and c.stats["cache_hits"] == 2


def test_a_clock_feeding_a_float_retraces_then_runs_eagerly_naming_the_call(monkeypatch):
    import time
    now = [0.0]
    monkeypatch.setattr(time, "time", lambda: now[0])

    def f(x):
        return x * time.time()
    c = tg.compile(f, max_variants=3)
    with pytest.warns(RuntimeWarning, match=r"time.time\(\) at test_compile_guards.py:\d+"):
        for t in range(6):
            now[0] = float(t)
            assert c(tg.ones(1)).item() == f(tg.ones(1)).item() == t
    assert c.stats["compiles"] == 3 and c.stats["fallbacks"] == 3


def test_an_environment_variable(monkeypatch):
    import os

    def f(x):
        if os.environ.get("TRACEGRAD_TEST_MODE", "double") == "double":
            return x * 2
        return x * int(os.environ["TRACEGRAD_TEST_FACTOR"])
    c = tg.compile(f)
    x = tg.ones(1)
    for mode, factor in (("double", "5"), ("factor", "5"), ("factor", "7"), ("double", "7")):
        monkeypatch.setenv("TRACEGRAD_TEST_MODE", mode)
        monkeypatch.setenv("TRACEGRAD_TEST_FACTOR", factor)
        assert c(x).item() == f(x).item()
    assert c.stats["compiles"] == 3 and c.stats["fallbacks"] == 0


def test_a_call_that_changes_its_argument_runs_eagerly():
    import random

    def f(x):
        order = [0, 1, 2]
        random.shuffle(order)
        return x[order]
    c = tg.compile(f)
    x = tg.tensor([1.0, 2.0, 3.0])
    with pytest.warns(RuntimeWarning, match="random.shuffle"):
        for seed in range(4):
            random.seed(seed)
            want = f(x).numpy()
            random.seed(seed)
            np.testing.assert_array_equal(c(x).numpy(), want)


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


# attribute chains ---------------------------------------------------------------------------

CFG = types.SimpleNamespace(scale=2.0, nested=types.SimpleNamespace(shift=0.0))


def _configured(x):
    return (x * CFG.scale + CFG.nested.shift).sum()


def test_a_global_config_objects_fields():
    c = tg.compile(_configured)
    x = tg.ones(3)
    try:
        for scale, shift in ((2.0, 0.0), (3.0, 0.0), (3.0, 1.0), (2.0, 0.0)):
            CFG.scale, CFG.nested.shift = scale, shift
            assert c(x).item() == _configured(x).item() == 3 * (scale + shift)
    finally:
        CFG.scale, CFG.nested.shift = 2.0, 0.0
    assert c.stats["compiles"] == 3 and c.stats["cache_hits"] == 1
    assert c.stats["retrace_reasons"][0] == "the attribute CFG.scale changed: 2.0 -> 3.0"
    line = inspect.getsourcelines(_configured)[1] + 1
    assert f"guard: the attribute CFG.scale == 2.0 (read in test_compile_guards.py:{line})" \
        in c.explain()


def test_a_global_is_reported_at_the_line_that_reads_it():
    c = tg.compile(_scaled)
    c(tg.ones(1))
    line = inspect.getsourcelines(_scaled)[1] + 1
    assert f"guard: the global SCALE == 2.0 (read in test_compile_guards.py:{line})" \
        in c.explain()


@dataclasses.dataclass
class _Config:
    p: float = 0.5
    power: int = 2


class _WithConfig(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) ** self.cfg.power * self.cfg.p


def test_self_cfg_field_in_a_modules_forward():
    model = _WithConfig(_Config())
    c = tg.compile(model)
    x = tg.randn(2, 3)
    for p, power in ((0.5, 2), (0.25, 2), (0.25, 3), (0.5, 2)):
        model.cfg.p, model.cfg.power = p, power
        with tg.no_grad():
            np.testing.assert_allclose(c(x).numpy(), model(x).numpy(), rtol=1e-6)
    model.cfg = _Config(p=2.0, power=1)         # a new config object
    with tg.no_grad():
        np.testing.assert_allclose(c(x).numpy(), model(x).numpy(), rtol=1e-6)
    assert "the attribute self.cfg.p changed: 0.5 -> 0.25" in c.stats["retrace_reasons"]
    assert c.stats["compiles"] == 4


class _Scaler:
    offset = 1.0            # a class attribute, read through the instance

    def __init__(self, scale):
        self.scale = scale

    @tg.compile
    def apply(self, x):
        return x * self.scale + self.offset


def test_a_plain_class_method_reads_self_and_class_attributes():
    s = _Scaler(2.0)
    x = tg.ones(2)
    try:
        for scale, offset in ((2.0, 1.0), (3.0, 1.0), (3.0, -1.0)):
            s.scale = scale
            _Scaler.offset = offset
            assert s.apply(x).tolist() == [scale + offset] * 2
        s.offset = 10.0                 # an instance attribute now shadows the class's
        assert s.apply(x).tolist() == [13.0, 13.0]
    finally:
        _Scaler.offset = 1.0
    other = _Scaler(5.0)
    assert other.apply(x).tolist() == [6.0, 6.0]
    assert "the attribute self.scale changed: 2.0 -> 3.0" in _Scaler.apply.stats[
        "retrace_reasons"]


def test_a_closure_config_and_a_constant_key():
    def make(hp):
        def f(x):
            return x * hp["lr"] + hp["bias"].sum()
        return f
    hp = {"lr": 0.1, "bias": tg.ones(2)}          # not plain as a whole: a tensor inside
    f = make(hp)
    c = tg.compile(f)
    x = tg.ones(2)
    for lr in (0.1, 0.5, 0.1):
        hp["lr"] = lr
        np.testing.assert_allclose(c(x).numpy(), f(x).numpy(), rtol=1e-6)
    assert c.stats["compiles"] == 2


def test_a_list_argument_whose_length_changes_and_a_dict_of_hyper_parameters():
    def f(x, powers, hp):
        return sum((x ** p).sum() for p in powers) * hp["scale"] + hp["shift"]
    c = tg.compile(f)
    x = tg.tensor([1.0, 2.0])
    calls = [([1, 2], {"scale": 1.0, "shift": 0.0}), ([1, 2, 3], {"scale": 1.0, "shift": 0.0}),
             ([1], {"scale": 2.0, "shift": 0.0}), ([1], {"scale": 2.0, "shift": 5.0}),
             ([1, 2], {"scale": 1.0, "shift": 0.0})]
    for powers, hp in calls:
        assert c(x, powers, hp).item() == f(x, powers, hp).item()
    assert c.stats["compiles"] == 4 and c.stats["cache_hits"] == 1


def test_item_feeding_python_arithmetic_feeding_a_tensor_op():
    def f(x):
        k = int(x.sum().item()) % 3 + 1
        return x * k
    c = tg.compile(f)
    for values in ([1.0, 1.0], [1.0, 2.0], [2.0, 2.0], [1.0, 1.0], [0.5, 0.5]):
        x = tg.tensor(values)
        assert c(x).tolist() == f(x).tolist()
    assert c.stats["compiles"] == 4 and c.stats["cache_hits"] == 1    # [1, 1] again: a hit


class _PropertyConfig:
    def __init__(self):
        self._scale = 2.0

    @property
    def scale(self):
        return self._scale


PCFG = _PropertyConfig()


def test_a_config_field_behind_a_property():
    def f(x):
        return x * PCFG.scale
    c = tg.compile(f)
    x = tg.ones(1)
    c(x)
    PCFG._scale = 3.0
    try:
        assert c(x).item() == 3.0
    finally:
        PCFG._scale = 2.0


def test_log_guards_prints_every_guard_with_its_line(monkeypatch, capsys):
    import random
    monkeypatch.setenv("TRACEGRAD_LOG", "guards")

    def f(x):
        y = x * SCALE * CFG.scale
        if y.sum() > 0:
            y = y * random.randint(1, 1)
        return y
    tg.compile(f)(tg.ones(1))
    err = capsys.readouterr().err
    assert re.search(r"guard: the global SCALE == 2.0 \(read in test_compile_guards.py:\d+\)",
                     err)
    assert re.search(r"guard: the attribute CFG.scale == 2.0 \(read in "
                     r"test_compile_guards.py:\d+\)", err)
    assert re.search(r"guard: random.randint\(1, 1\) at test_compile_guards.py:\d+ returned 1",
                     err)
    assert re.search(r"guard: bool\(...\) at .*test_compile_guards.py:\d+ was True", err)


def test_a_bound_method_compiled_guards_its_self():
    class Scaler:
        def __init__(self):
            self.scale = 2.0

        def fwd(self, x):
            return x * self.scale
    s = Scaler()
    f = tg.compile(s.fwd)
    x = tg.ones(4)
    assert f(x).sum().item() == 8.0
    s.scale = 3.0
    assert f(x).sum().item() == 12.0


@pytest.mark.parametrize("make", [lambda: np.random.default_rng(0), lambda: random.Random(0),
                                  lambda: np.random.RandomState(0)],
                         ids=["Generator", "Random", "RandomState"])
def test_draws_from_a_generator_object_are_made_each_call(make):
    def scaled_by_a_draw(rng):
        def f(x):
            return x * rng.random()
        return f
    results = {}
    for name in ("compiled", "eager"):
        f = scaled_by_a_draw(make())
        if name == "compiled":
            f = tg.compile(f, max_variants=64)
        with warnings.catch_warnings():
            warnings.simplefilter("error")      # drawn again each call, not run eagerly
            results[name] = [f(tg.ones(2)).sum().item() for _ in range(5)]
    assert results["compiled"] == results["eager"]
    assert len(set(results["eager"])) == 5


MASK = np.array([1.0, 0.0, 1.0, 1.0])
BIG = np.ones(10_000)


def _masked(x):
    return x * tg.tensor(MASK)


def _big(x):
    return x * tg.tensor(BIG[:4])


def test_a_global_numpy_array_changed_in_place_retraces():
    f = tg.compile(_masked)
    x = tg.ones(4)
    assert f(x).sum().item() == 3.0
    MASK[1] = 5.0
    try:
        assert f(x).sum().item() == 8.0
        assert "the global MASK changed" in f.stats["retrace_reasons"][-1]
    finally:
        MASK[1] = 0.0


def test_a_large_global_array_read_as_a_constant_is_said():
    with pytest.warns(RuntimeWarning, match="the global BIG is a NumPy array of 10000"):
        tg.compile(_big)(tg.ones(4))


LAMBDA_CFG = types.SimpleNamespace(scale=2.0)


def test_a_lambda_reading_a_config_field_is_guarded():
    f = tg.compile(lambda x: x * LAMBDA_CFG.scale)
    x = tg.ones(3)
    try:
        assert f(x).sum().item() == 6.0
        LAMBDA_CFG.scale = 3.0
        assert f(x).sum().item() == 9.0
    finally:
        LAMBDA_CFG.scale = 2.0


class _Getter:
    def __init__(self):
        self.s = 2.0

    def get(self):
        return self.s


GETTER = _Getter()


def test_a_value_returned_by_a_method_of_an_object():
    def f(x):
        return x * GETTER.get()
    c = tg.compile(f)
    c(tg.ones(1))
    GETTER.s = 3.0
    try:
        assert c(tg.ones(1)).item() == 3.0
    finally:
        GETTER.s = 2.0


ALIAS_CFG = types.SimpleNamespace(s=2.0)


@pytest.mark.parametrize("body", ["getattr", "alias"])
def test_getattr_with_a_constant_name_and_a_local_alias_are_guarded(body):
    if body == "getattr":
        def f(x):
            return x * getattr(ALIAS_CFG, "s")
    else:
        def f(x):
            c = ALIAS_CFG
            return x * c.s
    c_f = tg.compile(f)
    x = tg.ones(2)
    try:
        assert c_f(x).sum().item() == 4.0
        ALIAS_CFG.s = 3.0
        assert c_f(x).sum().item() == 6.0
    finally:
        ALIAS_CFG.s = 2.0


TABLE = {"a": {"s": 2.0}, "fn": len}    # not plain (it holds a function): no whole-value guard
KEY = "a"


def test_a_subscript_with_a_key_from_a_variable():
    def f(x):
        return x * TABLE[KEY]["s"]
    c = tg.compile(f)
    c(tg.ones(1))
    TABLE["a"]["s"] = 3.0
    try:
        assert c(tg.ones(1)).item() == 3.0
    finally:
        TABLE["a"]["s"] = 2.0



def test_the_key_variable_of_a_subscript_is_guarded_too():
    global KEY

    def f(x):
        return x * TABLE[KEY]["s"]
    c = tg.compile(f)
    TABLE["b"] = {"s": 7.0}
    try:
        assert c(tg.ones(1)).item() == 2.0
        KEY = "b"
        assert c(tg.ones(1)).item() == 7.0
    finally:
        KEY = "a"
        del TABLE["b"]


# modules reached from a compiled step: mode, settings, children and hooks --------------

def _net():
    tg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.LeakyReLU(0.1),
                         nn.Dropout(0.0), nn.Linear(8, 2))


@pytest.mark.parametrize("reached", ["closure", "argument", "compiled module"])
def test_a_modules_mode_settings_and_children_are_guarded_however_it_is_reached(reached):
    # a whole training step traced in train mode, then model.eval(), a setting changed, a
    # child replaced: each call compares compiled against eager from the same state
    x, y = tg.randn(6, 4), tg.randn(6, 2)
    nets = [_net(), _net()]       # [eager, compiled], the same weights

    def step(model, x):
        return ((model(x) - y) ** 2).mean()
    if reached == "closure":
        f = tg.compile(lambda x: step(nets[1], x))

        def compiled(model, x):
            return f(x)
    elif reached == "argument":
        compiled = tg.compile(step)
    else:
        g = tg.compile(nets[1])

        def compiled(model, x):
            return ((g(x) - y) ** 2).mean()
    changes = [lambda m: None, lambda m: m.eval(), lambda m: setattr(m[3], "p", 0.5),
               lambda m: m.train(), lambda m: setattr(m[2], "negative_slope", 0.5),
               lambda m: setattr(m[1], "eps", 1.0), lambda m: m.__setitem__(2, nn.Tanh()),
               lambda m: None]
    for change in changes:
        for m in nets:
            change(m)
        tg.manual_seed(1)
        want = step(nets[0], x)
        tg.manual_seed(1)
        got = compiled(nets[1], x)
        np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
        np.testing.assert_allclose(nets[1][1].running_mean.numpy(),
                                   nets[0][1].running_mean.numpy(), rtol=1e-5, atol=1e-7)


def test_the_retrace_reasons_name_the_module_change():
    model = _net()
    f = tg.compile(lambda x: model(x).sum())
    x = tg.randn(6, 4)
    f(x)
    model.eval()
    f(x)
    model[1].eps = 0.5
    f(x)
    model[2] = nn.ReLU()
    f(x)
    reasons = f.stats["retrace_reasons"]
    assert reasons[0] == "Sequential.training changed: True -> False", reasons
    assert reasons[1] == "the attribute eps of BatchNorm1d changed: 1e-05 -> 0.5"
    assert reasons[2] == "the child '2' of Sequential was replaced or removed"


def test_a_forward_hook_runs_at_every_call_as_eager():
    # a hook is Python the graph cannot repeat (feature capture appends to a list): the call
    # runs eagerly from the hooked module, at every call, and a hook added later is seen
    for when in ("before", "after"):
        model = _net()
        model.eval()
        seen = []
        f = tg.compile(lambda x: model(x).sum())
        x = tg.randn(6, 4)

        def hook(module, inputs, out):
            seen.append(out.detach().clone())
            return out * 10
        if when == "before":
            model[0].register_forward_hook(hook)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            f(x)
            if when == "after":
                handle = model[0].register_forward_hook(hook)
            outs = [f(x).item() for _ in range(3)]
        want = model(x).sum().item()
        assert len(seen) == (5 if when == "before" else 4)      # 3 calls, 1 trace, eager
        np.testing.assert_allclose(outs, [want] * 3, rtol=1e-5)
        if when == "after":
            handle.remove()
            np.testing.assert_allclose(f(x).item(), model(x).sum().item(), rtol=1e-5)
            assert abs(f(x).item() - want) > 1e-3       # the hook's * 10 is gone


# optimizer structure, rebound globals, replaced parameters ------------------------------

def _train_steps(change, compiled):
    """A compiled (or eager) SGD-with-momentum step over a closure model, 3 calls, then
    ``change(model, opt)`` (which may return a new optimizer), then 3 calls."""
    tg.manual_seed(0)
    model = nn.Linear(3, 2)
    box = {"opt": tg.optim.SGD([model.weight], lr=0.1, momentum=0.9)}
    x = tg.randn(4, 3)

    def step(x):
        loss = model(x).pow(2).mean()
        loss.backward()
        box["opt"].step()
        box["opt"].zero_grad()
        return loss
    f = tg.compile(step) if compiled else step
    losses = [f(x).item() for _ in range(3)]
    new = change(model, box["opt"])
    if new is not None:
        box["opt"] = new
    losses += [f(x).item() for _ in range(3)]
    return losses, [p.detach().numpy().copy() for p in model.parameters()]


def _reload_with_lr(model, opt):
    state = opt.state_dict()
    state["param_groups"][0]["lr"] = 0.5
    opt.load_state_dict(state)


@pytest.mark.parametrize("change", [
    _reload_with_lr,
    lambda model, opt: opt.state.clear(),
    lambda model, opt: opt.state[model.weight].clear(),
    lambda model, opt: opt.add_param_group({"params": [model.bias], "lr": 0.5}),
    lambda model, opt: tg.optim.Adam(model.parameters(), lr=0.05),      # rebound
    lambda model, opt: setattr(model, "weight", nn.Parameter(tg.zeros(2, 3))),
], ids=["load_state_dict", "state.clear", "state popped", "add_param_group",
        "optimizer rebound", "parameter replaced"])
def test_a_compiled_step_follows_its_optimizer_and_parameters(change):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        want, want_params = _train_steps(change, compiled=False)
        got, got_params = _train_steps(change, compiled=True)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for a, b in zip(got_params, want_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


class _Mode:
    TRAIN, EVAL = "train", "eval"


ACT = tg.relu
MODEL = None


def _uses_globals(x):
    return ACT(MODEL(x)).sum()


def test_rebound_globals_and_module_attributes_retrace():
    # a global function, a global module, a module's function attribute and a tensor kept
    # as a plain attribute, each rebound: compared by identity, each retraces
    global ACT, MODEL
    tg.manual_seed(0)
    MODEL = nn.Linear(3, 3)
    f = tg.compile(_uses_globals)
    x = tg.randn(2, 3)
    try:
        for rebind in (lambda: None, lambda: globals().__setitem__("ACT", tg.sigmoid),
                       lambda: globals().__setitem__("MODEL", nn.Linear(3, 3))):
            rebind()
            np.testing.assert_allclose(f(x).item(), _uses_globals(x).item(), rtol=1e-6)
        reasons = f.stats["retrace_reasons"]
        assert reasons[0].startswith("the global ACT was rebound") and \
            reasons[1].startswith("the global MODEL was rebound"), reasons
    finally:
        ACT, MODEL = tg.relu, None

    class Rotary(nn.Module):
        def __init__(self):
            super().__init__()
            self.act_fn = tg.relu
            self.cos_cached = tg.ones(3)

        def forward(self, x):
            return self.act_fn(x * self.cos_cached)
    m = Rotary()
    g = tg.compile(lambda x: m(x).sum())
    for change in (lambda: None, lambda: setattr(m, "act_fn", tg.tanh),
                   lambda: setattr(m, "cos_cached", tg.full((3,), 2.0))):
        change()
        np.testing.assert_allclose(g(x).item(), m(x).sum().item(), rtol=1e-6)


def test_untying_a_tied_weight_retraces():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.head = nn.Linear(3, 5, bias=False)
            self.head.weight = self.emb.weight

        def forward(self, idx):
            return self.head(self.emb(idx)).sum()
    tg.manual_seed(0)
    m = Tied()
    f = tg.compile(lambda idx: m(idx))
    idx = tg.tensor([1, 2, 3])
    np.testing.assert_allclose(f(idx).item(), m(idx).item(), rtol=1e-6)
    m.head.weight = nn.Parameter(tg.zeros(5, 3))
    assert f(idx).item() == m(idx).item() == 0.0
