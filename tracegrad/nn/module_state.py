"""``state_dict`` and ``load_state_dict`` of ``nn.Module``, with PyTorch's rules: parameters
and persistent buffers by dotted name; loading copies in place (or assigns, with
``assign=True``), always refuses a shape mismatch, and reports missing and unexpected keys
(raising on them when ``strict``)."""
import collections
import collections.abc
import itertools
from collections import OrderedDict

from ..autograd.grad_mode import no_grad
from ..tensor import Tensor
from .parameter import Parameter


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys",
                                               ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


class StateDictMixin:
    """The state-dict methods of ``Module`` (which defines ``_parameters``, ``_buffers``,
    ``_non_persistent_buffers_set`` and ``_modules``)."""

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached unless keep_vars)."""
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict, prefix, missing_keys, unexpected_keys,
                              error_msgs, assign):
        local_state = {k: v for k, v in itertools.chain(
            self._parameters.items(),
            ((k, v) for k, v in self._buffers.items()
             if k not in self._non_persistent_buffers_set)) if v is not None}
        for name, param in local_state.items():
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                error_msgs.append(f'While copying the parameter named "{key}", expected '
                                  f'tracegrad.Tensor or Tensor-like object from checkpoint but '
                                  f'received {type(value)}')
                continue
            if param.ndim == 0 and value.shape == (1,):   # PyTorch 0.3 checkpoints
                value = value[0]
            if value.shape != param.shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{value.shape} from checkpoint, the shape in current model "
                                  f"is {param.shape}.")
                continue
            try:
                with no_grad():
                    if assign:
                        self._assign(name, param, value)
                    else:
                        param.copy_(value)
            except Exception as exc:   # noqa: BLE001 - reported with the others, as PyTorch does
                error_msgs.append(f'While copying the parameter named "{key}", whose dimensions '
                                  f'in the model are {param.shape} and whose dimensions in the '
                                  f'checkpoint are {value.shape}, an exception occurred : '
                                  f'{exc.args}.')
        for key in state_dict:
            if key.startswith(prefix):
                head = key[len(prefix):].split(".", 1)
                known = self._modules if len(head) > 1 else local_state
                if head[0] not in known:
                    unexpected_keys.append(key)

    def _assign(self, name, param, value):
        if name in self._parameters:
            if not isinstance(value, Parameter):
                value = Parameter(value.detach(), requires_grad=param.requires_grad)
            self._parameters[name] = value
        else:
            self._buffers[name] = value

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy ``state_dict``'s tensors into this module's parameters and buffers.

        Shape mismatches always raise; missing and unexpected keys raise when ``strict``.
        Returns ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors = [], [], []

        def load(module, local, prefix):
            module._load_from_state_dict(local, prefix, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    load(child, {k: v for k, v in local.items() if k.startswith(child_prefix)},
                         child_prefix)

        load(self, OrderedDict(state_dict), "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        return _IncompatibleKeys(missing, unexpected)
