"""PyTorch's statistics and numerical-integration ops: ``mode``, ``cov``, ``corrcoef``,
``cdist``, ``trapezoid``/``trapz``, ``cumulative_trapezoid``, ``vander``, ``combinations`` and
``renorm``/``renorm_``.

``mode`` is in ``statistics_mode.py`` (exported from here): a primitive picks its index,
as PyTorch's CPU kernel does, and the values are gathered there.

The others are composites of differentiable ops, written as PyTorch's ATen code writes it
(the same steps in the same order), so values round as PyTorch's do, result dtypes follow
from the same promotions, and gradients (and second derivatives) come from the parts.
Where PyTorch's own derivative differs from what its forward's parts would give, the
composite is arranged to give PyTorch's:

- ``cdist``: the gradient at zero distance is 0 (the norms' safe roots), and for
  ``p=inf`` every coordinate that reaches the maximum gets the full gradient (amax would
  share it). For ``p=2`` with more than 25 rows (or ``compute_mode=
  "use_mm_for_euclid_dist"``) it uses PyTorch's matrix-product form, whose values differ
  from the direct form by rounding, as PyTorch's do.
- ``renorm``: the scale ``maxnorm / (norm + 1e-7)`` applies, and is differentiated, only
  where the norm exceeds ``maxnorm``.
"""
import itertools
import math
import warnings

from .. import dtypes
from ..tensor import Tensor
from .composite import isfinite
from .core import op_error
from .declare import method
from .elementwise import abs, clamp, sqrt, where
from .index_ops import index_select
from .linalg import matmul, mm
from .more_ops import cumprod, cumsum
from .norms import vector_norm
from .reduce_ops import amax, sum
from .rules import norm_dim
from .search_count import scalar_name
from .shape_ops import cat, expand, flip, narrow, reshape, unsqueeze
from .statistics_mode import mode  # noqa: F401 - in __all__


def _dim_of(name, y, dim):
    if y.ndim == 0:
        raise op_error(name, f"Dimension specified as {dim} but tensor has no dimensions",
                       IndexError)
    return norm_dim(dim, y.ndim)


# covariance and correlation --------------------------------------------------------------

def _check_weights(kind, w, n, integral):
    if w.ndim > 1:
        raise op_error("cov", f"cov(): expected {kind} to have one or fewer dimensions but got "
                              f"{kind} with {w.ndim} dimensions")
    ok = (not w.dtype.is_floating_point and w.dtype is not dtypes.bool) if integral \
        else w.dtype.is_floating_point
    if not ok:
        want = "integral" if integral else "floating point"
        raise op_error("cov", f"cov(): expected {kind} to have {want} dtype but got {kind} "
                              f"with {scalar_name(w.dtype)} dtype")
    if w.numel() != n:
        raise op_error("cov", f"cov(): expected {kind} to have the same numel as there are "
                              f"observations in the input but got {w.numel()} != {n}")
    if n and bool((w.min() < 0).item()):
        raise op_error("cov", f"cov(): {kind} cannot be negative")


def _dof_warning():
    warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than "
                  "the number of observations.", UserWarning, stacklevel=3)


@method
def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the rows (variables) over the columns (observations),
    with ``correction`` and the frequency and observation weights."""
    if input.ndim > 2:
        raise op_error("cov", f"cov(): expected input to have two or fewer dimensions but got "
                              f"an input with {input.ndim} dimensions")
    if input.dtype is dtypes.bool:
        raise op_error("cov", "cov(): bool dtype is not supported for input")
    x = reshape(input, (1, -1)) if input.ndim < 2 else input
    n = x.shape[1]
    w = None
    if fweights is not None:
        _check_weights("fweights", fweights, n, integral=True)
        w = fweights
    if aweights is not None:
        _check_weights("aweights", aweights, n, integral=False)
        w = aweights if w is None else w * aweights
    if w is None:
        avg = sum(x, 1) / n
        norm_factor = n - correction
        if norm_factor <= 0:
            _dof_warning()
            norm_factor = 0
    else:
        w_sum = sum(w)
        if not bool((w_sum != 0).item()):
            raise op_error("cov", "cov(): weights sum to zero, can't be normalized")
        avg = sum(x * w, 1) / w_sum
        if aweights is not None and correction != 0:
            norm_factor = w_sum - correction * sum(w * aweights) / w_sum
        else:
            norm_factor = w_sum - correction
        if bool((norm_factor <= 0).item()):
            _dof_warning()
            norm_factor = norm_factor * 0
    centred = x - unsqueeze(avg, 1)
    c = mm(centred, (centred if w is None else centred * w).t())
    return (c / norm_factor).squeeze()


@method
def corrcoef(input):
    """Pearson's correlation coefficients of the rows, clipped to [-1, 1]."""
    if input.ndim > 2:
        raise op_error("corrcoef", f"corrcoef(): expected input to have two or fewer dimensions "
                                   f"but got an input with {input.ndim} dimensions")
    c = cov(input)
    if c.ndim == 0:
        return c / c
    stddev = sqrt(c.diagonal())
    c = c / reshape(stddev, (-1, 1))
    c = c / reshape(stddev, (1, -1))
    return clamp(c, -1, 1)


