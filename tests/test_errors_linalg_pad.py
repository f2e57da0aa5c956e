"""Errors of ``tracegrad.linalg`` and of padding: each names the op the user called, starts
with PyTorch's words for it, and ends with the user's line, eagerly and inside ``compile``.

Each case is one line, ``fn(lib)`` for ``lib`` tracegrad or PyTorch, so the line the error
must name is the case's own.
"""
import numpy as np
import pytest

import tracegrad as tg

from tolerances import ulps

HERE = "test_errors_linalg_pad.py"


def _L(lib):
    return lib.linalg


def _F(lib):
    return lib.nn.functional


# (op the message starts with, fn(lib)); PyTorch raises the same words where installed
CASES = [
    ("linalg.inv", lambda lib: _L(lib).inv(lib.ones(2, 3))),
    ("linalg.inv", lambda lib: _L(lib).inv(lib.ones(3))),
    ("linalg.inv", lambda lib: _L(lib).inv(lib.ones(2, 2, dtype=lib.int64))),
    ("linalg.inv", lambda lib: lib.ones(2, 3).inverse()),
    ("linalg.solve", lambda lib: _L(lib).solve(lib.eye(3), lib.ones(2, 4))),
    ("linalg.solve", lambda lib: _L(lib).solve(lib.eye(3), lib.ones(2))),
    ("linalg.solve", lambda lib: _L(lib).solve(lib.eye(3), lib.ones(2, 4), left=False)),
    ("linalg.solve", lambda lib: _L(lib).solve(lib.eye(2), lib.ones(2, 1, dtype=lib.float64))),
    ("linalg.solve", lambda lib: _L(lib).solve(lib.eye(2), lib.tensor(1.0))),
    ("linalg.solve", lambda lib: _L(lib).solve(lib.ones(3, 2, 2), lib.ones(4, 2, 1))),
    ("linalg.det", lambda lib: _L(lib).det(lib.ones(2, 3))),
    ("linalg.det", lambda lib: lib.det(lib.ones(2, 2, dtype=lib.int64))),
    ("linalg.slogdet", lambda lib: _L(lib).slogdet(lib.ones(2, 3))),
    ("logdet", lambda lib: lib.ones(2, 3).logdet()),
    ("linalg.cholesky", lambda lib: _L(lib).cholesky(lib.ones(3))),
    ("linalg.qr", lambda lib: _L(lib).qr(lib.ones(3))),
    ("linalg.qr", lambda lib: _L(lib).qr(lib.eye(2), mode="full")),
    ("linalg.eigh", lambda lib: _L(lib).eigvalsh(lib.ones(2, 3))),
    ("linalg.svd", lambda lib: _L(lib).svdvals(lib.ones(3))),
    ("linalg.svd", lambda lib: _L(lib).svd(lib.ones(2, 3, dtype=lib.int64))),
    ("linalg.lstsq", lambda lib: _L(lib).lstsq(lib.ones(3), lib.ones(3, 1))),
    ("linalg.lstsq", lambda lib: _L(lib).lstsq(lib.ones(3, 2), lib.ones(4, 1))),
    ("linalg.lstsq", lambda lib: _L(lib).lstsq(lib.ones(3, 2), lib.ones(3, 1, dtype=lib.float64))),
    ("linalg.lstsq", lambda lib: _L(lib).lstsq(lib.ones(3, 2), lib.ones(3, 1), driver="x")),
    ("linalg.matrix_rank", lambda lib: _L(lib).matrix_rank(lib.ones(3))),
    ("linalg.matrix_power", lambda lib: _L(lib).matrix_power(lib.ones(2, 3), 2)),
    ("linalg.vector_norm", lambda lib: _L(lib).vector_norm(lib.ones(3, dtype=lib.int64))),
    ("linalg.matrix_norm", lambda lib: _L(lib).matrix_norm(lib.ones(3))),
    ("linalg.matrix_norm", lambda lib: _L(lib).matrix_norm(lib.eye(2), ord=3)),
    ("linalg.norm", lambda lib: _L(lib).norm(lib.ones(2, 2, 2), ord=1)),
    ("pad", lambda lib: _F(lib).pad(lib.ones(1, 2, 3), (1,))),
    ("pad", lambda lib: _F(lib).pad(lib.ones(1, 2, 3), (1, 1), mode="bogus")),
    ("pad", lambda lib: _F(lib).pad(lib.ones(3), (1, 1, 1, 1))),
    ("pad", lambda lib: _F(lib).pad(lib.ones(3), (1, 1), mode="reflect")),
    ("pad", lambda lib: _F(lib).pad(lib.ones(1, 2, 3), (1, 1), mode="reflect", value=1.0)),
    ("pad", lambda lib: _F(lib).pad(lib.ones(1, 0, 3), (1, 1), mode="replicate")),
    ("pad", lambda lib: _F(lib).pad(lib.ones(1, 2, 3), (1.5, 1))),
    ("pad", lambda lib: _F(lib).pad(lib.ones(1, 2, 3), 3)),
    ("reflection_pad1d", lambda lib: _F(lib).pad(lib.ones(1, 2, 3), (3, 3), mode="reflect")),
    ("circular_pad", lambda lib: _F(lib).pad(lib.ones(1, 2, 3), (4, 4), mode="circular")),
]
IDS = [f"{op}-{i}" for i, (op, _) in enumerate(CASES)]


