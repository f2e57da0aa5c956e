"""Every sample program runs to completion with the project's interpreter."""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> command-line arguments that keep the run small
SAMPLES = {
    "custom_function.py": [],
    "hooks.py": [],
    "grad_modes.py": [],
    "batchnorm.py": [],
    "higher_order.py": [],
    "profiler.py": [],
    "train_mlp.py": ["--epochs", "6", "--samples", "512"],
    "train_mlp_eager.py": ["--epochs", "3", "--samples", "256"],
    "compare_speed.py": ["--seconds", "0.05", "--width", "32"],
}


def _run(name):
    path = os.path.join(ROOT, "samples", name)
    proc = subprocess.run([sys.executable, path, *SAMPLES[name]], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_sample_runs(name):
    _run(name)


def _losses(out):
    return [float(v) for v in out.split("loss fell from ")[1].splitlines()[0].split(" to ")]


def test_the_demo_trains_compiled_like_eager_and_shows_its_code_and_profile():
    out = _run("train_mlp.py")
    first, last = _losses(out)
    assert last < 0.2 and last < first / 2       # the spirals are learnt
    eager = subprocess.run([sys.executable, os.path.join(ROOT, "samples", "train_mlp.py"),
                            *SAMPLES["train_mlp.py"], "--eager"], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    np.testing.assert_allclose(_losses(eager.stdout), [first, last], rtol=1e-4)
    assert "1 compile(s)" in out
    assert "def forward(" in out and "def backward(" in out
    assert "Self CPU time total" in out
