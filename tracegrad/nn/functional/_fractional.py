"""Fractional max pooling (``fractional_max_pool2d``/``3d``, Graham's pseudo-random pooling
regions), and two small helpers of ``torch.nn.functional``: ``boolean_dispatch`` and
``assert_int_or_pair``.

Each plane (n, c) draws one number u in [0, 1) per spatial dim (``_random_samples``, shape
(N, C, 2) for 2-D, (N, C, 3) for 3-D; PyTorch's order: 2-D takes u[0] for the width and
u[1] for the height, 3-D u[0], u[1], u[2] for time, height, width). Along a dim of size L
with pool size k and output size o, window j starts at PyTorch's

    start[j] = int((j + u) * alpha) - int(u * alpha),  alpha = (L - k) / (o - 1)
    start[o - 1] = L - k

computed in the input's dtype (float32 for float32 input, truncated toward zero), so the same
samples give PyTorch's windows. The max of each k-window is found by ``fractional_argmax``
(PyTorch's scan order: a larger value or a NaN replaces the best; an all ``-inf`` window
keeps its first element), a loop over the kernel's taps vectorised over every window; the
values are a gather of the plane at those flat indices, whose VJP scatters (adds) the
gradient to them: ``ops/pool.py``'s gather pair, max pooling's.

Without ``_random_samples`` the samples come from tracegrad's generator (``manual_seed``), not
PyTorch's: the windows then match PyTorch's only where they do not depend on the samples
(``alpha`` an integer, or ``o <= 2``). PyTorch's OpInfo calls the op under
``wrapper_set_seed`` (``torch.manual_seed(42)``): to compare, pass the samples PyTorch draws
there, ``torch.rand(N, C, nd, dtype=input.dtype)`` after ``torch.manual_seed(42)``.
"""
import itertools
import math

import numpy as np

from ... import dtypes
from ...ops.core import Primitive, bind, op_error
from ...ops.pool import _gather_pair


def _starts(xp, u, L, k, out):
    """Window starts (*, out) along one dim from the samples ``u`` (*,), as PyTorch's
    ``generate_intervals`` in u's dtype."""
    seq = xp.zeros(u.shape + (out,), dtype=np.int64)
    if out > 1:
        alpha = u.dtype.type(L - k) / u.dtype.type(out - 1)
        j = xp.arange(out - 1).astype(u.dtype)
        seq[..., :out - 1] = (((j + u[..., None]) * alpha).astype(np.int64)
                              - (u * alpha).astype(np.int64)[..., None])
    if out > 0:
        seq[..., out - 1] = L - k
    return seq


def _fractional_argmax(xp, x, samples, kernel, output):
    """Flat per-plane indices (N, C, *output) of each window's max."""
    nd = len(kernel)
    spatial = x.shape[-nd:]
    u = samples[: x.shape[0]].astype(x.dtype if x.dtype.kind == "f" else np.float32)
    if u.dtype == np.float16:       # PyTorch's Half arithmetic rounds through float32
        u = u.astype(np.float32)
    order = (1, 0) if nd == 2 else (0, 1, 2)        # which sample each dim reads
    plane = [math.prod(spatial[i + 1:]) for i in range(nd)]
    starts = []
    for i in range(nd):
        s = _starts(xp, u[..., order[i]], spatial[i], kernel[i], output[i])   # (N, C, o_i)
        shape = s.shape[:2] + tuple(output[j] if j == i else 1 for j in range(nd))
        starts.append(s.reshape(shape))
    flat = x.reshape(x.shape[:2] + (math.prod(spatial),))     # -1 fails on an empty batch
    first = sum(s * p for s, p in zip(starts, plane))
    out_shape = x.shape[:2] + tuple(output)
    best_idx = xp.broadcast_to(first, out_shape).copy()
    best = xp.full(out_shape, -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min,
                   dtype=x.dtype)
    for taps in itertools.product(*(range(k) for k in kernel)):
        idx = first + sum(t * p for t, p in zip(taps, plane))
        idx = xp.broadcast_to(idx, out_shape)
        cand = xp.take_along_axis(flat, idx.reshape(out_shape[:2] + (math.prod(output),)),
                                  -1).reshape(out_shape)
        take = cand > best
        if x.dtype.kind == "f":
            take |= xp.isnan(cand)      # PyTorch's rule: a NaN is the max (the last one)
        best = xp.where(take, cand, best)
        best_idx = xp.where(take, idx, best_idx)
    return best_idx


