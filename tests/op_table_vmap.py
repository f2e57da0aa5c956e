"""Op-table entries for the primitives ``tracegrad.func.vmap`` adds (``tracegrad/_vmap``):
``shared_matmul``, a batch of matmuls whose right operand is one matrix broadcast over the
batch (an unbatched weight under ``vmap(grad(f))``). Here the batch is ``w.expand``: the
gradient with respect to ``w`` is the examples' gradients summed by expand's backward, and
PyTorch computes the same function with ``matmul``."""
import numpy as np

import tracegrad
from op_table import op


def _shared_matmul(lib, a, w):
    if not isinstance(a, tracegrad.Tensor):      # PyTorch, or NumPy's reference
        return lib.matmul(a, w)
    from tracegrad._vmap.shared import shared_matmul_p
    from tracegrad.ops.core import bind
    return bind(shared_matmul_p, a, w.expand(a.shape[0], *w.shape))


op("shared_matmul", _shared_matmul, lambda a, w: a @ w, [(3, 2, 4), (4, 5)], ["shared_matmul"])
op("shared_matmul[one row]", _shared_matmul, lambda a, w: a @ w, [(3, 1, 4), (4, 2)],
   ["shared_matmul"])
