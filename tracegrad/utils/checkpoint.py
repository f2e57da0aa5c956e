"""``tracegrad.utils.checkpoint``: activation checkpointing, PyTorch's ``checkpoint``.

``checkpoint(fn, *args)`` runs ``fn`` without keeping the tensors its backward needs and
runs it again during backward to get them: memory for compute. The recomputation replays
the default generator's state from the forward (``preserve_rng_state=True``), so dropout
draws the same masks. The two variants are PyTorch's:

- ``use_reentrant=False`` (PyTorch's recommendation): ``fn`` runs with grad, its graph is
  kept, and every tensor its ops save is packed as a number instead (saved-tensor hooks,
  ``_Recomputed``). The first unpack in a backward runs ``fn`` again and hands each saved
  tensor's recomputed value to the original graph. The graph is the ordinary one, so
  ``autograd.grad`` with respect to any tensor ``fn`` reads works, touches no other
  ``.grad``, and ``create_graph=True`` gives differentiable gradients.
- ``use_reentrant=True`` (PyTorch's default, with a warning when not passed): ``fn`` runs
  without grad inside one custom ``Function``, whose backward recomputes it with grad and
  runs an inner backward, which accumulates into the ``.grad`` of the parameters ``fn``
  reads. Only the returned tensors and the arguments get gradients, and only through
  ``backward``, as in PyTorch.

``context_fn``, ``determinism_check`` and ``debug`` are accepted and ignored.
``checkpoint_sequential`` checkpoints a ``Sequential`` in segments.
"""
import warnings

from .. import autograd, creation
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks
from ..tensor import Tensor


def _replaying(rng_state, fn):
    """``fn()`` with the default generator set to ``rng_state`` (None: left as it is), and
    given back after."""
    if rng_state is None:
        return fn()
    gen = creation.default_generator
    now = gen.get_state()
    gen.set_state(rng_state)
    try:
        return fn()
    finally:
        gen.set_state(now)


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

        def recompute():
            with enable_grad():
                return ctx.run_function(*inputs)
        outputs = _replaying(ctx.rng_state, recompute)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads)
                 if isinstance(o, Tensor) and o.requires_grad and g is not None]
        if pairs:
            autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(i.grad if isinstance(i, Tensor) and i.requires_grad
                                    else None for i in inputs)


class _Recomputed:
    """The saved tensors of one non-reentrant checkpointed call, by the order they were
    saved in: the forward packs each as its number; the first unpack that finds its number
    missing runs the function again (generator and grad mode as in the forward) and keeps
    what that run saves, detached; each unpack takes its own out. A second backward
    (``retain_graph``) recomputes again."""

    def __init__(self, function, args, kwargs, rng_state):
        self.function, self.args, self.kwargs = function, args, kwargs
        self.rng_state = rng_state
        self.count = 0
        self.values = {}

    def pack(self, t):
        k = self.count
        self.count += 1
        return k

    def unpack(self, k):
        if k not in self.values:
            self._recompute()
        return self.values.pop(k)

    def _recompute(self):
        saved = []

        def keep(t):
            saved.append(t.detach() if t.requires_grad else t)
            return None

        def run():
            with saved_tensors_hooks(keep, lambda _: None), enable_grad():
                self.function(*self.args, **self.kwargs)
        _replaying(self.rng_state, run)
        if len(saved) != self.count:
            raise RuntimeError(
                "tracegrad.utils.checkpoint: A different number of tensors was saved during "
                f"the original forward and recomputation: {self.count} saved in the forward, "
                f"{len(saved)} in the recomputation. The checkpointed function must do the "
                "same operations each time it runs.")
        self.values = dict(enumerate(saved))


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check=None,
               debug=None, preserve_rng_state=True, **kwargs):
    """``function(*args, **kwargs)``, recomputed in backward instead of stored."""
    if use_reentrant is None:
        warnings.warn(
            "tracegrad.utils.checkpoint: the use_reentrant parameter should be passed "
            "explicitly. use_reentrant=False is recommended, but if you need to preserve the "
            "current default behavior, you can pass use_reentrant=True. Refer to docs for "
            "more details on the differences between the two variants.", stacklevel=2)
        use_reentrant = True
    if not use_reentrant:
        rng_state = creation.default_generator.get_state() if preserve_rng_state else None
        saved = _Recomputed(function, args, kwargs, rng_state)
        with saved_tensors_hooks(saved.pack, saved.unpack):
            return function(*args, **kwargs)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
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
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, **kwargs)
    return run(end + 1, len(functions) - 1)(input)


__all__ = ["checkpoint", "checkpoint_sequential"]
