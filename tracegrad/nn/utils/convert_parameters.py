"""``parameters_to_vector`` and ``vector_to_parameters``, as PyTorch 2.x defines them.

``parameters_to_vector`` concatenates the flattened parameters into one new
1-d tensor; it is an ordinary differentiable op (PyTorch records it too).
``vector_to_parameters(vec, parameters)`` sets each parameter's ``.data`` to the
matching slice of ``vec`` reshaped to the parameter's shape: the parameter
objects (and their ``.grad``) stay the same, no autograd history is recorded,
and, as in PyTorch, the parameters then share ``vec``'s storage.
All parameters must be on one device; a mix raises PyTorch's ``TypeError``.
"""
from ...ops import cat
from ...tensor import Tensor


def _typename(obj):
    # torch.typename's spelling: "numpy.ndarray", "list", "torch.FloatTensor"
    if isinstance(obj, Tensor):
        return obj.type()
    cls = type(obj)
    module = cls.__module__
    return cls.__qualname__ if module in ("", "builtins") else f"{module}.{cls.__qualname__}"


def _check_param_device(param, device):
    """``param``'s device; raises if it differs from ``device`` (the first parameter's)."""
    if device is not None and param.device != device:
        raise TypeError("Found two parameters on different devices, "
                        "this is currently not supported.")
    return param.device


def parameters_to_vector(parameters):
    """The parameters flattened and concatenated into one 1-d tensor."""
    device = None
    flat = []
    for param in parameters:
        device = _check_param_device(param, device)
        flat.append(param.view(-1))
    return cat(flat)


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-d ``vec`` into ``parameters`` (via ``.data``)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {_typename(vec)}")
    device = None
    pointer = 0
    for param in parameters:
        device = _check_param_device(param, device)
        n = param.numel()
        param.data = vec[pointer:pointer + n].view_as(param).data
        pointer += n
