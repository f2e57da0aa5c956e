"""One compiled variant: a traced graph made into generated forward/backward code.

``build(traced, ...)`` runs the pass pipeline and codegen; ``Variant.run``
executes the generated forward on a call's tensors, writes mutated inputs
back, and wraps the results, joined to one ``CompiledFunctionBackward`` node
when gradients are needed.
"""

import numpy as np

from tracegrad.codegen import numpy as npgen
from tracegrad.codegen.support import GuardFailure, buffer_bytes
from tracegrad.codegen import python as py
from tracegrad.codegen.names import CodeNamer
from tracegrad.autograd.graph import packing
from tracegrad.ir import Graph, print_graph
from tracegrad.passes import pipeline
from tracegrad.passes.autodiff import active_values
from tracegrad.tensor import Tensor
from tracegrad.trace import OutputRef, map_structure

from . import cuda_tier, tiers
from .backward import CompiledFunctionBackward, PackedResiduals
from .dynamic import carrier_of, size_carrier
from .events import phase, run_generated
from .guards import FreeGuard


class Variant:
    """Generated code plus what the runtime needs to call it and to check it still fits.

    ``signature`` and ``paths`` describe the call it was traced for; ``captured`` are the
    tensors it reads besides the arguments, with their ``sources`` (name, getter) and
    metadata, and ``free`` the Python values it read from outside the arguments, all
    checked before each call. ``build`` fills in the code; ``tier`` says where
    its fused kernels run ("numpy", then "c" once the C build is ready; "cuda" for a
    variant whose tensors are on a GPU, its ``device``).
    """

    # per variant, once: the output index when the result is one tensor, the indices when it
    # is a plain tuple of tensors (a loss and its gradients), else -1
    _result_index = None

    def __init__(self, label, title, profile_name, signature=None, paths=(), sources=(),
                 captured=(), captured_meta=(), free=(), impure=()):
        self.label, self.title, self.profile_name = label, title, profile_name
        self.signature, self.paths = signature, list(paths)
        self.sources, self.captured = list(sources), list(captured)
        self.captured_meta = list(captured_meta)
        self.free = list(free)          # guards.FreeGuard: Python values read from outside
        self.impure = list(impure)      # transform.ImpureCall: drawn again before each reuse
        self.checks = bool(self.sources or self.free)
        self.tier, self.kernel_ir, self.namespace = "numpy", [], {}
        self.c_source, self.c_kernels, self.c_skipped, self.c_seconds = None, [], {}, None
        self.cuda_source, self.cuda_kernels, self.cuda_skipped = None, [], {}
        self.device, self.asarray = "cpu", np.asarray   # asarray: a result array as it is kept
        self.device_index = None    # the GPU's index where ``device`` is "cuda"

    @property
    def code(self):
        """The generated Python module, then the C or CUDA source of its kernels once built."""
        if self.cuda_source is not None:
            return f"{self.python_code}\n\n// ---- the CUDA tier ----\n{self.cuda_source}"
        if self.c_source is None:
            return self.python_code
        return f"{self.python_code}\n\n/* ---- the C tier ---- */\n{self.c_source}"

    sizes = None        # a dynamic variant: SizeGuard, its check of the call's sizes
    grad_checks = grad_sets = scalars = after = ()   # see Tracer.finish and Tracer.scalar_input
    grad_guard = None       # the index in ``guards`` of the check on .grad
    n_extra = 0     # the forward's outputs after the mutations: new .grad values, stored tensors
    size_carrier = None     # [(argument index, dim)]: sizes its backward gets in a carrier

    def run(self, tensors, first=False):
        """Results for one call; ``tensors`` are the argument tensors then the captured ones;
        ``first``: the traced call, whose trace run made its stores already."""
        if self.sizes is not None:
            self.sizes.check(tensors)
        if self.grad_checks:        # the .grad the trace started from, on every tensor it sets
            for where, before in self.grad_checks:
                t = tensors[where] if type(where) is int else where
                if t._grad is not before:
                    raise GuardFailure(self.grad_guard)
        for t, get in self.scalars:     # a learning rate: read afresh
            t._data[...] = float(get())
        # the generators' states before the forward draws: create_graph draws the same again
        states = [(g, g.get_state()) for g in self.generators] if self.generators else None
        try:
            outs = run_generated(self.forward, [t._data for t in tensors], self.profile_name,
                                 "forward", self.device_index)
        except GuardFailure:
            raise
        except Exception as exc:    # noqa: BLE001 - re-raised naming the user's line
            raise generated_error(self, exc) from exc
        n_res = self.n_results
        mutated = self.mutated
        n_kept = n_res + len(mutated) + self.n_extra
        seeds = self.seeds
        if seeds:
            residuals = outs[n_kept:]
            if self.copy_residuals:     # an input saved for backward is about to be written
                residuals = list(residuals)
                for k in self.copy_residuals:
                    residuals[k] = residuals[k].copy()
        for i, arr in zip(mutated, outs[n_res:n_kept]):
            t = tensors[i]
            if t._data is not arr:
                if self.device_index is not None and type(t._data) is np.ndarray:
                    arr = arr.get()     # a CPU scalar tensor a CUDA variant wrote (step += 1)
                t._data[...] = arr
            t._vc.value += 1
        for where, k in self.grad_sets:     # the .grad the call set, as eager sets it
            t = tensors[where] if type(where) is int else where
            t._grad = None if k is None else Tensor._make(self.asarray(outs[k]))
        results = [None] * n_res
        for k, src in enumerate(self.result_inputs):
            if src is not None:         # an input returned as it is: the same tensor object
                results[k] = tensors[src]
        if seeds:
            meta = self.out_meta if self.sizes is None else tuple(
                (outs[k].shape, m[1], m[2]) for k, m in zip(seeds, self.out_meta))
            node = CompiledFunctionBackward(
                tuple([tensors[i]._grad_edge() for i in self.wrt]), meta)
            node.variant = self
            carrier = [carrier_of(tensors, self.size_carrier)] if self.size_carrier else []
            if packing():       # saved through the user's saved_tensors_hooks
                residuals = PackedResiduals(residuals, carrier)
            elif carrier:
                residuals = list(residuals) + carrier
            node.residuals = residuals
            node.inputs = tensors
            node.versions = [(tensors[i], tensors[i]._vc.value) for i in self.saved_inputs]
            node.rng_states = states
            for nr, k in enumerate(seeds):
                if results[k] is None:
                    results[k] = Tensor._make(self.asarray(outs[k]), node, True, None, nr)
        for k in range(n_res):
            if results[k] is None:
                results[k] = Tensor._make(self.asarray(outs[k]))
        if self.after:      # stores to outside state, a scheduler's step: made again
            self._replay(first, tensors, outs, results)
        k = self._result_index
        if k is None:
            k = self._result_index = _result_index(self.out_tree)
        if type(k) is tuple:
            return tuple([results[i] for i in k])
        if k >= 0:
            return results[k]
        return map_structure(self.out_tree,
                             lambda leaf: results[leaf.index] if type(leaf) is OutputRef else leaf)

    def _replay(self, first, tensors, outs, results):
        """The calls the trace recorded besides its graph, in order (``Tracer.after``), each
        with this run's tensors; on the traced call, those its trace run made are skipped."""
        for _, fn, specs, done in self.after:
            if first and done:
                continue
            args = []
            for kind, a in specs:
                if kind == "result":
                    a = results[a]
                elif kind == "output":
                    a = Tensor._make(self.asarray(outs[a]))
                elif kind == "input":
                    a = tensors[a] if type(a) is int else a
                args.append(a)
            fn(*args)

    # inspection ----------------------------------------------------------------------------
    def graph_text(self):
        """The forward and backward IR, values named as in ``code`` and ``explain()``."""
        if self.backward_graph is None:
            return print_graph(self.forward_graph, "forward", self.namer)
        return (print_graph(self.forward_graph, "forward", self.namer) + "\n"
                + print_graph(self.backward_graph, "backward", self.namer))


