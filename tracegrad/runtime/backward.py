"""``CompiledBackward``: the autograd node of a compiled function's outputs.

One node per call joins every differentiable output to every input that
requires grad. ``apply`` runs the variant's generated backward on the saved
residuals; under ``create_graph=True`` it instead evaluates the joint IR
through eager ops on the saved inputs, so the gradients are differentiable
again (any order), with the generators set back to where the forward found them, so
its random ops draw the forward's numbers again. ``release`` frees the residuals (a second backward without
``retain_graph`` raises PyTorch's error), and inputs saved for backward are
checked against in-place changes as eager saved tensors are. Under
``saved_tensors_hooks``, the residuals are saved through the hooks
(``PackedResiduals``), as PyTorch's compiled functions save theirs.
"""

from tracegrad.autograd import grad_mode
from tracegrad.autograd.graph import FREED_ERROR, Node, SavedTensor
from tracegrad.ir import evaluate
from tracegrad.tensor import Tensor

from .events import run_generated

_gm = grad_mode._state


class PackedResiduals:
    """A call's residuals saved through the open ``saved_tensors_hooks``: each is packed
    now, and unpacked when the backward runs (a hook that offloads or compresses them holds
    them instead of the node). ``kept``: arrays after them that no hook sees (the sizes of a
    dynamic variant)."""
    __slots__ = ("saved", "kept")

    def __init__(self, arrays, kept=()):
        self.saved = [SavedTensor(Tensor._make(a)) for a in arrays]
        self.kept = list(kept)

    def unpack(self, node):
        return [s.unpack(node)._data for s in self.saved] + self.kept


class CompiledFunctionBackward(Node):
    _materialize = True       # outputs that got no gradient count as zeros
    __slots__ = ("variant", "residuals", "inputs", "versions", "rng_states")

    def apply(self, grads):
        if self.residuals is None:
            raise RuntimeError(FREED_ERROR)
        if self.versions:
            self._check_versions()
        v = self.variant
        if _gm.grad_enabled:        # create_graph: run the joint graph through eager ops
            sizes = {str(n): self.inputs[ti]._data.shape[d] for ti, d, n in v.sym_dims} \
                if getattr(v, "sym_dims", None) else None     # a dynamic variant: its sizes now
            args = list(self.inputs) + list(grads)
            if v.device_index is None:
                outs = self._replaying(evaluate, v.joint, args, sizes)
            else:       # on the variant's GPU, where its random ops' generators draw
                with v.on_device():
                    outs = self._replaying(evaluate, v.joint, args, sizes,
                                           f"cuda:{v.device_index}")
            return [None if k is None else outs[k] for k in v.grad_index]
        residuals = self.residuals
        if type(residuals) is PackedResiduals:
            residuals = residuals.unpack(self)
        arrays = run_generated(v.backward, [*residuals, *[g._data for g in grads]],
                               v.profile_name, "backward", v.device_index)
        make, asarray = Tensor._make, v.asarray
        return [None if k is None else make(asarray(arrays[k])) for k in v.grad_index]

    def _replaying(self, fn, *args):
        """``fn(*args)`` with the generators where the forward found them, so its random
        ops draw the forward's numbers again; the generators are given back after."""
        if not self.rng_states:
            return fn(*args)
        now = [(g, g.get_state()) for g, _ in self.rng_states]
        for g, state in self.rng_states:
            g.set_state(state)
        try:
            return fn(*args)
        finally:
            for g, state in now:
                g.set_state(state)

    def _check_versions(self):
        for t, version in self.versions:
            if t._vc.value != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified by "
                    f"an inplace operation: [{t.type()} {list(t.shape)}] is at version "
                    f"{t._vc.value}; expected version {version} instead. Hint: the compiled "
                    "function read this tensor; do not modify it in place before backward.")

    def release(self):
        self.residuals = self.inputs = None
