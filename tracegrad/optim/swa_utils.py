"""``optim.swa_utils``: weight averaging, PyTorch's.

``AveragedModel(model)`` keeps a copy of ``model`` whose parameters are an average of the
ones ``update_parameters`` is given: the running mean (stochastic weight averaging) by
default, an exponential moving average with ``multi_avg_fn=get_ema_multi_avg_fn(decay)``
(the EMA of a generator's weights), or any ``avg_fn(averaged, current, n_averaged)``.
Buffers are copied from the model (``use_buffers=True``: averaged with the parameters).
``update_bn`` recomputes batch-norm statistics for the averaged weights over a loader, and
``SWALR`` anneals each group's learning rate to its ``swa_lr``.
"""
import copy
import itertools
import math
import warnings

from .. import creation, dtypes
from ..autograd.grad_mode import no_grad
from ..nn.module import Module
from ..nn.modules.batchnorm import _BatchNorm
from ..tensor import Tensor
from .lr_scheduler.base import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn",
           "get_swa_multi_avg_fn", "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in "
                         f"[0,1] range.")


def get_ema_avg_fn(decay=0.999):
    """``avg_fn`` of an exponential moving average: ``decay * averaged + (1 - decay) *
    current``."""
    _check_decay(decay)

    @no_grad()
    def ema_update(averaged, current, num_averaged):
        return decay * averaged + (1 - decay) * current
    return ema_update


def get_swa_avg_fn():
    """``avg_fn`` of the running mean over the ``num_averaged`` models so far."""
    @no_grad()
    def swa_update(averaged, current, num_averaged):
        return averaged + (current - averaged) / (num_averaged + 1)
    return swa_update


def get_ema_multi_avg_fn(decay=0.999):
    """``multi_avg_fn`` of an exponential moving average: each averaged tensor moves a
    ``1 - decay`` part of the way to the current one, in place."""
    _check_decay(decay)

    @no_grad()
    def ema_update(averaged, current, num_averaged):
        for a, c in zip(averaged, current):
            if a.is_floating_point() or a.is_complex():
                a.lerp_(c, 1 - decay)
            else:
                a.copy_(a * decay + c * (1 - decay))
    return ema_update


def get_swa_multi_avg_fn():
    """``multi_avg_fn`` of the running mean, in place."""
    @no_grad()
    def swa_update(averaged, current, num_averaged):
        n = num_averaged.item() if isinstance(num_averaged, Tensor) else num_averaged
        for a, c in zip(averaged, current):
            if a.is_floating_point() or a.is_complex():
                a.lerp_(c, 1 / (n + 1))
            else:       # an integer buffer: the step truncated to an integer, as PyTorch's
                a.add_(((c - a) / (num_averaged + 1)).trunc().to(a.dtype))
    return swa_update


class AveragedModel(Module):
    """A copy of ``model`` holding the average of the weights it is updated with (see the
    module docstring); calling it calls the copy."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", creation.tensor(0, dtype=dtypes.int64,
                                                           device=device))
        self.avg_fn, self.multi_avg_fn = avg_fn, multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Fold ``model``'s current weights into the average (the first call copies them)."""
        if self.use_buffers:
            mine = itertools.chain(self.module.parameters(), self.module.buffers())
            theirs = itertools.chain(model.parameters(), model.buffers())
        else:
            mine, theirs = self.parameters(), model.parameters()
        averaged, current = [], []
        first = int(self.n_averaged.item()) == 0
        for a, c in zip(mine, theirs):
            c = c.detach().to(a.device)
            averaged.append(a.detach())
            current.append(c)
            if first:
                a.detach().copy_(c)
        if not first:
            n = self.n_averaged.to(averaged[0].device) if averaged else self.n_averaged
            if self.avg_fn is not None:
                for a, c in zip(averaged, current):
                    a.copy_(self.avg_fn(a, c, n))
            else:
                (self.multi_avg_fn or get_swa_multi_avg_fn())(averaged, current, n)
        if not self.use_buffers:        # the buffers are the model's own
            for b, b_model in zip(self.module.buffers(), model.buffers()):
                b.detach().copy_(b_model.detach().to(b.device))
        self.n_averaged += 1


@no_grad()
def update_bn(loader, model, device=None):
    """Recompute the batch-norm running statistics of ``model`` as a plain average over one
    pass of ``loader`` (its batches, or each batch's first element), in train mode; the
    momenta and the mode are given back after."""
    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm):
            m.reset_running_stats()
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    for batch in loader:
        if isinstance(batch, (list, tuple)):
            batch = batch[0]
        if device is not None:
            batch = batch.to(device)
        model(batch)
    for m, momentum in momenta.items():
        m.momentum = momentum
    model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each group's learning rate from its value to ``swa_lr`` over
    ``anneal_epochs`` steps (``"cos"`` or ``"linear"``), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos",
                 last_epoch=-1):
        for value, group in zip(_format_param("swa_lr", optimizer, swa_lr),
                                optimizer.param_groups):
            group["swa_lr"] = value
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def _anneal(self, t):
        return (1 - math.cos(math.pi * t)) / 2 if self._anneal_strategy == "cos" else t

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please "
                          "use `get_last_lr()`.", UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        # the lr the group would have started from, had the last step's mix not happened
        prev = self._anneal(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        alpha = self._anneal(max(0, min(1, step / max(1, self.anneal_epochs))))
        lrs = []
        for group in self.optimizer.param_groups:
            lr, swa_lr = group["lr"], group["swa_lr"]
            start = swa_lr if prev == 1 else (lr - prev * swa_lr) / (1 - prev)
            lrs.append(swa_lr * alpha + start * (1 - alpha))
        return lrs
