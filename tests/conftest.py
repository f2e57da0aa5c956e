"""Test-wide settings: every compiled graph is verified after every pass; compiled code
runs on the NumPy tier unless a test asks for a backend (``backend`` runs it on both);
every kernel lowered is also rendered by the CUDA language, for nvcc to compile."""
import os

import pytest

from tracegrad.passes import pipeline

from cuda_emulation import collect

os.environ["TRACEGRAD_BACKEND"] = "numpy"
collect.install()       # every kernel lowered is rendered for CUDA too: test_cuda_codegen


@pytest.fixture(autouse=True)
def _verify_every_pass(monkeypatch):
    monkeypatch.setattr(pipeline, "VERIFY", True)


@pytest.fixture(params=["numpy", "c"])
def backend(request, monkeypatch):
    """The test body runs once per tier: compile() without a backend takes this one."""
    monkeypatch.setenv("TRACEGRAD_BACKEND", request.param)
    return request.param


# Device option: TRACEGRAD_TEST_DEVICE=cuda (or cuda:N) runs the op-table tests of
# test_ops.py on that GPU (op_device.py); they skip, saying why, where no GPU is usable.
# Unset, everything runs on the CPU exactly as before.
TEST_DEVICE = os.environ.get("TRACEGRAD_TEST_DEVICE", "cpu")
