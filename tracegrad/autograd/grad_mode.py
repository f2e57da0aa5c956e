"""Grad modes: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode``.

The state is thread-local, as in PyTorch: a mode set in one thread does not
leak into another. Each mode is a context manager and a decorator.
"""
import functools
import inspect
import threading

from .._hooks import Census
from ..device import ask_grad_mode


class _State(threading.local):
    def __init__(self):
        self.grad_enabled = True
        self.inference = False


_state = _State()
# Threads in inference mode now: while none is, ``Tensor._make`` (run for every op) knows
# a new tensor is no inference tensor without reading this thread's state.
INFERENCE_THREADS = Census()


def _set_inference(value):
    if value != _state.inference:
        INFERENCE_THREADS.add(1 if value else -1)
    _state.inference = value


def is_grad_enabled():
    return _state.grad_enabled


ask_grad_mode(is_grad_enabled)      # the device layer's CPU-scalar rule reads it


def is_inference_mode_enabled():
    return _state.inference


class _DecoratorContextManager:
    """A context manager that also decorates functions and generator functions."""

    def __call__(self, fn):
        if inspect.isclass(fn):
            raise RuntimeError(f"{type(self).__name__} cannot decorate a class")
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen_wrapper(*args, **kwargs):
                gen = fn(*args, **kwargs)
                with self.clone():
                    response = gen.send(None)
                while True:
                    try:
                        request = yield response
                    except GeneratorExit:
                        with self.clone():
                            gen.close()
                        raise
                    try:
                        with self.clone():
                            response = gen.send(request)
                    except StopIteration as e:
                        return e.value
            return gen_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()


class no_grad(_DecoratorContextManager):
    """Disable gradient recording; usable as ``@no_grad``, ``@no_grad()`` or ``with``."""

    def __new__(cls, fn=None):
        self = super().__new__(cls)
        if fn is not None and callable(fn):
            self.__init__()
            return self(fn)
        return self

    def __init__(self, fn=None):
        self.prev = None

    def __enter__(self):
        self.prev = _state.grad_enabled
        _state.grad_enabled = False

    def __exit__(self, *exc):
        _state.grad_enabled = self.prev


class enable_grad(no_grad):
    def __enter__(self):
        self.prev = _state.grad_enabled
        _state.grad_enabled = True


class set_grad_enabled(_DecoratorContextManager):
    """Sets the mode at once when called, and restores the old one on ``__exit__``."""

    def __init__(self, mode):
        self.prev = _state.grad_enabled
        self.mode = bool(mode)
        _state.grad_enabled = self.mode

    def __call__(self, fn):
        _state.grad_enabled = self.prev
        return super().__call__(fn)

    def __enter__(self):
        _state.grad_enabled = self.mode

    def __exit__(self, *exc):
        _state.grad_enabled = self.prev

    def clone(self):
        return type(self)(self.mode)


class inference_mode(_DecoratorContextManager):
    """No grad recording, and tensors made inside are inference tensors."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):
            self.__init__()
            return self(mode)
        return self

    def __init__(self, mode=True):
        self.mode = bool(mode)
        self.prev = None

    def __enter__(self):
        self.prev = (_state.grad_enabled, _state.inference)
        # inference_mode(False) is grad mode, as in PyTorch
        _state.grad_enabled = not self.mode
        _set_inference(self.mode)

    def __exit__(self, *exc):
        _state.grad_enabled = self.prev[0]
        _set_inference(self.prev[1])

    def clone(self):
        return type(self)(self.mode)
