"""Faults injected into real 2-rank MPI jobs started by the launcher: a rank that raises,
calls ``sys.exit``, or ``os._exit``s while the other waits in a collective; ranks that pass
tensors of different shapes or dtypes; a rank that never comes; jobs over two "nodes" on
this machine.

Each job runs with a short group timeout (``TIMEOUT`` seconds) inside a subprocess timeout
far above it, so a hang fails the test instead of stalling the suite. The outcome asserted
is what the user sees: every rank and the launcher exit non-zero within the timeout, with a
message naming the op and the ranks; a job whose ranks all finish exits 0.
"""
import os
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from test_distributed import _mpi_ready     # the same reason to skip as the other tests

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 4          # the process group's timeout in these jobs, seconds
HANG = 90            # the subprocess timeout: reaching it means the job hung
LATE = TIMEOUT + 20  # a job that fails by a timeout ends before this (start-up included)


pytestmark = pytest.mark.skipif(_mpi_ready() is not None, reason=str(_mpi_ready()))

PROLOGUE = f'''
import os, sys, time
from datetime import timedelta
import tracegrad as torch
import tracegrad.distributed as dist
dist.init_process_group("mpi", timeout=timedelta(seconds=float(os.environ.get("JOB_TIMEOUT",
                                                                             {TIMEOUT}))))
R = dist.get_rank()
def say(*words):            # one write per line: the ranks' output is interleaved
    sys.stdout.write(" ".join(str(w) for w in words) + "\\n")
    sys.stdout.flush()
'''


def _env(**extra):
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                TRACEGRAD_BACKEND="numpy", **extra)


def launch(tmp_path, body, *args, n=2, launcher_args=(), env=None):
    script = tmp_path / "job.py"
    script.write_text(PROLOGUE + textwrap.dedent(body))
    cmd = [sys.executable, "-m", "tracegrad.distributed.run", "--nproc-per-node", str(n),
           *launcher_args, str(script), *args]
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG, cwd=str(tmp_path),
                       env=env or _env())
    return p, time.monotonic() - start


def _report(p):
    return f"rc={p.returncode}\nstdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-5000:]}"


# a rank that leaves early ---------------------------------------------------------------------

LEAVES = '''
how = sys.argv[1]
t = torch.ones(4)
dist.all_reduce(t)                  # both ranks are up
if R == 1:
    time.sleep(0.5)                 # rank 0 is inside the all_reduce below by now
    if how == "raise":
        raise ValueError("rank 1 fails on purpose")
    if how.startswith("sys.exit"):
        sys.exit(int(how[-2]))
    if how.startswith("os._exit"):
        os._exit(int(how[-2]))
dist.all_reduce(t)
say("unreachable", R)
'''


@pytest.mark.parametrize("how", ["raise", "sys.exit(0)", "sys.exit(1)", "os._exit(0)",
                                 "os._exit(1)"])
def test_a_rank_that_leaves_mid_collective_ends_the_job(tmp_path, how):
    p, took = launch(tmp_path, LEAVES, how)
    assert p.returncode != 0, _report(p)
    assert "unreachable" not in p.stdout, _report(p)
    assert took < LATE, f"took {took:.1f} s\n" + _report(p)
    if how == "raise":
        assert "rank 1 fails on purpose" in p.stderr, _report(p)
    if how == "sys.exit(0)":        # rank 0 waits out its timeout, and says where
        assert "all_reduce: timed out after 4 s" in p.stderr, _report(p)
        assert "job.py" in p.stderr, _report(p)
    if how == "os._exit(0)":        # hydra itself reports success here
        assert "ended without finishing its script" in p.stderr, _report(p)


@pytest.mark.parametrize("destroy", [False, True])
def test_ranks_that_finish_at_different_times_exit_0(tmp_path, destroy):
    """Rank 1 ends while rank 0 still works (no collective): no failure."""
    p, _ = launch(tmp_path, '''
        t = torch.ones(3)
        dist.all_reduce(t)
        if R == 0:
            time.sleep(1)
        if sys.argv[1] == "destroy":
            dist.destroy_process_group()
        say("done", R, t.tolist())
        ''', "destroy" if destroy else "end")
    assert p.returncode == 0, _report(p)
    assert p.stdout.count("done") == 2 and "[2.0, 2.0, 2.0]" in p.stdout, _report(p)


