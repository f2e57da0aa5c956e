"""``tracegrad.utils.checkpoint``: activation checkpointing, PyTorch's ``checkpoint``.

``checkpoint(fn, *args)`` runs ``fn`` without keeping its intermediate tensors and runs it
again during backward to get its gradients: memory for compute. The recomputation replays
the default generator's state from the forward (``preserve_rng_state=True``), so dropout
draws the same masks. Gradients reach the tensors among ``args`` through the returned
values and the tensors ``fn`` reads (a module's parameters), whose ``.grad`` the inner
backward accumulates into, as PyTorch's reentrant variant does; ``use_reentrant`` is
accepted either way and ``context_fn``/``determinism_check``/``debug`` are accepted and
ignored. ``checkpoint_sequential`` checkpoints a ``Sequential`` in segments.
"""
from .. import autograd, creation
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..tensor import Tensor


class _CheckpointFunction(Function):
    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.rng_state = creation.default_generator.get_state() if preserve_rng_state else None
        ctx.args = args
        with no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a
                  for a in ctx.args]
        gen = creation.default_generator
        now = gen.get_state()
        if ctx.rng_state is not None:
            gen.set_state(ctx.rng_state)
        try:
            with enable_grad():
                outputs = ctx.run_function(*inputs)
        finally:
            gen.set_state(now)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(i.grad if isinstance(i, Tensor) and i.requires_grad
                                    else None for i in inputs)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check=None,
               debug=None, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, recomputed in backward instead of stored."""
    if kwargs:
        fn = function
        function = lambda *a: fn(*a, **kwargs)  # noqa: E731
    return _CheckpointFunction.apply(function, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run ``functions`` (a ``Sequential`` or a list of modules) in ``segments`` chunks, each
    checkpointed but the last, as PyTorch does."""
    functions = list(functions.children()) if hasattr(functions, "children") \
        else list(functions)
    size = len(functions) // segments
    end = -1

    def run(start, stop):
        def forward(x):
            for f in functions[start:stop + 1]:
                x = f(x)
            return x
        return forward
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, **kwargs)
    return run(end + 1, len(functions) - 1)(input)


__all__ = ["checkpoint", "checkpoint_sequential"]
