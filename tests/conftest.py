"""Test-wide settings: every compiled graph is verified after every pass; compiled code
runs on the NumPy tier unless a test asks for a backend (``backend`` runs it on both);
every kernel lowered is also rendered by the CUDA language, for nvcc to compile; the
device option (below) moves the op-table tests onto a GPU."""
import os

import pytest

import tracegrad as tg
from tracegrad.passes import pipeline

from cuda_emulation import collect

os.environ["TRACEGRAD_BACKEND"] = "numpy"
collect.install()       # every kernel lowered is rendered for CUDA too: test_cuda_codegen


@pytest.fixture(autouse=True)
def _verify_every_pass(monkeypatch):
    monkeypatch.setattr(pipeline, "VERIFY", True)


# Device option: TRACEGRAD_TEST_DEVICE=cuda (or cuda:N) runs the op-table tests of
# test_ops.py (op_device.py) and the compiled-against-eager tests of ON_DEVICE on that GPU,
# the latter on the NumPy tier's CuPy calls and on the CUDA tier; they skip, saying why,
# where no GPU is usable. Unset, everything runs on the CPU exactly as before.
TEST_DEVICE = os.environ.get("TRACEGRAD_TEST_DEVICE", "cpu")
ON_DEVICE = ("test_compile_ops", "test_compile_property")


@pytest.fixture(params=["numpy", "c"] if TEST_DEVICE == "cpu" else ["numpy", "cuda"])
def backend(request, monkeypatch):
    """The test body runs once per tier: compile() without a backend takes this one. The
    CUDA tier takes CUDA tensors, which only the ON_DEVICE modules' tests make."""
    if request.param == "cuda" and request.module.__name__ not in ON_DEVICE:
        pytest.skip("this file's tensors are on the CPU; the CUDA tier runs the ON_DEVICE "
                    "files' tests (" + ", ".join(ON_DEVICE) + ")")
    monkeypatch.setenv("TRACEGRAD_BACKEND", request.param)
    return request.param


@pytest.fixture(autouse=True)
def _on_test_device(request):
    """The factory functions of an ON_DEVICE module's tests create on TEST_DEVICE."""
    if TEST_DEVICE == "cpu" or request.module.__name__ not in ON_DEVICE:
        yield
        return
    if not tg.cuda.is_available():
        pytest.skip(f"TRACEGRAD_TEST_DEVICE={TEST_DEVICE}, but no GPU is usable (CuPy and an "
                    f"NVIDIA GPU)")
    with tg.device(TEST_DEVICE):
        yield
