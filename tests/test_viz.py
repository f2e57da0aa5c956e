"""make_dot: torchviz's drawing of the autograd graph, as dot text (rendering needs Graphviz)."""
import re
import shutil
import sys

import pytest

import tracegrad as tg
from tracegrad.viz import Digraph, make_dot

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot")


def _graph(dot):
    """(labels by node id, fill colours by node id, edges as (tail label, head label, attrs))."""
    labels, fills, edges = {}, {}, []
    for line in dot.source.split("\n"):
        m = re.fullmatch(r'\t(\w+) \[label=("(?:[^"\\]|\\.)*"|\w+)(?: fillcolor=(\w+))?\]', line)
        if m:
            labels[m[1]] = m[2].strip('"').replace("\\n", "\n")
            fills[m[1]] = m[3]
            continue
        m = re.fullmatch(r"\t(\w+) -> (\w+)(?: \[(.*)\])?", line)
        if m:
            edges.append((m[1], m[2], m[3] or ""))
    return labels, fills, [(labels[a], labels[b], attrs) for a, b, attrs in edges]


def test_dot_text_is_pinned_for_a_small_graph():
    x = tg.ones(3, 4, requires_grad=True)
    dot = make_dot((x ** 2).sum(), params={"x": x})
    assert dot.source == (
        "digraph {\n"
        '\tgraph [size="12,12"]\n'
        "\tnode [align=left fontname=monospace fontsize=10 height=0.2 ranksep=0.1 shape=box "
        "style=filled]\n"
        '\tn0 [label="\\n ()" fillcolor=darkolivegreen1]\n'
        "\tn1 [label=SumBackward0]\n"
        "\tn2 -> n1\n"
        "\tn2 [label=PowBackward0]\n"
        "\tn3 -> n2\n"
        '\tn4 [label="x\\n (3, 4)" fillcolor=lightblue]\n'
        "\tn4 -> n3\n"
        "\tn3 [label=AccumulateGrad]\n"
        "\tn1 -> n0\n"
        "}\n")


def test_nodes_edges_and_parameter_names():
    x = tg.ones(3, 4, requires_grad=True)
    w = tg.ones(4, 5, requires_grad=True)
    y = (x ** 2).mm(w).sum()
    labels, fills, edges = _graph(make_dot(y, params={"x": x, "weight": w}))
    assert sorted(labels.values()) == sorted([
        "\n ()", "SumBackward0", "MmBackward0", "PowBackward0", "AccumulateGrad",
        "AccumulateGrad", "x\n (3, 4)", "weight\n (4, 5)"])
    edge_set = {(a, b) for a, b, _ in edges}
    assert {("MmBackward0", "SumBackward0"), ("PowBackward0", "MmBackward0"),
            ("AccumulateGrad", "PowBackward0"), ("AccumulateGrad", "MmBackward0"),
            ("x\n (3, 4)", "AccumulateGrad"), ("weight\n (4, 5)", "AccumulateGrad"),
            ("SumBackward0", "\n ()")} == edge_set
    by_label = {labels[k]: fills[k] for k in labels}
    assert by_label["x\n (3, 4)"] == "lightblue" and by_label["\n ()"] == "darkolivegreen1"


def test_leaves_without_params_are_unnamed():
    x = tg.ones(2, requires_grad=True)
    labels, _, _ = _graph(make_dot((x * 2).sum()))
    assert "\n (2)" in labels.values()
    with pytest.raises(TypeError, match="params"):
        make_dot(x * 2, params={"x": 1.0})


def test_show_saved_draws_saved_tensors_with_their_names_and_shapes():
    x = tg.ones(3, 4, requires_grad=True)
    w = tg.ones(4, 5, requires_grad=True)
    y = (x ** 2).mm(w)
    labels, fills, edges = _graph(make_dot(y, show_saved=True))
    saved = {(a, b) for a, b, attrs in edges if attrs == "dir=none"}
    assert ("MmBackward0", "self\n (3, 4)") in saved
    assert ("MmBackward0", "mat2\n (4, 5)") in saved
    assert ("PowBackward0", "self\n (3, 4)") in saved
    assert all(fills[k] == "orange" for k, v in labels.items() if v.startswith(("self", "mat2")))
    plain, _, _ = _graph(make_dot(y))
    assert not any(v.startswith("self") for v in plain.values())