fractional_argmax_p = Primitive(
    "fractional_argmax", _fractional_argmax, args=("self", "samples"),
    dtype=lambda x, s, kernel, output: dtypes.int64,
    shape=lambda s, ss, kernel, output: tuple(s[:2]) + tuple(output))


fractional_max_pool2d_p = _gather_pair("fractional_max_pool2d", "FractionalMaxPool2DBackward0")
fractional_max_pool3d_p = _gather_pair("fractional_max_pool3d", "FractionalMaxPool3DBackward0")


def _tuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


def _check(name, input, kernel, output, samples, nd):
    """PyTorch's checks (the C++ kernel's), in its order and words."""
    words = "tuple of Ints" if nd == 2 else "tuple of three Ints"
    if len(output) != nd:
        raise op_error(name, f"output_size must either be a single Int or {words}")
    if len(kernel) != nd:
        raise op_error(name, f"kernel_size must either be a single Int or {words}")
    if samples.ndim != 3:
        raise RuntimeError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    if samples.dtype is not input.dtype:
        raise RuntimeError("Expect _random_samples to have the same dtype as input")
    batch = input.shape[0] if input.ndim == nd + 2 else 1
    if samples.shape[0] < batch:
        raise RuntimeError("Expect _random_samples.size(0) no less then input batch size.")
    if samples.shape[1] != input.shape[-nd - 1]:
        raise RuntimeError("Expect _random_samples.size(1) equals to input channel size.")
    if samples.shape[2] != nd:
        raise RuntimeError(f"Expect _random_samples.size(2) equals to {nd}; got "
                           f"{samples.shape[2]}.")
    where = f"{name}()" if nd == 2 else f"{name}_out()"
    if input.ndim not in (nd + 1, nd + 2):
        raise op_error(where, f"Expected {nd + 1}D or {nd + 2}D tensor, but got: "
                              f"{list(input.shape)}")
    for i in range(1, input.ndim):
        if input.shape[i] == 0:
            raise op_error(where, f"Expected input to have non-zero size for non-batch "
                                  f"dimensions, but got{list(input.shape)} with dimension {i} "
                                  f"being empty.")
    names = ("height", "width") if nd == 2 else ("time", "height", "width")
    dims = list(zip(output, kernel, input.shape[-nd:], names))
    if nd == 3:                 # PyTorch checks time, width, then height
        dims = [dims[0], dims[2], dims[1]]
    for o, k, L, dim in dims:
        # PyTorch's 3-D check is strict (the last window may not end at the input's end)
        if o + k - 1 > L if nd == 2 else o + k - 1 >= L:
            raise op_error(where, f"pool {dim} {k} too large relative to input {dim} {L}")


