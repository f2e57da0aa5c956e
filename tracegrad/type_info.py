"""``finfo`` and ``iinfo``: the numerical limits of a dtype, as PyTorch reports them."""
from . import dtypes


class finfo:
    """Limits of a floating dtype (the default dtype when none is given): ``bits``, ``eps``,
    ``max``, ``min``, ``tiny`` (= ``smallest_normal``), ``resolution`` and ``dtype`` (its
    name)."""

    def __init__(self, type=None):  # noqa: A002 - PyTorch's keyword
        d = dtypes.get_default_dtype() if type is None else dtypes.as_dtype(type)
        if not d.is_floating_point:
            raise TypeError(f"torch.finfo() requires a floating point input type. Use "
                            f"torch.iinfo to handle '{type}'")
        import numpy as np
        info = np.finfo(d.np)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.tiny = self.smallest_normal = float(info.smallest_normal)
        self.resolution = 10.0 ** -int(info.precision)
        self.dtype = d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer (or bool) dtype: ``bits``, ``max``, ``min`` and ``dtype``."""

    def __init__(self, type):  # noqa: A002 - PyTorch's keyword
        d = dtypes.as_dtype(type)
        if d.is_floating_point:
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo to "
                            f"handle '{type}'")
        import numpy as np
        if d is dtypes.bool:
            self.bits, self.min, self.max = 8, 0, 1
        else:
            info = np.iinfo(d.np)
            self.bits, self.min, self.max = int(info.bits), int(info.min), int(info.max)
        self.dtype = d.name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"
