"""The device the op-table tests run on, and the ``lib`` their entries receive there.

``TRACEGRAD_TEST_DEVICE`` (read in ``conftest.py``) picks it; unset, it is the CPU and
``lib_on`` gives ``tracegrad`` itself, so the default run is the plain one. On a GPU the
entries' own constants (``lib.tensor([2, 0, 2])`` for an index, ``lib.eye(3)``) must be
made there too, as a PyTorch user's would be: ``lib_on("cuda")`` is tracegrad with the
creation functions defaulting to that device.
"""
import functools

import tracegrad as tg

_CREATION = ("tensor", "as_tensor", "zeros", "ones", "full", "empty", "eye", "arange",
             "linspace", "rand", "randn", "randint", "randperm")


class _OnDevice:
    def __init__(self, device):
        self.device = device

    def __getattr__(self, name):
        value = getattr(tg, name)
        if name in _CREATION:
            return functools.partial(_on, value, self.device)
        return value

    def __repr__(self):
        return f"<tracegrad, creating on {self.device}>"


def _on(create, device, *args, **kwargs):
    kwargs.setdefault("device", device)
    return create(*args, **kwargs)


def lib_on(device):
    return tg if device == "cpu" else _OnDevice(device)
