"""PyTorch's values made tracegrad's, and the two libraries' results compared: what the
sweeps over PyTorch's databases (``opinfo_sweep``, ``moduleinfo_sweep``, ``optiminfo_sweep``)
and the smoke calls share. A value with no tracegrad counterpart raises ``Unconvertible``;
one outside tracegrad's scope (complex, bfloat16, sparse gradients) ``OutOfScope``, which
the sweeps count as skipped. torch is imported lazily: this module imports without it."""
import inspect
import sys

import numpy as np

import tracegrad as tg


class Unconvertible(TypeError):
    """A sample holds a value with no tracegrad counterpart (a dtype, a layout...)."""


class OutOfScope(Unconvertible):
    """A sample outside tracegrad's scope (issue 22): a complex dtype, tensor or scalar, a
    bfloat16 tensor (tracegrad has no bfloat16 dtype), or sparse gradients
    (``sparse=True``). ``run_stage`` skips it and counts it in ``SKIPPED``; every other
    unconvertible value fails the entry."""


def torch():
    import torch as _torch
    return _torch


# ---- conversion from torch values to tracegrad values -------------------------------

def to_tg_dtype(dtype):
    name = str(dtype).removeprefix("torch.")
    if dtype.is_complex or dtype == torch().bfloat16:   # tracegrad has neither
        raise OutOfScope(f"a {'complex' if dtype.is_complex else name} dtype ({name})")
    converted = getattr(tg, name, None)
    if converted is None:
        raise Unconvertible(f"tracegrad has no dtype {name}")
    return converted


def to_tg_tensor(tensor, requires_grad=False):
    dtype = to_tg_dtype(tensor.dtype)
    if tensor.layout != torch().strided:
        raise Unconvertible(f"a {tensor.dtype} tensor of layout {tensor.layout}")
    values = tensor.detach().resolve_neg().resolve_conj().numpy().copy()
    return tg.tensor(values, dtype=dtype, requires_grad=requires_grad and tensor.requires_grad)


def to_tg(value, requires_grad=False):
    """``value`` with every torch tensor, dtype, nn module and named torch object (a
    layout, a memory format) made tracegrad's."""
    t = torch()
    if isinstance(value, t.Tensor):
        return to_tg_tensor(value, requires_grad)
    if isinstance(value, t.dtype):
        return to_tg_dtype(value)
    if isinstance(value, t.Size):
        return tuple(value)
    if isinstance(value, complex):
        raise OutOfScope(f"a complex scalar ({value!r})")
    if isinstance(value, t.device):
        return tg.device(str(value))
    if isinstance(value, (list, tuple)):
        items = [to_tg(v, requires_grad) for v in value]
        return type(value)(items) if type(value) in (list, tuple) else tuple(items)
    if isinstance(value, dict):
        return {k: to_tg(v, requires_grad) for k, v in value.items()}
    if isinstance(value, t.nn.Module):
        return to_tg_module(value)
    if type(value).__module__.startswith("torch"):
        return _named_torch_object(value)
    return value


def to_tg_module(module):
    """The ``tracegrad.nn`` module of the same class name, built with the torch module's
    constructor arguments (those it keeps as attributes of their own name), then given every
    other plain attribute the two share (PairwiseDistance keeps ``p`` as ``norm``) and the
    torch module's parameters and buffers."""
    cls = getattr(tg.nn, type(module).__name__, None)
    if not isinstance(cls, type) or not issubclass(cls, tg.nn.Module):
        raise Unconvertible(f"tracegrad.nn has no module {type(module).__name__}")
    own = {k: v for k, v in vars(module).items() if not k.startswith("_")}
    arguments = {name: to_tg(own[name]) for name in inspect.signature(cls).parameters
                 if name in own}
    converted = cls(**arguments)
    for name, value in own.items():
        if name in vars(converted) and not isinstance(value, torch().nn.Module):
            setattr(converted, name, to_tg(value))
    state = module.state_dict()
    floats = {v.dtype for v in state.values() if v.is_floating_point()}
    if len(floats) == 1:    # load_state_dict keeps the parameters' dtype: make it the module's
        converted = converted.to(to_tg_dtype(floats.pop()))
    if state:
        converted.load_state_dict({k: to_tg_tensor(v) for k, v in state.items()})
    return converted


def _named_torch_object(value):
    """A torch.memory_format / layout etc. by its name in tracegrad."""
    name = str(value).removeprefix("torch.")
    converted = getattr(tg, name, None) if name.isidentifier() else None
    if converted is None:
        raise Unconvertible(f"tracegrad has no counterpart of {value!r}")
    return converted


def leaves(value):
    """The leaves of nested lists/tuples/dicts, in order."""
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in leaves(v)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in leaves(v)]
    return [value]


def tensors_of(value, tensor_type):
    return [leaf for leaf in leaves(value) if isinstance(leaf, tensor_type)]


def replace_tensors(value, tensor_type, replacements):
    """``value`` with its tensors (in ``leaves`` order) taken from the iterator given."""
    if isinstance(value, tensor_type):
        return next(replacements)
    if isinstance(value, (list, tuple)):
        items = [replace_tensors(v, tensor_type, replacements) for v in value]
        return type(value)(items) if type(value) in (list, tuple) else tuple(items)
    if isinstance(value, dict):
        return {k: replace_tensors(v, tensor_type, replacements) for k, v in value.items()}
    return value


# ---- running a sample -------------------------------------------------------------