# mismatched tensors ---------------------------------------------------------------------------

MISMATCH = '''
def attempt(what, t, group=None):
    try:
        dist.all_reduce(t, group=group)
        say(what, "no error on rank", R, list(t.shape))
    except RuntimeError as e:
        say(what, "rank", R, "raised:", str(e).replace("\\n", " | "))


attempt("shape", torch.ones(2, 3) if R == 0 else torch.ones(3, 2))
attempt("dtype", torch.ones(4, dtype=torch.float32 if R == 0 else torch.float64))
attempt("count", torch.ones(4 if R == 0 else 5))
u = torch.ones(2)
dist.all_reduce(u)                  # the group still works after the errors
say("after", R, u.tolist())
# the level is read when a group is made
os.environ["TRACEGRAD_DISTRIBUTED_DEBUG"] = "OFF"
attempt("off", torch.ones(2, 3) if R == 0 else torch.ones(3, 2), dist.new_group())
os.environ["TRACEGRAD_DISTRIBUTED_DEBUG"] = "DETAIL"
detail = dist.new_group()
for step in range(3):   # a shape that changes on one rank after matching calls
    attempt(f"detail{step}", torch.ones(4) if (R == 0 or step < 2) else torch.ones(2, 2), detail)
'''


def test_mismatched_tensors_raise_on_every_rank(tmp_path):
    p, _ = launch(tmp_path, MISMATCH)
    assert p.returncode == 0, _report(p)
    shown = {
        "shape": ["rank 0: all_reduce(float32[2, 3], op=SUM)",
                  "rank 1: all_reduce(float32[3, 2], op=SUM)"],
        "dtype": ["rank 0: all_reduce(float32[4], op=SUM)",
                  "rank 1: all_reduce(float64[4], op=SUM)"],
        "count": ["rank 0: all_reduce(float32[4], op=SUM)",
                  "rank 1: all_reduce(float32[5], op=SUM)"],
        "detail2": ["rank 0: all_reduce(float32[4], op=SUM)",
                    "rank 1: all_reduce(float32[2, 2], op=SUM)"],
    }
    for what, parts in shown.items():
        raised = [line for line in p.stdout.splitlines()
                  if line.startswith(what + " rank") and " raised: " in line]
        assert len(raised) == 2, (what, _report(p))
        for line in raised:
            assert "all_reduce: the ranks called this collective with different tensors" in line
            for part in parts:
                assert part in line, line
            assert "job.py" in line, line       # the user's line
    assert p.stdout.count("[2.0, 2.0]") == 2, _report(p)
    # OFF: no exchange (the same count in another shape is MPI's business, as in PyTorch
    # without TORCH_DISTRIBUTED_DEBUG); DETAIL: the matching calls pass
    assert p.stdout.count("off no error") == 2, _report(p)
    assert p.stdout.count("detail0 no error") == 2 and p.stdout.count("detail1 no error") == 2


# every blocking call honours the timeout --------------------------------------------------------

