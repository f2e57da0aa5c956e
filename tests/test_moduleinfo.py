"""The ModuleInfo sweep: PyTorch's own nn module samples, for every module tracegrad has.

One test per (ModuleInfo entry, stage) over ``module_db``; an entry maps to the
``tracegrad.nn`` class of the same name. Each sample builds the torch module and the
tracegrad one from the same constructor arguments, copies the torch module's parameters
and buffers into tracegrad's by name (strictly: a name on one side only fails), and puts
both in the same mode (train and eval where the entry's ``train_and_eval_differ``):

- ``forward``: float32, every output and every entry of the state after the call (running
  statistics) against PyTorch's: same shape, dtype and NaN positions, values within
  rtol 1e-5 and atol 1e-5 (per-entry exceptions in ``moduleinfo_sweep.FLOAT32_TOLERANCE``);
- ``grad``: float64, the vector-Jacobian product for a fixed cotangent with respect to the
  inputs that require grad and every parameter (rtol 1e-7, atol 1e-9);
- ``compiled``: float32, ``tracegrad.compile(module)`` against tracegrad eager (rtol 1e-5,
  atol 1e-6); a graph break runs eagerly, as ``compile`` does.

Random modules (a fractional pool without ``_random_samples``, a nonzero dropout while
training) compare shapes and dtypes only. Samples come from a fixed seed; each stage runs
an entry's first ``moduleinfo_sweep.SAMPLE_CAP`` samples per mode. A sample PyTorch
rejects is not counted; an entry tracegrad has no class of is skipped as "absent"; an
entry and stage that fails today is xfail (not strict) with its reason from
``moduleinfo_sweep.KNOWN``. ``python tests/moduleinfo_sweep.py`` prints the counts.

Marked ``opinfo`` like ``test_opinfo.py``, and skipped unless ``TRACEGRAD_OPINFO`` is set:
``TRACEGRAD_OPINFO=1 pytest -m opinfo tests/test_moduleinfo.py``.
"""
import os

import pytest

if not os.environ.get("TRACEGRAD_OPINFO"):
    pytest.skip("the ModuleInfo sweep runs with TRACEGRAD_OPINFO=1 (and -m opinfo)",
                allow_module_level=True)

pytest.importorskip("torch")
pytest.importorskip("expecttest")

import moduleinfo_sweep as sweep  # noqa: E402 - after the skips: it needs torch to list
import sweeps  # noqa: E402

ENTRIES = sweep.entries()

pytestmark = pytest.mark.filterwarnings("ignore")   # PyTorch's samples warn (deprecations)


@pytest.mark.opinfo
@pytest.mark.parametrize("name, stage", sweeps.params(ENTRIES, sweep.STAGES, sweep.KNOWN))
def test_moduleinfo(name, stage):
    module_info, cls = ENTRIES[name]
    if cls is None:
        pytest.skip("absent: tracegrad.nn has no class of this name")
    if not sweep.run_stage(module_info, cls, stage):
        pytest.skip("no sample to check: PyTorch raises on each, or none has a float output "
                    "that requires grad")
