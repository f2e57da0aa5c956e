"""A corpus of realistic training programs, each run by PyTorch and by tracegrad.

Every program module is written the way people write PyTorch programs, with one change:
``torch`` is a parameter (``build(torch)``, ``train(torch, ...)``) instead of an import, so
the same source runs with ``torch`` bound to PyTorch (the oracle) and to ``tracegrad``
(``import tracegrad as torch``). ``test_corpus.py`` runs each program three ways, PyTorch
eager, tracegrad eager and tracegrad compiled, from the same weights and data.

A program module has ``STEPS``; ``build(torch)``, the program's modules by name (PyTorch
builds them seeded, and its ``state_dict``s are saved with ``torch.save`` and loaded into
tracegrad's with ``tracegrad.load``); ``data(steps)``, its data as NumPy arrays (each
library converts them itself, as a user's program would); and ``train(torch, models, data,
how)``, the training loop, which returns the losses it saw (``loss.item()`` per step) and
what it compiled: ``how`` is ``"eager"``, ``"step"`` (``torch.compile(train_step)``, the
whole step with ``backward`` and the optimizer) or ``"model"`` (``torch.compile(model)``).

The folder is a package so that ``test_corpus`` imports its programs as ``corpus.gpt`` and
so on under pytest's default (prepend) import mode: ``tests/`` is the rootdir pytest puts
on ``sys.path`` for a package below it, as it does for ``tests/cuda_emulation``.
"""


def compiled_as(torch, how, model, train_step):
    """``train_step`` as a run with ``how`` calls it, and what that run compiled (the test
    checks each compiled one traced once and hit its cache): ``model`` was compiled by the
    caller for ``how == "model"``."""
    if how == "step":
        train_step = torch.compile(train_step)
        return train_step, [train_step]
    return train_step, [model] if how == "model" else []
