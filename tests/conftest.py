"""Test-wide settings: every compiled graph is verified after every pass; compiled code
runs on the NumPy tier unless a test asks for a backend (``backend`` runs it on both)."""
import os

import pytest

from tracegrad.passes import pipeline

os.environ["TRACEGRAD_BACKEND"] = "numpy"


@pytest.fixture(autouse=True)
def _verify_every_pass(monkeypatch):
    monkeypatch.setattr(pipeline, "VERIFY", True)


@pytest.fixture(params=["numpy", "c"])
def backend(request, monkeypatch):
    """The test body runs once per tier: compile() without a backend takes this one."""
    monkeypatch.setenv("TRACEGRAD_BACKEND", request.param)
    return request.param
