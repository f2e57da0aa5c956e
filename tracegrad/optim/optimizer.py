"""``Optimizer``: parameter groups, per-parameter state, ``zero_grad`` and state dicts.

Subclasses implement ``step`` with in-place tracegrad ops under ``no_grad`` (recorded
for a ``differentiable`` optimizer, as PyTorch records its steps),
so parameters keep their identity (modules and other optimizers holding
them see the update) and their version counters move. In eager, unless
``foreach=False``, the step runs fused instead (``_foreach``: the same
update as NumPy ufuncs on the arrays, bit for bit, with the same version
counts); a traced step (``tracegrad.compile``) always runs the ops. ``state_dict`` is
PyTorch's format: ``{"state": {index: {...}}, "param_groups": [{..., "params":
[index, ...]}]}`` with parameters numbered across groups in order.
"""
import functools
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

from .. import _hooks, creation, dtypes
from . import _foreach
from ..autograd.grad_mode import set_grad_enabled
from ..nn.module import zero_grads
from ..tensor import Tensor


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _typename(obj):
    return obj.type() if isinstance(obj, Tensor) else type(obj).__name__


def check_lr(lr):
    """PyTorch's errors for a learning rate: a tensor of one element, not negative."""
    if isinstance(lr, Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def check_args(lr=0.0, eps=0.0, betas=(0.0, 0.0), weight_decay=0.0):
    """PyTorch's errors for hyper-parameters out of range (the Adam family's checks)."""
    check_lr(lr)
    if not 0.0 <= eps:
        raise ValueError(f"Invalid epsilon value: {eps}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise ValueError(f"Invalid beta parameter at index {i}: {beta}")
    if not 0.0 <= weight_decay:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


def scalar(t):
    """The number a 0-d state tensor holds (a step count): a Python float, or, inside
    ``tracegrad.compile``, the tensor in float64, so that the variant reads it at every call
    instead of baking this call's value (the arithmetic on it is the same float64's)."""
    return t.item() if _hooks.tracer is None else t.double()


# the options schedulers change (OneCycleLR and CyclicLR cycle the momentum and betas too)
RUNTIME = frozenset({"lr", "momentum", "betas"})


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


_TESTS = {"!= 0": lambda v: bool(v != 0), "> 0": lambda v: bool(v > 0)}


def option_is(group, key, test):
    """Whether ``group[key]`` passes ``test`` ("!= 0" or "> 0"), a Python bool. Inside a
    trace, an option read afresh at every call (``RUNTIME``: a schedule may cycle the
    momentum) is a tensor, and a branch on it would be a host read inside the step; the
    branch is taken on the option's number instead, and checked before each call (only a
    move to or from 0 changes the program)."""
    if isinstance(group, _TracedGroup):
        return group.passes(key, test)
    return _TESTS[test](group[key])


class _LiveGroup:
    """``optimizer.param_groups[index]`` looked up afresh at each read, not the dict a trace
    saw: what a variant reads and checks follows ``load_state_dict`` (new group dicts) and
    ``add_param_group``; a group that is gone reads as empty."""
    __slots__ = ("_optimizer", "_index")

    def __init__(self, optimizer, index):
        self._optimizer, self._index = optimizer, index

    def _now(self):
        groups = self._optimizer.param_groups
        return groups[self._index] if self._index < len(groups) else {}

    def __getitem__(self, key):
        return self._now()[key]

    def get(self, key, default=None):
        return self._now().get(key, default)

    def __contains__(self, key):
        return key in self._now()


def _nth(seq, k):
    """``seq[k]``, or None past its end (a parameter a variant looks for and no longer
    finds: the captured-tensor check says it was replaced)."""
    return seq[k] if k < len(seq) else None


class _TracedGroup:
    """A parameter group read inside a trace: the options in ``RUNTIME`` (numbers) are 0-d
    float64 tensors read afresh at every call; every other option is baked, with a check
    that it still holds. ``group`` is a ``_LiveGroup``."""

    def __init__(self, tracer, index, group):
        self._tracer, self._index, self._group, self._read = tracer, index, group, {}

    def __getitem__(self, key):
        if key in self._read:
            return self._read[key]
        group, value = self._group, self._group[key]
        name = key if self._index == 0 else f"{key}_{self._index}"
        if key in RUNTIME and _number(value):
            value = self._tracer.scalar_input(lambda: group[key], name)
        elif key in RUNTIME and isinstance(value, tuple) and all(map(_number, value)):
            value = tuple(self._tracer.scalar_input(lambda i=i: group[key][i], f"{name}{i}")
                          for i in range(len(value)))
        elif key == "params":       # where the variant finds each parameter again
            self._tracer.baked(f"len(optimizer.param_groups[{self._index}]['params'])",
                               group, key, len)
            for k, p in enumerate(value):
                self._tracer.hints.setdefault(id(p), (
                    f"optimizer.param_groups[{self._index}]['params'][{k}]",
                    lambda group=group, k=k: _nth(group.get("params", ()), k)))
        else:
            value = self._tracer.baked(f"optimizer.param_groups[{self._index}][{key!r}]",
                                       group, key)
        self._read[key] = value
        return value

    def passes(self, key, test):
        """``option_is`` on this group, its branch checked by the variant at every call (one
        check however often the step asks: a loop asks once a parameter)."""
        if (key, test) not in self._read:
            self._read[key, test] = self._tracer.baked(
                f"optimizer.param_groups[{self._index}][{key!r}] {test}", self._group, key,
                _TESTS[test])
        return self._read[key, test]

    def get(self, key, default=None):
        return self[key] if key in self._group else default

    def __contains__(self, key):
        return key in self._group


def _no_grad_step(step):
    """Run ``step`` without recording autograd, unless the optimizer is ``differentiable``
    (its steps are recorded, so a gradient flows through them to what the parameters were
    computed from, as in PyTorch); a closure, if given, runs with grad on."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        _check_capturable(self)
        with set_grad_enabled(bool(self.defaults.get("differentiable"))):
            return step(self, *args, **kwargs)
    return wrapper


CAPTURABLE_DEVICES = ["cuda", "xpu", "hpu", "privateuseone", "xla"]   # PyTorch's list


def _check_capturable(optimizer):
    """PyTorch's error for ``capturable=True`` on parameters (with a gradient) outside the
    devices that capture graphs: a CPU parameter, say."""
    for group in optimizer.param_groups:
        if group.get("capturable") and any(
                p.grad is not None and p.device.type not in CAPTURABLE_DEVICES
                for p in group["params"]):
            raise AssertionError(f"If capturable=True, params and state_steps must be on "
                                 f"supported devices: {CAPTURABLE_DEVICES}.")


class Optimizer:
    """Base class: ``params`` is an iterable of tensors, of ``(name, tensor)`` pairs, or of
    dicts (parameter groups, each with its own options overriding ``defaults``)."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)      # keyed by the parameter (tensors hash by identity)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError(f"params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {_typename(params)}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(dict(group))

    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with ``params`` and any option overrides)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {_typename(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]     # named parameters
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names and len(names) != len(params):
            raise ValueError("all optimizer params should be with/without names. Some param "
                             "names are missing")
        if names:
            param_group["param_names"] = names
        param_group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{_typename(p)}")
            if not self.defaults.get("differentiable") and not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        if len({id(p) for p in params}) != len(params):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        for group in self.param_groups:
            if ("param_names" in param_group) != ("param_names" in group):
                raise ValueError(
                    "all optimizer param groups should be with/without names. cannot add param "
                    f"group {'with' if names else 'without'} names to the optimizer")
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        zero_grads(chain.from_iterable(g["params"] for g in self.param_groups), set_to_none)

    @_no_grad_step
    def step(self, closure=None):
        """One update of every group: the fused step (``_fused_group``, see ``_foreach``)
        where it may run, then the per-parameter loop (``_single_group``) over the
        parameters it left. An optimizer without that loop overrides ``step``."""
        if not hasattr(self, "_single_group"):
            raise NotImplementedError
        loss = self._closure_loss(closure)
        fused = getattr(self, "_fused_group", None)
        for group in self._groups():
            rest = fused(group) if fused is not None and _foreach.enabled(group) else None
            self._single_group(group, rest)
        return loss

    def _groups(self):
        """The parameter groups as a step reads them. Inside ``tracegrad.compile`` each is a
        view (``_TracedGroup``): the learning rate is read afresh at every call, so that a
        scheduler's changes reach a compiled step, and the other options are checked."""
        tracer = _hooks.tracer
        if tracer is None:
            return self.param_groups
        if tracer.after:        # a scheduler stepped earlier in the call: replayed too late
            tracer.abandon("steps its optimizer after its scheduler in one call")
            return self.param_groups
        tracer.baked("len(optimizer.param_groups)", self.__dict__, "param_groups", len)
        for group in self.param_groups:     # where the variant finds each state tensor
            for p in group["params"]:       # again: looked up afresh, as load_state_dict
                for name, t in self.state.get(p, {}).items():   # and state.clear() replace
                    if isinstance(t, Tensor):                   # them
                        tracer.hints[id(t)] = (f"optimizer.state[...][{name!r}]",
                                               lambda p=p, name=name: self._state_of(p, name))
        return [_TracedGroup(tracer, i, _LiveGroup(self, i))
                for i in range(len(self.param_groups))]

    def _state_of(self, p, name):
        """``self.state[p][name]`` now, or None."""
        state = self.state.get(p)
        return state.get(name) if state is not None else None

    def _first_step(self):
        """A step about to make state: inside ``tracegrad.compile``, the rest of this call
        runs eagerly (the state is made once, as eager makes it) and the next call traces."""
        tracer = _hooks.tracer
        if tracer is not None:
            tracer.abandon(f"{type(self).__name__} made its state (its first step)",
                           for_good=False)

    def _lazy_state(self, p, *buffers, **scalars):
        """The state of ``p``, made at its first step: ``step`` (a float32 scalar tensor, as
        in PyTorch's state dicts), then ``scalars`` (float32 scalar tensors), then each of
        ``buffers`` as zeros like ``p``, in PyTorch's order."""
        state = self.state[p]
        if not state:
            self._first_step()
            state["step"] = creation.tensor(0.0, dtype=dtypes.float32)
            for name, value in scalars.items():
                state[name] = creation.tensor(value, dtype=dtypes.float32)
            for name in buffers:
                state[name] = creation.zeros_like(p)
        return state

    @staticmethod
    def _grads(group, params=None):
        """``(p, grad)`` for each parameter of ``group`` (or of ``params``, those of it the
        fused step left to the loop) that has a gradient; with ``maximize`` the gradient is
        negated (the step ascends)."""
        for p in group["params"] if params is None else params:
            if p.grad is not None:
                yield p, (-p.grad if group.get("maximize") else p.grad)

    def _kept(self, tensor):
        """``tensor`` as an operand of a product or quotient that the step later writes in
        place: in a ``differentiable`` step, a copy. tracegrad's products keep both operands
        for the backward (PyTorch's only the one the other's gradient needs), and a kept
        operand written in place fails the backward."""
        return tensor.clone() if self.defaults.get("differentiable") else tensor

    def _decayed(self, grad, p, weight_decay):
        """``grad + weight_decay * p`` (L2 weight decay), ``p`` as ``_kept``."""
        return grad.add(self._kept(p), alpha=weight_decay)

    def _closure_loss(self, closure):
        if closure is None:
            return None
        from ..autograd.grad_mode import enable_grad
        with enable_grad():
            return closure()

    # state dict --------------------------------------------------------------------------
    def state_dict(self):
        """The state (holding this optimizer's tensors, not copies) and the groups' options,
        parameters replaced by their index."""
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)] if isinstance(p, Tensor) else p: v for p, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a ``state_dict()`` taken from an optimizer over parameters of the same shapes;
        state tensors are moved to their parameter's dtype (except ``step``) and device."""
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                if key == "step":       # kept as saved: a float32 scalar, as PyTorch keeps it
                    return value
                if param.is_floating_point():
                    return value.to(dtype=param.dtype, device=param.device)
                return value.to(device=param.device)
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        for group, saved in zip(groups, saved_groups):
            saved["params"] = group["params"]
        self.state = state
        self.param_groups = saved_groups

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"
