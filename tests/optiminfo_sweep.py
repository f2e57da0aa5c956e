"""The OptimizerInfo sweep's machinery: PyTorch's optimizer database, run through tracegrad.

``test_optiminfo.py`` parametrizes one test per (OptimizerInfo entry, stage) over what is
here, and says what each stage checks; ``python tests/optiminfo_sweep.py`` prints the
counts (``-v``: and each failure's first error line). An entry (``optim_db``'s ``Adam``...)
maps to the ``tracegrad.optim`` class of the same name, else it is "absent"; ``SparseAdam``
is out of scope (sparse gradients). Each run draws the parameters (``DEFAULT_SHAPES``: a
matrix, a vector, a 0-d scalar; Muon takes matrices only) and the gradients of ``STEPS``
steps once, from a fixed seed, and gives both libraries the same values (LBFGS: a closure
computing one fixed quadratic loss in each library).

Tolerances (the difference allowed, in units of the largest magnitude of the value
compared, per step taken): float64 1e-10, float32 ``F32_ULPS`` ulps. A step is a dozen
roundings of a relative 1.1e-16 (float64) or 6e-8 (float32), which no formula of these
optimizers amplifies by more than a few units over five steps (the divisions are by
``sqrt(v) + eps``, ``v`` of the gradients' size), so 1e-10 leaves six orders of magnitude
for the order of the operations, while a changed formula or hyper-parameter moves the
values by 1e-4 or more. The exceptions, with their reasons, are the constants of
``optiminfo_sides`` (which runs the two sides and compares them).
torch is imported lazily: this module imports without it.
"""
import copy
import inspect
import os
import re
import warnings

import opinfo_convert as convert
import sweeps
import tracegrad as tg
from optiminfo_sides import (
    EXACT, STEPS, Side, _array, attempt, compare, compare_sides,
    convert_kwargs, draws, input_params, same_error, sides, tolerance, torch,
)

STAGES = ("float64", "float32", "differentiable", "errors", "state_dict", "zero_grad")
OUT_OF_SCOPE = {"SparseAdam": "steps sparse gradients (no sparse tensors in tracegrad)"}

# (entry, stage) -> why it fails today; the tests mark these xfail (not strict).
KNOWN = {}


def tracegrad_class(info):
    if info.name in OUT_OF_SCOPE:
        return None
    cls = getattr(tg.optim, info.optim_cls.__name__, None)
    return cls if isinstance(cls, type) and issubclass(cls, tg.optim.Optimizer) else None


def entries():
    """Every OptimizerInfo by name (sorted), with its tracegrad class or None."""
    from torch.testing._internal.common_optimizers import optim_db
    return dict(sorted((o.name, (o, tracegrad_class(o))) for o in optim_db))


def step_inputs(info, dtype, differentiable=False):
    """``(desc, params, kwargs)``: each OptimizerInput with every flag of the entry's
    ``supported_impls`` off, then with each on in turn (``fused`` where PyTorch fuses on
    the CPU), and with ``capturable`` where the entry has it; ``differentiable``: each
    OptimizerInput with that flag on alone (where the entry supports it)."""
    impls = [f for f in info.supported_impls if f != "fused" or "cpu" in info.supports_fused_on]
    flags = ["differentiable"] if differentiable else [f for f in impls if f != "differentiable"]
    if differentiable and "differentiable" not in impls:
        return
    flags += ["capturable"] if info.has_capturable_arg and not differentiable else []
    for optim_input in info.optim_inputs_func(device="cpu", dtype=dtype):
        base = dict(optim_input.kwargs, **{f: False for f in impls})
        if not differentiable:
            yield optim_input.desc, optim_input.params, base
        for flag in flags:
            if not optim_input.kwargs.get(flag):
                yield f"{optim_input.desc} & {flag}", optim_input.params, {**base, flag: True}


# ---- the stages ----------------------------------------------------------------------

def run_input(info, cls, params, kwargs, dtype, where):
    """Both libraries from the same values through STEPS steps, compared after each."""
    init, grads, data = draws(info, dtype)
    torch_side, tg_side = sides(init, kwargs.get("differentiable", False))
    torch_params, tg_params = input_params(params, torch_side, tg_side)
    want = attempt(torch_side.build, info.optim_cls, torch_params, kwargs)
    same_error(want, attempt(tg_side.build, cls, tg_params, convert_kwargs(kwargs)),
               f"{where} construction")
    for step in range(STEPS) if want is None else ():
        want = attempt(torch_side.step, grads[step], data)
        same_error(want, attempt(tg_side.step, grads[step], data), f"{where} step {step + 1}")
        if want is not None:
            return
        compare_sides(torch_side, tg_side, tolerance(info, kwargs, dtype, step + 1),
                      f"{where} step {step + 1}")
    if want is None and torch_side.roots is not None:
        compare_root_grads(torch_side, tg_side, tolerance(info, kwargs, dtype, STEPS), where)