# pairwise distances --------------------------------------------------------------------------

_MM_MODES = {"use_mm_for_euclid_dist_if_necessary": None, "use_mm_for_euclid_dist": True,
             "donot_use_mm_for_euclid_dist": False}


def _check_cdist(x1, x2, p):
    for name, t in (("X1", x1), ("X2", x2)):
        if t.ndim < 2:
            raise op_error("cdist", f"cdist only supports at least 2D tensors, {name} got: "
                                    f"{t.ndim}D")
    if x1.shape[-1] != x2.shape[-1]:
        raise op_error("cdist", f"X1 and X2 must have the same number of columns. X1: "
                                f"{x1.shape[-1]} X2: {x2.shape[-1]}")
    for name, t in (("X1", x1), ("X2", x2)):
        if not t.dtype.is_floating_point:
            raise op_error("cdist", f"cdist only supports floating-point dtypes, {name} got: "
                                    f"{scalar_name(t.dtype)}")
    if x1.dtype is not x2.dtype:
        raise op_error("cdist", f"expected scalar type {scalar_name(x1.dtype)} but found "
                                f"{scalar_name(x2.dtype)}")
    if p < 0:
        raise op_error("cdist", "cdist only supports non-negative p values")


def _euclidean_by_mm(x1, x2):
    """PyTorch's ``_euclidean_dist``: |a|^2 - 2 a.b + |b|^2 as one matrix product, clamped
    at 0; the root's gradient is 0 where the distance is."""
    from ..creation import ones_like
    n1 = sum(x1 * x1, -1, keepdim=True)
    n2 = sum(x2 * x2, -1, keepdim=True)
    a = cat([x1 * -2, n1, ones_like(n1)], -1)
    b = cat([x2, ones_like(n2), n2], -1)
    squared = matmul(a, b.mT)
    positive = squared > 0
    return where(positive, sqrt(where(positive, squared, 1.0)), 0.0)


def _max_distance(diff):
    """max |diff| along the last dim; each coordinate at the maximum gets the full gradient
    (PyTorch's), where amax alone would share it among them."""
    a = abs(diff)
    top = amax(a, -1, keepdim=True).detach()
    at_top = (a == top) & isfinite(a)
    return (top + sum(where(at_top, a - a.detach(), 0.0), -1, keepdim=True)).squeeze(-1)


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The p-norm distance between each row of ``x1`` and each row of ``x2`` (batched over
    the leading dims, which broadcast)."""
    if compute_mode not in _MM_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    _check_cdist(x1, x2, p)
    use_mm = _MM_MODES[compute_mode]
    if p == 2 and (use_mm or use_mm is None and max(x1.shape[-2], x2.shape[-2]) > 25):
        return _euclidean_by_mm(x1, x2)
    diff = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    if diff.shape[-1] == 0:
        return sum(diff, -1)
    if p == math.inf:
        return _max_distance(diff)
    return vector_norm(diff, p, -1)


# the trapezoidal rule ------------------------------------------------------------------------

def _spacing(name, y, x, dim):
    """The differences of ``x`` along ``dim``, shaped to broadcast against y's (PyTorch's
    viewing of a 1-D ``x`` along ``dim``, or of a shorter one with leading 1s)."""
    if x.ndim == 1:
        if x.shape[0] != y.shape[dim]:
            raise op_error(name, f"{name}: There must be one `x` value for each sample point")
        shape = [1] * y.ndim
        shape[dim] = x.shape[0]
        x = reshape(x, tuple(shape))
    elif x.ndim < y.ndim:
        x = reshape(x, (1,) * (y.ndim - x.ndim) + tuple(x.shape))
    n = x.shape[dim]
    return narrow(x, dim, 1, n - 1) - narrow(x, dim, 0, n - 1)


def _pairs(y, dim):
    n = y.shape[dim]
    return narrow(y, dim, 0, max(n - 1, 0)), narrow(y, dim, min(1, n), max(n - 1, 0))


def _check_trapezoid(name, y, x, dx):
    if x is not None and dx is not None:
        raise op_error(name, f"{name}() received both x and dx; give one", TypeError)
    if x is not None and not isinstance(x, Tensor):
        raise op_error(name, f"{name}() received an invalid combination of arguments: x must "
                             f"be a Tensor (a spacing goes in dx=), not {type(x).__name__}",
                       TypeError)
    if y.dtype is dtypes.bool or isinstance(x, Tensor) and x.dtype is dtypes.bool:
        raise op_error(name, f"{name}: received a bool input for `y`, but bool is not supported")
    if isinstance(dx, (bool, complex)):
        raise op_error(name, f"{name}: Currently, we only support dx as a real number.")


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The integral of ``y`` along ``dim`` by the trapezoidal rule, at sample points ``x``
    or spaced ``dx`` (1 by default) apart."""
    _check_trapezoid("trapezoid", y, x, dx)
    d = _dim_of("trapezoid", y, dim)
    if y.shape[d] == 0:
        from ..creation import zeros
        shape = tuple(n for k, n in enumerate(y.shape) if k != d)
        return zeros(shape, dtype=y.dtype, device=y.device)
    if isinstance(x, Tensor):
        left, right = _pairs(y, d)
        return sum((left + right) * _spacing("trapezoid", y, x, d), d) / 2.0
    step = 1.0 if dx is None else float(dx)
    ends = y.select(d, 0) + y.select(d, -1)
    return (sum(y, d) - ends * 0.5) * step


