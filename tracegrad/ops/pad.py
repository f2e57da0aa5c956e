"""Padding primitives: constant, reflection, replication and circular pads of the trailing dims.

Each pad takes ``pad``, one ``(low, high)`` pair per padded dim, the last dims of the input;
``pad_nd`` picks the primitive for a mode (``F.pad`` in ``nn/functional/_conv.py`` checks the
arguments with PyTorch's wording and calls it). A constant pad's widths may be negative (a
crop), and its VJP is a pad by minus its widths. Reflection and replication pads are one
primitive per number of padded dims (1 to 3), as PyTorch's kernels and their ``grad_fn``
names are; the circular pad is one for any. Each of those has a ``*_backward`` primitive
that folds the border gradients back onto the values they copied, and the two are each
other's VJP, so double backward works.
"""
from .core import Primitive, bind, op_error


# the constant pad ------------------------------------------------------------------------------

def _constant_pad_impl(xp, x, pad, value):
    _constant_pad_shape(x.shape, pad, value)
    nd = len(pad)
    lead = x.ndim - nd
    crop = (slice(None),) * lead + tuple(slice(max(-lo, 0), n - max(-hi, 0))
                                         for n, (lo, hi) in zip(x.shape[lead:], pad))
    x = x[crop]
    widths = ((0, 0),) * lead + tuple((max(lo, 0), max(hi, 0)) for lo, hi in pad)
    return xp.pad(x, widths, mode="constant", constant_values=value)


def _constant_pad_shape(s, pad, value):
    nd = len(pad)
    if nd > len(s):
        raise RuntimeError(f"Length of pad should be no more than twice the number of dimensions "
                           f"of the input. Pad length is {2 * nd} while the input has {len(s)} "
                           f"dimensions.")
    out = tuple(s[:len(s) - nd]) + tuple(n + lo + hi for n, (lo, hi) in zip(s[len(s) - nd:], pad))
    if any(n < 0 for n in out):
        raise RuntimeError("narrow(): length must be non-negative.")
    return out


constant_pad_nd_p = Primitive(
    "constant_pad_nd", _constant_pad_impl, dtype=lambda x, **_: x.dtype,
    shape=_constant_pad_shape,
    vjp=(lambda g, x, out, pad, value: constant_pad_nd(g, tuple((-lo, -hi) for lo, hi in pad)),),
    node="ConstantPadNdBackward0", kind="other")


def constant_pad_nd(input, pad, value=0.0):
    """``input`` padded by ``pad`` (``(low, high)`` per trailing dim; negative widths crop)."""
    return bind(constant_pad_nd_p, input, pad=tuple(tuple(p) for p in pad), value=value)


# reflection, replication and circular pads ------------------------------------------------------

_NP_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _fold_reflect(xp, part, lo, hi, n, axis):
    def sl(a, b):
        return (slice(None),) * axis + (slice(a, b),)
    out = part[sl(lo, lo + n)].copy()
    out[sl(1, lo + 1)] += xp.flip(part[sl(0, lo)], axis)
    out[sl(n - 1 - hi, n - 1)] += xp.flip(part[sl(lo + n, None)], axis)
    return out


def _fold_replicate(xp, part, lo, hi, n, axis):
    def sl(a, b):
        return (slice(None),) * axis + (slice(a, b),)
    out = part[sl(lo, lo + n)].copy()
    out[sl(0, 1)] += part[sl(0, lo)].sum(axis, keepdims=True)
    out[sl(n - 1, n)] += part[sl(lo + n, None)].sum(axis, keepdims=True)
    return out


def _fold_circular(xp, part, lo, hi, n, axis):
    def sl(a, b):
        return (slice(None),) * axis + (slice(a, b),)
    out = part[sl(lo, lo + n)].copy()
    out[sl(n - lo, n)] += part[sl(0, lo)]
    out[sl(0, hi)] += part[sl(lo + n, None)]
    return out


_FOLDS = {"reflect": _fold_reflect, "replicate": _fold_replicate, "circular": _fold_circular}


def _pad_impl(xp, x, pad, mode):
    _pad_shape(mode)(x.shape, pad)      # np.pad would reflect or wrap more than once
    lead = x.ndim - len(pad)
    return xp.pad(x, ((0, 0),) * lead + tuple(pad), mode=_NP_MODES[mode])


def _pad_backward_impl(xp, g, pad, mode, shape):
    """The adjoint of a pad: each padded dim's border gradients folded onto the values they
    copied (one slice-add per border; a reflection or a wrap maps a border one-to-one)."""
    lead = g.ndim - len(pad)
    for i, (lo, hi) in enumerate(pad):
        g = _FOLDS[mode](xp, g, lo, hi, shape[lead + i], lead + i)
    return g


