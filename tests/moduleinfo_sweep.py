"""The ModuleInfo sweep's machinery: PyTorch's nn module samples, run through tracegrad.

``test_moduleinfo.py`` parametrizes one test per (ModuleInfo entry, stage) over what is
here; ``python tests/moduleinfo_sweep.py`` prints the counts (``-v``: and each failure's
first error line). An entry (``module_db``'s ``nn.Linear``...) maps to the
``tracegrad.nn`` class of the same name, else it is "absent". Each sample is a
``ModuleInput``: both modules are built from its constructor arguments (torch values made
tracegrad's by ``opinfo_sweep``'s converters), the tracegrad one is given the torch one's
``state_dict`` (strictly: the same parameter and buffer names), both take the same
train/eval mode (both modes where the entry's ``train_and_eval_differ``). Stages:

- ``forward``: float32, the outputs and the state after the call (running statistics)
  against PyTorch's;
- ``grad``: float64, the vector-Jacobian product for a fixed cotangent, with respect to the
  inputs that require grad and every parameter (by name), against PyTorch's;
- ``compiled``: float32, ``tracegrad.compile(module)`` against tracegrad eager (two
  modules of the same state, so a call that updates buffers cannot leak into the other).

Lazy modules are materialised by one call on each side before the state is copied. A
sample PyTorch rejects is not counted. Random modules compare shapes and dtypes only.
torch is imported lazily: this module imports without it.
"""
import copy
import itertools
import os
import warnings

import opinfo_sweep as ops
import opinfo_convert as convert
import sweeps
import tracegrad as tg

STAGES = ("forward", "grad", "compiled")
# Samples per entry and mode, the first ones in the order module_inputs_func gives (None:
# all). Every sample fits the time: 1,210 samples (MultiheadAttention 128 over two modes,
# CrossEntropyLoss 105, the Transformer layers ~70, RNN/LSTM 64, most under 10) take about
# 12 s forward, 6 s grad and 36 s compiled on one core; a cap is the knob if that grows.
SAMPLE_CAP = {"forward": None, "grad": None, "compiled": None}

# Modules whose outputs are random (by ModuleInfo name): shapes and dtypes only. The
# fractional pools draw their windows unless the sample passes ``_random_samples`` (every
# sample of PyTorch 2.13 does); module_db has no RReLU or Dropout yet, and its Transformer
# and attention samples set dropout 0, so today every sample compares values.
VALUES_UNDEFINED = {"nn.FractionalMaxPool2d", "nn.FractionalMaxPool3d"}
RANDOM_WHEN_TRAINING = {"nn.RReLU"}
DROPOUT_CLASSES = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                   "FeatureAlphaDropout")

# float32 (rtol, atol) per entry beyond rtol 1e-5, atol 1e-5, as opinfo_sweep's.
FLOAT32_TOLERANCE = {}
GRAD_TOLERANCE = {"torch.float32": (1e-5, 1e-5)}   # else (1e-7, 1e-9): float64

# (entry, stage) -> why it fails today; the tests mark these xfail (not strict).
KNOWN = {}


def torch():
    import torch as _torch
    return _torch


def module_db():
    from torch.testing._internal.common_modules import module_db as _module_db
    return _module_db


def tracegrad_class(module_info):
    cls = getattr(tg.nn, module_info.module_cls.__name__, None)
    return cls if isinstance(cls, type) and issubclass(cls, tg.nn.Module) else None


def entries():
    """Every ModuleInfo by name (sorted), with its tracegrad class or None."""
    return dict(sorted((m.name, (m, tracegrad_class(m))) for m in module_db()))


def stage_dtype(stage):
    return torch().float64 if stage == "grad" else torch().float32


def modes(module_info):
    return (True, False) if module_info.train_and_eval_differ else (True,)


def samples(module_info, stage, training):
    """The stage's ModuleInputs that have a forward input (their first SAMPLE_CAP)."""
    torch().manual_seed(0)
    generated = module_info.module_inputs_func(
        module_info, device="cpu", dtype=stage_dtype(stage), requires_grad=stage == "grad",
        training=training)
    usable = (s for s in generated if s.forward_input is not None)
    return list(itertools.islice(usable, SAMPLE_CAP[stage]))


# ---- conversion ----------------------------------------------------------------------

def to_tg(value, requires_grad=False, memo=None):
    """opinfo_sweep's ``to_tg``, plus PackedSequence and the torch functions a sample
    passes as arguments (a Transformer layer's ``activation=F.gelu``). ``memo`` keeps
    aliasing: a torch tensor passed twice (KLDivLoss's scalar samples pass one tensor as
    input and target) becomes one tracegrad tensor, so its gradient sums both uses."""
    t = torch()
    memo = {} if memo is None else memo
    if isinstance(value, t.Tensor):
        if id(value) not in memo:
            memo[id(value)] = convert.to_tg(value, requires_grad)
        return memo[id(value)]
    if isinstance(value, t.nn.utils.rnn.PackedSequence):
        return tg.nn.utils.rnn.PackedSequence(*(to_tg(v, requires_grad, memo) for v in value))
    if type(value) in (list, tuple):
        return type(value)(to_tg(v, requires_grad, memo) for v in value)
    if isinstance(value, dict):
        return {k: to_tg(v, requires_grad, memo) for k, v in value.items()}
    if isinstance(value, (t.nn.TransformerEncoderLayer, t.nn.TransformerDecoderLayer)):
        return _tg_transformer_layer(value)
    if callable(value) and not isinstance(value, (type, t.nn.Module)) and (
            getattr(value, "__module__", None) or "").startswith("torch"):
        return _tg_function(value)
    return convert.to_tg(value, requires_grad)