def test_show_attrs_lists_saved_attributes():
    x = tg.ones(3, requires_grad=True)
    labels, _, _ = _graph(make_dot(x ** 3, show_attrs=True))
    pow_label = next(v for v in labels.values() if v.startswith("PowBackward0"))
    assert re.search(r"exponent: +3", pow_label) and "[saved tensor]" in pow_label
    long, _, _ = _graph(make_dot(x ** 3, show_attrs=True, max_attr_chars=5))
    assert "[s..." in next(v for v in long.values() if v.startswith("PowBackward0"))


def test_several_outputs_and_a_view_base():
    x = tg.ones(3, 4, requires_grad=True)
    y = x * 2
    v = y[0]
    labels, fills, edges = _graph(make_dot((v, y.sum())))
    assert ("\n (3, 4)", "\n (4)", "style=dotted") in edges       # the view's base
    assert list(labels.values()).count("MulBackward0") == 1        # shared node drawn once


def test_custom_function_saved_tensors_are_drawn():
    class Exp(tg.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            result, = ctx.saved_tensors
            return grad_output * result

    a = tg.ones(2, requires_grad=True)
    labels, fills, edges = _graph(make_dot(Exp.apply(a)))
    assert ("\n (2)", "ExpBackward", "dir=none") in edges
    assert "orange" in fills.values()


def test_labels_and_ids_are_quoted_for_dot():
    g = Digraph()
    g.node("a b", 'say "hi"\nnow')
    g.node("graph", "node")
    g.edge("a b", "graph")
    assert '\t"a b" [label="say \\"hi\\"\\nnow"]' in g.source
    assert '\t"graph" [label="node"]' in g.source
    assert '\t"a b" -> "graph"' in g.source


def test_rendering_without_graphviz_says_what_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)      # import graphviz fails
    monkeypatch.setattr(shutil, "which", lambda name: None)
    x = tg.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"graphviz.*dot|dot.*graphviz"):
        make_dot(x * 2).pipe("svg")


@needs_dot
def test_render_writes_svg(tmp_path):
    x = tg.ones(2, requires_grad=True)
    out = make_dot((x * 2).sum(), params={"x": x}).render(str(tmp_path / "graph"), format="svg")
    with open(out) as f:
        assert "<svg" in f.read()


@pytest.mark.skipif(sys.platform == "win32", reason="a shell script stands in for dot")
def test_render_shells_out_to_dot(tmp_path, monkeypatch):
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\n[ \"$1\" = -Tsvg ] || exit 3\ncat > /dev/null\necho '<svg/>'\n")
    fake.chmod(0o755)
    monkeypatch.setitem(sys.modules, "graphviz", None)
    monkeypatch.setattr(shutil, "which", lambda name: str(fake) if name == "dot" else None)
    x = tg.ones(2, requires_grad=True)
    out = make_dot((x * 2).sum()).render(str(tmp_path / "g"), format="svg", cleanup=True)
    assert out == str(tmp_path / "g.svg")
    with open(out) as f:
        assert f.read().strip() == "<svg/>"
    assert not (tmp_path / "g").exists()          # cleanup removed the dot source
    with pytest.raises(RuntimeError, match="dot -Tpng failed"):
        make_dot((x * 2).sum()).pipe("png")


def test_a_long_chain_is_not_limited_by_recursion():
    x = tg.ones(2, requires_grad=True)
    y = x
    for _ in range(3000):
        y = y * 1.0
    labels, _, edges = _graph(make_dot(y.sum()))
    assert list(labels.values()).count("MulBackward0") == 3000
    assert len(edges) == 3000 + 3          # the chain, sum -> output, leaf -> acc -> first mul


def test_a_compiled_functions_graph_is_drawn():
    @tg.compile
    def f(x, w):
        hidden = tg.tanh(x * w)
        return hidden.sum()

    f(tg.ones(3), tg.ones(3, requires_grad=True))
    src = tg.viz.make_dot_from_graph(f).source
    assert "forward: x" in src and "backward: d_out" in src
    assert "tanh\\nhidden: f32[3]" in src and "forward output 0" in src
    assert src.count("->") >= 6
