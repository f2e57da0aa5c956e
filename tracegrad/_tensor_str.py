"""``repr(tensor)`` in PyTorch's format: same number formatting, wrapping and suffixes."""
import math

import numpy as np

from . import dtypes


class _PrintOptions:
    precision = 4
    threshold = 1000
    edgeitems = 3
    linewidth = 80
    sci_mode = None


PRINT_OPTS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    if profile == "default":
        PRINT_OPTS.precision, PRINT_OPTS.threshold = 4, 1000
        PRINT_OPTS.edgeitems, PRINT_OPTS.linewidth = 3, 80
    for name, v in (("precision", precision), ("threshold", threshold),
                    ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if v is not None:
            setattr(PRINT_OPTS, name, v)
    PRINT_OPTS.sci_mode = sci_mode


class _Formatter:
    """Chooses integer, fixed or scientific notation from all values, as PyTorch does."""

    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode, self.sci_mode, self.max_width = True, False, 1
        p = PRINT_OPTS.precision
        if not floating:
            for v in values.reshape(-1).tolist():
                self.max_width = max(self.max_width, len(f"{v}"))
            return
        flat = values.reshape(-1).astype(np.float64)
        finite = flat[np.isfinite(flat) & (flat != 0)]
        if finite.size == 0:
            return
        vals = finite.tolist()
        fabs = np.abs(finite)
        lo, hi = float(fabs.min()), float(fabs.max())
        self.int_mode = all(v == math.ceil(v) for v in vals)
        if self.int_mode:
            if hi / lo > 1000.0 or hi > 1.0e8:
                self.sci_mode = True
                strs = [f"{v:.{p}e}" for v in vals]
            else:
                strs = [f"{v:.0f}" for v in vals]
                self.max_width = max(self.max_width, max(len(s) + 1 for s in strs))
                strs = []
        else:
            if hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                strs = [f"{v:.{p}e}" for v in vals]
            else:
                strs = [f"{v:.{p}f}" for v in vals]
        for s in strs:
            self.max_width = max(self.max_width, len(s))
        if PRINT_OPTS.sci_mode is not None:
            self.sci_mode = PRINT_OPTS.sci_mode

    def format(self, v):
        p = PRINT_OPTS.precision
        if self.floating:
            if self.sci_mode:
                s = f"{v:{self.max_width}.{p}e}"
            elif self.int_mode:
                s = f"{v:.0f}"
                if not (math.isinf(v) or math.isnan(v)):
                    s += "."
            else:
                s = f"{v:.{p}f}"
        else:
            s = f"{v}"
        return (self.max_width - len(s)) * " " + s


def _summarized(a):
    e = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.shape[0] > 2 * e:
        parts = [_summarized(x) for x in list(a[:e]) + list(a[-e:])] if a.ndim > 1 else \
            [a[:e], a[-e:]]
        return np.concatenate(parts) if a.ndim == 1 else np.stack(parts)
    if a.ndim == 1:
        return a
    return np.stack([_summarized(x) for x in a])


def _vector_str(a, indent, summarize, fmt):
    width = fmt.max_width + 2
    per_line = max(1, int(math.floor((PRINT_OPTS.linewidth - indent) / width)))
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        data = [fmt.format(v) for v in a[:e].tolist()] + [" ..."] + \
            [fmt.format(v) for v in a[-e:].tolist()]
    else:
        data = [fmt.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str(a, indent, summarize, fmt):
    if a.ndim == 0:
        return fmt.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, fmt)
    e = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * e:
        slices = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] + \
                 [_tensor_str(a[i], indent + 1, summarize, fmt)
                  for i in range(a.shape[0] - e, a.shape[0])]
    else:
        slices = [_tensor_str(a[i], indent + 1, summarize, fmt) for i in range(a.shape[0])]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def array_str(a, indent):
    """The bracketed body of a repr for array ``a`` (NumPy, on the host)."""
    if a.dtype == np.float16:
        a = a.astype(np.float32)
    summarize = a.size > PRINT_OPTS.threshold
    fmt = _Formatter(_summarized(a) if summarize else a, a.dtype.kind == "f")
    return _tensor_str(a, indent, summarize, fmt)


def _add_suffixes(body, suffixes, indent):
    out = [body]
    last_line_len = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            out.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            out.append(", " + suffix)
            last_line_len += len(suffix) + 2
    out.append(")")
    return "".join(out)


def tensor_repr(t, prefix="tensor("):
    from .device import CPU, to_device
    indent = len(prefix)
    a = to_device(t._data, CPU)
    dt = t.dtype
    suffixes = []
    if t.device.type != "cpu":
        suffixes.append(f"device='{t.device}'")
    default = dt in (dtypes.get_default_dtype(), dtypes.int64, dtypes.bool)
    if a.size == 0:
        if a.ndim != 1:
            suffixes.append(f"size={tuple(a.shape)}")
        if dt is not dtypes.get_default_dtype():
            suffixes.append(f"dtype={dt!r}")
        body = "[]"
    else:
        if not default:
            suffixes.append(f"dtype={dt!r}")
        body = array_str(a, indent)
    fn = t._grad_fn
    if fn is not None:
        suffixes.append(f"grad_fn=<{type(fn).__name__}>")
    elif t._requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
