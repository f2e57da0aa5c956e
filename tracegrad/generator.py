"""``Generator``: a seedable source of random numbers, on the CPU or a GPU. The default
generators and seeding (``manual_seed``) are in ``creation``, which draws from them."""
import numpy as np

from .device import as_device, cupy


class Generator:
    """A seedable source of random numbers: NumPy's PCG64 on the CPU; on a GPU, CuPy's
    generator (cuRAND), made at the first draw so that seeding needs no GPU."""

    def __init__(self, device="cpu"):
        self.device = as_device(device)
        self.manual_seed(_fresh_seed())

    @property
    def rng(self):
        rng = self._rng
        if rng is None:
            cp = cupy()
            with cp.cuda.Device(self.device.index):
                rng = self._rng = cp.random.default_rng(self._seed)
        return rng

    def manual_seed(self, seed):
        self._seed = int(seed)
        self._rng = np.random.default_rng(self._seed) if self.device.type == "cpu" else None
        return self

    def seed(self):
        return self.manual_seed(_fresh_seed())._seed

    def initial_seed(self):
        return self._seed

    def get_state(self):
        if self.device.type == "cpu":
            return self.rng.bit_generator.state
        return self.rng.bit_generator._state.copy()     # CuPy keeps its cuRAND states there

    def set_state(self, state):
        if self.device.type == "cpu":
            self.rng.bit_generator.state = state
        else:
            self.rng.bit_generator._state[...] = state


def _fresh_seed():
    return int(np.random.SeedSequence().entropy % (2 ** 63))