def _result_index(tree):
    """``Variant._result_index`` of a traced result's tree."""
    if type(tree) is OutputRef:
        return tree.index
    if type(tree) is tuple and all(type(leaf) is OutputRef for leaf in tree):
        return tuple(leaf.index for leaf in tree)
    return -1


class SizeGuard:
    """The sizes a dynamic variant serves: each symbol read from its first dim, the other dims
    of that size equal to it, every symbol at least 2, and the relations the trace relied
    on (``s0 > 16``). ``check(tensors)`` raises ``GuardFailure(index)`` when they fail;
    ``index`` is this guard's place in the variant's ``guards``."""

    def __init__(self, sym_dims, relations, index):
        self.sym_dims, self.relations, self.index = list(sym_dims), list(relations), index
        first, lines, tests = {}, [], []
        for ti, d, size in self.sym_dims:
            name = str(size)
            if name not in first:
                first[name] = (ti, d)
                lines.append(f"    {name} = tensors[{ti}]._data.shape[{d}]")
                tests.append(f"{name} >= 2")
            else:
                tests.append(f"tensors[{ti}]._data.shape[{d}] == {name}")
        tests += [f"({d}) {op} 0" if ok else f"not (({d}) {op} 0)" for d, op, ok in relations]
        hints = [f"{name} == {int(size)}" for name, size in
                 {str(z): z for _, _, z in self.sym_dims}.items()]
        ns = {"GuardFailure": GuardFailure}
        for fname, conds in (("general", tests), ("exact", tests + hints)):
            src = (f"def {fname}(tensors):\n" + "\n".join(lines) + "\n"
                   f"    if not ({' and '.join(conds)}):\n        raise GuardFailure({index})\n")
            exec(compile(src, "<tracegrad size guard>", "exec"), ns)
        self._general, self._exact = ns["general"], ns["exact"]
        self.symbols = list(first)
        # until a trace at another size agreed with this one, only the traced sizes fit
        self.verified = False

    def check(self, tensors):
        (self._general if self.verified else self._exact)(tensors)

    paths = ()      # the argument tensors' names (set by build)

    def dims(self, word):
        """``{symbol: [word(argument name, dim), ...]}``: where each size is read."""
        out = {}
        for ti, d, size in self.sym_dims:
            name = self.paths[ti] if ti < len(self.paths) else f"tensor {ti}"
            out.setdefault(str(size), []).append(word(name, d))
        return out

    def describe(self):
        dims = self.dims(lambda name, d: f"{name}.shape[{d}]")
        where = "; ".join(f"{s} = {' = '.join(w)} >= 2" for s, w in dims.items())
        rel = "".join(f", {_relation(d, op, ok)}" for d, op, ok in self.relations)
        exact = "" if self.verified else ", and (until checked at another size) " + ", ".join(
            f"{s} == {int(z)}" for s, z in {str(z): z for _, _, z in self.sym_dims}.items())
        return f"sizes {where}{rel}{exact}"


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
_NOT = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}


