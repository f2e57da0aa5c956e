"""``vmap`` by batching rules.

``batched.py``: the batched value (``BatchedTensor``) and the levels in force;
``rules.py``: the rule table and the generic rules by kind (elementwise, reductions, ops on
trailing dims, a loop as the fallback); ``rules_nn.py``, ``rules_conv.py``: the primitives'
own rules; ``shared.py``: the matmul with one weight for every example (per-sample
gradients); ``transform.py``: a level's bind hook, reverse mode inside vmap, and ``vmap``.
"""
from . import rules_conv, rules_nn  # noqa: F401  (register the primitives' own rules)
from .rules import coverage
from .transform import autograd_grad, track, vmap

__all__ = ["vmap", "track", "autograd_grad", "coverage"]
