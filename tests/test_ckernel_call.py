"""How a C-tier kernel takes its arrays (``codegen.support.CKernel``): the address of an
argument that is the same array as at the last call is reused, and every other case (a
read-only or strided input, another dtype, a new array where a freed one was) still
reaches the C code as the NumPy tier would see it."""
import numpy as np
import pytest

import tracegrad as tg
from tracegrad.codegen.support import CKernel


@pytest.fixture(scope="module")
def kernel():
    """The C kernel of ``tanh(x * y + 1)`` over float32[16]: ``kernel(x, y, out, ws)``."""
    def f(x, y):
        return (x * y + 1.0).tanh()

    c = tg.compile(f, backend="c")
    c(tg.randn(16), tg.randn(16))
    variant = c._last
    assert variant.c_kernels, "the C tier did not build"
    k = variant.namespace[variant.c_kernels[0]]
    assert isinstance(k, CKernel) and len(k.dtypes) == 3
    return k


class _Workspace:       # the kernel's last argument: unused by a kernel of fixed sizes
    pass


def _want(x, y):
    return np.tanh(np.float32(x) * np.float32(y) + np.float32(1))


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(16).astype(np.float32), rng.standard_normal(16).astype(np.float32)


def test_the_same_arrays_called_again_with_new_values_give_the_new_results(kernel):
    x, y = _inputs(0)
    out = np.empty(16, np.float32)
    for seed in range(3):       # the same objects each call, as workspace slots are
        x[:], y[:] = _inputs(seed)
        kernel(x, y, out, _Workspace())
        np.testing.assert_allclose(out, _want(x, y), rtol=1e-6)


def test_an_array_the_kernel_knows_cannot_move_under_it(kernel):
    x, y = _inputs(1)
    out = np.empty(16, np.float32)
    kernel(x, y, out, _Workspace())
    # the address is kept with a weak reference to its array, and NumPy does not resize
    # (reallocate) a weakly referenced array: the kept address cannot go stale
    with pytest.raises(ValueError, match="cannot resize"):
        out.resize(1 << 16, refcheck=False)
    x2, y2 = _inputs(2)
    kernel(x2, y2, out, _Workspace())
    np.testing.assert_allclose(out, _want(x2, y2), rtol=1e-6)


def test_new_arrays_each_call_are_not_mistaken_for_freed_ones(kernel):
    for seed in range(20):      # freed arrays' ids and memory are reused by the next ones
        x, y = _inputs(seed)
        out = np.empty(16, np.float32)
        kernel(x, y, out, _Workspace())
        np.testing.assert_allclose(out, _want(x, y), rtol=1e-6)
        del x, y, out


def test_read_only_transposed_and_other_dtype_inputs_are_copied(kernel):
    x, y = _inputs(3)
    out = np.empty(16, np.float32)
    kernel(x, y, out, _Workspace())
    ro = y.copy()
    ro.flags.writeable = False
    kernel(x, ro, out, _Workspace())
    np.testing.assert_allclose(out, _want(x, y), rtol=1e-6)
    strided = np.repeat(y, 2)[::2]                      # not C-contiguous
    kernel(x.astype(np.float64), strided, out, _Workspace())
    np.testing.assert_allclose(out, _want(x, y), rtol=1e-6)
    kernel(x, y, out, _Workspace())     # back to the arrays it has seen: the same results
    np.testing.assert_allclose(out, _want(x, y), rtol=1e-6)


def test_an_output_that_is_not_a_contiguous_array_of_its_dtype_is_refused(kernel):
    x, y = _inputs(4)
    out = np.empty(16, np.float32)
    kernel(x, y, out, _Workspace())     # seen once: a later wrong output is still refused
    with pytest.raises(TypeError, match="C kernel output 0 must be a C-contiguous float32"):
        kernel(x, y, np.empty(32, np.float32)[::2], _Workspace())
    with pytest.raises(TypeError, match="C kernel output 0"):
        kernel(x, y, np.empty(16, np.float64), _Workspace())
    with pytest.raises(TypeError, match="C kernel output 0"):
        kernel(x, y, out.view(np.int32), _Workspace())
    out.dtype = np.int32        # the very array seen last call, now of another dtype
    with pytest.raises(TypeError, match="C kernel output 0"):
        kernel(x, y, out, _Workspace())
