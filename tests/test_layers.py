"""The layers of DESIGN.md, written as import-linter contracts in ``pyproject.toml``.

The contracts hold on the package as it is, and they bite: one upward import added to a
copy of the package (the primitive table reaching the runtime, codegen reaching nn) breaks
them. ``nn.functional`` is a package whose parts share helpers through ``_base``, never
through the package itself, so no import cycle runs through ``F``.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
CONTRACTS = ROOT / "pyproject.toml"


def lint(root):
    """``lint-imports`` with the repository's contracts over the ``tracegrad`` found under
    ``root`` (the checkout, or a copy of it): ``(exit status, report)``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
         "--no-logo", "--no-cache", str(CONTRACTS)],
        cwd=root, env=env, capture_output=True, text=True, timeout=120)
    return run.returncode, run.stdout + run.stderr


def test_the_contracts_hold():
    status, report = lint(ROOT)
    assert status == 0, report
    assert " kept, 0 broken." in report, report


@pytest.mark.parametrize("path, upward, broken", [
    ("ops/shape_ops.py", "tracegrad.runtime.compiled",
     ["Layers:", "The eager core never imports the compiler"]),
    ("codegen/names.py", "tracegrad.nn.functional", ["Code generation never imports nn"]),
])
def test_an_upward_import_breaks_the_contracts(tmp_path, path, upward, broken):
    copy = tmp_path / "tracegrad"
    shutil.copytree(ROOT / "tracegrad", copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / path
    target.write_text(target.read_text() + f"\nimport {upward}  # noqa: E402,F401\n")
    status, report = lint(tmp_path)
    assert status != 0, report
    importer = "tracegrad." + path[:-len(".py")].replace("/", ".")
    assert f"{importer} -> {upward}" in report, report     # the copy was read, not the checkout
    for name in broken:
        assert f"{name}" in report.split("Broken contracts")[1], report


def test_the_parts_of_functional_import_no_package_facade():
    """The parts import ``_base`` and each other, never ``tracegrad.nn.functional`` (its
    ``__init__``) nor ``tracegrad`` itself, so they form no cycle with ``F``."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("tracegrad", cache_dir=None)
    package = "tracegrad.nn.functional"
    parts = graph.find_children(package)
    assert f"{package}._base" in parts and len(parts) > 10
    for part in sorted(parts):
        imported = graph.find_modules_directly_imported_by(part)
        assert package not in imported and "tracegrad" not in imported, part
    assert not graph.find_shortest_chain(importer=f"{package}._base", imported=package)


def test_every_package_is_installed():
    """pyproject's setuptools ``packages`` lists every package folder of ``tracegrad`` (an
    install from a wheel would leave out one it misses)."""
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads(CONTRACTS.read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "tracegrad").rglob("__init__.py")}
    assert found == listed, {"not listed": sorted(found - listed),
                             "not a package": sorted(listed - found)}


def _import_cycles(graph):
    """The strongly connected components of more than one module in ``graph``, over the
    modules that are no package (a package's ``__init__`` re-exports its children, which
    import from their siblings, not from it); imports inside functions count."""
    modules = {m for m in graph.modules
               if not any(o.startswith(m + ".") for o in graph.modules)}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):       # Tarjan's algorithm, iterative: the chains are long
        work = [(v, iter(sorted(graph.find_modules_directly_imported_by(v) & modules)))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)
                                                & modules))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.add(w)
                        if w == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    return found


def test_no_import_cycle():
    """No two modules of the package import each other, directly or through others: the
    eager core is layers (the "eager-core" contract), a lower module reaching up only through
    a slot that the higher one fills when it is imported (``_hooks.apply_plain``,
    ``autograd.graph.run_backward``, ``prim_node.sum_to_shape``'s ops) or a method it installs
    on ``Tensor`` (``Tensor(...)``, ``to``)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("tracegrad", cache_dir=None)
    assert _import_cycles(graph) == []
