"""PyTorch's tensor layouts, of which tracegrad has one: ``strided``, the dense arrays every
tensor here is. Creation functions take ``layout=`` where PyTorch's do, as PyTorch's
default: ``None`` or ``tracegrad.strided``; anything else (a sparse layout) is an error
that says so.
"""


class layout:
    """A tensor layout (``tracegrad.strided``); prints as PyTorch's."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"torch.{self.name}"

    def __reduce__(self):
        return self.name        # pickles as the module's global of that name


strided = layout("strided")


def check_layout(op, value):
    """Accept ``layout=None`` or ``strided`` in ``op``; raise PyTorch's TypeError for a value
    that is no layout, and say that tracegrad has dense tensors only for another layout."""
    if value is None or value is strided:
        return
    # late: tracegrad imports this module before the ops package, which imports creation,
    # which imports this module
    from .ops.op_errors import op_error
    if not isinstance(value, layout):
        raise op_error(op, f"argument 'layout' must be torch.layout, not "
                           f"{type(value).__name__} (tracegrad's one layout is "
                           f"tracegrad.strided)", TypeError)
    raise op_error(op, f"expected layout=tracegrad.strided, got {value!r}: tracegrad's tensors "
                       f"are dense (strided) only", NotImplementedError)
