"""Cross-rank shape and dtype checks for collectives, as PyTorch's ``TORCH_DISTRIBUTED_DEBUG``.

Before a collective starts, its ranks may exchange a short text signature of
the call (op, shapes, dtypes, root) and compare them: a mismatch raises the
same error on every rank, naming the op and each rank's tensors, where MPI
would otherwise return garbage (same element count, another shape) or abort
(another count). How often, by ``TRACEGRAD_DISTRIBUTED_DEBUG`` (else
``TORCH_DISTRIBUTED_DEBUG``), read when a group is made:

- ``INFO`` (the default): the first call of each signature on each group, so a
  training loop pays one small exchange per distinct shape, not per step;
- ``DETAIL``: every call;
- ``OFF``: never.

The exchange runs on a communicator of its own (``ProcessGroup.check_comm``), so
it can never be matched against a collective's data. Under ``INFO`` a rank whose
signature is new while another rank's is not (shapes that agreed before and
differ now) cannot be told apart from a late rank: its check waits and then
raises the group's timeout error with a hint to use ``DETAIL``.
"""
import hashlib
import os

import numpy as np

from ._wait import poll, timed_out

_WIDTH = 160        # bytes per rank's signature; longer ones keep a hash of the rest
_MAX_SEEN = 4096


def debug_level():
    level = (os.environ.get("TRACEGRAD_DISTRIBUTED_DEBUG")
             or os.environ.get("TORCH_DISTRIBUTED_DEBUG") or "INFO").upper()
    if level not in ("OFF", "INFO", "DETAIL"):
        raise ValueError(f"TRACEGRAD_DISTRIBUTED_DEBUG={level!r}: expected OFF, INFO or DETAIL")
    return level


def describe(t):
    """``float32[2, 3]`` for a tensor."""
    name = getattr(t.dtype, "name", None) or str(t.dtype).rsplit(".", 1)[-1]
    return f"{name}{list(t.shape)}"


def check(pg, op, *parts):
    """Raise on every rank of ``pg`` unless every rank calls ``op`` with the same ``parts``
    (strings; ``describe`` a tensor)."""
    if pg.check_comm is None or pg.debug == "OFF":
        return
    signature = f"{op}({', '.join(parts)})"
    if pg.debug == "INFO" and signature in pg.seen:
        return
    raw = signature.encode()
    if len(raw) > _WIDTH:
        raw = raw[:_WIDTH - 17] + b"#" + hashlib.sha1(raw).hexdigest()[:16].encode()
    mine = np.zeros(_WIDTH, np.uint8)
    mine[:len(raw)] = np.frombuffer(raw, np.uint8)
    everyone = np.empty((pg.size(), _WIDTH), np.uint8)
    try:
        poll(pg.check_comm.Iallgather(mine, everyone), pg.timeout, op)
    except RuntimeError:
        raise timed_out(op, pg.timeout, hint=(
            f"This rank was comparing {signature} with the other ranks' calls. Another rank "
            "may have failed, exited, or not reached this call; or it called this collective "
            "with a shape or dtype it had used before, while this one is new on this rank "
            "(TRACEGRAD_DISTRIBUTED_DEBUG=DETAIL compares every call).")) from None
    got = [bytes(row).rstrip(b"\0").decode(errors="replace") for row in everyone]
    if all(g == got[0] for g in got):
        if len(pg.seen) >= _MAX_SEEN:       # every rank clears at the same call
            pg.seen.clear()
        pg.seen.add(signature)
        return
    from ..ops.core import op_error
    lines = "\n".join(f"  rank {pg.ranks[i]}: {g}" for i, g in enumerate(got))
    raise op_error(op, "the ranks called this collective with different tensors:\n" + lines +
                   "\nEvery rank must pass tensors of the same shape and dtype (and the same "
                   "src/dst).")
