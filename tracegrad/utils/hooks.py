"""``RemovableHandle``, as returned by every ``register_*hook``."""
from ..autograd.graph import RemovableHandle  # noqa: F401
