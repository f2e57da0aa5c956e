"""``tracegrad.random``: PyTorch's ``torch.random``, the default generators' seeding and
state, and ``fork_rng``, which gives the generators back as it found them."""
import contextlib

from . import creation
from .creation import initial_seed, manual_seed, seed


def get_rng_state():
    """The default generator's state (``set_rng_state`` restores it)."""
    return creation.default_generator.get_state()


def set_rng_state(new_state):
    """Restore a state from ``get_rng_state``."""
    creation.default_generator.set_state(new_state)


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices",
             device_type="cuda"):
    """Inside the block, draws move the default generators as usual; after it, the CPU
    generator and the cuda generators in ``devices`` (every one made so far when None) are
    where the block found them. ``enabled=False`` forks nothing."""
    if not enabled:
        yield
        return
    gens = [creation.default_generator]
    cuda = creation._cuda_generators if creation.loaded_cupy() is not None else {}
    for index, gen in sorted(cuda.items()):     # without a GPU, a seeded one draws nothing
        if devices is None or index in {d if isinstance(d, int) else
                                        getattr(d, "index", None) or 0 for d in devices}:
            gens.append(gen)
    states = [(g, g.get_state()) for g in gens]
    try:
        yield
    finally:
        for g, state in states:
            g.set_state(state)


__all__ = ["fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed",
           "set_rng_state"]
