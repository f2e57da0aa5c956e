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
    "char_lstm.py": ["--steps", "60"],
    "transformer_encoder.py": ["--steps", "200"],
    "train_cnn.py": ["--epochs", "2", "--samples", "256"],
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


def test_the_cnn_sample_learns_compiled_like_eager():
    out = _run("train_cnn.py")
    eager = [float(line.split("loss ")[1].split(",")[0]) for line in out.splitlines()
             if line.startswith("[   eager] epoch")]
    compiled = [float(line.split("loss ")[1].split(",")[0]) for line in out.splitlines()
                if line.startswith("[compiled] epoch")]
    assert len(eager) == len(compiled) == 2
    assert eager[-1] < eager[0] / 2                 # the quadrants are learnt
    np.testing.assert_allclose(compiled, eager, rtol=1e-3)
    assert "[compiled] 1 compile(s)" in out


@pytest.mark.parametrize("name", ["char_lstm.py", "transformer_encoder.py"])
def test_the_sequence_samples_learn_compiled_like_eager(name):
    first, last = _losses(_run(name))
    assert last < first / 5                  # the grammar / the reversal is learnt
    short = {}
    for mode in ([], ["--eager"]):
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "samples", name),
                               "--steps", "15", *mode], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        short[bool(mode)] = _losses(proc.stdout)
    np.testing.assert_allclose(short[False], short[True], rtol=1e-4)
