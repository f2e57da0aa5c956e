"""The OpInfo sweep: PyTorch's own sample inputs, for every op tracegrad has.

One test per (OpInfo entry, stage), over the entries whose dtypes on the CPU include
the stage's (float32 for ``forward`` and ``compiled``, float64 for ``grad``, which also
needs ``supports_autograd``):

- ``forward``: tracegrad's op on the float32 sample against ``opinfo.op``: every tensor
  output with the same shape, dtype and NaN positions, values within rtol 1e-5 and
  atol 1e-5 (per-entry exceptions in ``opinfo_sweep.FLOAT32_TOLERANCE``);
- ``grad``: the vector-Jacobian product for a fixed cotangent, float64, through
  ``tracegrad.autograd.grad`` against ``torch.autograd.grad`` (rtol 1e-7, atol 1e-9);
- ``compiled``: ``tracegrad.compile`` of a call of the op, tensors as arguments and the
  rest closed over, against tracegrad eager (rtol 1e-5, atol 1e-6); a graph break runs
  eagerly, as ``compile`` does;
- ``reference``: ``forward`` on PyTorch's reference inputs (extremes, NaN/inf,
  non-contiguous, type promotion), the first 64 of each entry.

A float32 value of an entry in ``opinfo_sweep.FLOAT64_ARBITRATED`` that differs from
PyTorch's passes if it is at least as close to the op's float64 evaluation as PyTorch's.
Samples outside tracegrad's scope (complex and bfloat16 dtypes, complex scalars, sparse
gradients) are skipped sample by sample, the entry checked on the rest.

Samples come from a fixed seed; the eager stages run all of an entry's samples, the
compiled stage its first 16 (``opinfo_sweep.SAMPLE_CAP``: each is a trace and a code
generation, and max_pool alone has hundreds). The module takes about 1.5 minutes here
(3.5 under load from other processes), well within CI's 6 on two shared cores. A sample PyTorch rejects is not counted;
an entry tracegrad has no counterpart of is skipped as "absent"; an entry and stage
that fails today is xfail (not strict) with its reason from ``opinfo_sweep.KNOWN``.
``python tests/opinfo_sweep.py`` prints the counts. The mapping and the checks live in
``opinfo_sweep.py``.
"""
import pytest

pytest.importorskip("torch")
pytest.importorskip("expecttest")

import opinfo_sweep as sweep  # noqa: E402 - after the skips: it needs torch to list

ENTRIES = sweep.entries()

pytestmark = pytest.mark.filterwarnings("ignore")   # PyTorch's samples warn (deprecations)


def _params():
    params = []
    for name, (opinfo, _) in ENTRIES.items():
        for stage in sweep.STAGES:
            if not sweep.stage_in_scope(opinfo, stage):
                continue
            reason = sweep.KNOWN.get((name, stage))
            marks = [pytest.mark.xfail(reason=reason, strict=False)] if reason else []
            params.append(pytest.param(name, stage, marks=marks, id=f"{name}-{stage}"))
    return params


@pytest.mark.opinfo
@pytest.mark.parametrize("name, stage", _params())
def test_opinfo(name, stage):
    opinfo, fn = ENTRIES[name]
    if fn is None:
        pytest.skip("absent: tracegrad has no counterpart of this OpInfo")
    if not sweep.run_stage(opinfo, fn, stage):
        pytest.skip("no sample to check: PyTorch raises on each, or none has a float output "
                    "that requires grad")
