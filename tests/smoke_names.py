"""Which of tracegrad's present PyTorch names are exercised by what.

``benchmarks/coverage.py`` counts a name as present when tracegrad has an attribute of
that name; this module says which check makes that name do real work, so a stub cannot
count. Every present name of a namespace (the optimizer ones aside: the optim sweep owns
them) is one of:

- ``opinfo``: the OpInfo sweep (``opinfo_sweep``) calls this very tracegrad callable on
  PyTorch's samples (the entry's name, resolved as the sweep resolves it);
- ``variant``: the name is another spelling of a swept entry (an alias, the aten name, the
  method variant ``x.name``, the in-place variant ``name_``) under a different tracegrad
  object: ``test_smoke_names`` calls it on the entry's first samples, PyTorch's name of the
  same spelling against tracegrad's (``variant_check`` below);
- ``moduleinfo``: an ``nn`` module class that the ModuleInfo sweep builds and runs;
- ``smoke``: a hand-written call in ``smoke_calls*.SMOKE``;
- ``uncovered``: none of these; ``test_smoke_names`` fails listing it.

torch is imported lazily; call these only where it is installed.
"""
import functools
import importlib.util
import inspect
import itertools
from pathlib import Path

import opinfo_sweep as sweep
import opinfo_convert as convert
import tracegrad as tg

_coverage_path = Path(__file__).resolve().parent.parent / "benchmarks" / "coverage.py"
SKIPPED_NAMESPACES = ("torch.optim", "torch.optim.lr_scheduler")   # the optim sweep's
# OpInfo name prefix -> namespace of coverage.py
PREFIXES = {"nn.functional.": "torch.nn.functional", "linalg.": "torch.linalg",
            "special.": "torch.special"}
# entries whose opinfo_sweep adapter calls an in-place method, not the entry's name
ADAPTED_METHODS = {"zero_": "zero_", "normal[in_place]": "normal_",
                   **{name: f"{name}_" for name in sweep.UNNAMED if name != "slice"}}
# (namespace, name) -> why its variant check fails today; the test marks it xfail (strict)
KNOWN_VARIANTS = {}
VARIANT_SAMPLES = 4     # samples per variant check: enough to see a wrong result


