"""The scheduler base: ``LRScheduler`` and what every scheduler shares."""
import warnings
from functools import wraps
from weakref import ref

from ... import _hooks
from ...tensor import Tensor
from ..optimizer import Optimizer


EPOCH_DEPRECATION_WARNING = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler. During the deprecation, if "
    "epoch is different from None, the closed form is used instead of the new chainable form, "
    "where available. Please open an issue if you are unable to replicate your use case: "
    "https://github.com/pytorch/pytorch/issues/new/choose.")


# group values: an lr may be a Tensor, which must be updated in place and never aliased -------
def _copy(value):
    return value.clone() if isinstance(value, Tensor) else value


def _format_param(name, optimizer, param):
    """One value per param group: ``param`` repeated, or a list checked for length."""
    if isinstance(param, (list, tuple)):
        if len(param) != len(optimizer.param_groups):
            raise ValueError(f"{name} must have the same length as optimizer.param_groups. "
                             f"{name} has {len(param)} values, param_groups has "
                             f"{len(optimizer.param_groups)}.")
    else:
        param = [param] * len(optimizer.param_groups)
    return [_copy(p) for p in param]


def _group_values(optimizer, key):
    return [_copy(group[key]) for group in optimizer.param_groups]


def _set_group_value(group, key, value):
    # A Tensor lr is filled, not replaced, so code holding that tensor sees the new rate.
    if isinstance(group[key], Tensor):
        group[key].fill_(value.item() if isinstance(value, Tensor) else value)
    else:
        group[key] = value


def _warn_get_lr_called_within_step(scheduler):
    if not scheduler._get_lr_called_within_step:
        warnings.warn("To get the last learning rate computed by the scheduler, please use "
                      "`get_last_lr()`.", UserWarning, stacklevel=3)



def replayed(step):
    """A scheduler's ``step`` inside ``tracegrad.compile``: it changes Python state only (the
    learning rates), which a graph cannot hold, so the variant makes the same call after each
    of its runs. One given a tensor (a loss to watch) makes the call run eagerly."""
    @wraps(step)
    def wrapper(self, *args, **kwargs):
        tracer = _hooks.tracer
        if tracer is None:
            return step(self, *args, **kwargs)
        if any(isinstance(a, Tensor) for a in (*args, *kwargs.values())):
            tracer.abandon(f"calls {type(self).__name__}.step with a tensor's value")
            return step(self, *args, **kwargs)
        tracer.replay_after(f"{type(self).__name__}.step()",
                            lambda: step(self, *args, **kwargs))
    return wrapper

class _Flag:
    """Set ``obj.<name>`` to True for the duration of a ``with`` block."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name

    def __enter__(self):
        setattr(self.obj, self.name, True)

    def __exit__(self, *exc):
        setattr(self.obj, self.name, False)


def _mark_optimizer_steps(optimizer):
    """Wrap ``optimizer.step`` (once) to set ``optimizer._opt_called`` when it runs."""
    if hasattr(optimizer.step, "_wrapped_by_lr_sched"):
        return
    opt_ref = ref(optimizer)        # weak: the wrapper lives on the optimizer itself
    func = optimizer.step.__func__

    @wraps(func)
    def wrapper(*args, **kwargs):
        opt = opt_ref()
        opt._opt_called = True
        return func.__get__(opt, opt.__class__)(*args, **kwargs)

    wrapper._wrapped_by_lr_sched = True
    optimizer.step = wrapper


# base ----------------------------------------------------------------------------------------
class LRScheduler:
    """Base class: subclasses implement ``get_lr`` (and may override ``step``). Building one
    overwrites the groups' ``lr``: when restoring a checkpoint, build the scheduler before
    loading the optimizer's state dict."""

    _get_lr_called_within_step = False
    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", _copy(group["lr"]))
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   f"when resuming scheduler with last_epoch >= 0: load the "
                                   f"optimizer's state dict (which holds it) first, or pass "
                                   f"last_epoch=-1 for a fresh run")
        self.base_lrs = _group_values(optimizer, "initial_lr")
        self.last_epoch = last_epoch
        _mark_optimizer_steps(optimizer)
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        with _Flag(self, "_is_initial"):
            self.step()

    def state_dict(self):
        """Every attribute but the optimizer."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def get_last_lr(self):
        """The groups' lrs after the last ``step`` (copies)."""
        return self._last_lr

    def get_lr(self):
        """The next lr for each group; called by ``step``, use ``get_last_lr`` to inspect."""
        raise NotImplementedError

    @replayed
    def step(self, epoch=None):
        """Advance one epoch (or jump to ``epoch``, deprecated); call after ``optimizer.step``."""
        if self._step_count == 1:       # the user's first step: was the optimizer stepped?
            if not hasattr(self.optimizer.step, "_wrapped_by_lr_sched"):
                warnings.warn(
                    "Seems like `optimizer.step()` has been overridden after learning rate "
                    "scheduler initialization. Please, make sure to call `optimizer.step()` "
                    "before `lr_scheduler.step()`. See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
            elif not getattr(self.optimizer, "_opt_called", False):
                warnings.warn(
                    "Detected call of `lr_scheduler.step()` before `optimizer.step()`. In "
                    "PyTorch 1.1.0 and later, you should call them in the opposite order: "
                    "`optimizer.step()` before `lr_scheduler.step()`.  Failure to do this will "
                    "result in PyTorch skipping the first value of the learning rate schedule. "
                    "See more details at "
                    "https://pytorch.org/docs/stable/optim.html#how-to-adjust-learning-rate",
                    UserWarning, stacklevel=2)
        self._step_count += 1
        if epoch is not None:
            warnings.warn(EPOCH_DEPRECATION_WARNING, UserWarning, stacklevel=2)
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        with _Flag(self, "_get_lr_called_within_step"):
            if epoch is None:
                self.last_epoch += 1
                values = self.get_lr()
            else:
                self.last_epoch = epoch
                closed_form = getattr(self, "_get_closed_form_lr", None)
                values = closed_form() if closed_form is not None else self.get_lr()
        self._write_lrs(values)

    def _write_lrs(self, values):
        groups = self.optimizer.param_groups
        if len(values) != len(groups):
            raise ValueError(f"{type(self).__name__}.get_lr returned {len(values)} values for "
                             f"{len(groups)} param groups")
        for group, lr in zip(groups, values):
            _set_group_value(group, "lr", lr)
        self._last_lr = _group_values(self.optimizer, "lr")


class _LRScheduler(LRScheduler):
    """The pre-2.0 name, kept (as a subclass, so its ``__name__`` reads as PyTorch's)."""


# chainable schedules -------------------------------------------------------------------------
