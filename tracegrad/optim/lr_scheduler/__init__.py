"""``tracegrad.optim.lr_scheduler``: PyTorch's learning-rate schedulers, same names, signatures,
formulas and state dicts.

Contract (PyTorch 2.x's):

- Building a scheduler with ``last_epoch=-1`` stores ``group["initial_lr"]`` (kept if already
  there), sets ``base_lrs`` from it, and takes one initial ``step()`` so the optimizer holds
  the epoch-0 rate. Resuming with ``last_epoch >= 0`` needs ``initial_lr`` in every group.
- ``step()`` advances ``last_epoch`` and writes ``get_lr()`` into ``group["lr"]``. Most
  ``get_lr`` are *chainable*: they scale the group's current lr, so schedulers stacked on one
  optimizer compose. ``step(epoch)`` (deprecated, warns) jumps to ``epoch`` through the
  closed form ``_get_closed_form_lr`` where a scheduler has one.
- ``get_last_lr()`` is the list of group lrs after the last step (copies, never aliases).
- ``state_dict()`` is every attribute but the optimizer (and nested schedulers' own state
  dicts); the attribute names are PyTorch's, so state dicts carry over between the libraries.
- The optimizer's ``step`` is wrapped to note that it ran, so stepping the scheduler first
  warns as PyTorch does (the first value of the schedule would be skipped).
- ``ReduceLROnPlateau`` takes no initial step and steps on a metric: ``step(metrics)``.
"""
from bisect import bisect_right  # noqa: F401 - PyTorch's module re-exports both

from ..optimizer import Optimizer  # noqa: F401
from .base import LRScheduler, _LRScheduler  # noqa: F401 - _LRScheduler: PyTorch's old name
from .cycles import ChainedScheduler, CosineAnnealingWarmRestarts, OneCycleLR, SequentialLR
from .cyclic import CyclicLR
from .plateau import ReduceLROnPlateau
from .simple import (
    ConstantLR, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR, MultiplicativeLR,
    MultiStepLR, PolynomialLR, StepLR,
)

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "LinearLR", "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "ChainedScheduler",
           "ReduceLROnPlateau", "CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR",
           "PolynomialLR"]
