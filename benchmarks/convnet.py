"""Convolutional networks: tracegrad eager, tracegrad compiled and PyTorch eager in one run.

Two workloads, float32, all systems from the same weights and data:

- ``resnet18``: ``tracegrad.models.resnet18`` (train mode) forward and backward, batch 8 at
  3x64x64: ``(model(x) * w).sum().backward()`` (w fixed, random), the gradients of x and
  every parameter.
- ``lenet``: one training step of the LeNet of PyTorch's "Neural Networks" tutorial at
  batch 64 (1x32x32): forward, cross entropy, backward, SGD (momentum 0.9) step.

How it is timed (the manner of suite.py): each system runs in a process of its own (two
libraries' thread pools in one process slow each other down), ``--rounds`` processes per
system in rotating order so that a change in the machine's load touches every system
alike. In each process the first call is timed on its own (for tracegrad compiled: trace +
compile + first run, then the C tier's build is awaited where a C compiler exists) and its
outputs are kept for the check against PyTorch's (max|got - ref| / max|ref| over the loss
and the gradients); then at least 0.5 s of warm-up and ``--seconds / --rounds`` of timed
calls (at least 5). Reported: the first call (first round), the median and minimum over all
rounds, median / PyTorch's median, and the aims (eager <= 2.5x, compiled <= 1.8x).
Threads are left as each library defaults; the load average is printed before and after.

The ResNet's err is about 4e-3 in x's gradient: one pre-ReLU value of layer4.0 lies within
float32 rounding of 0 for this data and falls on the other side in tracegrad than in PyTorch
(the same step in float64 agrees to 1e-14); the loss and the fc gradient agree to 1e-5.

    python benchmarks/convnet.py [--seconds 3] [--workloads resnet18,lenet] [--profile]

``--profile`` adds, per workload, a cProfile of tracegrad eager's steady state (the top
functions by internal time), which shows the split between GEMMs, window copies and Python.
"""
import argparse
import cProfile
import importlib.util
import io
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tracegrad as tg                  # noqa: E402
from tracegrad.models import resnet18  # noqa: E402

AIMS = {"tracegrad eager": 2.5, "tracegrad compiled": 1.8}
WORKLOADS = ("resnet18", "lenet")


# the workloads, per system -----------------------------------------------------------------

def _lenet(lib):
    """PyTorch's tutorial LeNet, in ``lib`` (tracegrad or torch: the code is the same)."""
    nn, F = lib.nn, lib.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), (2, 2))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = lib.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = F.relu(self.fc2(x))
            return self.fc3(x)
    return Net()


def _torch_resnet18(torch):
    """torchvision's ResNet-18 in torch.nn (torchvision need not be installed): the model
    zoo's, at torchvision's width and classes."""
    from zoo import _resnet_build
    return _resnet_build(torch, {"width": 64, "classes": 1000})["model"]


def _copy_to_torch(torch, src, dst):
    dst.load_state_dict({k: torch.from_numpy(v.numpy().copy())
                         for k, v in src.state_dict().items()})


def build(workload, system):
    """``(step, outputs)``: ``step()`` runs one timed call; ``outputs()`` returns the arrays
    checked against PyTorch's after the first call (loss first)."""
    rng = np.random.default_rng(0)
    tg.manual_seed(0)
    if workload == "resnet18":
        src = resnet18()
        data = rng.standard_normal((8, 3, 64, 64), dtype=np.float32)
    else:
        src = _lenet(tg)
        data = rng.standard_normal((64, 1, 32, 32), dtype=np.float32)
        labels = rng.integers(0, 10, 64)
    if system == "PyTorch eager":
        import torch
        model = _torch_resnet18(torch) if workload == "resnet18" else _lenet(torch)
        _copy_to_torch(torch, src, model)
        lib, x = torch, torch.from_numpy(data)
    else:
        model, lib, x = src, tg, tg.tensor(data)
    model.train()
    state = {}
    if workload == "resnet18":
        x.requires_grad_(True)
        # a weighted sum of the logits: a plain sum's gradient is the same for every sample,
        # which train-mode BatchNorm nearly cancels (float32 results would differ at 1e-2)
        weights = lib.from_numpy(rng.standard_normal((8, 1000), dtype=np.float32))

        def loss_fn(inp):
            return (model(inp) * weights).sum()
        if system == "tracegrad compiled":
            loss_fn = tg.compile(loss_fn)

        def step():
            x.grad = None
            for p in model.parameters():
                p.grad = None
            loss = loss_fn(x)
            loss.backward()
            state["loss"] = loss
            return loss

        def outputs():
            return [state["loss"].detach().numpy(), x.grad.numpy(),
                    model.conv1.weight.grad.numpy(), model.fc.weight.grad.numpy()]
    else:
        y = lib.from_numpy(labels)
        crit = lib.nn.CrossEntropyLoss()
        opt = lib.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        w0 = model.conv1.weight.detach().numpy().copy()

        def loss_fn(inp, tgt):
            return crit(model(inp), tgt)
        if system == "tracegrad compiled":
            loss_fn = tg.compile(loss_fn)

        def step():
            opt.zero_grad()
            loss = loss_fn(x, y)
            loss.backward()
            opt.step()
            state["loss"] = loss
            return loss

        def outputs():      # the first step's loss, gradients and the update it made
            return [state["loss"].detach().numpy(), model.conv1.weight.grad.numpy(),
                    model.fc1.weight.grad.numpy(), model.conv1.weight.detach().numpy() - w0]
    return step, outputs, loss_fn