def _fractional(name, prim, nd, input, kernel_size, output_size, output_ratio, samples):
    if output_size is None and output_ratio is None:
        raise ValueError(f"{name} requires specifying either an output_size or an "
                         f"output_ratio")
    if output_size is None:
        if nd == 2 and len(output_ratio) > 2:
            raise ValueError(f"{name} requires output_ratio to either be a single Int or "
                             f"tuple of Ints.")
        ratio = _tuple(output_ratio, nd)
        output_size = [int(input.size(-nd + i) * ratio[i]) for i in range(nd)]
    if samples is None:
        from ...creation import rand
        n_batch = 1 if input.dim() == nd + 1 else input.size(0)
        samples = rand(n_batch, input.size(-nd - 1), nd, dtype=input.dtype,
                       device=input.device)
    kernel, output = _tuple(kernel_size, nd), _tuple(output_size, nd)
    _check(name, input, kernel, output, samples, nd)
    x = input if input.ndim == nd + 2 else input.unsqueeze(0)
    indices = bind(fractional_argmax_p, x, samples.detach(), kernel=tuple(int(k) for k in kernel),
                   output=tuple(int(o) for o in output))
    values = bind(prim, x, indices, nd=nd)
    if input.ndim == nd + 1:
        values, indices = values.squeeze(0), indices.squeeze(0)
    return values, indices


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """``(values, indices)`` of 2-D fractional max pooling over (N, C, H, W) or (C, H, W):
    ``kernel_size`` windows at pseudo-random steps that give ``output_size`` (or
    ``output_ratio`` times the input size); indices are flat within each plane."""
    return _fractional("fractional_max_pool2d", fractional_max_pool2d_p, 2, input, kernel_size,
                       output_size, output_ratio, _random_samples)


def _fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None,
                           return_indices=False, _random_samples=None):
    return fractional_max_pool2d_with_indices(input, kernel_size, output_size, output_ratio,
                                              return_indices, _random_samples)[0]


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=False, _random_samples=None):
    """``(values, indices)`` of 3-D fractional max pooling over (N, C, T, H, W) or
    (C, T, H, W), as the 2-D form."""
    return _fractional("fractional_max_pool3d", fractional_max_pool3d_p, 3, input, kernel_size,
                       output_size, output_ratio, _random_samples)


def _fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None,
                           return_indices=False, _random_samples=None):
    return fractional_max_pool3d_with_indices(input, kernel_size, output_size, output_ratio,
                                              return_indices, _random_samples)[0]


# helpers F exports ----------------------------------------------------------------------------

def boolean_dispatch(arg_name, arg_index, default, if_true, if_false, module_name, func_name):
    """A function that calls ``if_true`` or ``if_false`` by the boolean argument
    ``arg_name`` (keyword, or positional at ``arg_index``; ``default`` when not given);
    it takes the docstring of whichever of the two has one (PyTorch's helper, which
    TorchScript resolves at compile time)."""
    def fn(*args, **kwargs):
        flag = default
        if arg_name in kwargs:
            flag = kwargs[arg_name]
        elif arg_index < len(args):
            flag = args[arg_index]
        return if_true(*args, **kwargs) if flag else if_false(*args, **kwargs)

    if if_true.__doc__ is None and if_false.__doc__ is not None:
        if_true.__doc__ = if_false.__doc__
    elif if_false.__doc__ is None and if_true.__doc__ is not None:
        if_false.__doc__ = if_true.__doc__
    elif if_false.__doc__ is not None and if_true.__doc__ is not None:
        raise RuntimeError("only one function can have a docstring")
    fn.__doc__ = if_true.__doc__
    if module_name is not None:
        fn.__module__ = module_name
    if func_name is not None:
        fn.__name__ = func_name
    return fn


def assert_int_or_pair(arg, arg_name, message):
    """Raise ``AssertionError(message.format(arg_name))`` unless ``arg`` is an int or has two
    elements."""
    if not (isinstance(arg, int) or len(arg) == 2):
        raise AssertionError(message.format(arg_name))


fractional_max_pool2d = boolean_dispatch(
    "return_indices", 4, False, fractional_max_pool2d_with_indices, _fractional_max_pool2d,
    __name__, "fractional_max_pool2d")
fractional_max_pool3d = boolean_dispatch(
    "return_indices", 4, False, fractional_max_pool3d_with_indices, _fractional_max_pool3d,
    __name__, "fractional_max_pool3d")

__all__ = ["fractional_max_pool2d", "fractional_max_pool3d", "fractional_max_pool2d_with_indices",
           "fractional_max_pool3d_with_indices", "boolean_dispatch", "assert_int_or_pair"]