def _pad_shape(mode):
    def rule(s, pad):
        lead = len(s) - len(pad)
        for i, ((lo, hi), n) in enumerate(zip(pad, s[lead:])):
            too_big = (lo >= n or hi >= n) if mode == "reflect" else (lo > n or hi > n)
            if too_big and mode != "replicate":
                raise RuntimeError(f"Padding size should be less than the corresponding input "
                                   f"dimension, but got: padding ({lo}, {hi}) at dimension "
                                   f"{lead + i} of input {list(s)}" if mode == "reflect" else
                                   "Padding value causes wrapping around more than once.")
            if mode == "replicate" and n == 0:
                raise RuntimeError(f"Expected input's dimension {lead + i} to be non-empty")
            if lo < 0 or hi < 0:
                raise RuntimeError(f"{mode} padding widths must be non-negative, got {(lo, hi)}")
        return tuple(s[:lead]) + tuple(n + lo + hi for n, (lo, hi) in zip(s[lead:], pad))
    return rule


def _declare_pad(mode, name, node, backward_node):
    """A pad primitive and its adjoint, each the other's VJP."""
    fwd = Primitive(
        name, lambda xp, x, pad: _pad_impl(xp, x, pad, mode), dtype=lambda x, **_: x.dtype,
        shape=_pad_shape(mode),
        vjp=(lambda g, x, out, pad: bind(bwd, g, pad=pad, shape=tuple(x.shape)),),
        node=node, kind="other")
    bwd = Primitive(
        name + "_backward", lambda xp, g, pad, shape: _pad_backward_impl(xp, g, pad, mode, shape),
        dtype=lambda g, **_: g.dtype,
        shape=lambda s, pad, shape: tuple(shape),
        vjp=(lambda g, gy, out, pad, shape: bind(fwd, g, pad=pad),),
        node=backward_node, kind="other")
    return fwd


# PyTorch names the node after the number of padded dims: ReflectionPad2DBackward0, ...
PAD_PRIMITIVES = {("circular", None): _declare_pad("circular", "circular_pad", "CopySlices",
                                                   "CircularPadBackwardBackward0")}
for _mode, _stem in (("reflect", "Reflection"), ("replicate", "Replication")):
    for _nd in (1, 2, 3):
        PAD_PRIMITIVES[_mode, _nd] = _declare_pad(
            _mode, f"{_stem.lower()}_pad{_nd}d", f"{_stem}Pad{_nd}DBackward0",
            f"{_stem}Pad{_nd}DBackwardBackward0")


def _replicate_crop(input, pad):
    """``(crop, pad)`` for a replication pad with a negative width: PyTorch's kernel reads
    ``x[clamp(j - low, 0, n - 1)]`` for output ``j``, so a crop past the far end still
    replicates the last element (``(-5, 3)`` on ``[a, b, c, d]`` is ``[d, d]``). ``crop``
    keeps the elements read (non-positive widths, a ``constant_pad_nd``) and ``pad`` is the
    non-negative replication of them."""
    lead = input.ndim - len(pad)
    shape = tuple(input.shape[:lead]) + tuple(
        n + lo + hi for (lo, hi), n in zip(pad, input.shape[lead:]))
    if len(pad) == 1 and shape[-1] <= 0:
        raise op_error("pad", f"input (W: {input.shape[-1]}) is too small. Calculated output "
                              f"W: {shape[-1]}")
    if min(shape) < 0:          # PyTorch's 2-d and 3-d pads allow an empty output
        raise op_error("pad", f"Trying to create tensor with negative dimension {min(shape)}: "
                              f"{list(shape)}")
    crop, widths = [], []
    for (lo, hi), n, out in zip(pad, input.shape[lead:], shape[lead:]):
        if out == 0:
            crop.append((-n, 0))
            widths.append((0, 0))
            continue
        first, last = min(max(-lo, 0), n - 1), min(max(n + hi - 1, 0), n - 1)   # read
        kept = last - first + 1
        low = min(max(lo, 0), out - kept)
        crop.append((-first, last + 1 - n))
        widths.append((low, out - kept - low))
    return tuple(crop), tuple(widths)


def pad_nd(input, pad, mode="constant", value=0.0):
    """``input`` padded in its trailing ``len(pad)`` dims (``pad``: ``(low, high)`` pairs);
    a negative width crops in the constant and the replication pads."""
    pad = tuple(tuple(int(v) for v in p) for p in pad)
    if mode == "constant":
        return constant_pad_nd(input, pad, value)
    if mode not in _NP_MODES:
        raise op_error("pad", f"Unrecognised padding mode {mode}", NotImplementedError)
    if mode == "replicate" and any(w < 0 for p in pad for w in p):
        crop, pad = _replicate_crop(input, pad)
        input = constant_pad_nd(input, crop)
        if 0 in input.shape:    # an empty output: its shape is all there is to it
            return constant_pad_nd(input, pad)
    prim = PAD_PRIMITIVES[mode, None if mode == "circular" else len(pad)]
    return bind(prim, input, pad=pad)


__all__ = ["constant_pad_nd", "pad_nd"]
