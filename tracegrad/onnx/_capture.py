"""The trace an ONNX export is built from: the one ``tracegrad.compile`` makes.

The model runs once on the example inputs under a tracer (in the mode ``training`` asks
for, without autograd), through the same front end and ``Tracer`` as a compiled call,
with ``fullgraph`` on: what a graph cannot hold raises instead of running eagerly. The
dims ``dynamic_axes`` names are traced symbolic, so shapes computed from them stay
expressions of the input sizes; the simplify passes then leave primitives only.
"""
import warnings

from ..symbolic import ShapeEnv, Specialize
from ..tensor import Tensor
from ..trace import Tracer


class Captured:
    """``graph`` (optimised IR), ``input_names`` (argument tensors, in graph input order),
    ``params`` (captured tensors: ``[(qualified name or None, tensor)]``), ``n_results``,
    ``sym_names`` (size symbol -> the user's dim name), ``sym_dims`` (size symbol ->
    (argument index, dim))."""

    def __init__(self, graph, input_names, params, n_results, sym_names, sym_dims):
        self.graph, self.input_names, self.params = graph, input_names, params
        self.n_results, self.sym_names, self.sym_dims = n_results, sym_names, sym_dims


def capture(model, args, kwargs, input_names, dynamic_axes):
    from ..passes.pipeline import optimize
    from ..runtime.compiled import CompiledFunction, _flatten     # the compiler's own trace
    from . import OnnxExporterError
    fn = CompiledFunction(model, backend="numpy", fullgraph=True)
    tensors, paths = [], []
    _flatten((args, kwargs), "", tensors, paths, [])
    names = _input_names([fn._readable(p) for p in paths], input_names)
    dynamic, axis_names = _dynamic_dims(tensors, names, dynamic_axes)
    env = ShapeEnv(same=lambda where, dims: axis_names.get(where) == axis_names.get(dims[0])) \
        if dynamic else None
    tracer = Tracer(shape_env=env)
    try:
        traced = fn._trace(tracer, args, kwargs, tensors, names, dynamic)
    except Specialize as e:
        dims = sorted(axis_names.get(where, str(where)) for where in _dims_of(tracer, e.symbols))
        raise OnnxExporterError(
            f"tracegrad.onnx.export: the model needs the size of the dynamic axes "
            f"{', '.join(dims) or 'it was given'} as a fixed number ({e.why}, at "
            f"{_user_site(e)}), so the graph cannot follow other sizes. Export with those "
            "axes static (leave them out of dynamic_axes), or compute that size with tensor "
            "ops.") from None
    except Exception as e:
        if not dynamic:
            raise
        # a step that cannot take a symbolic size: the user's error if a static trace fails too
        fn._trace(Tracer(), args, kwargs, tensors, names, {})
        raise OnnxExporterError(
            f"tracegrad.onnx.export: the model cannot be traced with the dynamic axes "
            f"{', '.join(sorted(set(axis_names.values())))} symbolic ({type(e).__name__}: {e}, "
            f"at {_user_site(e)}); it traces with fixed sizes. Export without those "
            "dynamic_axes.") from e
    if traced.guards:
        sites = ", ".join(sorted({g.site or "<unknown>" for g in traced.guards}))
        warnings.warn(f"tracegrad.onnx.export: the model branched on tensor values ({sites}); "
                      "the ONNX graph keeps the branch these inputs took, for every input.",
                      RuntimeWarning, stacklevel=4)
    graph = optimize(traced.graph)
    owners = _param_names(model)
    params = [(owners.get(id(t)), t) for t in traced.captured]
    sym_names, sym_dims = {}, {}
    for arg, dim, size in tracer.sym_dims:
        sym = size.poly.terms[0][0][0]
        sym_dims.setdefault(sym, (arg, dim))
        sym_names.setdefault(sym, axis_names[(arg, dim)])
    return Captured(graph, names, params, traced.out_tree[1], sym_names, sym_dims)


def _input_names(default, given):
    if given is None:
        names = list(default)
    else:
        given = list(given)
        if len(given) > len(default):
            raise ValueError(f"tracegrad.onnx.export: {len(given)} input_names for "
                             f"{len(default)} tensor inputs ({', '.join(default)})")
        names = given + list(default[len(given):])
    if len(set(names)) != len(names):
        raise ValueError(f"tracegrad.onnx.export: input names must be distinct, got {names}")
    return names


def dims_of(spec, name):
    """``{dim: name}`` from a ``dynamic_axes`` entry: a dict, or a list of dims."""
    if isinstance(spec, dict):
        return {int(d): str(v) for d, v in spec.items()}
    return {int(d): f"{name}_dynamic_axes_{k + 1}" for k, d in enumerate(spec)}


def _dynamic_dims(tensors, names, dynamic_axes):
    """``({argument index: dims}, {(argument index, dim): axis name})`` for the inputs."""
    dynamic, axis_names = {}, {}
    for i, (t, name) in enumerate(zip(tensors, names)):
        if name not in (dynamic_axes or {}):
            continue
        for d, axis in dims_of(dynamic_axes[name], name).items():
            if not -t.ndim <= d < t.ndim:
                raise ValueError(f"tracegrad.onnx.export: dynamic_axes names dim {d} of input "
                                 f"'{name}', which has {t.ndim} dims")
            d %= t.ndim
            if t.shape[d] < 2:
                raise ValueError(
                    f"tracegrad.onnx.export: dim {d} of input '{name}' is dynamic ('{axis}') but "
                    f"has size {t.shape[d]} in the example; a size of 0 or 1 would be traced "
                    "as a constant (broadcasting treats 1 apart). Export with an example of "
                    "size 2 or more along that dim.")
            dynamic.setdefault(i, []).append(d)
            axis_names[(i, d)] = axis
    return {i: tuple(ds) for i, ds in dynamic.items()}, axis_names


def _dims_of(tracer, symbols):
    return [(arg, dim) for arg, dim, size in tracer.sym_dims
            if size.poly.terms[0][0][0] in symbols]


def _param_names(model):
    """id(tensor) -> its qualified name in ``model`` (``0.weight``), as PyTorch names the
    initializers."""
    out = {}
    for kind in ("named_parameters", "named_buffers"):
        get = getattr(model, kind, None)
        if get is not None:
            for name, t in get():
                if isinstance(t, Tensor):
                    out.setdefault(id(t), name)
    return out


def _user_site(exc):
    """``file:line`` of the innermost frame of ``exc``'s traceback outside tracegrad, else
    the innermost one outside its ops and sizes (the layer that asked for the size)."""
    import os
    from ..ops.core import INTERNAL, _PKG_DIR
    machinery = (os.path.join(_PKG_DIR, "ops") + os.sep, os.path.join(_PKG_DIR, "symbolic"))
    user = layer = None
    tb = exc.__traceback__
    while tb is not None:
        f = tb.tb_frame.f_code.co_filename
        if not f.startswith(INTERNAL):
            user = f"{f}:{tb.tb_lineno}"
        elif not f.startswith(machinery):
            layer = f"{f}:{tb.tb_lineno}"
        tb = tb.tb_next
    return user or layer or "<unknown>"


__all__ = ["capture", "Captured", "dims_of"]