def trapz(y, x=None, *, dx=None, dim=-1):
    """``trapezoid`` (its older name)."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """The running integral of ``y`` along ``dim`` by the trapezoidal rule (one element
    fewer than ``y`` along ``dim``)."""
    _check_trapezoid("cumulative_trapezoid", y, x, dx)
    d = _dim_of("cumulative_trapezoid", y, dim)
    left, right = _pairs(y, d)
    if isinstance(x, Tensor):
        return cumsum((left + right) * _spacing("cumulative_trapezoid", y, x, d), d) / 2.0
    step = 1.0 if dx is None else float(dx)
    return cumsum(step / 2.0 * (left + right), d)


# vander and combinations ------------------------------------------------------------------

def vander(x, N=None, increasing=False):
    """The Vandermonde matrix: column j is ``x ** j`` (``increasing``) or ``x ** (N-1-j)``,
    as running products so that integer inputs stay integers (int64, as PyTorch's)."""
    from ..creation import ones
    if x.ndim != 1:
        raise op_error("vander", "x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise op_error("vander", "N must be non-negative.")
    dt = x.dtype if x.dtype.is_floating_point else dtypes.int64
    x = x.to(dt)
    first = ones((x.shape[0], min(n, 1)), dtype=dt, device=x.device)
    if n <= 1:
        return first
    powers = cumprod(expand(unsqueeze(x, 1), x.shape[0], n - 1), 1)
    out = cat([first, powers], 1)
    return out if increasing else flip(out, (1,))


def combinations(input, r=2, with_replacement=False):
    """Every combination of ``r`` elements of a vector, one per row, in lexicographic order
    of positions (with repeats when ``with_replacement``)."""
    from ..creation import empty, tensor
    if input.ndim != 1:
        raise op_error("combinations", f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise op_error("combinations", f"Expect a non-negative number, but got {r}")
    if r == 0:
        return empty(0, dtype=input.dtype, device=input.device)
    pick = itertools.combinations_with_replacement if with_replacement \
        else itertools.combinations
    rows = list(pick(range(input.shape[0]), r))
    idx = tensor([k for row in rows for k in row], dtype=dtypes.int64, device=input.device)
    return reshape(index_select(input, 0, idx), (len(rows), r))


# renorm ---------------------------------------------------------------------------------

def _check_renorm(input, p, maxnorm):
    if isinstance(p, complex):
        raise op_error("renorm", "renorm: p must be real-valued")
    if not p > 0:
        raise op_error("renorm", "renorm: non-positive-norm not supported")
    if isinstance(maxnorm, complex):
        raise op_error("renorm", "renorm: maxnorm must be real-valued")
    if not maxnorm >= 0:
        raise op_error("renorm", f"renorm: expected maxnorm to be >= 0 but got {float(maxnorm)}")
    if input.ndim <= 1:
        raise op_error("renorm", f"renorm: input needs at least 2 dimensions, got {input.ndim} "
                                 f"dimensions")


@method
def renorm(input, p, dim, maxnorm):
    """Each slice ``input.select(dim, i)`` whose p-norm exceeds ``maxnorm``, scaled down to
    norm ``maxnorm`` (by ``maxnorm / (norm + 1e-7)``); the others unchanged."""
    _check_renorm(input, p, maxnorm)
    d = norm_dim(dim, input.ndim)
    rest = tuple(k for k in range(input.ndim) if k != d)
    norm = vector_norm(input, p, rest, keepdim=True)
    factor = where(norm > maxnorm, maxnorm / (norm + 1e-7), 1.0)
    return input * factor


@method("renorm_")
def _renorm_(self, p, dim, maxnorm):
    # from a copy: the gradient reads the old values, which copy_ overwrites
    return self.copy_(renorm(self.clone(), p, dim, maxnorm))


__all__ = ["mode", "cov", "corrcoef", "cdist", "trapezoid", "trapz", "cumulative_trapezoid",
           "vander", "combinations", "renorm"]