def torch_call(op, sample):
    """PyTorch's result on the sample, or None when PyTorch itself raises."""
    try:
        return op(sample.input, *sample.args, **sample.kwargs)
    except Exception:  # noqa: BLE001 - a sample PyTorch rejects is out of scope
        return None


def tg_call(fn, tg_sample):
    inp, args, kwargs = tg_sample
    return fn(inp, *args, **kwargs)


def convert_sample(sample, requires_grad=False):
    """(input, args, kwargs) made tracegrad's; OutOfScope for sparse gradients."""
    if sample.kwargs.get("sparse"):
        raise OutOfScope("sparse=True (sparse gradients)")
    return (to_tg(sample.input, requires_grad), to_tg(list(sample.args), requires_grad),
            to_tg(dict(sample.kwargs), requires_grad))


# ---- comparison -------------------------------------------------------------------

def to_numpy(tensor):
    return tensor.detach().numpy()


def compare_outputs(expected, actual, rtol, atol, values, where, truth=None):
    """Assert ``actual`` (tracegrad) matches ``expected`` leaf by leaf; with ``truth``
    (the float64 evaluation, as many leaves) a value may instead be as close to it as
    ``expected``'s (``assert_close``)."""
    expected_leaves = _leaf_list(expected)
    actual_leaves = _leaf_list(actual)
    assert len(expected_leaves) == len(actual_leaves), (
        f"{where}: {len(actual_leaves)} outputs, expected {len(expected_leaves)}")
    truths = [None] * len(expected_leaves) if truth is None else _leaf_list(truth)
    for i, (want, got, true) in enumerate(zip(expected_leaves, actual_leaves, truths)):
        compare_leaf(want, got, rtol, atol, values, f"{where} output {i}", truth=true)


def _leaf_list(value):
    return leaves(value) if isinstance(value, (list, tuple)) else [value]


def compare_leaf(want, got, rtol, atol, values, where, truth=None):
    want_array, want_dtype = _as_array(want)
    got_array, got_dtype = _as_array(got)
    if want_array is None:
        assert _plain(want) == _plain(got), f"{where}: {got!r} != {want!r}"
        return
    assert got_array is not None, f"{where}: got {type(got).__name__}, expected a tensor"
    assert want_dtype == got_dtype, f"{where}: dtype {got_dtype}, expected {want_dtype}"
    assert want_array.shape == got_array.shape, (
        f"{where}: shape {got_array.shape}, expected {want_array.shape}")
    if values:
        assert_close(want_array, got_array, rtol, atol, where,
                     truth=None if truth is None else _as_array(truth)[0])


def _plain(value):
    """A non-tensor output as comparable text: dtypes by name, numbers by value."""
    if isinstance(value, (bool, int, float)):
        return value
    return str(value).removeprefix("torch.").removeprefix("tracegrad.")


def _as_array(value):
    """(array, dtype name) for a tensor of either library, else (None, None)."""
    if isinstance(value, tg.Tensor):
        return to_numpy(value), str(value.dtype).removeprefix("tracegrad.").removeprefix(
            "torch.")
    if "torch" in sys.modules and isinstance(value, torch().Tensor):
        if value._is_zerotensor():   # a gradient PyTorch knows to be zero, unmaterialised
            return np.zeros(tuple(value.shape), dtype=value.numpy(force=True).dtype), str(
                value.dtype).removeprefix("torch.")
        return value.detach().cpu().resolve_conj().resolve_neg().numpy(), str(
            value.dtype).removeprefix("torch.")
    return None, None


def assert_close(want, got, rtol, atol, where, truth=None):
    """Equal NaN positions and infinities, the finite values within ``atol + rtol *
    |want|``; with ``truth``, a value outside that passes where ``arbitrated`` says it is
    as close to the truth as ``want``."""
    if want.dtype == bool or not np.issubdtype(want.dtype, np.inexact):
        mismatched = np.count_nonzero(want != got)
        assert mismatched == 0, f"{where}: {mismatched} of {want.size} values differ"
        return
    want64, got64 = want.astype(np.float64), got.astype(np.float64)
    nan_want, nan_got = np.isnan(want64), np.isnan(got64)
    assert np.array_equal(nan_want, nan_got), f"{where}: NaN positions differ"
    finite = np.isfinite(want64) & np.isfinite(got64)
    assert np.array_equal(want64[~finite & ~nan_want], got64[~finite & ~nan_got]), (
        f"{where}: infinities differ")
    error = np.abs(want64[finite] - got64[finite])
    allowed = atol + rtol * np.abs(want64[finite])
    bad = error > allowed
    if truth is not None:
        bad &= ~arbitrated(want64[finite], got64[finite],
                           np.broadcast_to(truth, want.shape)[finite], want.dtype)
    assert not bad.any(), (f"{where}: {np.count_nonzero(bad)} of {want.size} values differ, "
                           f"max error {error.max():.3g}")


def arbitrated(want, got, truth, dtype):
    """Where ``got`` is at least as close to ``truth`` (float64) as ``want`` is, give or
    take one rounding of the truth to ``dtype`` (its epsilon times ``|truth|``): a value
    that differs from PyTorch's but is no further from the float64 result."""
    truth = truth.astype(np.float64)
    slack = np.finfo(dtype).eps * np.abs(truth)
    with np.errstate(invalid="ignore"):
        return np.isfinite(truth) & (np.abs(got - truth) <= np.abs(want - truth) + slack)