def compare_root_grads(torch_side, tg_side, tol, where):
    """``differentiable``: d(sum of the final parameters) / d(the leaves they cloned). Not
    compared where PyTorch's own backward raises (its step overwrote in place a value its
    backward saved: Adamax's 0-d ``exp_inf``)."""
    grads = []
    for side in (torch_side, tg_side):
        loss = sum(p.sum() for p in side.params)
        grads.append([])
        error = attempt(lambda: grads[-1].extend(side.lib.autograd.grad(
            loss, side.roots, allow_unused=True)))
        if error is not None and side is torch_side:
            return
        same_error(None, error, f"{where} backward")
    for i, (w, g) in enumerate(zip(*grads)):
        compare(w, g, tol, f"{where} grad through the steps of leaf {i}")


def check_steps(info, cls, dtype_name, differentiable=False):
    """Every step input (with each flag) of the dtype: the number checked."""
    dtype = getattr(torch(), dtype_name)
    inputs = list(step_inputs(info, dtype, differentiable))
    for desc, params, kwargs in inputs:
        run_input(info, cls, params, kwargs, dtype, f"{info.name} [{desc}] {dtype_name}")
    return len(inputs)


def _rejection(side, cls, params, kwargs, error_input, grads, data):
    """Construct (and, for a step error, step): the exception raised, or the first warning
    of the expected category, else None."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        error = attempt(side.build, cls, params, kwargs)
        if error is None and error_input.error_on.name == "STEP_ERROR":
            error = attempt(side.step, grads, data)
    expected = error_input.error_type
    if error is None and issubclass(expected, Warning):
        error = next((w.message for w in caught if issubclass(w.category, expected)), None)
    return error


def check_errors(info, cls):
    """Each error input PyTorch rejects (raises, or warns) tracegrad rejects alike: an
    exception (warning) of the same type, whose message matches the input's pattern."""
    t = torch()
    checked = 0
    for error_input in info.optim_error_inputs_func(device="cpu", dtype=t.float64):
        optim_input = error_input.optimizer_error_input
        where = f"{info.name} error input [{optim_input.desc}]"
        init, grads, data = draws(info, t.float64, 1)
        torch_side, tg_side = sides(init)
        try:
            torch_params, tg_params = input_params(optim_input.params, torch_side, tg_side)
        except convert.Unconvertible:
            continue        # complex parameters: out of tracegrad's scope
        want = _rejection(torch_side, info.optim_cls, torch_params, optim_input.kwargs,
                          error_input, grads[0], data)
        if not isinstance(want, error_input.error_type):
            continue        # PyTorch does not reject it here (on the CPU, in float64)
        got = _rejection(tg_side, cls, tg_params, convert_kwargs(optim_input.kwargs),
                         error_input, grads[0], data)
        same_error(want, got, where)
        assert re.search(error_input.error_regex, str(got)), (
            f"{where}: message {str(got)!r} does not match {error_input.error_regex!r}")
        checked += 1
    return checked


def base_inputs(info):
    """The entry's float64 OptimizerInputs, without the flag variants."""
    return [(i.desc, i.kwargs) for i in info.optim_inputs_func(device="cpu",
                                                               dtype=torch().float64)]


def _groups(info, params, kwargs):
    """Two parameter groups (one where the optimizer takes one): the first parameter, and
    the rest at half the learning rate (where it is a number)."""
    if not info.supports_param_groups:
        return params
    lr = kwargs.get("lr", inspect.signature(info.optim_cls).parameters["lr"].default)
    return [{"params": params[:1]},
            {"params": params[1:], **({"lr": lr / 2} if isinstance(lr, float) else {})}]


def _run(info, which, draw, steps, values=None, state=None):
    """A side of ``which`` (lib, class, kwargs) over parameters of ``values`` (else the
    drawn ones), its optimizer over ``_groups`` loaded with ``state`` if given, after
    ``steps`` of the drawn gradients."""
    lib, cls, kwargs = which
    init, grads, data = draw
    side = Side(lib, [lib.tensor(v.copy(), requires_grad=True)
                      for v in (init if values is None else values)])
    side.build(cls, _groups(info, side.params, kwargs), kwargs)
    if state is not None:
        side.optimizer.load_state_dict(state)
    for k in steps:
        side.step(grads[k], data)
    return side


