"""torchviz's ``make_dot(loss, params=dict(model.named_parameters()))``: the autograd graph.

``make_dot`` returns a ``Digraph`` whose ``.source`` is Graphviz dot text;
for ``(x ** 2).sum()`` with ``params={"x": x}``:

    digraph {
        graph [size="12,12"]
        node [align=left fontname=monospace fontsize=10 height=0.2 ranksep=0.1 shape=box ...]
        n0 [label="\\n ()" fillcolor=darkolivegreen1]
        n1 [label=SumBackward0]
        n2 -> n1
        n2 [label=PowBackward0]
        n3 -> n2
        n4 [label="x\\n (3, 4)" fillcolor=lightblue]
        n4 -> n3
        n3 [label=AccumulateGrad]
        n1 -> n0
    }

Colours are torchviz's: outputs darkolivegreen1 (a view's base darkolivegreen3),
leaves lightblue, saved tensors orange (``show_saved=True``). Node ids are
assigned in visiting order, so the text is deterministic. ``render`` and
``pipe`` need Graphviz: the ``graphviz`` Python package when it is installed,
else the ``dot`` program; the text itself needs neither.

``_DotBuilder`` is the one place that knows the styles: ``op`` (a function
box), ``value`` (a tensor: output, parameter, saved, base) and ``edge``,
keyed by any Python object. An IR graph (nodes with op names, inputs and
shapes) can be drawn with the same three calls.
"""
import os
import shutil
import subprocess

__all__ = ["make_dot", "make_dot_from_graph", "Digraph"]

SAVED_PREFIX = "_saved_"
_FILL = {"output": "darkolivegreen1", "base": "darkolivegreen3", "param": "lightblue",
         "saved": "orange"}


_KEYWORDS = {"node", "edge", "graph", "digraph", "subgraph", "strict"}


def _quote(s):
    """A dot ID: bare when it is a plain identifier or number, else a quoted string."""
    s = str(s)
    if s.lower() not in _KEYWORDS and s and (
            s.replace("_", "a").isalnum() and not s[0].isdigit()
            or s.replace(".", "", 1).isdigit()):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _attrs(attrs):
    return " ".join(f"{k}={_quote(v)}" for k, v in attrs.items() if v is not None)