def coverage_module():
    """``benchmarks/coverage.py``, loaded by path ("coverage" is also a package name)."""
    spec = importlib.util.spec_from_file_location("tracegrad_coverage_report", _coverage_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def present_names():
    """``{namespace: (torch object, tracegrad object, [present names])}`` as coverage.py
    selects them (its helpers, its rules), optimizer namespaces left out."""
    import torch
    report = coverage_module()
    found = {}
    for theirs_path, ours_path, names_of in report.NAMESPACES:
        if theirs_path in SKIPPED_NAMESPACES:
            continue
        theirs = report._resolve(theirs_path.split(" ")[0])
        ours = report._resolve(ours_path)
        names = report._public(theirs, names_of(theirs) if names_of else None)
        if theirs is torch:
            names = [n for n in names if _is_function(getattr(torch, n))]
        if theirs is torch.Tensor:
            names = [n for n in dir(torch.Tensor) if not n.startswith("_")]
        present = [n for n in names if not report._reason(n) and hasattr(ours, n)]
        found[theirs_path] = (theirs, ours, present)
    return found


def _is_function(obj):
    """coverage.py's test for a function of the torch namespace (not a class or dtype)."""
    return inspect.isfunction(obj) or inspect.isbuiltin(obj) or type(obj).__name__ in (
        "builtin_function_or_method", "function", "_VariableFunctionsClass")


def split_dotted(name):
    """(namespace, name) of an OpInfo or alias name: ``linalg.norm`` is torch.linalg's."""
    for prefix, namespace in PREFIXES.items():
        if name.startswith(prefix):
            return namespace, name[len(prefix):]
    if "." in name:
        return None, name
    return "torch (functions)", name


def direct_target(eid, opinfo):
    """(namespace, name) of the tracegrad object the OpInfo sweep calls for the entry:
    the method its adapter calls (ADAPTED_METHODS), else ``tracegrad.<name>`` if it has
    one, else the Tensor method (as ``opinfo_sweep.resolve`` looks it up)."""
    if eid in ADAPTED_METHODS:
        return "torch.Tensor", ADAPTED_METHODS[eid]
    namespace, name = split_dotted(opinfo.name)
    if namespace == "torch (functions)" and not callable(getattr(tg, name, None)):
        return "torch.Tensor", name
    return namespace, name


def spellings(opinfo):
    """Every (namespace, name, kind) under which PyTorch spells the entry's op: kind is
    ``function`` (called as ``namespace.name(input, *args)``) or ``method``."""
    names = [opinfo.name, opinfo.aten_name] + [alias.name for alias in opinfo.aliases]
    found = []
    for dotted in names:
        namespace, name = split_dotted(dotted)
        if namespace is None:
            continue
        found.append((namespace, name, "function"))
        found.append((namespace, name + "_", "function"))
        if namespace == "torch (functions)":
            found += [("torch.Tensor", name, "method"), ("torch.Tensor", name + "_", "method")]
    return found


@functools.lru_cache(maxsize=None)
def swept_entries():
    """The OpInfo entries the sweep runs (in scope, with a tracegrad counterpart)."""
    return {eid: (opinfo, fn) for eid, (opinfo, fn) in sweep.entries().items()
            if fn is not None}


def module_classes():
    """Class names of the nn modules the ModuleInfo sweep runs."""
    import moduleinfo_sweep
    return {info.module_cls.__name__ for info, cls in moduleinfo_sweep.entries().values()
            if cls is not None}


def classify(smoke_names=()):
    """``{(namespace, name): (kind, detail)}`` for every present name: kind as the module
    docstring lists; detail the OpInfo entry id (``opinfo``), the list of (entry id,
    spelling kind) that spell the name (``variant``: the test tries them all), or None.
    ``smoke_names``: the (namespace, name) pairs of the smoke table: a smoke call stands
    for a name no sweep calls, in place of a variant check where PyTorch's spelling takes
    none of the entry's samples."""
    present = present_names()
    wanted = {(ns, name) for ns, (_, _, names) in present.items() for name in names}
    kinds = {}
    entries = swept_entries()
    for eid, (opinfo, _) in entries.items():
        target = direct_target(eid, opinfo)
        if target in wanted:
            kinds.setdefault(target, ("opinfo", eid))
    for eid, (opinfo, _) in entries.items():
        for namespace, name, how in spellings(opinfo):
            key = (namespace, name)
            if key in wanted and kinds.get(key, ("variant",))[0] == "variant":
                kinds.setdefault(key, ("variant", []))[1].append((eid, how))
    for name in module_classes():
        if ("torch.nn", name) in wanted:
            kinds.setdefault(("torch.nn", name), ("moduleinfo", None))
    for key in set(smoke_names) & wanted:       # a smoke call replaces a variant check
        if kinds.get(key, ("variant",))[0] == "variant":
            kinds[key] = ("smoke", None)
    for key in wanted - set(kinds):
        kinds[key] = ("uncovered", None)
    return kinds


# ---- the variant check -----------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _first_samples(eid):
    """The entry's first 16 float32 samples, from a fixed seed. ``sample_inputs_func``
    directly: ``sample_inputs`` inspects the whole call stack on every call (to find the
    test function), which under pytest costs a quarter of a second."""
    import torch
    opinfo = swept_entries()[eid][0]
    torch.manual_seed(0)
    generated = opinfo.sample_inputs_func(opinfo, "cpu", torch.float32, False)
    return tuple(itertools.islice(generated, 16))


def _library_attr(library, namespace, name):
    """``namespace``'s ``name`` in torch or tracegrad (``library`` is either module)."""
    path = {"torch (functions)": "", "torch.Tensor": "Tensor"}.get(
        namespace, namespace.removeprefix("torch."))
    target = library
    for part in filter(None, path.split(".")):
        target = getattr(target, part)
    return getattr(target, name)


def _call(library, namespace, name, how, inp, args, kwargs):
    if how == "method":
        return getattr(inp, name)(*args, **kwargs)
    return _library_attr(library, namespace, name)(inp, *args, **kwargs)


def variant_check(namespace, name, eid, how):
    """Call ``namespace.name`` of both libraries on the first VARIANT_SAMPLES float32
    samples of the entry on which PyTorch's spelling runs; compare the outputs and the
    input after the call (an in-place spelling must write it). Returns how many samples
    were compared."""
    import torch
    opinfo = swept_entries()[eid][0]
    tg.manual_seed(0)
    checked = 0
    for index, sample in enumerate(_first_samples(eid)):
        if how == "method" and name.endswith("_") and sample.broadcasts_input:
            continue    # PyTorch resizes the input there (addbmm_); its own tests skip it
        tg_inp, tg_args, tg_kwargs = convert.convert_sample(sample)
        inp = sample.input.clone() if isinstance(sample.input, torch.Tensor) else sample.input
        try:
            expected = _call(torch, namespace, name, how, inp, sample.args, sample.kwargs)
        except Exception:  # noqa: BLE001 - a sample PyTorch's spelling rejects is skipped
            continue
        actual = _call(tg, namespace, name, how, tg_inp, tg_args, tg_kwargs)
        rtol, atol = sweep.float32_tolerance(opinfo, expected)
        values = sweep.values_defined(opinfo, sample)
        where = f"{namespace}.{name} ({how}) on {eid} sample {index}"
        convert.compare_outputs((expected, inp), (actual, tg_inp), rtol, atol, values, where)
        checked += 1
        if checked == VARIANT_SAMPLES:
            break
    return checked