def _resumed(info, source, target, draw, carry):
    """Two steps on ``source``; its state dict, through ``carry``, loaded into a fresh
    ``target`` over parameters of the values reached, which takes the other steps."""
    first = _run(info, source, draw, range(2))
    values = [_array(p)[0].copy() for p in first.params]
    state = carry(first.optimizer.state_dict())
    return _run(info, target, draw, range(2, STEPS), values, state)


def check_state_dict(info, cls):
    """A state dict saved after two steps and loaded into a fresh optimizer (two parameter
    groups) continues as the uninterrupted optimizer, to the steps' tolerance (loading
    casts the state to the parameters' dtype, as PyTorch's does: not bit for bit, nor of
    the same dtypes); and PyTorch's state dict, loaded into tracegrad's optimizer,
    continues as PyTorch's own reloaded optimizer does."""
    t = torch()
    for desc, kwargs in base_inputs(info):
        where = f"{info.name} [{desc}] state_dict"
        draw = draws(info, t.float64)
        ours, theirs = (tg, cls, convert_kwargs(kwargs)), (t, info.optim_cls, kwargs)
        tol = tolerance(info, kwargs, t.float64, STEPS)
        compare_sides(_run(info, ours, draw, range(STEPS)),
                      _resumed(info, ours, ours, draw, copy.deepcopy),
                      tol, f"{where} (tracegrad's)", dtypes=False)
        compare_sides(_resumed(info, theirs, theirs, draw, copy.deepcopy),
                      _resumed(info, theirs, ours, draw,
                               lambda state: convert.to_tg(copy.deepcopy(state))),
                      tol, f"{where} (PyTorch's, loaded)")
    return len(base_inputs(info))


def check_zero_grad(info, cls):
    """After a step, ``zero_grad(set_to_none=False)`` leaves zero gradients and
    ``zero_grad(set_to_none=True)`` none, as PyTorch's; the steps after each agree."""
    t = torch()
    for desc, kwargs in base_inputs(info):
        where = f"{info.name} [{desc}] zero_grad"
        init, grads, data = draws(info, t.float64, 1)
        torch_side, tg_side = sides(init)
        torch_side.build(info.optim_cls, torch_side.params, kwargs)
        tg_side.build(cls, tg_side.params, convert_kwargs(kwargs))
        for step, set_to_none in enumerate((None, False, True)):
            label = f"{where} zero_grad(set_to_none={set_to_none})"
            for side in (torch_side, tg_side):
                if set_to_none is not None:
                    side.optimizer.zero_grad(set_to_none=set_to_none)
            for i, (w, g) in enumerate(zip(torch_side.params, tg_side.params)):
                assert (w.grad is None) == (g.grad is None), (
                    f"{label}: grad of param {i} is {g.grad}, expected {w.grad}")
                if w.grad is not None:
                    compare(w.grad, g.grad, EXACT, f"{label} grad of param {i}")
            same_error(*(attempt(side.step, grads[0] if step == 0 else None, data)
                         for side in (torch_side, tg_side)), label)
            compare_sides(torch_side, tg_side, tolerance(info, kwargs, t.float64, step + 1),
                          label)
    return len(base_inputs(info))


CHECKS = {"float64": lambda i, c: check_steps(i, c, "float64"),
          "float32": lambda i, c: check_steps(i, c, "float32"),
          "differentiable": lambda i, c: check_steps(i, c, "float64", differentiable=True),
          "errors": check_errors, "state_dict": check_state_dict, "zero_grad": check_zero_grad}


def run_stage(info, cls, stage):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CHECKS[stage](info, cls)


# ---- counts --------------------------------------------------------------------------

def outcome(info, cls, stage):
    """'pass', 'fail: <why>', 'absent', 'out of scope' or 'no inputs'."""
    if info.name in OUT_OF_SCOPE:
        return "out of scope"
    if cls is None:
        return "absent"
    try:
        checked = run_stage(info, cls, stage)
    except Exception as error:  # noqa: BLE001 - any error is the entry's failure
        return sweeps.failure(error)
    return "pass" if checked else "no inputs"


def main():
    os.environ.setdefault("TRACEGRAD_BACKEND", "numpy")   # as the tests run (conftest)
    table = entries()
    print(f"OptimizerInfo entries: {len(table)}; with a tracegrad.optim class: "
          f"{sum(cls is not None for _, cls in table.values())}")
    sweeps.report(table, STAGES, outcome, KNOWN,
                  ("pass", "fail", "absent", "out of scope", "no inputs"))


if __name__ == "__main__":
    main()
