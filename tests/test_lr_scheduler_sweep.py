"""The LR scheduler sweep: every scheduler class of ``torch.optim.lr_scheduler`` tracegrad has,
built with typical arguments in both libraries, against PyTorch's.

PyTorch has no database of schedulers, so the entries are its module's own: every class
that subclasses ``LRScheduler`` (``ReduceLROnPlateau`` among them; not ``LRScheduler``
itself), the names ``benchmarks/coverage.py`` counts for the namespace. Each gets an SGD
optimizer over two parameter groups (lrs 0.1 and 0.05, momentum 0.9, which CyclicLR and
OneCycleLR cycle) in each library, its ``ARGUMENTS`` (``ReduceLROnPlateau`` steps on the
fixed metric sequence ``METRICS``; ``SequentialLR`` and ``ChainedScheduler`` wrap simple
schedulers, ``LambdaLR`` and ``MultiplicativeLR`` take simple lambdas), and
``optimizer.step(); scheduler.step()`` 30 times: ``get_last_lr()`` (and every group's
momentum) after each step must agree with PyTorch's to 1e-12 relative (the schedules are
the same float arithmetic in the same order: in practice bit for bit). A class that
tracegrad lacks is skipped as absent; one with no ``ARGUMENTS`` fails, so a scheduler
PyTorch adds is not silently left out. ``KNOWN``: (name) -> why it fails today (xfail).

Marked ``opinfo`` (the sweep pass of ``scripts/test.sh``); ``python
tests/test_lr_scheduler_sweep.py`` prints the counts. It takes about a second.
"""
import inspect
import math
import sys
import warnings

import pytest

import tracegrad as tg

STEPS = 30
METRICS = [1.0, 0.9, 0.9, 0.95, 0.9, 0.91, 0.92, 0.5, 0.5, 0.5, 0.5, 0.5, 0.49999, 0.6, 0.7,
           0.8, 0.9, 1.0, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3, 0.3]

# name -> factory(lr_scheduler module, optimizer): the typical arguments.
ARGUMENTS = {
    "StepLR": lambda m, o: m.StepLR(o, step_size=4, gamma=0.5),
    "MultiStepLR": lambda m, o: m.MultiStepLR(o, milestones=[3, 7, 20], gamma=0.3),
    "ConstantLR": lambda m, o: m.ConstantLR(o, factor=0.4, total_iters=6),
    "LinearLR": lambda m, o: m.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=12),
    "ExponentialLR": lambda m, o: m.ExponentialLR(o, gamma=0.9),
    "PolynomialLR": lambda m, o: m.PolynomialLR(o, total_iters=20, power=2.0),
    "CosineAnnealingLR": lambda m, o: m.CosineAnnealingLR(o, T_max=7, eta_min=1e-3),
    "CosineAnnealingWarmRestarts": lambda m, o: m.CosineAnnealingWarmRestarts(
        o, T_0=3, T_mult=2, eta_min=1e-4),
    "CyclicLR": lambda m, o: m.CyclicLR(o, base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=4,
                                        mode="triangular2"),
    "OneCycleLR": lambda m, o: m.OneCycleLR(o, max_lr=[1.0, 0.4], total_steps=STEPS),
    "LambdaLR": lambda m, o: m.LambdaLR(o, lr_lambda=[lambda e: 0.95 ** e,
                                                      lambda e: 1 / (e + 1)]),
    "MultiplicativeLR": lambda m, o: m.MultiplicativeLR(o, lr_lambda=lambda e: 0.9),
    "SequentialLR": lambda m, o: m.SequentialLR(
        o, [m.ConstantLR(o, factor=0.5, total_iters=3), m.ExponentialLR(o, gamma=0.9)],
        milestones=[5]),
    "ChainedScheduler": lambda m, o: m.ChainedScheduler(
        [m.ConstantLR(o, factor=0.5, total_iters=4), m.ExponentialLR(o, gamma=0.9)]),
    "ReduceLROnPlateau": lambda m, o: m.ReduceLROnPlateau(o, patience=2, factor=0.5,
                                                          cooldown=1),
}

KNOWN = {}

pytest.importorskip("torch")


def torch():
    import torch as _torch
    return _torch


def entries():
    """Every scheduler class of PyTorch's module by name, with tracegrad's class or None."""
    module = torch().optim.lr_scheduler
    base = module.LRScheduler
    names = sorted(n for n, c in vars(module).items() if inspect.isclass(c) and
                   issubclass(c, base) and c is not base and not n.startswith("_"))
    return {n: getattr(tg.optim.lr_scheduler, n, None) for n in names}


def _run(lib, name):
    """(lrs per step, momenta per step) of ``name`` in ``lib`` (torch or tracegrad)."""
    groups = [{"params": [lib.tensor([1.0, -2.0], requires_grad=True)]},
              {"params": [lib.tensor([0.5], requires_grad=True)], "lr": 0.05}]
    optimizer = lib.optim.SGD(groups, lr=0.1, momentum=0.9)
    scheduler = ARGUMENTS[name](lib.optim.lr_scheduler, optimizer)
    lrs, momenta = [], []
    for step in range(STEPS):
        optimizer.step()
        if name == "ReduceLROnPlateau":
            scheduler.step(METRICS[step])
        else:
            scheduler.step()
        lrs.append(list(scheduler.get_last_lr()))
        momenta.append([g["momentum"] for g in optimizer.param_groups])
    return lrs, momenta


def check(name):
    """tracegrad's schedule of ``name`` against PyTorch's, step by step."""
    if name not in ARGUMENTS:
        raise AssertionError(f"{name}: no typical arguments in ARGUMENTS: add them")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want, got = _run(torch(), name), _run(tg, name)
    for what, w_steps, g_steps in zip(("lr", "momentum"), want, got):
        for step, (w, g) in enumerate(zip(w_steps, g_steps)):
            assert len(w) == len(g) and all(
                math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-300)
                for a, b in zip(w, g)), (
                f"{name} step {step + 1}: {what} {g}, expected {w}")


def outcome(name, cls):
    if cls is None:
        return "absent"
    try:
        check(name)
    except Exception as error:  # noqa: BLE001 - any error is the entry's failure
        return f"fail: {type(error).__name__}: {(str(error).splitlines() or [''])[0][:200]}"
    return "pass"


def main():
    table = entries()
    outcomes = {name: outcome(name, cls) for name, cls in table.items()}
    counts = {k: sum(o.startswith(k) for o in outcomes.values())
              for k in ("pass", "fail", "absent")}
    print(f"LR schedulers: {len(table)}; " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for name, result in outcomes.items():
        if result != "pass" and ("-v" in sys.argv or name not in KNOWN):
            print(f"    {name}: {result}")


ENTRIES = entries()


def _params():
    return [pytest.param(name, marks=[pytest.mark.xfail(reason=KNOWN[name], strict=False)]
                         if name in KNOWN else [], id=name) for name in ENTRIES]


@pytest.mark.opinfo
@pytest.mark.parametrize("name", _params())
def test_lr_scheduler(name):
    if ENTRIES[name] is None:
        pytest.skip("absent: tracegrad.optim.lr_scheduler has no class of this name")
    check(name)


if __name__ == "__main__":
    main()
