"""``tracegrad.onnx``: PyTorch's ``torch.onnx.export``, built from tracegrad's traced IR.

``export(model, args, f, input_names=..., output_names=..., dynamic_axes=...,
opset_version=...)`` traces ``model`` as ``tracegrad.compile`` does (in eval mode unless
``training`` says otherwise, without autograd), writes every primitive of the graph as
ONNX operators with the ``onnx`` package, checks the model with ``onnx.checker`` and
saves it to ``f`` (a path or a binary file object). It returns an ``ONNXProgram`` whose
``model_proto`` is the model. The dims ``dynamic_axes`` names are traced symbolic, so the
graph computes every shape from the input sizes it is run with. An op without an ONNX
form raises ``OnnxExporterError`` naming the op and the user's line.

``onnx`` (and ``onnxruntime``, to run the result) are optional: ``pip install
'tracegrad[onnx]'``. Importing this module never needs them, because PyTorch programs
import ``torch.onnx`` unconditionally; ``export`` says what to install.
"""
import contextlib
import enum
import os

DEFAULT_OPSET = 20      # PyTorch's default
MIN_OPSET = 13          # Squeeze, Unsqueeze and ReduceSum take their axes as inputs from here
_INSTALL = "pip install 'tracegrad[onnx]'"
_exporting = 0


class TrainingMode(enum.IntEnum):
    """The mode a model is exported in: EVAL (the default), PRESERVE its own, TRAINING."""
    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


class OperatorExportTypes(enum.IntEnum):
    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class OnnxExporterError(RuntimeError):
    """A model that cannot be written as ONNX (names the op and the user's line)."""


def is_in_onnx_export():
    """True while ``export`` is tracing a model (as PyTorch's)."""
    return _exporting > 0


def _require(name):
    try:
        return __import__(name)
    except ImportError as e:
        raise ImportError(f"tracegrad.onnx.export needs the '{name}' package, which is not "
                          f"installed: {_INSTALL} (installs onnx and onnxruntime)") from e


class ONNXProgram:
    """An exported model: ``model_proto`` (an ``onnx.ModelProto``), ``save(f)``, and
    ``__call__(*args)`` running it in onnxruntime on tracegrad tensors (or arrays)."""

    def __init__(self, model_proto, input_names, output_names):
        self.model_proto = model_proto
        self.input_names, self.output_names = list(input_names), list(output_names)
        self._session = None

    def save(self, destination):
        onnx = _require("onnx")
        if isinstance(destination, (str, os.PathLike)):
            onnx.save_model(self.model_proto, os.fspath(destination))
        else:       # a binary file object
            destination.write(self.model_proto.SerializeToString())

    def __call__(self, *args):
        import numpy as np
        from ..creation import from_numpy
        from ..tensor import Tensor
        if self._session is None:
            ort = _require("onnxruntime")
            self._session = ort.InferenceSession(self.model_proto.SerializeToString(),
                                                 providers=["CPUExecutionProvider"])
        arrays = [np.asarray(a.detach().cpu().numpy() if isinstance(a, Tensor) else a)
                  for a in args]
        feed = dict(zip(self.input_names, arrays))
        return [from_numpy(np.asarray(o)) for o in self._session.run(None, feed)]

    def __repr__(self):
        g = self.model_proto.graph
        return (f"ONNXProgram({len(g.node)} nodes, inputs {self.input_names}, outputs "
                f"{self.output_names}, opset {self.model_proto.opset_import[0].version})")


def export(model, args=(), f=None, *, kwargs=None, verbose=None, input_names=None,
           output_names=None, opset_version=None, dynamo=True, external_data=True,
           dynamic_shapes=None, custom_translation_table=None, report=False, optimize=True,
           verify=False, profile=False, dump_exported_program=False, artifacts_dir=".",
           export_params=True, keep_initializers_as_inputs=False, dynamic_axes=None,
           training=TrainingMode.EVAL, operator_export_type=OperatorExportTypes.ONNX,
           do_constant_folding=True, custom_opsets=None, export_modules_as_functions=False,
           autograd_inlining=True):
    """Export ``model`` called on ``args`` (and ``kwargs``) as ONNX; see the module docstring.

    Takes PyTorch's arguments. ``dynamo``, ``optimize``, ``do_constant_folding``,
    ``external_data``, ``report``, ``profile``, ``dump_exported_program``,
    ``artifacts_dir``, ``custom_opsets`` and ``autograd_inlining`` change nothing (one
    exporter serves both of PyTorch's; the graph is already simplified and folded);
    ``verify=True`` runs the result in onnxruntime and compares it with the model's own
    outputs. ``dynamic_shapes`` (``{argument name: {dim: name}}`` or one entry per
    argument) is read as ``dynamic_axes``.
    """
    global _exporting
    onnx = _require("onnx")
    opset = _opset(opset_version, onnx)
    if operator_export_type != OperatorExportTypes.ONNX:
        raise ValueError("tracegrad.onnx.export writes standard ONNX operators only "
                         "(operator_export_type=OperatorExportTypes.ONNX)")
    if export_modules_as_functions or custom_translation_table:
        raise NotImplementedError("tracegrad.onnx.export: export_modules_as_functions and "
                                  "custom_translation_table are not supported")
    args, kwargs = _split_args(args, kwargs)
    if dynamic_shapes is not None:
        dynamic_axes = dict(dynamic_axes or {}, **_from_dynamic_shapes(model, args, kwargs,
                                                                       dynamic_shapes))
    from . import _capture, _graph
    _exporting += 1
    try:
        with _mode(model, training):
            cap = _capture.capture(model, args, kwargs, input_names, dynamic_axes)
            expected = _run(model, args, kwargs) if verify else None
    finally:
        _exporting -= 1
    names = _graph.output_names(output_names, cap.n_results, cap.input_names)
    _check_axes(dynamic_axes, cap.input_names, names)
    proto = _graph.build_model(onnx, cap, opset, names, dynamic_axes, export_params,
                               keep_initializers_as_inputs, ("tracegrad", _version()))
    onnx.checker.check_model(proto, full_check=True)
    program = ONNXProgram(proto, [i.name for i in proto.graph.input], names)
    if verbose:
        print(onnx.helper.printable_graph(proto.graph))
    if expected is not None:
        _verify(program, args, kwargs, expected)
    if f is not None:
        program.save(f)
    return program


