"""``addmm`` and ``embedding`` as primitives: the nodes ``nn.Linear`` and ``nn.Embedding`` show.

PyTorch's ``Linear`` on a matrix is one ``addmm`` (``AddmmBackward0``, whose
``next_functions`` are the bias, the input and ``TBackward0`` of the weight) and
``Embedding`` one ``embedding`` (``EmbeddingBackward0``); programs print these walks. In
eager mode both are one primitive each here too, which is also one node instead of three
(``mm``, ``add`` and the weight's transpose). Inside a trace ``addmm`` stays the matmul and
add the compiler fuses (but for ``beta = 0``), so a compiled ``Linear`` is unchanged. The
VJP rules are written with tracegrad ops, so they differentiate again. (Helpers are private:
the profiler reports every public function of ``tracegrad.ops`` as an op.)
"""
import numpy as np

from .. import _hooks
from ..device import recording
from .core import Primitive, bind, op_error
from .linalg import _matmul_dtype, _mat1_grad, _mat2_grad, matmul

_hook_state = _hooks.state


def _tracing():
    return _hook_state.tracer is not None


# addmm --------------------------------------------------------------------------------------

def _addmm_impl(xp, c, a, b, beta, alpha):
    prod = xp.matmul(a, b)
    if alpha != 1:
        prod = prod * prod.dtype.type(alpha)
    if beta == 0:       # PyTorch ignores input (NaN and inf too) when beta is 0
        return prod
    return prod + (c if beta == 1 else c * c.dtype.type(beta))


def _addmm_shape(c, a, b, beta, alpha):
    if len(a) != 2 or len(b) != 2:
        raise RuntimeError(f"mat1 must be a matrix, got {len(a)}-D tensor" if len(a) != 2
                           else f"mat2 must be a matrix, got {len(b)}-D tensor")
    if a[1] != b[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and "
                           f"{b[0]}x{b[1]})")
    out = (a[0], b[1])
    if len(c) > 2 or any(n not in (1, m) for n, m in zip(c[::-1], out[::-1])):
        raise RuntimeError(f"The expanded size of the tensor ({out[-1]}) must match the "
                           f"existing size ({c[-1] if c else 1}) of input {list(c)}")
    return out


def _addmm_dtype(c, a, b):
    _matmul_dtype(c, a)         # the input's dtype must be the matrices' too
    return _matmul_dtype(a, b)


def _scaled(g, k):
    return g if k == 1 else g * k


addmm_p = Primitive(
    "addmm", _addmm_impl, args=("self", "mat1", "mat2"),
    dtype=lambda c, a, b, beta, alpha: _addmm_dtype(c, a, b),
    shape=_addmm_shape,
    vjp=(lambda g, c, a, b, out, beta, alpha: g * 0 if beta == 0 else _scaled(g, beta),
         lambda g, c, a, b, out, beta, alpha: _scaled(_mat1_grad(g, a, b), alpha),
         lambda g, c, a, b, out, beta, alpha: _scaled(_mat2_grad(g, a, b), alpha)),
    saves=("mat1", "mat2"), node="AddmmBackward0")


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``; with ``beta = 0`` input is ignored."""
    scalars = all(isinstance(k, (int, float)) for k in (beta, alpha))
    if not scalars or _tracing() and beta != 0:     # beta = 0 ignores input: the primitive
        from .elementwise import add, mul
        prod = matmul(mat1, mat2)
        return add(mul(input, beta) if not scalars or beta != 1 else input,
                   mul(prod, alpha) if not scalars or alpha != 1 else prod)
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise op_error("addmm", f"mat1 must be a matrix, got {mat1.ndim}-D tensor"
                       if mat1.ndim != 2 else f"mat2 must be a matrix, got {mat2.ndim}-D tensor")
    return bind(addmm_p, input, mat1, mat2, beta=beta, alpha=alpha)


# embedding ---------------------------------------------------------------------------------

def _embedding_impl(xp, weight, indices, padding_idx=None, scale_grad_by_freq=False):
    n = weight.shape[0]
    if indices.size and not recording(xp) and (     # (a host read: see recording)
            int(indices.min()) < 0 or int(indices.max()) >= n):
        raise IndexError("embedding: index out of range in self")
    return xp.take(weight, indices, axis=0)


def _embedding_backward_impl(xp, g, indices, num_weights, padding_idx, scale_grad_by_freq):
    d = g.shape[-1]
    flat = indices.reshape(-1)
    rows = g.reshape(-1, d)
    if scale_grad_by_freq:
        counts = xp.bincount(flat, minlength=num_weights)
        rows = rows / counts[flat][:, None].astype(g.dtype)
    out = xp.zeros((num_weights, d), dtype=g.dtype)
    if xp is np:
        np.add.at(out, flat, rows)
    else:
        import cupyx
        cupyx.scatter_add(out, flat, rows)
    if padding_idx is not None:
        out[padding_idx] = 0
    return out


def _embedding_backward_vjp(gg, g, indices, out, num_weights, padding_idx, scale_grad_by_freq):
    """The adjoint of the scatter: each position reads its row of ``gg`` (none at the padding
    row; divided by the row's count where the scatter divided)."""
    from .elementwise import where
    from .shape_ops import unsqueeze
    rows = bind(embedding_p, gg, indices)
    if padding_idx is not None:
        rows = where(unsqueeze(indices == padding_idx, -1), 0.0, rows)
    if scale_grad_by_freq:
        ones = unsqueeze((indices * 0 + 1).to(gg.dtype), -1)
        counts = bind(embedding_backward_p, ones, indices, num_weights=num_weights,
                      padding_idx=None, scale_grad_by_freq=False)
        rows = rows / bind(embedding_p, counts, indices)
    return rows


embedding_p = Primitive(
    "embedding", _embedding_impl, args=("weight", "indices"),
    dtype=lambda w, i, **_: w.dtype, shape=lambda w, i, **_: tuple(i) + tuple(w[1:]),
    vjp=(lambda g, w, i, out, padding_idx=None, scale_grad_by_freq=False:
         bind(embedding_backward_p, g, i, num_weights=w.shape[0], padding_idx=padding_idx,
              scale_grad_by_freq=scale_grad_by_freq), None),
    # forward mode: linear in the weight, padding and frequency scaling aside (as PyTorch's)
    jvp=(lambda t, w, i, out, **params: bind(embedding_p, t, i, **params), None),
    saves=("indices",), node="EmbeddingBackward0")
embedding_backward_p = Primitive(
    "embedding_backward", _embedding_backward_impl, args=("grad", "indices"),
    dtype=lambda g, i, **_: g.dtype,
    shape=lambda g, i, num_weights, **_: (num_weights, g[-1]),
    vjp=(_embedding_backward_vjp, None), saves=("indices",),
    node="EmbeddingDenseBackwardBackward0")


def embedding(weight, indices, padding_idx=None, scale_grad_by_freq=False):
    """``weight[indices]`` as one node; the padding row gets no gradient, and with
    ``scale_grad_by_freq`` each row's gradient is divided by its count in ``indices``."""
    return bind(embedding_p, weight, indices, padding_idx=padding_idx,
                scale_grad_by_freq=bool(scale_grad_by_freq))
