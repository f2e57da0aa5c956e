"""``default_collate`` and ``default_convert``, PyTorch's rules for merging samples.

Tensors are stacked along a new dim 0, Python floats become float64 tensors and ints
int64 tensors, strings stay lists, and tuples, lists, named tuples and dicts are collated
field by field (a tuple of fields comes back as a list, as in PyTorch).
"""
import collections.abc
import numbers

import numpy as np

from .... import creation, dtypes
from ....ops import stack
from ....tensor import Tensor


def default_convert(data):
    """Like ``default_collate`` for one unbatched sample: arrays and NumPy scalars become
    tensors, containers are converted field by field, everything else is kept."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and data.dtype.kind in "biuf":
        return creation.as_tensor(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


def default_collate(batch):
    """Merge a list of samples into a batch (see the module docstring)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, (np.ndarray, np.generic)) and elem.dtype.kind in "biuf":
        return stack([creation.as_tensor(np.asarray(b)) for b in batch], 0)
    if isinstance(elem, float):
        return creation.tensor(batch, dtype=dtypes.float64)
    if isinstance(elem, (bool, numbers.Integral)):
        return creation.tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        merged = {key: default_collate([d[key] for d in batch]) for key in elem}
        try:
            return type(elem)(merged)
        except TypeError:       # a mapping type that cannot be built from a dict
            return merged
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(b) != len(elem) for b in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(s) for s in zip(*batch)]      # each a tuple, as PyTorch
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                    f"or lists; found {type(elem)}")


__all__ = ["default_collate", "default_convert"]
