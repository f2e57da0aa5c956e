"""``tracegrad.utils.data``: datasets, samplers, collation and ``DataLoader``, under
PyTorch's module paths (``dataset``, ``sampler``, ``dataloader``, ``distributed``,
``_utils.collate``, ``_utils.worker``)."""
from . import dataset, sampler, dataloader, distributed, _utils  # noqa: F401
from ._utils.collate import default_collate, default_convert
from ._utils.worker import get_worker_info
from .dataloader import DataLoader
from .dataset import (
    ChainDataset, ConcatDataset, Dataset, IterableDataset, StackDataset, Subset, TensorDataset,
    random_split,
)
from .distributed import DistributedSampler
from .sampler import (
    BatchSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "Dataset", "IterableDataset", "TensorDataset", "StackDataset", "Subset", "ConcatDataset",
    "ChainDataset", "random_split", "Sampler", "SequentialSampler", "RandomSampler",
    "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler", "DistributedSampler",
    "default_collate", "default_convert", "get_worker_info", "DataLoader",
]
