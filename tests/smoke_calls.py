"""The smoke table: one call per present name that no sweep exercises.

Each entry of ``SMOKE`` is keyed by (namespace, name), the namespaces of
``benchmarks/coverage.py``, and holds a ``Smoke``: ``call(lib)`` receives the library
module (``torch`` or ``tracegrad``) and returns a value, so one call runs on both and
``test_smoke_names`` compares the results (tensors by shape, dtype and values within
``rtol``/``atol``; floats within them; ints, bools, dtypes, sizes and strings by
equality). An entry whose
result has no torch counterpart is ``own``: it runs on tracegrad alone and returns a bool
that must be True (a real property of the result, not the call's mere success). An entry
``xfail`` names a known gap.

Calls build their inputs with ``arr`` (fixed NumPy values, so both libraries see the same
numbers) and leave global state (default dtype, seeds, thread counts, print options) as
they found it (``restoring``). Random results are reduced to what any draw shares: a shape,
a dtype, a range, a statistic, or the sameness of two draws from one seed.

The tables live by namespace in ``smoke_calls_torch.py``, ``smoke_calls_tensor.py`` and
``smoke_calls_nn.py``; this module holds the entry type and the helpers they share.
"""
from contextlib import contextmanager
from typing import Callable, NamedTuple, Optional

import numpy as np


class Smoke(NamedTuple):
    """One name's smoke call and how its results compare."""
    call: Callable
    rtol: float = 1e-5      # float32 elementwise results: a few ulps; sums: the terms' ulps
    atol: float = 1e-5
    own: bool = False       # tracegrad alone; ``call`` returns a bool that must be True
    xfail: Optional[str] = None


def own(call):
    """An entry with no torch counterpart: ``call(tracegrad)`` returns True when it works."""
    return Smoke(call, own=True)


def xfail(reason, call):
    return Smoke(call, xfail=reason)


def arr(*shape, seed=0, dtype=np.float32, low=-2.0, high=2.0):
    """Fixed values of ``shape`` (uniform in [low, high)) from a NumPy generator."""
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


def t(lib, *shape, seed=0, dtype=np.float32, requires_grad=False, **kwargs):
    """A tensor of ``lib`` holding ``arr(*shape, seed=seed, ...)``."""
    return lib.tensor(arr(*shape, seed=seed, dtype=dtype, **kwargs), requires_grad=requires_grad)


def ints(lib, *values):
    return lib.tensor(list(values))


def fill_parameters(lib, module):
    """Give ``module``'s parameters fixed values, in registration order, so a torch module
    and a tracegrad one of the same architecture compute the same function."""
    with lib.no_grad():
        for index, parameter in enumerate(module.parameters()):
            values = arr(*parameter.shape, seed=100 + index, low=-0.5, high=0.5)
            parameter.copy_(lib.tensor(values))
    return module


def restoring(get, put, body):
    """``body()``, then ``put(saved)`` with what ``get()`` returned before it."""
    saved = get()
    try:
        return body()
    finally:
        put(saved)


@contextmanager
def seeded(lib, seed=0):
    """Run under ``manual_seed(seed)``, restoring the generator's state after."""
    state = lib.get_rng_state()
    lib.manual_seed(seed)
    try:
        yield
    finally:
        lib.set_rng_state(state)


def drawn(lib, draw, seed=0):
    """``draw()`` under a fixed seed (and the generator restored after)."""
    with seeded(lib, seed):
        return draw()


def same_draws(lib, draw, seed=7):
    """Whether two draws under one seed are equal and a draw under another seed is not."""
    first, second, other = (drawn(lib, draw, s) for s in (seed, seed, seed + 1))
    return bool(lib.equal(first, second)) and not bool(lib.equal(first, other))


def in_range(x, low, high):
    """(shape, dtype, whether every value lies in [low, high])."""
    return tuple(x.shape), x.dtype, bool(((x >= low) & (x <= high)).all())


def stats(x):
    """(mean, std) of a sample as Python floats: compared with a statistical tolerance."""
    return float(x.double().mean()), float(x.double().std())


def _tables():
    from smoke_calls_nn import SMOKE as nn_table
    from smoke_calls_tensor import SMOKE as tensor_table
    from smoke_calls_torch import SMOKE as torch_table
    return {**torch_table, **tensor_table, **nn_table}


def table():
    """Every smoke entry, ``{(namespace, name): Smoke}``."""
    return {key: entry if isinstance(entry, Smoke) else Smoke(entry)
            for key, entry in _tables().items()}