def test_every_blocking_collective_honours_the_timeout(tmp_path):
    """Rank 1 never calls anything: each of rank 0's blocking calls raises at the group's
    timeout (a short one here) instead of waiting in MPI for ever."""
    p, _ = launch(tmp_path, '''
    from tracegrad import nn
    if R == 1:
        time.sleep(60)
    x = lambda: torch.ones(2)
    calls = {
        "all_reduce": lambda: dist.all_reduce(x()),
        "broadcast": lambda: dist.broadcast(x(), 1),
        "all_gather": lambda: dist.all_gather([x(), x()], x()),
        "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(torch.ones(4), x()),
        "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(torch.ones(1), x()),
        "reduce": lambda: dist.reduce(x(), 0),
        "gather": lambda: dist.gather(x(), [x(), x()], 0),
        "scatter": lambda: dist.scatter(x(), None, 1),
        "all_to_all_single": lambda: dist.all_to_all_single(x(), x()),
        "send": lambda: dist.send(torch.ones(1 << 20), 1),
        "recv": lambda: dist.recv(x(), 1),
        "barrier": lambda: dist.barrier(),
        "wait": lambda: dist.all_reduce(x(), async_op=True).wait(),
        "all_gather_object": lambda: dist.all_gather_object([None, None], {"a": 1}),
        "broadcast_object_list": lambda: dist.broadcast_object_list([None], 1),
        "gather_object": lambda: dist.gather_object(1, [None, None], 0),
        "scatter_object_list": lambda: dist.scatter_object_list([None], None, 1),
        "new_group": lambda: dist.new_group([0, 1]),
        "DistributedDataParallel": lambda: nn.parallel.DistributedDataParallel(
            nn.Linear(2, 2), find_unused_parameters=True)(torch.ones(1, 2)).sum().backward(),
        "SyncBatchNorm": lambda: nn.SyncBatchNorm(2)(torch.ones(4, 2)),
    }
    for name, call in calls.items():
        start = time.monotonic()
        try:
            call()
            say("returned", name)
        except RuntimeError as e:
            took = time.monotonic() - start
            say("timed out", name, f"{took:.1f}", "timed out after 0.3 s" in str(e),
                str(e).split(":")[0])
    os._exit(3)
    ''', env=_env(TRACEGRAD_DISTRIBUTED_DEBUG="OFF", JOB_TIMEOUT="0.3"))
    lines = [line.split() for line in p.stdout.splitlines() if line.startswith("timed out")]
    assert len(lines) == 20 and "returned" not in p.stdout, _report(p)
    for words in lines:
        assert float(words[3]) < 3.0 and words[4] == "True", words
    assert p.returncode != 0


# beyond one machine ---------------------------------------------------------------------------

NODES = '''
t = torch.tensor([float(R + 1)])
dist.all_reduce(t)
say("rank", R, "of", dist.get_world_size(), "node", os.environ["GROUP_RANK"], "local",
    os.environ["LOCAL_RANK"], "sum", t.item())
if sys.argv[1] == "fail" and R == dist.get_world_size() - 1:
    raise ValueError("the last rank fails on purpose")
dist.all_reduce(t)
dist.destroy_process_group()
'''


def _port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_launchers(tmp_path, how):
    """torchrun's way: one launcher per node, met at --master-addr:--master-port."""
    script = tmp_path / "job.py"
    script.write_text(PROLOGUE + textwrap.dedent(NODES))
    port = str(_port())
    procs = [subprocess.Popen(
        [sys.executable, "-m", "tracegrad.distributed.run", "--nnodes", "2", "--node-rank",
         str(node), "--master-addr", "127.0.0.1", "--master-port", port, "--nproc-per-node",
         "1", str(script), how],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(tmp_path),
        env=_env()) for node in (1, 0)]        # node 1 first: it waits for node 0
    outs = [p.communicate(timeout=HANG) for p in procs]
    return [p.returncode for p in procs], outs[1][0], outs[1][1] + outs[0][1]


def test_two_nodes_with_one_launcher_each(tmp_path):
    codes, out, err = _two_launchers(tmp_path, "ok")
    assert codes == [0, 0], (codes, out, err)
    assert "rank 0 of 2 node 0 local 0 sum 3.0" in out, (out, err)
    assert "rank 1 of 2 node 1 local 0 sum 3.0" in out, (out, err)


def test_a_failure_on_one_node_fails_every_launcher(tmp_path):
    codes, out, err = _two_launchers(tmp_path, "fail")
    assert all(c != 0 for c in codes), (codes, out, err)
    assert "the last rank fails on purpose" in err, err


def test_two_nodes_from_a_hostfile(tmp_path):
    """One launcher; hydra starts the second "node" (a second name for this machine)."""
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost:1\n127.0.0.1:1\n")
    p, _ = launch(tmp_path, NODES, "ok", n=1, launcher_args=(
        "--nnodes", "2", "--hostfile", str(hosts), "--master-addr", "127.0.0.1"))
    assert p.returncode == 0, _report(p)
    assert "rank 1 of 2 node 1 local 0 sum 3.0" in p.stdout, _report(p)
