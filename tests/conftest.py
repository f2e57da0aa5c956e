"""Test-wide settings: every compiled graph is verified after every pass."""
import pytest

from tracegrad.passes import pipeline


@pytest.fixture(autouse=True)
def _verify_every_pass(monkeypatch):
    monkeypatch.setattr(pipeline, "VERIFY", True)
