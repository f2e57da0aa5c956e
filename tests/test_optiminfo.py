"""The OptimizerInfo sweep: PyTorch's own optimizer database, for every optimizer tracegrad has.

One test per (OptimizerInfo entry, stage) over ``optim_db``; an entry maps to the
``tracegrad.optim`` class of the same name (``SparseAdam`` is out of scope: sparse
gradients). Both libraries start from the same parameters (a matrix, a vector and a 0-d
scalar) and take the same gradients, drawn once (LBFGS: a closure computing one fixed
quadratic loss in each library), for 5 steps:

- ``float64``, ``float32``: every OptimizerInput of the entry, also with each of its
  ``supported_impls`` flags (``foreach``, ``fused`` where PyTorch fuses on the CPU) and
  ``capturable`` on in turn; after each step the parameters and every value of
  ``state_dict()["state"]`` against PyTorch's, within 1e-10 (float64) or 8 ulps (float32)
  of the value's magnitude per step (LBFGS's history, rounding noise once its quadratic
  has converged, in structure only). Where PyTorch raises (``capturable`` on the CPU),
  tracegrad raises an error of the same type;
- ``differentiable``: every OptimizerInput with ``differentiable=True``, on clones of
  leaves, and the gradient through the steps with respect to those leaves;
- ``errors``: PyTorch's error inputs that it rejects on the CPU: the same exception (or
  warning) type and a message matching PyTorch's pattern;
- ``state_dict``: a state dict saved after two steps, loaded into a fresh optimizer over two
  parameter groups, continues as the uninterrupted one; PyTorch's state dict loaded into
  tracegrad's optimizer continues as PyTorch's reloaded one;
- ``zero_grad``: ``zero_grad(set_to_none=True/False)`` leaves the gradients PyTorch's does,
  and the steps after it agree.

The tolerances and their reasons are in ``optiminfo_sweep``'s docstring and constants. An
entry and stage that fails today is xfail (not strict) with its reason from
``optiminfo_sweep.KNOWN``; ``python tests/optiminfo_sweep.py`` prints the counts. The whole
module takes about 20 s of CPU here.

Marked ``opinfo`` like ``test_opinfo.py`` (the sweep pass of ``scripts/test.sh``).
"""
import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")

import optiminfo_sweep as sweep  # noqa: E402 - after the skips: it needs torch to list
import sweeps  # noqa: E402

ENTRIES = sweep.entries()

pytestmark = pytest.mark.filterwarnings("ignore")   # PyTorch's inputs warn (deprecations)


@pytest.mark.opinfo
@pytest.mark.parametrize("name, stage", sweeps.params(ENTRIES, sweep.STAGES, sweep.KNOWN))
def test_optiminfo(name, stage):
    info, cls = ENTRIES[name]
    if name in sweep.OUT_OF_SCOPE:
        pytest.skip(f"out of scope: {sweep.OUT_OF_SCOPE[name]}")
    if cls is None:
        pytest.skip("absent: tracegrad.optim has no class of this name")
    if not sweep.run_stage(info, cls, stage):
        pytest.skip("no input to check: the entry does not support the stage's flag, or "
                    "PyTorch rejects none of its error inputs on the CPU")