def _tg_transformer_layer(layer):
    """A Transformer layer keeps few of its constructor arguments as attributes (not
    ``d_model``, ``nhead``), so ``opinfo_sweep.to_tg_module`` cannot rebuild it: they are
    read off its submodules, then its state is copied."""
    attention = layer.self_attn
    activation = layer.activation
    cls = getattr(tg.nn, type(layer).__name__)
    converted = cls(
        attention.embed_dim, attention.num_heads, dim_feedforward=layer.linear1.out_features,
        dropout=layer.dropout.p, layer_norm_eps=layer.norm1.eps,
        batch_first=attention.batch_first, norm_first=layer.norm_first,
        bias=layer.linear1.bias is not None,
        activation=to_tg(activation) if not isinstance(activation, torch().nn.Module)
        else convert.to_tg_module(activation))
    state = layer.state_dict()
    converted = converted.to(convert.to_tg_dtype(next(iter(state.values())).dtype))
    converted.load_state_dict({k: convert.to_tg_tensor(v) for k, v in state.items()})
    return converted.train(layer.training)


def _tg_function(fn):
    for namespace in (tg.nn.functional, tg):
        found = getattr(namespace, fn.__name__, None)
        if callable(found):
            return found
    raise convert.Unconvertible(f"tracegrad has no function {fn.__name__}")


def _convert_call(function_input, requires_grad=False):
    memo = {}
    return (to_tg(list(function_input.args), requires_grad, memo),
            to_tg(dict(function_input.kwargs), requires_grad, memo))


def build(module_info, cls, sample, dtype, training):
    """(torch module, tracegrad module) of the same constructor arguments and state."""
    t = torch()
    args, kwargs = sample.constructor_input.args, sample.constructor_input.kwargs
    tg_args, tg_kwargs = _convert_call(sample.constructor_input)
    t.manual_seed(0)
    torch_module = module_info.module_cls(*args, **kwargs).to(dtype).train(training)
    tg_module = cls(*tg_args, **tg_kwargs).to(convert.to_tg_dtype(dtype)).train(training)
    if _lazy(torch_module):     # one call each materialises the parameters
        with t.no_grad():
            torch_module(*copy.deepcopy(sample.forward_input.args),
                         **copy.deepcopy(sample.forward_input.kwargs))
        fwd_args, fwd_kwargs = _convert_call(sample.forward_input)
        with tg.no_grad():
            tg_module(*fwd_args, **fwd_kwargs)
    tg_module.load_state_dict({k: convert.to_tg_tensor(v)
                               for k, v in torch_module.state_dict().items()})
    return torch_module, tg_module


def _lazy(module):
    uninitialized = torch().nn.parameter.is_lazy
    return any(uninitialized(p) for p in module.parameters())


# ---- the stages ----------------------------------------------------------------------

def values_defined(module_info, torch_module, sample, training):
    """False where the output is random: FractionalMaxPool without ``_random_samples``,
    RReLU training, a module with a nonzero dropout while training."""
    name = module_info.name
    if name in VALUES_UNDEFINED and "_random_samples" not in sample.constructor_input.kwargs:
        return False
    if not training:
        return True
    if name in RANDOM_WHEN_TRAINING:
        return False
    for sub in torch_module.modules():
        if type(sub).__name__ in DROPOUT_CLASSES and sub.p > 0:
            return False
        if isinstance(getattr(sub, "dropout", None), float) and sub.dropout > 0:
            return False   # MultiheadAttention keeps its dropout probability as a float
    return True


def _torch_forward(module, sample):
    try:
        return module(*sample.forward_input.args, **sample.forward_input.kwargs)
    except Exception:  # noqa: BLE001 - a sample PyTorch rejects is out of scope
        return None


def _tolerance(module_info):
    return FLOAT32_TOLERANCE.get(module_info.name, (1e-5, 1e-5))


def check_forward(module_info, cls, sample, training, where):
    torch_module, tg_module = build(module_info, cls, sample, stage_dtype("forward"), training)
    tg_args, tg_kwargs = _convert_call(sample.forward_input)   # before a module writes them
    expected = _torch_forward(torch_module, sample)
    if expected is None:
        return False
    actual = tg_module(*tg_args, **tg_kwargs)
    rtol, atol = _tolerance(module_info)
    defined = values_defined(module_info, torch_module, sample, training)
    convert.compare_outputs(expected, actual, rtol, atol, defined, where)
    want_state, got_state = torch_module.state_dict(), tg_module.state_dict()
    for name, value in want_state.items():
        convert.compare_leaf(value, got_state[name], rtol, atol, defined, f"{where} state {name}")
    return True


