"""``tracegrad.testing.assert_close``: PyTorch's comparison, tolerances and messages.

Tensors (and NumPy arrays) compare with tensors, Python numbers with numbers, sequences and
mappings item by item. Default tolerances are PyTorch's per dtype (the looser of the two
operands' when ``check_dtype=False`` lets them differ); integers and bools compare exactly.
"""
import collections.abc
import math
import numbers

import numpy as np

from . import dtypes
from .tensor import Tensor

# dtype name -> (rtol, atol)
_TOLERANCES = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
               "float64": (1e-7, 1e-7)}


def _default_tolerances(*names):
    pairs = [_TOLERANCES.get(n, (0.0, 0.0)) for n in names]
    return max(p[0] for p in pairs), max(p[1] for p in pairs)


class _Mismatch(AssertionError):
    pass


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close:
    ``|actual - expected| <= atol + rtol * |expected|`` elementwise (NaN equal to NaN only
    with ``equal_nan``), after checking shape, dtype and device. The message is PyTorch's:
    the mismatched element count and the greatest absolute and relative differences with
    their indices; ``msg`` (a string, or a callable given the generated message) replaces
    it."""
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'atol' if atol is None else 'rtol'}.")
    try:
        _compare(actual, expected, (), rtol=rtol, atol=atol, equal_nan=equal_nan,
                 check_device=check_device, check_dtype=check_dtype)
    except _Mismatch as exc:
        text = str(exc)
        if msg is not None:
            text = msg(text) if callable(msg) else msg
        raise AssertionError(text) from None


def _is_tensor_like(x):
    return isinstance(x, (Tensor, np.ndarray))


def _compare(actual, expected, path, **kw):
    if _is_tensor_like(actual) and _is_tensor_like(expected):
        return _with_path(_compare_tensors, actual, expected, path, **kw)
    if _is_number(actual) and _is_number(expected):
        return _with_path(_compare_numbers, actual, expected, path, **kw)
    if isinstance(actual, collections.abc.Mapping) and isinstance(expected,
                                                                  collections.abc.Mapping):
        if set(actual) != set(expected):
            raise _Mismatch(f"The keys of the mappings do not match:\n\nMissing keys in the actual "
                            f"mapping: {sorted(set(expected) - set(actual), key=repr)}\nAdditional "
                            f"keys in the actual mapping: "
                            f"{sorted(set(actual) - set(expected), key=repr)}")
        for k in expected:
            _compare(actual[k], expected[k], path + (k,), **kw)
        return
    if _is_sequence(actual) and _is_sequence(expected):
        if len(actual) != len(expected):
            raise _Mismatch(f"The length of the sequences mismatch: {len(actual)} != "
                            f"{len(expected)}" + _where(path))
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, path + (i,), **kw)
        return
    if actual is None and expected is None:
        return
    raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and "
                    f"{type(expected)}.")


def _is_number(x):
    return isinstance(x, (numbers.Number, np.generic)) and not isinstance(x, (str, bytes))


def _is_sequence(x):
    return isinstance(x, collections.abc.Sequence) and not isinstance(x, str)


def _where(path):
    if not path:
        return ""
    return "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)


def _with_path(fn, actual, expected, path, **kw):
    try:
        fn(actual, expected, **kw)
    except _Mismatch as exc:
        raise _Mismatch(str(exc) + _where(path)) from None


def _as_array(x):
    if isinstance(x, Tensor):
        return x.detach().numpy(force=True) if hasattr(x, "numpy") else np.asarray(x)
    return np.asarray(x)


def _dtype_name(x):
    return x.dtype.name if isinstance(x, Tensor) else dtypes.from_numpy(x.dtype).name


def _attr_mismatch(name, a, e):
    raise _Mismatch(f"The values for attribute '{name}' do not match: {a} != {e}.")


def _compare_tensors(actual, expected, *, rtol, atol, equal_nan, check_device, check_dtype):
    if tuple(actual.shape) != tuple(expected.shape):
        _attr_mismatch("shape", _shape_repr(actual), _shape_repr(expected))
    if check_device and isinstance(actual, Tensor) and isinstance(expected, Tensor) \
            and actual.device != expected.device:
        _attr_mismatch("device", actual.device, expected.device)
    names = (_dtype_name(actual), _dtype_name(expected))
    if check_dtype and names[0] != names[1]:
        _attr_mismatch("dtype", _dtype_repr(actual), _dtype_repr(expected))
    if rtol is None:
        rtol, atol = _default_tolerances(*names)
    a, e = _as_array(actual), _as_array(expected)
    if a.dtype != e.dtype:
        common = np.promote_types(a.dtype, e.dtype)
        a, e = a.astype(common), e.astype(common)
    matches = _isclose(a, e, rtol, atol, equal_nan)
    if matches.all():
        return
    if a.ndim == 0:
        _scalar_mismatch(a.item(), e.item(), rtol, atol)
    raise _Mismatch(_tensor_message(a, e, matches, rtol, atol))


def _shape_repr(x):
    return repr(x.shape) if isinstance(x, Tensor) else f"tracegrad.Size({list(x.shape)})"


def _dtype_repr(x):
    return repr(x.dtype) if isinstance(x, Tensor) else repr(dtypes.from_numpy(x.dtype))


def _isclose(a, e, rtol, atol, equal_nan):
    if a.dtype.kind in "biu" and e.dtype.kind in "biu" and rtol == 0 and atol == 0:
        return a == e
    with np.errstate(all="ignore"):
        af, ef = (a, e) if a.dtype.kind == "f" else (a.astype(np.float64), e.astype(np.float64))
        close = (af == ef) | (np.abs(af - ef) <= atol + rtol * np.abs(ef))
        if equal_nan:
            close |= np.isnan(af) & np.isnan(ef)
    return close


def _tensor_message(a, e, matches, rtol, atol):
    n = matches.size
    bad = n - int(matches.sum())
    flat_match = matches.reshape(-1)
    if a.dtype.kind in "biu":   # PyTorch upcasts to int64; the ratio is in the default float
        af, ef = a.reshape(-1).astype(np.int64), e.reshape(-1).astype(np.int64)
        fdt = dtypes.get_default_dtype().np
    else:
        af, ef = a.reshape(-1), e.reshape(-1)
        fdt = af.dtype
    with np.errstate(all="ignore"):
        abs_diff = np.abs(af - ef)
        abs_diff[flat_match] = 0
        rel = abs_diff.astype(fdt) / np.abs(ef).astype(fdt)
        rel[flat_match] = 0
    i_abs, i_rel = int(np.argmax(abs_diff)), int(np.argmax(rel))
    extra = f"Mismatched elements: {bad} / {n} ({bad / n:.1%})"
    return _message("Tensor-likes", extra, abs_diff[i_abs].item(),
                    _index(i_abs, a.shape), rel[i_rel].item(), _index(i_rel, a.shape),
                    rtol, atol)


def _index(flat, shape):
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def _message(identifier, extra, abs_diff, abs_idx, rel_diff, rel_idx, rtol, atol):
    equality = rtol == 0 and atol == 0
    text = f"{identifier} are not {'equal' if equality else 'close'}!\n\n{extra}\n"
    for kind, diff, idx, tol in (("absolute", abs_diff, abs_idx, atol),
                                 ("relative", rel_diff, rel_idx, rtol)):
        line = (f"{kind.title()} difference: {diff}" if idx is None
                else f"Greatest {kind} difference: {diff} at index {idx}")
        text += line + ("" if equality else f" (up to {tol} allowed)") + "\n"
    return text.strip()


def _scalar_mismatch(actual, expected, rtol, atol):
    diff = abs(actual - expected)
    if expected == 0:
        rel = 0.0 if diff == 0 else math.inf
    else:
        rel = diff / abs(expected)
    raise _Mismatch(_message("Scalars", f"Expected {expected} but got {actual}.", diff, None,
                             rel, None, rtol, atol))


def _compare_numbers(actual, expected, *, rtol, atol, equal_nan, check_device, check_dtype):
    if isinstance(actual, np.generic):
        actual = actual.item()
    if isinstance(expected, np.generic):
        expected = expected.item()
    if check_dtype and type(actual) is not type(expected):
        _attr_mismatch("type", type(actual), type(expected))
    if rtol is None:
        exact = all(isinstance(v, (bool, int)) for v in (actual, expected))
        rtol, atol = (0.0, 0.0) if exact else _TOLERANCES["float64"]
    if actual == expected or (equal_nan and actual != actual and expected != expected):
        return
    if abs(actual - expected) <= atol + rtol * abs(expected):
        return
    _scalar_mismatch(actual, expected, rtol, atol)


__all__ = ["assert_close"]
