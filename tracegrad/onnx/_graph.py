"""Write a captured IR graph as an ONNX ``ModelProto``.

Inputs are the argument tensors (their dynamic dims named as ``dynamic_axes`` says),
parameters and buffers become initializers named by their place in the module
(``0.weight``), every IR node becomes the ONNX nodes of its primitive (``_ops``), each
carrying the user's ``file:line`` as its doc string, and every IR value a ``value_info``
with its shape, so a viewer shows the shapes the trace saw.
"""
import numpy as np

from ._builder import Builder
from ._capture import dims_of
from ._ops import EMIT, unsupported
from . import _ops_index, _ops_nn  # noqa: F401 - they register their primitives in EMIT


def build_model(onnx, cap, opset, out_names, dynamic_axes, export_params,
                keep_initializers_as_inputs, producer):
    """The ``ModelProto`` of captured graph ``cap``; ``out_names`` from ``output_names``."""
    b = Builder(onnx, opset)
    graph = cap.graph
    dynamic_axes = dynamic_axes or {}
    n_args = len(cap.input_names)
    inputs, initializers_as_inputs = [], []
    for sym, (arg, dim) in cap.sym_dims.items():
        b.symbols[sym] = (cap.input_names[arg], dim)
    b.dim_names = dict(cap.sym_names)
    for v, name in zip(graph.inputs, cap.input_names):
        b.used.add(name)
        b.env[v] = name
        inputs.append(b.value_info(name, v.aval))     # dynamic dims are named by their symbol
    for v, (qualname, t) in zip(graph.inputs[n_args:], cap.params):
        name = b.unique(qualname or v.name or "param")
        b.env[v] = name
        if export_params:
            b.initializers.append(onnx.numpy_helper.from_array(_host(t), name))
            if keep_initializers_as_inputs:
                initializers_as_inputs.append(b.value_info(name, v.aval))
        else:
            inputs.append(b.value_info(name, v.aval))
    outputs = graph.outputs[:cap.n_results]
    for name in out_names:
        b.used.add(name)
    wanted = {}     # value -> the output name its producing node writes directly
    for v, name in zip(outputs, out_names):
        wanted.setdefault(v, name)
    infos, bound = [], set(b.env.values())
    for n in graph.nodes:
        emit = EMIT.get(n.op)
        if emit is None:
            raise unsupported(n)
        b.site = n.site
        name = emit(b, n)
        if n.out in wanted and b.nodes and name in b.nodes[-1].output and name not in bound:
            _rename(b.nodes[-1], name, wanted[n.out])      # the node writes the output
            name = wanted.pop(n.out)
        b.env[n.out] = name
        if name is not None and name not in bound:
            infos.append(b.value_info(name, n.out.aval))
            bound.add(name)
    b.site = ""
    out_infos = []
    for v, name in zip(outputs, out_names):
        if b.env[v] != name:        # an input, a parameter, an alias or a repeated output
            b.op("Identity", [b.read(v)], out=name)
        out_infos.append(b.value_info(name, v.aval, dims_of(dynamic_axes.get(name, {}), name)))
    infos = [i for i in infos if i.name not in out_names]
    g = onnx.helper.make_graph(b.nodes, "main_graph", inputs + initializers_as_inputs,
                               out_infos, initializer=b.initializers, value_info=infos)
    opsets = [onnx.helper.make_opsetid("", opset)]
    model = onnx.helper.make_model(g, opset_imports=opsets, producer_name=producer[0],
                                   producer_version=producer[1])
    model.ir_version = onnx.helper.find_min_ir_version_for(opsets)
    return model


def _rename(node, old, new):
    for i, o in enumerate(node.output):
        if o == old:
            node.output[i] = new


def output_names(given, count, input_names):
    if given is None:
        names = ["output"] if count == 1 else [f"output_{k}" for k in range(count)]
    else:
        names = list(given)
        if len(names) > count:
            raise ValueError(f"tracegrad.onnx.export: {len(names)} output_names for {count} "
                             "tensor outputs")
        names += [f"output_{k}" for k in range(len(names), count)]
    clash = set(names) & set(input_names)
    if clash or len(set(names)) != len(names):
        raise ValueError(f"tracegrad.onnx.export: output names must be distinct and differ "
                         f"from the input names, got {names}")
    return names


def _host(t):
    return np.array(t.detach().cpu().numpy(), order="C")


__all__ = ["build_model", "output_names"]