def check_grad(module_info, cls, sample, training, where):
    """The VJP of every float output PyTorch differentiates, with respect to the inputs
    that require grad and every parameter, matched by name."""
    t = torch()
    torch_module, tg_module = build(module_info, cls, sample, stage_dtype("grad"), training)
    tg_args, tg_kwargs = _convert_call(sample.forward_input, requires_grad=True)
    t.manual_seed(0)
    expected = _torch_forward(torch_module, sample)
    if expected is None:
        return False
    fwd = (list(sample.forward_input.args), dict(sample.forward_input.kwargs))
    torch_inputs = [x for x in convert.tensors_of(fwd, t.Tensor) if x.requires_grad]
    torch_params = dict(torch_module.named_parameters())
    torch_outputs = convert.tensors_of([expected], t.Tensor)
    wanted = [i for i, o in enumerate(torch_outputs) if ops._differentiable(o)]
    if not wanted:
        return False
    cotangents = {i: ops._cotangent(i, torch_outputs[i]) for i in wanted}
    want = t.autograd.grad(
        [torch_outputs[i] for i in wanted], torch_inputs + list(torch_params.values()),
        [t.from_numpy(c).to(torch_outputs[i].dtype) for i, c in cotangents.items()],
        allow_unused=True)
    tg.manual_seed(0)
    tg_params = dict(tg_module.named_parameters())
    assert sorted(tg_params) == sorted(torch_params), (
        f"{where}: parameters {sorted(tg_params)}, expected {sorted(torch_params)}")
    tg_inputs = [x for x in convert.tensors_of((tg_args, tg_kwargs), tg.Tensor) if x.requires_grad]
    tg_outputs = convert.tensors_of([tg_module(*tg_args, **tg_kwargs)], tg.Tensor)
    assert len(tg_outputs) == len(torch_outputs), (
        f"{where}: {len(tg_outputs)} tensor outputs, expected {len(torch_outputs)}")
    got = ops._tg_vjp([(tg_outputs[i], c) for i, c in cotangents.items()
                       if ops._differentiable(tg_outputs[i])],
                      tg_inputs + [tg_params[name] for name in torch_params])
    names = [f"input {i}" for i in range(len(torch_inputs))] + list(torch_params)
    defined = values_defined(module_info, torch_module, sample, training)
    for name, w, g in zip(names, want, got):
        if w is None or g is None:
            assert ops._all_zero(w) and ops._all_zero(g), (
                f"{where}: grad of {name} None on one side only")
        else:
            rtol, atol = GRAD_TOLERANCE.get(str(w.dtype), (1e-7, 1e-9))
            convert.compare_leaf(w, g, rtol, atol, defined, f"{where} grad of {name}")
    return True


def check_compiled(module_info, cls, sample, training, where):
    """tracegrad.compile(module) against the eager module: two modules of one state."""
    torch_module, eager_module = build(module_info, cls, sample, stage_dtype("compiled"),
                                       training)
    if _torch_forward(torch_module, sample) is None:
        return False
    tg_args, tg_kwargs = _convert_call(sample.constructor_input)
    compiled_module = cls(*tg_args, **tg_kwargs).to(tg.float32).train(training)
    compiled_module.load_state_dict(eager_module.state_dict())
    eager_args, eager_kwargs = _convert_call(sample.forward_input)
    args, kwargs = _convert_call(sample.forward_input)
    tg.manual_seed(0)
    eager = eager_module(*eager_args, **eager_kwargs)
    tg.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = tg.compile(compiled_module)(*args, **kwargs)
    convert.compare_outputs(eager, compiled, 1e-5, 1e-6,
                        values_defined(module_info, torch_module, sample, training), where)
    return True


CHECKS = {"forward": check_forward, "grad": check_grad, "compiled": check_compiled}


def run_stage(module_info, cls, stage):
    """Check every sample of the stage in each mode; the number checked."""
    checked = 0
    for training in modes(module_info):
        mode = "train" if training else "eval"
        for index, sample in enumerate(samples(module_info, stage, training)):
            where = f"{module_info.name} {mode} sample {index} ({sample.desc or 'no desc'})"
            if CHECKS[stage](module_info, cls, sample, training, where):
                checked += 1
    return checked


# ---- counts --------------------------------------------------------------------------

def outcome(module_info, cls, stage):
    """'pass', 'fail: <why>', 'absent' or 'no samples'."""
    if cls is None:
        return "absent"
    try:
        checked = run_stage(module_info, cls, stage)
    except Exception as error:  # noqa: BLE001 - any error is the entry's failure
        return sweeps.failure(error, 160)
    return "pass" if checked else "no samples"


def main():
    os.environ.setdefault("TRACEGRAD_BACKEND", "numpy")   # as the tests run (conftest)
    warnings.simplefilter("ignore")
    table = entries()
    print(f"ModuleInfo entries: {len(table)}; with a tracegrad.nn class: "
          f"{sum(cls is not None for _, cls in table.values())}")
    sweeps.report(table, STAGES, outcome, KNOWN, ("pass", "fail", "absent", "no samples"))


if __name__ == "__main__":
    main()