class Digraph:
    """The part of ``graphviz.Digraph`` that ``make_dot`` uses: ``node``, ``edge``, ``body``,
    ``graph_attr``, ``source``, ``render`` and ``pipe``."""

    def __init__(self, name=None, comment=None, format="svg", node_attr=None, graph_attr=None,
                 edge_attr=None):
        self.name, self.comment, self.format = name, comment, format
        self.node_attr = dict(node_attr or {})
        self.graph_attr = dict(graph_attr or {})
        self.edge_attr = dict(edge_attr or {})
        self.body = []

    def node(self, name, label=None, **attrs):
        self.body.append(f"\t{_quote(name)} [{_attrs({'label': label, **attrs})}]")

    def edge(self, tail_name, head_name, **attrs):
        a = _attrs(attrs)
        self.body.append(f"\t{_quote(tail_name)} -> {_quote(head_name)}" + (f" [{a}]" if a
                                                                            else ""))

    @property
    def source(self):
        lines = [f"// {self.comment}"] if self.comment else []
        lines.append(f"digraph {_quote(self.name)} {{" if self.name else "digraph {")
        for kind, attrs in (("graph", self.graph_attr), ("node", self.node_attr),
                            ("edge", self.edge_attr)):
            if attrs:
                lines.append(f"\t{kind} [{_attrs(dict(sorted(attrs.items())))}]")
        lines += self.body
        lines.append("}")
        return "\n".join(lines) + "\n"

    def __str__(self):
        return self.source

    def pipe(self, format=None):
        """The rendered graph as bytes (``format``: "svg", "png", "pdf", ...)."""
        format = format or self.format
        try:
            import graphviz
        except ImportError:
            graphviz = None
        if graphviz is not None:
            return graphviz.Source(self.source).pipe(format=format)
        dot = shutil.which("dot")
        if dot is None:
            raise RuntimeError(
                f"Digraph.pipe(format={format!r}): rendering needs Graphviz, and neither the "
                f"'graphviz' Python package nor the 'dot' program was found. Install Graphviz "
                f"(apt install graphviz, brew install graphviz, conda install graphviz) or "
                f"write .source to a .dot file and render it elsewhere.")
        done = subprocess.run([dot, f"-T{format}"], input=self.source.encode(),
                              capture_output=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"Digraph.pipe: dot -T{format} failed: "
                               f"{done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    def render(self, filename=None, directory=None, format=None, view=False, cleanup=False):
        """Write the dot text to ``filename`` and the rendering beside it (``filename.svg``);
        returns the rendering's path. ``cleanup`` removes the dot file afterwards."""
        format = format or self.format
        filename = filename or (self.name or "Digraph") + ".gv"
        path = os.path.join(directory, filename) if directory else filename
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        data = self.pipe(format)
        with open(path, "w") as f:
            f.write(self.source)
        out = f"{path}.{format}"
        with open(out, "wb") as f:
            f.write(data)
        if cleanup:
            os.remove(path)
        if view:
            _open_file(out)
        return out

    def _repr_svg_(self):
        try:
            return self.pipe("svg").decode()
        except RuntimeError:
            return None     # no Graphviz: notebooks fall back to the text repr


def _open_file(path):
    opener = shutil.which("xdg-open") or shutil.which("open")
    if opener:
        subprocess.Popen([opener, path])


class _DotBuilder:
    """Nodes and edges keyed by Python objects (by identity), named n0, n1, ... in order."""

    def __init__(self, dot):
        self.dot = dot
        self.names = {}
        self.keep = []      # keys stay alive so that their ids are not reused while building

    def name(self, key):
        k = id(key)
        if k not in self.names:
            self.names[k] = f"n{len(self.names)}"
            self.keep.append(key)
        return self.names[k]

    def op(self, key, label):
        self.dot.node(self.name(key), label)

    def value(self, key, label, role):
        self.dot.node(self.name(key), label, fillcolor=_FILL[role])

    def edge(self, src, dst, **attrs):
        self.dot.edge(self.name(src), self.name(dst), **attrs)


def _size_to_str(shape):
    return "(" + ", ".join(str(int(v)) for v in shape) + ")"


def _saved_attrs(fn):
    """``(name, value)`` of each ``_saved_*`` attribute of a backward node, sorted as ``dir``."""
    names = {a[len(SAVED_PREFIX):] for a in dir(fn) if a.startswith(SAVED_PREFIX)}
    prim = getattr(fn, "prim", None)
    if prim is not None:    # a primitive's node answers for its saves and params on demand
        names.update(s for s in prim.saves if not s.startswith("*"))
        names.update(getattr(fn, "params", None) or ())
    out = []
    for name in sorted(names):
        try:
            out.append((name, getattr(fn, SAVED_PREFIX + name)))
        except (AttributeError, RuntimeError):      # not saved, or freed by backward
            continue
    return out


def _function_saved(fn):
    """The tensors a custom ``Function`` saved (torchviz draws them always); () when freed."""
    from .autograd.function import BackwardCFunction
    from .tensor import Tensor
    if not isinstance(fn, BackwardCFunction):
        return ()
    try:
        return [t for t in fn.saved_tensors if isinstance(t, Tensor)]
    except RuntimeError:
        return ()


def _fn_label(fn, show_attrs, max_attr_chars):
    from .tensor import Tensor
    name = type(fn).__name__
    if not show_attrs:
        return name
    attrs = {}
    for attr, val in _saved_attrs(fn):
        if isinstance(val, Tensor):
            attrs[attr] = "[saved tensor]"
        elif isinstance(val, tuple) and any(isinstance(t, Tensor) for t in val):
            attrs[attr] = "[saved tensors]"
        else:
            attrs[attr] = str(val)
    if not attrs:
        return name
    max_attr_chars = max(max_attr_chars, 3)
    col1 = max(len(k) for k in attrs)
    col2 = min(max(len(v) for v in attrs.values()), max_attr_chars)
    sep = "-" * max(col1 + col2 + 2, len(name))

    def truncate(s):
        return s[:col2 - 3] + "..." if len(s) > col2 else s
    rows = "\n".join(f"{k:<{col1}}: {truncate(v):>{col2}}" for k, v in attrs.items())
    return f"{name}\n{sep}\n{rows}"


def make_dot_from_graph(graphs):
    """Draw IR graphs: ``[(title, Graph), ...]``, a ``Graph``, or a compiled function
    (its last variant's forward and backward). Inputs are lightblue, outputs green;
    each node is a box ``op`` with its value's name and type."""
    from .ir import Graph, Namer, Value, type_str
    if hasattr(graphs, "graph_ir"):
        graphs = graphs.graph_ir
    if isinstance(graphs, Graph):
        graphs = [("graph", graphs)]
    dot = Digraph(node_attr=dict(style="filled", shape="box", align="left", fontsize="10",
                                 ranksep="0.1", height="0.2", fontname="monospace"))
    b = _DotBuilder(dot)
    namer = Namer()
    for title, graph in graphs:
        for v in graph.inputs:
            b.value(v, f"{title}: {namer(v)}\n{type_str(v.aval)}", "param")
        for n in graph.nodes:
            b.op(n.out, f"{n.op}\n{namer(n.out)}: {type_str(n.out.aval)}")
            for v in n.inputs:
                if type(v) is Value:
                    b.edge(v, n.out)
        for k, v in enumerate(graph.outputs):
            key = ("out", title, k)
            b.keep.append(key)
            b.value(key, f"{title} output {k}\n{namer(v)}", "output")
            b.edge(v, key)
    _resize_graph(dot)
    return dot


def make_dot(var, params=None, show_attrs=False, show_saved=False, max_attr_chars=50):
    """torchviz's ``make_dot``: the backward graph of ``var`` (a tensor or a tuple of them).

    ``params`` maps names to tensors (``dict(model.named_parameters())``) to label leaves;
    ``show_attrs`` lists each node's saved attributes; ``show_saved`` draws saved tensors.
    """
    from .tensor import Tensor
    param_map = {}
    if params is not None:
        for k, v in params.items():
            if not isinstance(v, Tensor):
                raise TypeError(f"make_dot: params must map names to tensors, got "
                                f"{type(v).__name__} for {k!r}")
            param_map[id(v)] = k
    node_attr = dict(style="filled", shape="box", align="left", fontsize="10", ranksep="0.1",
                     height="0.2", fontname="monospace")
    dot = Digraph(node_attr=node_attr, graph_attr=dict(size="12,12"))
    b = _DotBuilder(dot)

    def var_label(t, name=None):
        name = name or param_map.get(id(t), "")
        return f"{name}\n {_size_to_str(t.shape)}"

    def add_saved(fn):
        for attr, val in _saved_attrs(fn):
            if isinstance(val, Tensor):
                items = [(attr, val)]
            elif isinstance(val, tuple):
                items = [(f"{attr}[{i}]", t) for i, t in enumerate(val) if isinstance(t, Tensor)]
            else:
                items = []
            for label, t in items:
                key = (fn, label)       # one box per saved slot: unpacking may make new tensors
                b.edge(fn, key, dir="none")
                b.value(key, var_label(t, label), "saved")

    visited = set()     # ids of nodes and tensors drawn (the builder also names edge ends)

    def draw_fn(fn):
        """Draw one backward node (and its leaf, saved tensors); return its next nodes."""
        visited.add(id(fn))
        if show_saved:
            add_saved(fn)
        leaf = getattr(fn, "variable", None)
        if leaf is not None:            # AccumulateGrad: draw the leaf it feeds
            visited.add(id(leaf))
            b.value(leaf, var_label(leaf), "param")
            b.edge(leaf, fn)
        b.op(fn, _fn_label(fn, show_attrs, max_attr_chars))
        for i, t in enumerate(_function_saved(fn)):   # a custom Function's ctx.saved_tensors
            key = (fn, i)
            b.edge(key, fn, dir="none")
            b.value(key, var_label(t), "saved")
        return iter([nxt for nxt, _ in getattr(fn, "next_functions", ()) if nxt is not None])

    def add_fn(root):
        """Depth first, in torchviz's order, with an explicit stack: long chains of ops are
        deeper than Python's recursion limit."""
        if id(root) in visited:
            return
        todo = [(root, draw_fn(root))]
        while todo:
            fn, nexts = todo[-1]
            nxt = next(nexts, None)
            if nxt is None:
                todo.pop()
                continue
            b.edge(nxt, fn)
            if id(nxt) not in visited:
                todo.append((nxt, draw_fn(nxt)))

    def add_tensor(t, role="output"):
        if id(t) in visited:
            return
        visited.add(id(t))
        b.value(t, var_label(t), role)
        if t.grad_fn is not None:
            add_fn(t.grad_fn)
            b.edge(t.grad_fn, t)
        if t._base is not None:
            add_tensor(t._base, "base")
            b.edge(t._base, t, style="dotted")

    for v in (var if isinstance(var, (tuple, list)) else (var,)):
        add_tensor(v)
    _resize_graph(dot)
    return dot


def _resize_graph(dot, size_per_element=0.15, min_size=12):
    """Grow the drawing with the number of statements, as torchviz does."""
    size = max(min_size, len(dot.body) * size_per_element)
    dot.graph_attr.update(size=f"{size},{size}")
