"""Dtypes and PyTorch's type promotion.

A ``dtype`` wraps a NumPy dtype. Promotion follows PyTorch, not NumPy: operands
fall into three tiers (tensors with dimensions, zero-dim tensors, Python
scalars) and a lower tier only changes the result when it is of a higher
category (bool < integer < floating). So ``float32_tensor * 2.5`` stays float32,
``int_tensor * 2.5`` is the default float dtype, and ``int32 + int64_scalar``
stays int32.
"""
import numpy as np


class dtype:
    __slots__ = ("name", "np", "is_floating_point", "is_signed", "itemsize", "_rank", "_cat")

    def __init__(self, name, np_dtype, category, rank):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = category == 2
        self.is_signed = category != 0
        self.itemsize = self.np.itemsize
        self._cat = category      # 0 bool, 1 integer, 2 floating
        self._rank = rank         # order within the category

    @property
    def is_complex(self):
        return False

    def __repr__(self):
        return f"tracegrad.{self.name}"

    def __reduce__(self):
        return self.name


_py_float, _py_int, _py_bool = type(1.0), type(1), type(True)

bool = dtype("bool", np.bool_, 0, 0)  # noqa: A001 - PyTorch's public name
uint8 = dtype("uint8", np.uint8, 1, 0)
int8 = dtype("int8", np.int8, 1, 1)
int16 = dtype("int16", np.int16, 1, 2)
int32 = dtype("int32", np.int32, 1, 3)
int64 = dtype("int64", np.int64, 1, 4)
float16 = dtype("float16", np.float16, 2, 0)
float32 = dtype("float32", np.float32, 2, 1)
float64 = dtype("float64", np.float64, 2, 2)

half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001

ALL = (bool, uint8, int8, int16, int32, int64, float16, float32, float64)
_BY_NUMPY = {d.np: d for d in ALL}
_DEFAULT = [float32]


def get_default_dtype():
    return _DEFAULT[0]


def set_default_dtype(d):
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point types are supported as the default type, got {d}")
    _DEFAULT[0] = d


def from_numpy(np_dtype):
    """The tracegrad dtype of a NumPy dtype (float64 stays float64)."""
    try:
        return _BY_NUMPY[np_dtype]
    except KeyError:
        d = np.dtype(np_dtype)
        if d in _BY_NUMPY:
            return _BY_NUMPY[d]
        raise TypeError(f"tracegrad has no dtype for NumPy's {d}") from None


def as_dtype(d):
    """Accept a tracegrad dtype, a NumPy dtype, a Python type or a name."""
    if isinstance(d, dtype):
        return d
    if d is _py_float:
        return get_default_dtype()
    if d is _py_int:
        return int64
    if d is _py_bool:
        return bool
    if isinstance(d, str) and d in _BY_NAME:
        return _BY_NAME[d]
    return from_numpy(d)


_BY_NAME = {d.name: d for d in ALL}


def promote_types(a, b):
    """Promotion of two dtypes of the same tier (``torch.promote_types``)."""
    if a is b:
        return a
    if a._cat != b._cat:
        return a if a._cat > b._cat else b
    if a._cat == 1 and {a.name, b.name} == {"uint8", "int8"}:
        return int16
    return a if a._rank >= b._rank else b


def _scalar_dtype(x):
    if isinstance(x, _py_bool):
        return bool
    if isinstance(x, _py_int):
        return int64
    return get_default_dtype()


def _combine(higher, lower):
    # PyTorch's combine_categories: a lower tier wins only with a higher category.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_floating_point:
        return higher
    if higher is bool or lower.is_floating_point:
        return promote_types(higher, lower)
    return higher


def can_cast(from_, to):
    """Whether PyTorch's casting rules allow ``from_`` to ``to`` (no float to integer, no
    number to bool): ``torch.can_cast``, and the check of an ``out=`` argument."""
    a, b = as_dtype(from_), as_dtype(to)
    if a.is_floating_point and not b.is_floating_point:
        return False
    if a is not bool and b is bool:
        return False
    return True


def result_type(*operands, **_):
    """The dtype PyTorch gives an op over ``operands`` (tensors, avals or scalars).

    An operand is a tensor-like when it has ``dtype`` and ``ndim``; anything else
    is a Python scalar.
    """
    n = len(operands)
    if n == 1:
        d = getattr(operands[0], "dtype", None)
        if d is not None:
            return d
    elif n == 2:     # the common cases, decided without the general walk
        a, b = operands
        ta, tb = type(a), type(b)
        if ta is _py_float or ta is _py_int:
            a, b, ta, tb = b, a, tb, ta
        da = getattr(a, "dtype", None)
        if da is not None:
            if tb is _py_float:
                if da._cat == 2:
                    return da
            elif tb is _py_int:
                if da._cat >= 1:
                    return da
            elif getattr(b, "dtype", None) is da:
                return da
    dim = zero = wrapped = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if d is None:
            s = _scalar_dtype(x)
            wrapped = s if wrapped is None else promote_types(wrapped, s)
        elif x.ndim:
            dim = d if dim is None else promote_types(dim, d)
        else:
            zero = d if zero is None else promote_types(zero, d)
    return _combine(dim, _combine(zero, wrapped))


def to_float(d):
    """The floating dtype a math op computes in: ints and bool become the default."""
    return d if d.is_floating_point else get_default_dtype()


_LEGACY_BASE = {
    "bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
    "int64": "Long", "float16": "Half", "float32": "Float", "float64": "Double",
}


def type_name(d, device_type="cpu"):
    """PyTorch's legacy tensor type name, e.g. ``tracegrad.FloatTensor``."""
    cuda = ".cuda" if device_type == "cuda" else ""
    return f"tracegrad{cuda}.{_LEGACY_BASE[d.name]}Tensor"


def from_type_name(name):
    """(dtype, device type) of a legacy type name: ``torch.DoubleTensor``,
    ``tracegrad.cuda.LongTensor`` (either library's prefix)."""
    parts = name.split(".")
    by_base = {f"{base}Tensor": dname for dname, base in _LEGACY_BASE.items()}
    if parts[0] not in ("torch", "tracegrad") or parts[-1] not in by_base or len(parts) > 3 or (
            len(parts) == 3 and parts[1] != "cuda"):
        raise ValueError(f"invalid type: '{name}'")
    return as_dtype(by_base[parts[-1]]), "cuda" if len(parts) == 3 else "cpu"
