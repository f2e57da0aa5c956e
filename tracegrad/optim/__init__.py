"""``tracegrad.optim``: optimizers that update parameters in place, PyTorch's formulas.

Each lives under PyTorch's module path (``optim.adam.Adam``, ``optim.adamw.AdamW``,
``optim.optimizer.Optimizer``, ``optim.lr_scheduler``; ``Adafactor`` in ``optim._adafactor``,
which PyTorch's reports as ``torch.optim``), and ``swap_in_optimizer_params_and_state``, which
runs an optimizer's steps on other parameters and state for the length of a context."""
import contextlib
from collections import defaultdict

from . import lr_scheduler
from . import adadelta, adagrad, adam, adamax, adamw, asgd, lbfgs, nadam, optimizer  # noqa: F401
from . import muon, radam, rmsprop, rprop, sgd, swa_utils  # noqa: F401
from ._adafactor import Adafactor
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .muon import Muon
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "Rprop", "ASGD", "Adafactor", "LBFGS", "Muon", "lr_scheduler",
           "swap_in_optimizer_params_and_state"]

Adafactor.__module__ = __name__     # as PyTorch reports its Adafactor: torch.optim
Muon.__module__ = __name__          # and its Muon


@contextlib.contextmanager
def swap_in_optimizer_params_and_state(optimizer, swapin_parameters, swapin_optim_state):
    """Within the context, ``optimizer`` steps ``swapin_parameters`` (a dict, in the order of
    its parameters) with the state and group options of ``swapin_optim_state`` (a
    ``state_dict()``: state keyed by packed ids); on exit its own groups and state come back.
    In-place changes to the swapped-in state tensors stay in ``swapin_optim_state``. PyTorch's
    ``torch.optim.swap_in_optimizer_params_and_state``, with its checks and messages."""
    name = "swap_in_optimizer_params_and_state"
    if not optimizer.state:
        raise RuntimeError(f"{name} requires initialized optimizer state.")
    if not isinstance(swapin_optim_state, dict):
        raise RuntimeError(f"{name} requires a DCP-style optimizer state_dict.")
    state, groups = swapin_optim_state.get("state"), swapin_optim_state.get("param_groups")
    if not isinstance(state, dict):
        raise RuntimeError(f"{name} requires swapin_optim_state['state'] to be a dict mapping "
                           f"packed parameter ids to per-param state dicts, got "
                           f"{type(state).__name__}.")
    if not isinstance(groups, list):
        raise RuntimeError(f"{name} requires swapin_optim_state['param_groups'] to be a list "
                           f"of param-group dicts, got {type(groups).__name__}.")
    if len(groups) != len(optimizer.param_groups):
        raise RuntimeError("swapin_optim_state has a different number of parameter groups "
                           "than the live optimizer.")
    flat, offset, seen, swaps = list(swapin_parameters.values()), 0, set(), []
    for idx, (group, swapin) in enumerate(zip(optimizer.param_groups, groups)):
        ids = swapin.get("params") if isinstance(swapin, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise RuntimeError(f"{name} requires optimizer.state_dict()-style "
                               "param_groups[*]['params'] entries keyed by packed parameter ids.")
        if len(ids) != len(group["params"]):
            raise RuntimeError(f"swapin_optim_state param group {idx} has a different number "
                               "of params than the live optimizer param group.")
        if set(swapin) != set(group):
            raise RuntimeError(
                f"{name} requires optimizer.state_dict()-style param group keys to exactly "
                f"match the live optimizer group keys for group {idx}. Keys only in swap-in: "
                f"{[k for k in swapin if k not in group]}. Keys only in live: "
                f"{[k for k in group if k not in swapin]}.")
        if offset + len(ids) > len(flat):
            raise RuntimeError(f"{name} requires the explicit parameter state to match "
                               "optimizer.param_groups ordering.")
        swaps.append((group, swapin, flat[offset:offset + len(ids)]))
        offset += len(ids)
        seen.update(ids)
    extra = [k for k in state if k not in seen]
    if extra:
        raise RuntimeError(f"{name} requires swapin_optim_state['state'] to be keyed only by "
                           f"packed parameter ids from param_groups[*]['params']; got extra "
                           f"keys {extra!r}.")
    original_state = optimizer.state
    snapshots = [dict(g) for g in optimizer.param_groups]
    try:
        swapped = defaultdict(dict)
        for group, swapin, params in swaps:
            group.update({k: v for k, v in swapin.items() if k != "params"}, params=params)
            for p, i in zip(params, swapin["params"]):
                swapped[p] = dict(state.get(i, {}))     # in-place edits reach the caller's
        optimizer.state = swapped
        yield
    finally:
        for group, snapshot in zip(optimizer.param_groups, snapshots):
            group.clear()
            group.update(snapshot)
        optimizer.state = original_state