def _relation(d, op, ok):
    """``(d op 0) is ok`` for people: ``s0 - 16 > 0`` as ``s0 > 16``, ``not (10 - s0 > 0)``
    as ``s0 >= 10``."""
    if not ok:
        op = _NOT[op]
    if d.terms and d.terms[-1][1] < 0:      # the leading term negative: turn it round
        d, op = -d, _FLIP[op]
    const = dict(d.terms).get((), 0)
    lhs = str(d - type(d).const(const)) if const else str(d)
    return f"{lhs} {op} {-const}"


def build(traced, label, want_grad, dump_ir=None, check=None, title=None, profile_name=None,
          backend="auto", **call):
    """A ``Variant`` for ``traced`` (from ``Tracer.finish``); ``want_grad``: grad mode was on;
    ``call``: the ``Variant`` fields that describe the call (signature, paths, captured...)."""
    g = traced.graph
    v = Variant(label, title or label, profile_name or label, **call)
    n_res = traced.out_tree[1]
    n_mut = len(traced.mutations) + traced.n_extra      # the outputs kept after the results
    inputs = list(traced.arg_tensors) + list(traced.captured)
    index_of = {id(t): i for i, t in enumerate(inputs)}
    on_gpu = next((t._data for t in inputs if cuda_tier.on_gpu(t._data)), None)
    if on_gpu is not None:      # its driver runs CuPy's calls on that GPU
        v.device, v.device_index = "cuda", on_gpu.device.id
    v.mutated = [index_of[id(t)] for t in traced.mutations]
    v.n_results = n_res
    v.out_tree = traced.out_tree[0]
    input_pos = {val: i for i, val in enumerate(g.inputs)}
    v.result_inputs = [input_pos.get(val) for val in g.outputs[:n_res]]
    # an unnamed result is out (and its gradient d_out): a hint, the value keeps its name
    names = {val: "out" if n_res == 1 else f"out{k}"
             for k, val in enumerate(g.outputs[:n_res]) if val.name is None}
    v.guards = list(traced.guards)
    _effects(v, traced)
    if traced.sym_dims:     # a dynamic trace: its sizes are checked before the forward runs
        v.sizes = SizeGuard(traced.sym_dims, traced.shape_env.relations, len(v.guards))
        v.sizes.paths = v.paths
        v.guards.append(v.sizes)
    # guard values ride along as extra outputs, so no pass drops them
    graph = Graph(g.inputs, g.nodes, list(g.outputs) + [gd.value for gd in traced.guards])
    wrt = [i for i, t in enumerate(inputs)
           if want_grad and t._requires_grad and t.dtype.is_floating_point]
    active = active_values(graph, wrt) if wrt else set()
    seeds = [k for k in range(n_res)
             if graph.outputs[k] in active and v.result_inputs[k] is None]
    v.wrt, v.seeds = wrt, seeds
    # generators the forward draws from (dropout's masks): their states are kept per call
    v.generators = list({id(n.params["generator"]): n.params["generator"]
                         for n in g.nodes if n.op == "random"}.values()) if seeds else []
    v.out_meta = tuple((graph.outputs[k].shape, graph.outputs[k].dtype.np, None) for k in seeds)
    n_kept = n_res + n_mut
    with phase(v.profile_name, "passes", "compile"):
        fwd, bwd, joint, grad_index, v.hints = _passes(graph, wrt, seeds, dump_ir, check,
                                                       v.mutated, names)
    if seeds:
        residuals = fwd.outputs[len(graph.outputs):]
        returned = list(fwd.outputs[:n_kept]) + list(residuals)
        v.joint = Graph(joint.inputs, joint.nodes,
                        [joint.outputs[k] for k in grad_index if k is not None])
        v.grad_index = _running(grad_index)     # per wrt input: its position among the grads
        v.saved_inputs = sorted({input_pos[r] for r in residuals if r in input_pos})
        mutated = set(v.mutated)
        v.copy_residuals = [k for k, r in enumerate(residuals) if input_pos.get(r) in mutated]
        v.n_residuals = len(residuals)
        if traced.sym_dims:     # sizes no residual has as a dim come in one more input
            bwd, v.size_carrier = size_carrier(bwd, v.n_residuals, traced.sym_dims)
        v.backward_graph = bwd
    else:
        returned = list(fwd.outputs[:n_kept])
        v.backward_graph = v.joint = None
        v.grad_index, v.saved_inputs, v.copy_residuals = [], [], []
    v.forward_graph = Graph(fwd.inputs, fwd.nodes, returned, fwd.groups, fwd.plan)
    with phase(v.profile_name, "codegen", "compile"):
        _generate(v, traced, label, v.title)
    tiers.start(v, backend)
    return v


