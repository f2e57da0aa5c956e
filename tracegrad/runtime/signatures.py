"""Call signatures: the key a compiled function's variants are cached under, and why a
call's key differs from a variant's, in words.

A signature is the argument structure, each tensor's shape, dtype, device and
requires_grad, and the value of every other argument (``_flatten``); the grad and inference
modes join it in the key. ``_difference`` names the first entry that changed, for
``stats["retrace_reasons"]``.
"""
from numpy import ndarray

from tracegrad.tensor import Tensor


_ARGS_KWARGS = (tuple, 2)     # the signature's first entry: the (args, kwargs) pair


def _flatten(x, path, tensors, paths, sig):
    """Collect tensors (with a readable path each, unless ``paths`` is None) and a hashable
    signature of ``x``."""
    if isinstance(x, Tensor):
        tensors.append(x)
        if paths is not None:
            paths.append(path or "arg")
        sig.append(("T", x._data.shape, x.dtype, _where_data(x._data), x._requires_grad))
    elif isinstance(x, (tuple, list)):
        sig.append((type(x), len(x)))
        if path == "":          # the top level: (args, kwargs)
            args, kwargs = x
            for i, a in enumerate(args):
                _flatten(a, f"arg{i}", tensors, paths, sig)
            for k, a in kwargs.items():
                sig.append(("kw", k))
                _flatten(a, k, tensors, paths, sig)
            return
        for i, a in enumerate(x):
            _flatten(a, None if paths is None else f"{path}_{i}", tensors, paths, sig)
    elif isinstance(x, dict):
        sig.append((type(x), tuple(x)))
        for k, a in x.items():
            _flatten(a, None if paths is None else f"{path}_{k}", tensors, paths, sig)
    elif x is None or isinstance(x, (bool, int, float, str, complex, bytes)):
        sig.append((type(x), x))
    else:
        sig.append(("obj", type(x), id(x)))


def _on_gpu(array):
    """The signature's place of a GPU array: its type and device index (a variant's kernels,
    constants and buffers live on one device)."""
    return (type(array), array.device.id)


def _where_data(array):
    """Where a tensor's data lives, as signatures say it: ``np.ndarray`` on the CPU (free),
    ``(array type, device index)`` on a GPU."""
    return ndarray if type(array) is ndarray else _on_gpu(array)


def _tensor_metas(sig):
    return [s for s in sig if type(s) is tuple and s and s[0] == "T"]


def _fmt_meta(m):
    _, shape, dtype, kind, rg = m
    return f"{dtype.name}[{', '.join(map(str, shape))}]" + (" requires_grad" if rg else "")


# the fields of a tensor's signature entry ("T", shape, dtype, _where_data, requires_grad)
_TENSOR_FIELDS = (("shape", lambda s: "[" + ", ".join("dynamic" if n is None else str(n)
                                                      for n in s) + "]"), ("dtype", lambda d: d.name),
                  ("device", lambda where: "cpu" if where is ndarray else f"cuda:{where[1]}"),
                  ("requires_grad", bool))


def _mode_name(grad, inference):
    return "inference mode" if inference else ("grad mode" if grad else "no_grad")


def _difference(old, key, paths):
    """Why ``key`` does not match the variant ``old``, in words."""
    osig, ograd, oinf = old.signature
    sig, grad, inf = key
    if (grad, inf) != (ograd, oinf):
        return f"grad mode changed: {_mode_name(ograd, oinf)} -> {_mode_name(grad, inf)}"
    if len(osig) != len(sig):
        return "the structure of the arguments changed"
    ti = 0
    for a, b in zip(osig, sig):
        is_t = type(b) is tuple and b and b[0] == "T"
        name = paths[ti] if is_t and ti < len(paths) else "an argument"
        if is_t:
            ti += 1
        if a == b:
            continue
        if a[0] == "training":
            return "a module switched between train() and eval()"
        if is_t and type(a) is tuple and a and a[0] == "T":
            for i, (what, fmt) in enumerate(_TENSOR_FIELDS, 1):
                if a[i] != b[i]:
                    return f"{what} of {name} changed: {fmt(a[i])} -> {fmt(b[i])}"
        if type(a) is tuple and type(b) is tuple and len(a) == 2 and a[0] is b[0]:
            return f"a scalar argument changed: {a[1]!r} -> {b[1]!r}"
        return "the structure of the arguments changed"
    return "the arguments changed"