def _opset(version, onnx):
    newest = min(onnx.defs.onnx_opset_version(), 23)
    version = DEFAULT_OPSET if version is None else int(version)
    if not MIN_OPSET <= version <= newest:
        raise ValueError(f"tracegrad.onnx.export supports opset_version {MIN_OPSET} to {newest}, "
                         f"got {version}")
    return version


def _split_args(args, kwargs):
    """PyTorch's conventions: one tensor for ``args``, or a tuple ending in a dict of
    keyword arguments."""
    from ..tensor import Tensor
    if isinstance(args, Tensor) or not isinstance(args, (tuple, list)):
        args = (args,)
    args = tuple(args)
    kwargs = dict(kwargs or {})
    if args and isinstance(args[-1], dict):
        kwargs = dict(args[-1], **kwargs)
        args = args[:-1]
    return args, kwargs


def _from_dynamic_shapes(model, args, kwargs, spec):
    """``dynamic_shapes`` as ``dynamic_axes`` keyed by the arguments' default input names."""
    import inspect
    fn = getattr(model, "forward", model)
    try:
        params = [p for p in inspect.signature(fn).parameters]
    except (TypeError, ValueError):
        params = []
    if isinstance(spec, (tuple, list)):
        spec = {params[i] if i < len(params) else f"arg{i}": s for i, s in enumerate(spec)}
    out = {}
    for name, dims in spec.items():
        if dims is None:
            continue
        if isinstance(dims, (tuple, list)):
            dims = dict(enumerate(dims))
        named = {}
        for d, axis in dims.items():
            if axis is None:
                continue
            named[int(d)] = axis if isinstance(axis, str) else getattr(
                axis, "__name__", f"{name}_dim{d}")
        out[name] = named
    return out


def _check_axes(dynamic_axes, inputs, outputs):
    unknown = sorted(set(dynamic_axes or {}) - set(inputs) - set(outputs))
    if unknown:
        raise ValueError(f"tracegrad.onnx.export: dynamic_axes names {unknown}, which are "
                         f"neither inputs ({inputs}) nor outputs ({outputs})")


@contextlib.contextmanager
def _mode(model, training):
    """The module in the mode ``training`` asks for, without autograd, restored after."""
    from ..autograd import inference_mode, no_grad
    was = getattr(model, "training", None)
    if was is not None and training != TrainingMode.PRESERVE:
        model.train(training == TrainingMode.TRAINING)
    try:
        with (no_grad() if training == TrainingMode.TRAINING else inference_mode()):
            yield
    finally:
        if was is not None:
            model.train(was)


def _run(model, args, kwargs):
    from ..trace import map_structure
    from ..tensor import Tensor
    out = []
    map_structure(model(*args, **kwargs), lambda x: out.append(x) if isinstance(x, Tensor)
                  else None)
    return out


def _verify(program, args, kwargs, expected):
    import numpy as np
    from ..trace import map_structure
    from ..tensor import Tensor
    flat = []
    map_structure((args, kwargs), lambda x: flat.append(x) if isinstance(x, Tensor) else None)
    got = program(*flat)
    for name, g, e in zip(program.output_names, got, expected):
        if not np.allclose(g.numpy(), e.detach().cpu().numpy(), rtol=1e-4, atol=1e-5,
                           equal_nan=True):
            raise OnnxExporterError(f"tracegrad.onnx.export(verify=True): output '{name}' of "
                                    "onnxruntime differs from the model's own")


def _version():
    from .. import __version__
    return __version__


__all__ = ["export", "ONNXProgram", "OnnxExporterError", "TrainingMode", "OperatorExportTypes",
           "is_in_onnx_export"]
