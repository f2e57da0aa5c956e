"""Tolerances that state what floating-point arithmetic guarantees, for comparing two
implementations (tracegrad against PyTorch, the C tier against NumPy, eager against compiled).

One IEEE operation rounds to within half an ulp of the exact result; two libraries that
compute the same formula may still part by a few ulps per operation: a fused multiply-add
rounds once where a multiply and an add round twice, a vectorised ``exp``/``tanh`` is a
few ulps from the C library's, a sum in another order (SIMD lanes, blocked matmul) rounds
differently. PyTorch picks its kernels by CPU (``ATEN_CPU_CAPABILITY``: default, AVX2,
AVX-512, NEON), so the last bits of its results depend on the machine. Errors add along a
chain of dependent operations, so a result ``n_ops`` operations deep is within about
``n_ops * factor`` ulps of the other library's: :func:`ulps`. A sum of ``n`` terms is
``n - 1`` operations deep in the worst order; count it so.

That relative bound holds for the result's scale, not for an element that cancels to near
zero (``a - b`` with ``a ~ b``, a gradient summed from terms of both signs): such an
element keeps the absolute error of its terms, so :func:`close` also returns ``atol``, the
same ulps times the size of the terms (``scale``).

An iteration that amplifies a discrepancy (an optimizer on a curved valley, a recurrent
network) multiplies it by up to its growth factor per step: :func:`amplified`.

Each bound is many orders of magnitude below the error of a wrong formula (a wrong sign,
a missing term, a wrong reduction axis moves a result by a sizeable fraction of itself),
so the tests still catch real bugs.
"""
import numpy as np


def eps(dtype):
    """Machine epsilon of a NumPy, tracegrad or PyTorch float dtype (or its name)."""
    name = dtype if isinstance(dtype, str) else str(dtype)
    try:
        return float(np.finfo(np.dtype(name.rsplit(".", 1)[-1])).eps)
    except TypeError:
        return float(np.finfo(dtype).eps)


def ulps(dtype, n_ops=1, factor=4):
    """Relative tolerance for a result ``n_ops`` dependent operations deep, each of which
    two correct implementations may round ``factor`` ulps apart."""
    return factor * n_ops * eps(dtype)


def close(dtype, n_ops=1, factor=4, scale=1.0):
    """``assert_allclose`` keywords: ``rtol`` from :func:`ulps`, and an ``atol`` of the
    same ulps times ``scale``, the size of the terms an element is computed from (an
    element that cancels to near zero keeps their absolute error)."""
    rtol = ulps(dtype, n_ops, factor)
    return dict(rtol=rtol, atol=rtol * scale)


def amplified(dtype, steps, growth=2.0, n_ops=1, factor=4):
    """Relative tolerance after ``steps`` iterations that each multiply an existing
    discrepancy by at most ``growth`` (the iteration map's Lipschitz constant on the path
    taken), starting from :func:`ulps` apart."""
    return ulps(dtype, n_ops, factor) * growth ** steps


def assert_close_normwise(actual, desired, rtol, err_msg=""):
    """Every element within ``rtol`` times the largest magnitude of ``desired``: the bound
    for a vector whose elements mix (a matmul, an optimizer's update), where a small element
    carries the absolute error of the large ones."""
    desired = np.asarray(desired)
    scale = float(np.abs(desired).max()) if desired.size else 0.0
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=rtol * scale, err_msg=err_msg)
