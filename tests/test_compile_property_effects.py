"""Random programs (``test_compile_property.programs``) with effects beyond their results,
compiled against eager: stores to outside state (a list they append to, a counter, a dict
item), an in-place write to an outside tensor followed by a raise on some calls, and first
calls made from several threads at once. After every call the outside state, the tensor
written and the exception (or its absence) must be eager's."""
import os
import threading
import types

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import tracegrad as tg
from test_compile_property import (
    MAX_EXAMPLES, PROBE, Program, Step, _assert_like_eager, _close, _compiled_from_source,
    _eager, _run, _values, programs,
)


class Stop(Exception):
    """What a program raises past its threshold."""


def _namespace():
    return {"tg": tg, "Stop": Stop, "LOG": [], "TABLE": {},
            "STATE": types.SimpleNamespace(count=0), "ACC": tg.zeros(2, dtype=tg.float64)}


# name -> (source lines over the value read {a} and the new value's index {k}, the effect)
EFFECTS = {
    "append": (["LOG.append({a})"], lambda ns, a: ns["LOG"].append(a)),
    "count": (["STATE.count += 1"], lambda ns, a: setattr(ns["STATE"], "count",
                                                           ns["STATE"].count + 1)),
    "item": (["TABLE['v{k}'] = {a}"], None),
    "raise": (["ACC.add_(1)", "if {a}.sum() > 0.5:", "    raise Stop('v{k}')"], None),
}


def _effect_fn(name, ns, i, k):
    def fn(env):
        a = env[i]
        if name == "item":
            ns["TABLE"][f"v{k}"] = a
        elif name == "raise":
            ns["ACC"].add_(1)
            if a.sum() > 0.5:
                raise Stop(f"v{k}")
        else:
            EFFECTS[name][1](ns, a)
        return a
    return fn


@st.composite
def programs_with_effects(draw):
    prog = draw(programs())
    eager_ns, compiled_ns = _namespace(), _namespace()
    steps = list(prog.steps)
    n_values = len(prog.in_shapes) + len(steps)
    shapes = list(prog.in_shapes) + [s.shape for s in steps]
    names = draw(st.lists(st.sampled_from(sorted(EFFECTS)), min_size=1, max_size=3))
    for name in names:
        k = n_values
        i = draw(st.integers(0, k - 1))
        lines = [line.format(a=f"v{i}", k=k) for line in EFFECTS[name][0]] + [f"v{k} = v{i}"]
        steps.append(Step(k, lines, _effect_fn(name, eager_ns, i, k), shapes[i], 2.0))
        shapes.append(shapes[i])
        n_values += 1
    out = Program(prog.in_shapes, prog.requires_grad, steps, prog.outputs, prog.seed,
                  prog.n_branches)
    return out, eager_ns, compiled_ns


def _state(ns):
    return ([t.detach().clone() for t in ns["LOG"]], ns["STATE"].count,
            {k: v.detach().clone() for k, v in ns["TABLE"].items()}, ns["ACC"].clone())


def _same_state(a, b, where):
    (la, ca, ta, aa), (lb, cb, tb, ab) = a, b
    assert len(la) == len(lb) and ca == cb and sorted(ta) == sorted(tb), where
    for x, y in zip(la, lb):
        _close(x, y, f"{where}: a logged value")
    for key in ta:
        _close(ta[key], tb[key], f"{where}: TABLE[{key!r}]")
    _close(aa, ab, f"{where}: ACC")


def _outcome(fn, arrays, prog):
    try:
        return _run(fn, arrays, prog.requires_grad), None
    except Stop as e:
        return None, str(e)


@settings(max_examples=max(MAX_EXAMPLES // 5, 10), deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(case=programs_with_effects())
def test_random_programs_with_stores_and_raises_compile_like_eager(case, backend):
    prog, eager_ns, compiled_ns = case
    fn = prog.function()
    compiled = _compiled_from_source(prog, compiled_ns)
    for call in range(4):
        arrays = _values(prog, call)
        PROBE.start()
        try:
            want, want_error = _outcome(fn, arrays, prog)
        finally:
            PROBE.stop()
        if PROBE.near_kink:
            assume(call > 0)
            break
        got, got_error = _outcome(compiled, arrays, prog)
        assert got_error == want_error, f"call {call}"
        if want is not None:
            _assert_like_eager(got, want, f"call {call}: ")
        _same_state(_state(compiled_ns), _state(eager_ns), f"after call {call}")


@settings(max_examples=max(MAX_EXAMPLES // 10, 10), deadline=None, database=None,
          derandomize=not os.environ.get("TRACEGRAD_PROPERTY_RANDOM"),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.filter_too_much])
@given(prog=programs())
def test_random_programs_first_called_from_threads_compile_once(prog):
    fn = prog.function()
    arrays = _values(prog, 0)
    want = _eager(fn, arrays, prog)
    assume(not PROBE.near_kink)
    compiled = tg.compile(fn)
    n = 6
    results, errors = [None] * n, []
    barrier = threading.Barrier(n)

    def call(t):
        barrier.wait()
        try:
            results[t] = _run(compiled, arrays, prog.requires_grad)
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=call, args=(t,)) for t in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for t in range(n):
        _assert_like_eager(results[t], want, f"thread {t}: ")
    assert compiled.stats["compiles"] == 1 and compiled.stats["fallbacks"] == 0, \
        compiled.explain()


pytestmark = pytest.mark.filterwarnings("ignore:tracegrad.compile")