def rel_error(got, ref):
    return max(float(np.abs(np.asarray(g, np.float64) - r).max() / max(np.abs(r).max(), 1e-30))
               for g, r in zip(got, ref))


# timing -------------------------------------------------------------------------------------

def child(workload, system, seconds, outputs_path):
    """One system in a process of its own: the first call, its outputs saved for the error
    check, >= 0.5 s of warm-up, then >= ``seconds`` (and 5) timed calls."""
    step, outputs, fn = build(workload, system)
    t0 = time.perf_counter()
    step()
    first = time.perf_counter() - t0
    tier = _await_c_tier(fn) if system == "tracegrad compiled" else None
    if outputs_path:
        np.savez(outputs_path, *[np.asarray(o) for o in outputs()])
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        step()
    times = []
    start = time.perf_counter()
    while time.perf_counter() - start < seconds or len(times) < 5:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"first_ms": first * 1e3, "times": times, "tier": tier}


def run_child(workload, system, seconds, outputs_path=""):
    cmd = [sys.executable, os.path.abspath(__file__), "--child", workload, system,
           "--seconds", str(seconds), "--outputs", outputs_path]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    raise RuntimeError(f"{workload} / {system} failed: " + (tail[-1] if tail else "no output"))


def measure(workload, systems, seconds, rounds):
    """Each system in its own process (two libraries' thread pools in one process slow each
    other down), ``rounds`` times in rotating order, so that a change in the machine's load
    touches every system alike; the times of all rounds are pooled."""
    rows = {system: {"times": []} for system in systems}
    order = list(systems)
    with tempfile.TemporaryDirectory(prefix="tg_convnet_") as tmp:
        for r in range(rounds):
            for system in order:
                path = os.path.join(tmp, system.replace(" ", "_") + ".npz")
                got = run_child(workload, system, seconds / rounds, path if r == 0 else "")
                row = rows[system]
                row["times"] += got["times"]
                if r == 0:
                    row["first_ms"], row["tier"] = got["first_ms"], got["tier"]
                    with np.load(path) as f:
                        row["got"] = [f[k].astype(np.float64) for k in f.files]
            order = order[1:] + order[:1]
    ref = rows.get("PyTorch eager", {}).get("got")
    for row in rows.values():
        row["error"] = None if ref is None else rel_error(row["got"], ref)
    return rows


def _await_c_tier(compiled):
    """The tier the compiled step ends on: waits for a background C build where one runs."""
    try:
        from tracegrad.runtime import tiers
    except ImportError:
        return None
    names = []
    for v in compiled._variants:
        tiers.wait(v)
        names.append(v.tier)
    return ",".join(names)


def profile_eager(workload, repeats=5, top=14):
    step, _, _ = build(workload, "tracegrad eager")
    step()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(repeats):
        step()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(f"\ncProfile of tracegrad eager, {workload}, {repeats} steps (by internal time):")
    text = out.getvalue()
    print(text[text.find("ncalls") - 3:].rstrip())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0,
                    help="seconds of timed repetitions per system and workload")
    ap.add_argument("--rounds", type=int, default=2,
                    help="processes per system and workload, in rotating order")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--profile", action="store_true", help="add a cProfile of eager")
    ap.add_argument("--child", nargs=2, metavar=("WORKLOAD", "SYSTEM"), help=argparse.SUPPRESS)
    ap.add_argument("--outputs", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(*args.child, args.seconds, args.outputs)))
        return
    workloads = [w for w in args.workloads.split(",") if w]
    systems = ["tracegrad eager", "tracegrad compiled"]
    if importlib.util.find_spec("torch") is not None:
        systems.append("PyTorch eager")
    load0 = os.getloadavg()[0]
    results = {w: measure(w, systems, args.seconds, args.rounds) for w in workloads}
    load1 = os.getloadavg()[0]
    print(f"convnets, float32, {os.cpu_count()} CPU(s), threads as each library defaults, "
          f"load average {load0:.2f} before / {load1:.2f} after")
    print("resnet18: forward + backward, batch 8, 3x64x64, train mode; lenet: one SGD training "
          "step, batch 64, 1x32x32")
    print(f"each system in its own process, {args.rounds} round(s) in rotating order: first call"
          f" on its own, >= 0.5 s warm-up, then >= {args.seconds / args.rounds:g} s of calls per"
          f" round; err: max rel error vs PyTorch")
    header = (f"{'workload':<10}{'system':<20}{'first ms':>10}{'median ms':>11}{'min ms':>9}"
              f"{'reps':>6}{'/ PyTorch':>10}{'err':>9}  aim")
    print(header)
    print("-" * (len(header) + 12))
    for w, rows in results.items():
        ref = rows.get("PyTorch eager")
        ref_ms = statistics.median(ref["times"]) * 1e3 if ref else None
        for system, r in rows.items():
            med = statistics.median(r["times"]) * 1e3
            ratio = med / ref_ms if ref_ms else None
            aim = ""
            if system in AIMS and ratio is not None:
                aim = f"<= {AIMS[system]}x " + ("met" if ratio <= AIMS[system] else "NOT met")
            if r["tier"]:
                aim += f" (tier: {r['tier']})"
            err = "" if r["error"] is None else f"{r['error']:.1e}"
            print(f"{w:<10}{system:<20}{r['first_ms']:>10.1f}{med:>11.2f}"
                  f"{min(r['times']) * 1e3:>9.2f}{len(r['times']):>6}"
                  f"{'' if ratio is None else f'{ratio:.2f}x':>10}{err:>9}  {aim}")
    if args.profile:
        for w in workloads:
            profile_eager(w)


if __name__ == "__main__":
    main()
