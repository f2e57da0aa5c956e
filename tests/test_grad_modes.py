"""Grad modes: context managers, decorators, nesting, threads, inference tensors."""
import threading

import pytest

import tracegrad as tg


def _records(x):
    return (x * 2).requires_grad


def test_no_grad_context_and_restore():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.no_grad():
        assert not tg.is_grad_enabled()
        y = x * 2
        assert y.grad_fn is None and not y.requires_grad
    assert tg.is_grad_enabled()
    assert _records(x)


def test_no_grad_restores_on_exception():
    with pytest.raises(ValueError):
        with tg.no_grad():
            raise ValueError
    assert tg.is_grad_enabled()


def test_enable_grad_inside_no_grad():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.no_grad():
        with tg.enable_grad():
            assert tg.is_grad_enabled() and _records(x)
        assert not tg.is_grad_enabled() and not _records(x)


def test_set_grad_enabled_function_and_context():
    x = tg.tensor([1.0], requires_grad=True)
    tg.set_grad_enabled(False)
    try:
        assert not tg.is_grad_enabled() and not _records(x)
    finally:
        tg.set_grad_enabled(True)
    assert tg.is_grad_enabled()
    with tg.set_grad_enabled(False):
        assert not _records(x)
        with tg.set_grad_enabled(True):
            assert _records(x)
        assert not _records(x)
    assert _records(x)


def test_decorators_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0], requires_grad=True)

        @lib.no_grad
        def bare(t):
            return t * 2

        @lib.no_grad()
        def called(t):
            return t * 2

        @lib.enable_grad()
        def enabled(t):
            return t * 2

        @lib.set_grad_enabled(False)
        def disabled(t):
            return t * 2

        @lib.inference_mode()
        def infer(t):
            return t * 2

        @lib.inference_mode
        def infer_bare(t):
            return t * 2

        assert lib.is_grad_enabled()        # decorating does not switch modes
        assert not bare(x).requires_grad and bare.__name__ == "bare"
        assert not called(x).requires_grad
        assert not disabled(x).requires_grad
        assert infer(x).is_inference() and infer_bare(x).is_inference()
        with lib.no_grad():
            assert enabled(x).requires_grad
        assert lib.is_grad_enabled()


def test_no_grad_decorates_generator():
    x = tg.tensor([1.0], requires_grad=True)

    @tg.no_grad()
    def gen():
        for _ in range(2):
            yield (x * 2).requires_grad, tg.is_grad_enabled()

    it = gen()
    assert next(it) == (False, False)
    assert tg.is_grad_enabled()          # between steps the caller's mode holds
    assert next(it) == (False, False)


def test_nested_modes():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.no_grad():
        with tg.no_grad():
            pass
        assert not tg.is_grad_enabled()
        with tg.enable_grad():
            with tg.inference_mode():
                assert tg.is_inference_mode_enabled() and not tg.is_grad_enabled()
                with tg.inference_mode(False):
                    assert not tg.is_inference_mode_enabled()
                assert tg.is_inference_mode_enabled()
            assert tg.is_grad_enabled() and _records(x)
        assert not tg.is_grad_enabled()
    assert tg.is_grad_enabled() and not tg.is_inference_mode_enabled()


def test_mode_is_thread_local():
    x = tg.tensor([1.0], requires_grad=True)
    entered, release = threading.Event(), threading.Event()
    seen = {}

    def other():
        entered.wait()
        seen["grad"] = tg.is_grad_enabled()
        seen["inference"] = tg.is_inference_mode_enabled()
        seen["records"] = _records(x)
        with tg.no_grad():
            release.set()
            seen["inner"] = tg.is_grad_enabled()

    th = threading.Thread(target=other)
    th.start()
    with tg.inference_mode():
        entered.set()
        release.wait(5)
        th.join(5)
    assert seen == {"grad": True, "inference": False, "records": True, "inner": False}
    assert tg.is_grad_enabled()       # the other thread's no_grad did not leak here


def test_new_thread_starts_with_grad_enabled():
    seen = []
    with tg.no_grad():
        th = threading.Thread(target=lambda: seen.append(tg.is_grad_enabled()))
        th.start()
        th.join(5)
    assert seen == [True]


def test_inference_mode_tensors():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        with lib.inference_mode():
            assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
            y = x * 2
            assert y.is_inference() and not y.requires_grad
        assert not lib.is_inference_mode_enabled()
        assert not x.is_inference()
        with lib.no_grad():
            assert not (x * 2).is_inference()
        with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
            x * y
        assert not (y * 2).requires_grad       # an op that saves nothing is fine
        z = y.clone() * x                      # a clone is a normal tensor
        assert not y.clone().is_inference() and z.requires_grad
        with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                               "InferenceMode is not allowed"):
            y.add_(1)
        with lib.inference_mode():
            y.add_(1)                          # fine inside


def test_inference_tensor_views_and_requires_grad_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        with lib.inference_mode():
            t = lib.ones(3)
        v = t[:2]
        assert v.is_inference() and t.detach().is_inference()
        assert not (t + 1).is_inference()
        with pytest.raises(RuntimeError, match="Inference tensors cannot be saved for backward"):
            lib.ones(2, requires_grad=True) * v
        with pytest.raises(RuntimeError, match="Setting requires_grad=True on inference tensor "
                                               "outside InferenceMode is not allowed."):
            t.requires_grad_()
        with lib.inference_mode():
            u = lib.ones(2).requires_grad_()      # allowed inside
        assert u.requires_grad


def test_inplace_on_view_of_inference_tensor_raises():
    with tg.inference_mode():
        t = tg.ones(3)
    with pytest.raises(RuntimeError, match="Inplace update to inference tensor outside "
                                           "InferenceMode is not allowed"):
        t[:2].add_(1)


def test_inference_mode_false_is_grad_mode():
    x = tg.tensor([1.0], requires_grad=True)
    with tg.inference_mode(False):
        y = x * 2
    assert y.requires_grad and not y.is_inference()
