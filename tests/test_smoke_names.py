"""A name tracegrad exports must work: every present name of ``benchmarks/coverage.py``'s
namespaces (the optimizer ones aside, which the optim sweep covers) is exercised by the
OpInfo sweep, the ModuleInfo sweep, a variant check or a smoke call (``smoke_names``
classifies them), so a stub cannot count as coverage.

- ``test_every_present_name_is_covered`` fails listing any present name none covers, and
  any smoke entry for a name that is not present (a stale entry); the names are the ones
  coverage.py counts (``test_present_names_are_coverage_reports``), and a stub added for a
  missing name shows as uncovered (``test_a_stub_counts_as_uncovered``);
- ``test_variant`` calls an alias, aten name, method or in-place spelling of a swept
  OpInfo entry on the entry's first float32 samples, torch's spelling against tracegrad's;
- ``test_smoke`` runs each ``smoke_calls`` entry on both libraries and compares: tensors by
  shape, dtype and values (the entry's rtol/atol), floats within them, everything else
  (bools, ints, dtypes, sizes, strings) by equality; an ``own`` entry runs on tracegrad
  alone and must return True.
"""
import math
import warnings

import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")

import torch  # noqa: E402 - after the skips

import opinfo_convert as convert  # noqa: E402
import smoke_calls  # noqa: E402
import smoke_names  # noqa: E402
import tracegrad as tg  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore")   # deprecated spellings warn on both sides

SMOKE = smoke_calls.table()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    KINDS = smoke_names.classify(SMOKE)


def _id(key):
    """``torch.is_tensor``, ``Tensor.numpy``, ``nn.init.eye_``..."""
    namespace, name = key
    prefix = {"torch (functions)": "torch"}.get(namespace, namespace.removeprefix("torch."))
    return f"{prefix}.{name}"


def test_present_names_are_coverage_reports():
    """smoke_names selects the names as benchmarks/coverage.py counts them."""
    counted = {ns: n_present for ns, _, _, n_present, _, _ in
               smoke_names.coverage_module().measure()}
    listed = {ns: len(names) for ns, (_, _, names) in smoke_names.present_names().items()}
    assert listed == {ns: n for ns, n in counted.items()
                      if ns not in smoke_names.SKIPPED_NAMESPACES}


def test_every_present_name_is_covered():
    uncovered = sorted(_id(key) for key, (kind, _) in KINDS.items() if kind == "uncovered")
    assert not uncovered, f"present names no sweep or smoke call exercises: {uncovered}"
    stale = sorted(_id(key) for key in SMOKE if key not in KINDS)
    assert not stale, f"smoke entries for names that are not present: {stale}"


def test_a_stub_counts_as_uncovered(monkeypatch):
    """A name torch.nn.functional has and tracegrad lacks, added as a stub, is present to
    coverage.py and uncovered here."""
    missing = {ns: names for ns, _, _, _, _, names in smoke_names.coverage_module().measure()}
    name = missing["torch.nn.functional"][0]
    monkeypatch.setattr(tg.nn.functional, name, lambda *args, **kwargs: None, raising=False)
    assert smoke_names.classify(SMOKE)[("torch.nn.functional", name)] == ("uncovered", None)


def _variant_params():
    params = []
    for key, (kind, detail) in sorted(KINDS.items()):
        if kind == "variant":
            reason = smoke_names.KNOWN_VARIANTS.get(key)
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            params.append(pytest.param(key, detail, marks=marks, id=_id(key)))
    return params


@pytest.mark.parametrize("key, spellings", _variant_params())
def test_variant(key, spellings):
    namespace, name = key
    checked = sum(smoke_names.variant_check(namespace, name, eid, how) for eid, how in spellings)
    assert checked, (f"{_id(key)}: PyTorch's spelling rejects every sample of "
                     f"{[eid for eid, _ in spellings]}: give it a smoke call")


def _smoke_params():
    params = []
    for key, entry in sorted(SMOKE.items()):
        marks = [pytest.mark.xfail(reason=entry.xfail, strict=True)] if entry.xfail else []
        params.append(pytest.param(key, marks=marks, id=_id(key)))
    return params


@pytest.mark.parametrize("key", _smoke_params())
def test_smoke(key):
    entry = SMOKE[key]
    if entry.own:
        assert entry.call(tg) is True, f"{_id(key)}: the check of tracegrad's result failed"
        return
    expected = entry.call(torch)
    actual = entry.call(tg)
    _compare(expected, actual, entry.rtol, entry.atol, _id(key))


def _compare(expected, actual, rtol, atol, where):
    want, got = convert.leaves([expected]), convert.leaves([actual])
    assert len(want) == len(got), f"{where}: {len(got)} results, expected {len(want)}"
    for i, (w, g) in enumerate(zip(want, got)):
        at = f"{where} result {i}"
        if isinstance(w, float) and not isinstance(g, bool):
            assert isinstance(g, (int, float)), f"{at}: got {g!r}, expected the float {w!r}"
            assert math.isclose(w, g, rel_tol=rtol, abs_tol=atol), f"{at}: {g!r} != {w!r}"
        else:
            convert.compare_leaf(w, g, rtol, atol, True, at)