class GradGuard:
    """The ``.grad`` of each tensor the function sets is what it was when traced (None, or
    the same tensor, which the function then updates in place)."""

    def __init__(self, checks):
        self.checks = checks

    def describe(self):
        return (f"the .grad of {len(self.checks)} tensor(s) the function sets is what it was "
                "when traced (None or the same tensor)")


def _effects(v, traced):
    """What a run does besides its graph: set ``.grad``s, read learning rates afresh, check
    the plain values it baked, replay a scheduler's step."""
    v.grad_checks, v.grad_sets = traced.grad_checks, traced.grad_sets
    v.n_extra = traced.n_extra
    if v.grad_checks:
        v.grad_guard = len(v.guards)
        v.guards.append(GradGuard(v.grad_checks))
    v.scalars, v.after = traced.scalars, traced.after
    v.free += [FreeGuard(*g) for g in traced.value_guards]
    v.checks = bool(v.sources or v.free)


def _passes(graph, wrt, seeds, dump_ir, check, written, names):
    if seeds:
        return pipeline.forward_backward(graph, wrt, seeds, dump_ir, check, written, names)
    return pipeline.forward_only(graph, dump_ir, check), None, None, None, names


def _running(grad_index):
    """Positions among the gradients that exist, in order (None stays None)."""
    out, k = [], 0
    for gi in grad_index:
        if gi is None:
            out.append(None)
        else:
            out.append(k)
            k += 1
    return out


