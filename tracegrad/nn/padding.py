"""Padding layers: ``ZeroPad``, ``ConstantPad``, ``ReflectionPad``, ``ReplicationPad`` and
``CircularPad`` in 1, 2 and 3 dims, each ``F.pad`` with its mode, reprs as PyTorch's."""
from . import functional as F
from .module import Module


class _PadNd(Module):
    _nd = 1
    _mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = (tuple(padding) if hasattr(padding, "__len__")
                        else (int(padding),) * (2 * self._nd))
        if len(self.padding) != 2 * self._nd:
            raise ValueError(f"{type(self).__name__}: expected padding to be an int or a "
                             f"{2 * self._nd}-tuple, got {padding!r}")

    def forward(self, input):
        return F.pad(input, self.padding, self._mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


def _family(base, stem, mode=None):
    out = []
    for nd in (1, 2, 3):
        attrs = {"_nd": nd, "__doc__": f"``F.pad`` of the last {nd} dim(s), {stem} mode."}
        if mode:
            attrs["_mode"] = mode
        out.append(type(f"{stem}{nd}d", (base,), attrs))
    return out


ConstantPad1d, ConstantPad2d, ConstantPad3d = _family(_ConstantPadNd, "ConstantPad")
ZeroPad1d, ZeroPad2d, ZeroPad3d = _family(_ZeroPadNd, "ZeroPad")
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = _family(_PadNd, "ReflectionPad", "reflect")
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = _family(_PadNd, "ReplicationPad",
                                                               "replicate")
CircularPad1d, CircularPad2d, CircularPad3d = _family(_PadNd, "CircularPad", "circular")

for _cls in (ConstantPad1d, ConstantPad2d, ConstantPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d,
             ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d,
             ReplicationPad2d, ReplicationPad3d, CircularPad1d, CircularPad2d, CircularPad3d):
    _cls.__module__ = __name__
