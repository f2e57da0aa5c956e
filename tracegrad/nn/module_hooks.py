"""A module's full backward hooks (``register_full_backward_hook`` and its pre-hooks): an
identity ``Function`` on the call's inputs and on its outputs, whose backward hands the
gradients to the hooks, as PyTorch's ``BackwardHookFunction`` does; and the handle-ordered
hook dicts every ``register_*_hook`` writes."""
from .. import creation
from ..autograd import grad_mode
from ..autograd.function import Function
from ..autograd.graph import RemovableHandle
from ..tensor import Tensor


def _add_hook(hooks, entry, prepend):
    handle = RemovableHandle(hooks)
    hooks[handle.id] = entry
    if prepend:          # the handle holds the dict weakly, so reorder it in place
        rest = [(k, v) for k, v in hooks.items() if k != handle.id]
        hooks.clear()
        hooks[handle.id] = entry
        hooks.update(rest)
    return handle


class _HookIdentity(Function):
    """The identity on a module's tensor inputs or outputs that need gradients; its backward
    hands the gradients to ``_BackwardHooks`` (PyTorch's ``BackwardHookFunction``)."""

    @staticmethod
    def forward(ctx, on_backward, *tensors):
        ctx.on_backward = on_backward
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.on_backward(grads))


class _BackwardHooks:
    """One call's full backward hooks: the output identity records ``grad_output`` (after the
    pre-hooks), the input identity calls the hooks with ``grad_input`` and ``grad_output``.
    Gradient tuples have one entry per positional argument: None for a non-tensor, zeros
    for a tensor that needs no gradient (as PyTorch reports them)."""

    def __init__(self, module):
        self.module = module
        self.grad_outputs = None
        self.input_index = None

    @staticmethod
    def _wrap(values, on_backward):
        """``(values with the identity applied, positions of those that need grads, the
        packing template)``; positions are None when nothing needs a gradient."""
        template = [creation.zeros_like(v) if isinstance(v, Tensor) else None for v in values]
        idx = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
        if not grad_mode.is_grad_enabled() or not idx:
            return values, None, template
        new = _HookIdentity.apply(on_backward, *[values[i] for i in idx])
        new = new if isinstance(new, tuple) else (new,)
        values = list(values)
        for i, t in zip(idx, new):
            values[i] = t
        return tuple(values), idx, template

    @staticmethod
    def _pack(idx, grads, template):
        out = list(template)
        for i, g in zip(idx, grads):
            out[i] = g
        return tuple(out)

    def wrap_inputs(self, args):
        args, self.input_index, self.input_template = self._wrap(args, self._on_input_grads)
        return args

    def wrap_outputs(self, result):
        single = not isinstance(result, tuple)
        outs = (result,) if single else result
        outs, self.output_index, self.output_template = self._wrap(outs, self._on_output_grads)
        return outs[0] if single else outs

    def _on_output_grads(self, grads):
        grad_outputs = self._pack(self.output_index, grads, self.output_template)
        for hook in list(self.module._backward_pre_hooks.values()):
            res = hook(self.module, grad_outputs)
            if res is None:
                continue
            res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            if len(res) != len(grad_outputs):
                raise RuntimeError(f"Backward pre hook returned an invalid number of "
                                   f"grad_output, got {len(res)}, but expected "
                                   f"{len(grad_outputs)}")
            grad_outputs = res
        if self.input_index is None:
            # no input needs a gradient: the hooks fire now, with grad_input all None
            grad_inputs = (None,) * len(self.input_template)
            for hook in list(self.module._backward_hooks.values()):
                res = hook(self.module, grad_inputs, grad_outputs)
                if res is not None and not all(r is None for r in res):
                    raise RuntimeError("Backward hook for Modules where no input requires "
                                       "gradient should always return None or None for all "
                                       "gradients.")
        else:
            self.grad_outputs = grad_outputs
        return [grad_outputs[i] for i in self.output_index]

    def _on_input_grads(self, grads):
        if self.grad_outputs is None:
            # the gradient reached the inputs without passing through the outputs
            return grads
        grad_inputs = self._pack(self.input_index, grads, self.input_template)
        for hook in list(self.module._backward_hooks.values()):
            res = hook(self.module, grad_inputs, self.grad_outputs)
            if res is None:
                continue
            res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            if len(res) != len(grad_inputs):
                raise RuntimeError(f"Backward hook returned an invalid number of grad_input, "
                                   f"got {len(res)}, but expected {len(grad_inputs)}")
            grad_inputs = res
        self.grad_outputs = None
        return [grad_inputs[i] for i in self.input_index]