def _generate(v, traced, label, title):
    em = npgen.Emitter()
    em.device = v.device
    namer = v.namer = CodeNamer(hints=v.hints)
    guards = [(gd.value, gd.kind, gd.expected, i) for i, gd in enumerate(traced.guards)]
    parts = [f'"""Generated by tracegrad.compile from {title}.\n\n'
             "forward(inputs) returns the results, the new values of inputs written in place,\n"
             'and what backward needs; backward(saved, output grads) returns input grads.\n"""',
             "import numpy as np" if v.device == "cpu" else
             "import cupy as np  # the tensors are on a GPU: CuPy's NumPy-compatible calls"]
    fsrc = npgen.emit_function(em, v.forward_graph, "forward", namer, guards)
    bsrc = None
    if v.backward_graph is not None:
        bsrc = npgen.emit_function(em, v.backward_graph, "backward", namer)
    header_globals = [f"# {name}: set by the loader ({_describe(obj, v.device)})"
                      for name, obj in em.globals_used.items()]
    workspaces = [f"{name} = {npgen.workspace_source(*spec, on_device=v.device == 'cuda')}"
                  for name, spec in em.workspaces.items()]
    body = "\n".join(em.kernels + [fsrc, bsrc or ""])
    imports = []
    used = [n for n, mark in (("GuardFailure", "GuardFailure("), ("P", "P."),
                              ("Workspace", "_workspace."), ("run_chunks", "run_chunks("),
                              ("Outputs", "_outputs.")) if mark in body]
    if used:
        imports.append(f"from tracegrad.codegen.support import {', '.join(used)}")
    if "Outputs" in used:   # large results: earlier calls' arrays, once nothing holds them
        workspaces.append("_outputs = Outputs()")
    for name, obj in em.helpers.items():   # the primitives' helpers, imported by name
        imports.append(f"from {obj.__module__} import {obj.__name__}"
                       + (f" as {name}" if name != obj.__name__ else ""))
    if "dtypes." in body:
        imports.append("from tracegrad import dtypes")
    functions = em.kernels + [fsrc] + ([bsrc] if bsrc else [])
    source = "\n".join(parts + imports + header_globals + workspaces + ["", ""]
                       + ["\n\n\n".join(functions)]) + "\n"
    ns, filename = py.load(source, label, em.env)
    v.python_code = source
    v.namespace = ns
    v.kernel_ir = em.kernel_ir
    v.workspaces = em.workspaces    # module global -> (kernels' scratch, slots, sizes)
    v.workspace_bytes = sum(buffer_bytes(*spec[:2]) for spec in em.workspaces.values())
    v.filename = filename
    v.forward = ns["forward"]
    v.backward = ns.get("backward")
    if v.device == "cuda":      # constants onto the GPU once; the driver runs on that GPU
        cuda_tier.place(v, em.globals_used)


def generated_error(v, exc):
    """An error raised inside generated code, restated with the statement and the user's line."""
    import linecache
    import traceback
    lineno = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == v.filename:
            lineno = line
    if lineno is None:
        return exc
    lines = linecache.getlines(v.filename)
    stmt = lines[lineno - 1].strip()
    site = next((ln.strip()[2:] for ln in reversed(lines[:lineno - 1])
                 if ln.strip().startswith("# ") and ":" in ln), "")
    err = type(exc) if isinstance(exc, (IndexError, TypeError, ValueError)) else RuntimeError
    try:
        return err(f"{exc} (in the compiled code at `{stmt}`)" + (f"\n  (at {site})" if site else ""))
    except TypeError:
        return RuntimeError(f"{exc} (in the compiled code at `{stmt}`)")


def _describe(obj, device="cpu"):
    if isinstance(obj, np.ndarray):
        return f"a constant {obj.dtype}{list(obj.shape)} array" + (
            ", copied to the GPU once" if device == "cuda" else "")
    return type(obj).__name__