def _error(fn, lib=tg):
    with pytest.raises(Exception) as info:
        fn(lib)
    return info.value


def _names_the_line(exc, fn):
    """The message ends with this file's line of ``fn`` and its source."""
    last = str(exc).splitlines()[-1]
    return f"{HERE}:{fn.__code__.co_firstlineno}:" in last and "lambda lib:" in last


@pytest.mark.parametrize("op,fn", CASES, ids=IDS)
def test_error_names_the_op_and_the_users_line(op, fn):
    exc = _error(fn)
    assert str(exc).startswith(f"{op}: "), str(exc)
    assert _names_the_line(exc, fn), str(exc)


@pytest.mark.parametrize("op,fn", CASES, ids=IDS)
def test_error_starts_with_torchs_words(op, fn):
    torch = pytest.importorskip("torch")
    want = _error(fn, torch)
    got = _error(fn)
    assert isinstance(got, type(want)) or issubclass(type(want), type(got)), (want, got)
    first = str(got).split("\n  (at ")[0]
    # PyTorch names some ops torch.linalg.x, and a reflection pad's dim as "Argument #4"
    words = str(want).replace("torch.linalg.", "linalg.").removeprefix("Argument #4: ")
    assert first == words or first == f"{op}: {words}", (first, words)


@pytest.mark.parametrize("op,fn", CASES, ids=IDS)
def test_error_inside_compile_names_the_users_line(op, fn):
    compiled = tg.compile(lambda: fn(tg))
    exc = _error(lambda lib: compiled())
    assert str(exc).startswith(f"{op}: "), str(exc)
    assert _names_the_line(exc, fn), str(exc)


@pytest.mark.parametrize("op,fn,words", [
    ("linalg.inv", lambda A: tg.linalg.inv(A), "the input matrix is singular"),
    ("linalg.solve", lambda A: tg.linalg.solve(A, tg.ones(2)), "the input matrix is singular"),
    ("linalg.cholesky", lambda A: tg.linalg.cholesky(A), "the input is not positive-definite"),
], ids=["inv", "solve", "cholesky"])
def test_a_failure_on_the_values_names_the_op_and_the_users_line(op, fn, words):
    bad = tg.tensor([[1.0, 2.0], [2.0, 4.0]])        # singular, and not positive-definite
    exc = _error(lambda lib: fn(bad))
    assert str(exc).startswith(f"{op}: ") and words in str(exc), str(exc)
    assert f"{HERE}:{fn.__code__.co_firstlineno}:" in str(exc).splitlines()[-1], str(exc)
    compiled = tg.compile(fn)
    compiled(tg.tensor([[2.0, 1.0], [1.0, 2.0]]))       # traced on a good matrix
    exc = _error(lambda lib: compiled(bad))             # the cached variant's code fails
    assert f"{op}: " in str(exc) and words in str(exc), str(exc)
    assert f"{HERE}:{fn.__code__.co_firstlineno}:" in str(exc), str(exc)


def test_a_direct_bind_of_a_linalg_primitive_still_raises_pytorchs_words():
    from tracegrad.linalg.solve import inv_p
    from tracegrad.ops.core import bind
    with pytest.raises(RuntimeError, match="linalg.inv: A must be batches of square matrices"):
        bind(inv_p, tg.ones(2, 3))


def test_checks_leave_good_inputs_alone():
    a = tg.tensor(np.array([[2.0, 1.0], [1.0, 3.0]], dtype=np.float32))
    np.testing.assert_allclose(tg.linalg.solve(a, tg.ones(2), left=True).numpy(),
                               np.linalg.solve(a.numpy(), np.ones(2)),
                               rtol=ulps("float32", 4))     # a float32 2 x 2 solve, cond 2.6
    assert tuple(tg.nn.functional.pad(tg.ones(0, 2, 3), (1, 1), mode="replicate").shape) == \
        (0, 2, 5)
    assert tuple(tg.nn.functional.pad(tg.ones(1, 0, 3), (1, 1), mode="circular").shape) == \
        (1, 0, 5)
    assert tuple(tg.nn.functional.pad(tg.ones(2), (np.int64(1), 1)).shape) == (4,)
    assert tg.linalg.matrix_power(tg.ones(2, 2, dtype=tg.int64), 2).dtype is tg.int64
