"""``CyclicLR``: the cyclical learning rate policy (Smith 2015), stepped once per batch.

The lr climbs from ``base_lr`` to ``max_lr`` over ``step_size_up`` steps and back over
``step_size_down``; the amplitude is scaled per cycle (``triangular``: 1, ``triangular2``:
halved each cycle) or per step (``exp_range``: ``gamma ** step``), or by a ``scale_fn``
evaluated on the cycle number or the step (``scale_mode``). With ``cycle_momentum`` the
momentum (SGD's ``momentum``, Adam's ``betas[0]``) moves inversely, between
``max_momentum`` and ``base_momentum``. The formulas, group keys and state dict are
PyTorch's.
"""
import math
import types
from functools import partial

from ..optimizer import Optimizer
from .base import LRScheduler, _format_param, _set_group_value, _warn_get_lr_called_within_step

_MODES = ("triangular", "triangular2", "exp_range")


class CyclicLR(LRScheduler):
    """Cycle each group's lr between ``base_lr`` and ``max_lr`` (see the module docstring).
    Building it sets the groups' lr to ``base_lr`` (and their momentum to ``max_momentum``)."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        base_lrs = _format_param("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                _set_group_value(group, "lr", lr)
        self.max_lrs = _format_param("max_lr", optimizer, max_lr)
        step_size_up = float(step_size_up)
        step_size_down = float(step_size_down) if step_size_down is not None else step_size_up
        self.total_size = step_size_up + step_size_down
        self.step_ratio = step_size_up / self.total_size
        if mode not in _MODES and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self._init_momentum(optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_momentum(self, optimizer, base_momentum, max_momentum, last_epoch):
        """Check that the optimizer has a momentum to cycle; start it at ``max_momentum``."""
        if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
            raise ValueError("optimizer must support momentum or beta1 with `cycle_momentum` "
                             "option enabled")
        self.use_beta1 = "betas" in optimizer.defaults
        self.base_momentums = _format_param("base_momentum", optimizer, base_momentum)
        self.max_momentums = _format_param("max_momentum", optimizer, max_momentum)
        if last_epoch == -1:
            for m_max, m_base, group in zip(self.max_momentums, self.base_momentums,
                                            optimizer.param_groups):
                self._set_momentum(group, m_max)
                group["max_momentum"] = m_max
                group["base_momentum"] = m_base

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _init_scale_fn(self):
        """The built-in scale function of ``mode`` (and its ``scale_mode``), unless custom."""
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self._scale_fn_ref = self._triangular_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self._scale_fn_ref = self._triangular2_scale_fn
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self._scale_fn_ref = partial(self._exp_range_scale_fn, self.gamma)
            self.scale_mode = "iterations"

    def scale_fn(self, x):
        """The amplitude's scale at ``x`` (the cycle number or the step, per ``scale_mode``)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        return self._scale_fn_ref(x)

    @staticmethod
    def _triangular_scale_fn(x):
        return 1.0

    @staticmethod
    def _triangular2_scale_fn(x):
        return 1 / (2.0 ** (x - 1))

    @staticmethod
    def _exp_range_scale_fn(gamma, x):
        return gamma ** x

    def _position(self):
        """``(cycle, scale_factor)``: the cycle number (from 1) and where the step is in it,
        0 at ``base_lr`` rising to 1 at ``max_lr`` and falling back."""
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            return cycle, x / self.step_ratio
        return cycle, (x - 1) / (self.step_ratio - 1)

    def get_lr(self):
        """The lr for each group at step ``last_epoch``; also sets the groups' momentum."""
        _warn_get_lr_called_within_step(self)
        cycle, scale_factor = self._position()
        x = cycle if self.scale_mode == "cycle" else self.last_epoch
        # scale_fn is called once per group and value, as PyTorch calls it (a callable
        # object may count its calls)
        lrs = [base_lr + (max_lr - base_lr) * scale_factor * self.scale_fn(x)
               for base_lr, max_lr in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            momentums = [max_m - (max_m - base_m) * scale_factor * self.scale_fn(x)
                         for base_m, max_m in zip(self.base_momentums, self.max_momentums)]
            for group, momentum in zip(self.optimizer.param_groups, momentums):
                self._set_momentum(group, momentum)
        return lrs

    def state_dict(self):
        """The attributes but the optimizer and the built-in scale function; a custom one's
        ``__dict__`` if it is a callable object (None for a function or lambda)."""
        state = super().state_dict()
        state.pop("_scale_fn_ref", None)
        fn = state.pop("_scale_fn_custom")
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict):
        state = {k: v for k, v in state_dict.items() if k != "_scale_fn_custom"}
        saved_fn = state_dict.get("_scale_fn_custom")
        super().load_state_dict(state)
        if saved_fn is not None:
            self._scale_fn_custom.__dict__.update(saved_fn)
        self._init_scale_fn()
