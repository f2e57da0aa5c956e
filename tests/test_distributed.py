"""tracegrad.distributed on real multi-process jobs (loopback MPI through the launcher).

The checks that need several processes run in one job per world size (start-up
costs about a second): ``WORKER`` below runs every collective and ReduceOp against
NumPy, DDP against single-process training on the concatenated batch (eager and
compiled), ``no_sync`` accumulation and SyncBatchNorm against BatchNorm, and
prints one ``PASS`` line per rank. Each job is bounded by a timeout.
"""
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import tracegrad as torch
import tracegrad.distributed as dist
from tracegrad.utils.data.distributed import DistributedSampler

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 60


def _mpi_ready():
    if not dist.is_available():
        return 'mpi4py is not installed (pip install "tracegrad[distributed]")'
    from tracegrad.distributed.run import find_mpiexec
    if find_mpiexec() is None:
        return "no mpiexec found (pip install mpich)"
    return None


needs_mpi = pytest.mark.skipif(_mpi_ready() is not None, reason=str(_mpi_ready()))


def launch(tmp_path, source, n, *extra, launcher=None, timeout=TIMEOUT):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(source))
    cmd = [sys.executable, "-m", "tracegrad.distributed.run", "--nproc-per-node", str(n)]
    if launcher:
        cmd += ["--launcher", launcher]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               TRACEGRAD_BACKEND="numpy")
    start = time.monotonic()
    p = subprocess.run(cmd + [str(script), *extra], capture_output=True, text=True,
                       timeout=timeout, cwd=str(tmp_path), env=env)
    return p, time.monotonic() - start


WORKER = r'''
import numpy as np
import tracegrad as torch
import tracegrad.distributed as dist
from tracegrad import nn

dist.init_process_group("gloo")
R, W = dist.get_rank(), dist.get_world_size()
NP = {torch.float32: np.float32, torch.float64: np.float64, torch.int64: np.int64}


def data(rank, shape, dt):
    a = (np.arange(np.prod(shape)).reshape(shape) % 5 + 1 + rank).astype(NP[dt])
    return a


def check(got, want, what, tol=1e-6):
    got = got.detach().numpy() if hasattr(got, "numpy") else got
    assert got.shape == np.shape(want), (what, got.shape, np.shape(want))
    assert np.allclose(got, want, rtol=tol, atol=tol), (what, got, want)


# collectives against NumPy ------------------------------------------------------------------
OPS = {"SUM": lambda a: a.sum(0), "PRODUCT": lambda a: a.prod(0), "MAX": lambda a: a.max(0),
       "MIN": lambda a: a.min(0), "AVG": lambda a: a.mean(0)}
for dt in (torch.float32, torch.float64, torch.int64):
    for shape in ((5,), (2, 3)):
        everyone = np.stack([data(r, shape, dt) for r in range(W)])
        for name, ref in OPS.items():
            if name == "AVG" and dt is torch.int64:
                continue
            for async_op in (False, True):
                t = torch.tensor(data(R, shape, dt))
                v = t._version
                work = dist.all_reduce(t, op=getattr(dist.ReduceOp, name), async_op=async_op)
                if async_op:
                    work.wait()
                    assert work.is_completed()
                check(t, ref(everyone).astype(NP[dt]), f"all_reduce {name} {dt} {shape}")
                assert t._version > v
        for async_op in (False, True):
            t = torch.tensor(data(R, shape, dt))
            w = dist.broadcast(t, src=W - 1, async_op=async_op)
            w and w.wait()
            check(t, everyone[W - 1], "broadcast")
            outs = [torch.zeros(shape, dtype=dt) for _ in range(W)]
            w = dist.all_gather(outs, torch.tensor(data(R, shape, dt)), async_op=async_op)
            w and w.wait()
            for r in range(W):
                check(outs[r], everyone[r], "all_gather")
            out = torch.zeros((W * shape[0],) + shape[1:], dtype=dt)
            w = dist.all_gather_into_tensor(out, torch.tensor(data(R, shape, dt)),
                                            async_op=async_op)
            w and w.wait()
            check(out, np.concatenate(list(everyone)), "all_gather_into_tensor")
            big = np.stack([data(r, (W,) + shape, dt) for r in range(W)])
            out = torch.zeros(shape, dtype=dt)
            flat = torch.tensor(big[R].reshape((W * shape[0],) + shape[1:]))
            w = dist.reduce_scatter_tensor(out, flat, async_op=async_op)
            w and w.wait()
            check(out, big.sum(0)[R], "reduce_scatter_tensor")
            t = torch.tensor(data(R, shape, dt))
            w = dist.reduce(t, dst=1 % W, op=dist.ReduceOp.MAX, async_op=async_op)
            w and w.wait()
            check(t, everyone.max(0) if R == 1 % W else everyone[R], "reduce")
            gl = [torch.zeros(shape, dtype=dt) for _ in range(W)] if R == 0 else None
            w = dist.gather(torch.tensor(data(R, shape, dt)), gl, dst=0, async_op=async_op)
            w and w.wait()
            if R == 0:
                for r in range(W):
                    check(gl[r], everyone[r], "gather")
            t = torch.zeros(shape, dtype=dt)
            sl = [torch.tensor(data(10 * r, shape, dt)) for r in range(W)] if R == 0 else None
            w = dist.scatter(t, sl, src=0, async_op=async_op)
            w and w.wait()
            check(t, data(10 * R, shape, dt), "scatter")
        # point to point: a ring
        t = torch.tensor(data(R, shape, dt))
        got = torch.zeros(shape, dtype=dt)
        if R % 2 == 0:
            dist.send(t, (R + 1) % W)
            src = dist.recv(got, (R - 1) % W)
        else:
            src = dist.recv(got)
            dist.send(t, (R + 1) % W)
        assert src == (R - 1) % W
        check(got, everyone[(R - 1) % W], "send/recv")
        got = torch.zeros(shape, dtype=dt)
        works = [dist.isend(t, (R + 1) % W), dist.irecv(got, (R - 1) % W)]
        for w in works:
            w.wait()
        check(got, everyone[(R - 1) % W], "isend/irecv")
# a strided view and float16 go through staging copies
t = torch.tensor(np.arange(12.0).reshape(3, 4) + R)
dist.all_reduce(t[:, 1])
col = sum(np.arange(12.0).reshape(3, 4)[:, 1] + r for r in range(W))
check(t[:, 1], col, "strided all_reduce")
h = torch.ones(4, dtype=torch.float16)
dist.all_reduce(h)
check(h.float(), np.full(4, float(W), np.float32), "float16 all_reduce")
# a subgroup
g = dist.new_group([0, W - 1])
t = torch.tensor([float(R)])
if R in (0, W - 1):
    dist.all_reduce(t, group=g)
    check(t, np.array([float(W - 1)]), "new_group all_reduce")
    assert dist.get_world_size(g) == 2
else:
    assert g is dist.GroupMember.NON_GROUP_MEMBER and dist.get_rank(g) == -1
dist.barrier()


# DDP against one process on the concatenated batch ----------------------------------------
def make_model(bn=False, seed=0):
    torch.manual_seed(seed)
    layers = [nn.Linear(4, 16)]
    if bn:
        layers.append(nn.BatchNorm1d(16))
    layers += [nn.Tanh(), nn.Linear(16, 3)]
    return nn.Sequential(*layers).double()


B = 6
rng = np.random.default_rng(0)
X = torch.tensor(rng.standard_normal((5, W * B, 4)))
Y = torch.tensor(rng.standard_normal((5, W * B, 3)))
mine = slice(R * B, (R + 1) * B)


def train(model, xs, ys, steps, accumulate=1):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for s in range(steps):
        opt.zero_grad()
        for k in range(accumulate):
            loss = ((model(xs[s][k]) - ys[s][k]) ** 2).mean()
            loss.backward()
        opt.step()
    return model


ref = make_model(seed=1)
train(ref, [[X[s]] for s in range(5)], [[Y[s]] for s in range(5)], 5)
variants = {
    "eager": lambda m: nn.parallel.DistributedDataParallel(m, bucket_cap_mb=0.0005),
    "DDP(compile(m))": lambda m: nn.parallel.DistributedDataParallel(torch.compile(m)),
    "compile(DDP(m))": lambda m: torch.compile(nn.parallel.DistributedDataParallel(m)),
}
for name, wrap in variants.items():
    model = make_model(seed=1 + R)          # different on each rank: DDP broadcasts rank 0's
    ddp = wrap(model)
    train(ddp, [[X[s][mine]] for s in range(5)], [[Y[s][mine]] for s in range(5)], 5)
    if name.startswith("compile("):
        assert ddp.stats["compiles"] >= 1 and ddp.stats["fallbacks"] == 0, ddp.stats
    for (k, p), q in zip(model.named_parameters(), ref.parameters()):
        check(p.detach(), q.detach().numpy(), f"DDP {name} {k}", tol=1e-6)
ddp = nn.parallel.DistributedDataParallel(make_model())
assert all(k.startswith("module.") for k in ddp.state_dict()), list(ddp.state_dict())
assert ddp.module is not None and len(ddp._buckets) >= 1

# no_sync: two micro-batches, the first accumulated locally
ref = make_model(seed=3)
half = W * B // 2
for k in range(2):
    loss = ((ref(X[0][k * half:(k + 1) * half]) - Y[0][k * half:(k + 1) * half]) ** 2).mean()
    loss.backward()
model = make_model(seed=3)
ddp = nn.parallel.DistributedDataParallel(model)
parts = [np.arange(k * half + R * (half // W), k * half + (R + 1) * (half // W)) for k in range(2)]
with ddp.no_sync():
    ((ddp(X[0][parts[0]]) - Y[0][parts[0]]) ** 2).mean().backward()
((ddp(X[0][parts[1]]) - Y[0][parts[1]]) ** 2).mean().backward()
for p, q in zip(model.parameters(), ref.parameters()):
    check(p.grad, q.grad.numpy(), "no_sync accumulation")

# find_unused_parameters: a layer no rank uses keeps no gradient, the rest are averaged
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 3).double()
        self.b = nn.Linear(4, 3).double()

    def forward(self, x):
        return self.a(x)


m = Branchy()
ddp = nn.parallel.DistributedDataParallel(m, find_unused_parameters=True)
(ddp(X[0][mine]) ** 2).mean().backward()
assert m.b.weight.grad is None
g = m.a.weight.grad.numpy().copy()
m2 = Branchy()
m2.load_state_dict(m.state_dict())
(m2(X[0]) ** 2).mean().backward()
check(g, m2.a.weight.grad.numpy(), "find_unused_parameters")
# a parameter this backward leaves out, with a gradient accumulated earlier (under no_sync):
# its own .grad is what the rank contributes, as PyTorch's reducer does
class Switchy(Branchy):
    def forward(self, x, both):
        return self.a(x) + (self.b(x) if both else 0)


m = Switchy()
ddp = nn.parallel.DistributedDataParallel(m, find_unused_parameters=True)
with ddp.no_sync():
    (ddp(X[0][mine], True) ** 2).mean().backward()
(ddp(X[0][mine], R == 0) ** 2).mean().backward()     # only rank 0 uses b now
m3 = Switchy()
m3.load_state_dict(m.state_dict())
for r in range(W):          # every rank's accumulation, averaged
    rows = np.arange(r * (len(X[0]) // W), (r + 1) * (len(X[0]) // W))
    (m3(X[0][rows], True) ** 2).mean().backward()
    if r == 0:
        (m3(X[0][rows], True) ** 2).mean().backward()
want = m3.b.weight.grad.numpy() / W
check(m.b.weight.grad, want, "find_unused_parameters keeps an accumulated gradient")
try:
    bad = nn.parallel.DistributedDataParallel(Branchy())
    (bad(X[0][mine]) ** 2).mean().backward()
    raise AssertionError("an unused parameter without find_unused_parameters must raise")
except RuntimeError as e:
    assert "find_unused_parameters" in str(e)


# SyncBatchNorm against BatchNorm on the concatenated batch --------------------------------
for shape in ((W * 4, 3), (W * 2, 3, 5)):
    for dt in (torch.float64, torch.float32):
        tol = 1e-9 if dt is torch.float64 else 2e-4
        full = torch.tensor(rng.standard_normal(shape) * 2 + 1).to(dt)
        coef = torch.tensor(rng.standard_normal(shape)).to(dt)
        n = shape[0] // W
        bn = nn.BatchNorm1d(3).to(dt)
        sbn = nn.SyncBatchNorm.convert_sync_batchnorm(nn.Sequential(nn.BatchNorm1d(3)).to(dt))[0]
        assert isinstance(sbn, nn.SyncBatchNorm)
        with torch.no_grad():
            bn.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
            sbn.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
        xr = full.clone().requires_grad_(True)
        out = bn(xr)
        (out * coef).sum().backward()
        xs = full[R * n:(R + 1) * n].clone().requires_grad_(True)
        outs = sbn(xs)
        (outs * coef[R * n:(R + 1) * n]).sum().backward()
        check(outs.detach(), out.detach()[R * n:(R + 1) * n].numpy(), "SyncBN forward", tol)
        check(xs.grad, xr.grad[R * n:(R + 1) * n].numpy(), "SyncBN input grad", tol)
        for p, q in ((sbn.weight, bn.weight), (sbn.bias, bn.bias)):
            g = p.grad.clone()
            dist.all_reduce(g)
            check(g, q.grad.numpy(), "SyncBN weight/bias grad (summed over ranks)", tol)
        check(sbn.running_mean, bn.running_mean.numpy(), "SyncBN running_mean", tol)
        check(sbn.running_var, bn.running_var.numpy(), "SyncBN running_var", tol)
        sbn.eval(), bn.eval()
        check(sbn(full), bn(full).detach().numpy(), "SyncBN eval", tol)

# DDP + SyncBatchNorm + DistributedSampler training gives the same weights as one process
ref = make_model(bn=True, seed=5)
train(ref, [[X[s]] for s in range(3)], [[Y[s]] for s in range(3)], 3)
model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model(bn=True, seed=5 + R))
ddp = nn.parallel.DistributedDataParallel(model)
train(ddp, [[X[s][mine]] for s in range(3)], [[Y[s][mine]] for s in range(3)], 3)
for p, q in zip(model.parameters(), ref.parameters()):
    check(p.detach(), q.detach().numpy(), "DDP + SyncBatchNorm")
check(model[1].running_var, ref[1].running_var.numpy(), "DDP + SyncBatchNorm running_var")
# the same compiled as a whole: the collectives are Functions, so they run at every call
model = nn.SyncBatchNorm.convert_sync_batchnorm(make_model(bn=True, seed=5 + R))
compiled = torch.compile(nn.parallel.DistributedDataParallel(model))
train(compiled, [[X[s][mine]] for s in range(3)], [[Y[s][mine]] for s in range(3)], 3)
assert compiled.stats["compiles"] >= 1 and compiled.stats["fallbacks"] == 0, compiled.stats
for p, q in zip(model.parameters(), ref.parameters()):
    check(p.detach(), q.detach().numpy(), "compile(DDP(SyncBatchNorm model))")
check(model[1].running_var, ref[1].running_var.numpy(), "compiled SyncBatchNorm running_var")
dist.barrier()
dist.destroy_process_group()
print(f"PASS rank {R} of {W}", flush=True)
'''


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_worker_job(tmp_path, n):
    p, took = launch(tmp_path, WORKER, n)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    assert p.stdout.count("PASS rank") == n, p.stdout


FAILING = r'''
import sys
import tracegrad.distributed as dist
from datetime import timedelta
dist.init_process_group("mpi", timeout=timedelta(seconds=20))
if dist.get_rank() == 1:
    raise ValueError("rank 1 fails on purpose")
dist.barrier()          # rank 0 would wait here for ever
print("unreachable", flush=True)
'''


@needs_mpi
def test_a_failing_rank_stops_the_job(tmp_path):
    p, took = launch(tmp_path, FAILING, 2, timeout=40)
    assert p.returncode != 0
    assert "rank 1 fails on purpose" in p.stderr
    assert "unreachable" not in p.stdout
    assert took < 30


@needs_mpi
def test_barrier_times_out_instead_of_hanging(tmp_path):
    src = r'''
    import time
    import tracegrad.distributed as dist
    from datetime import timedelta
    dist.init_process_group("mpi", timeout=timedelta(seconds=2))
    if dist.get_rank() == 0:
        try:
            dist.barrier()
        except RuntimeError as e:
            print("timed out:", e, flush=True)
            raise SystemExit(3)
    else:
        time.sleep(8)
    '''
    p, took = launch(tmp_path, src, 2, timeout=40)
    assert "timed out" in p.stdout and p.returncode != 0, p.stdout + p.stderr
    assert took < 20


@needs_mpi
@pytest.mark.xfail(reason="MPICH 5.0 cannot connect singleton processes (pmodels/mpich#7805): "
                          "the environment rendezvous without mpiexec fails there", strict=False)
def test_environment_rendezvous_without_mpiexec(tmp_path):
    src = r'''
    import tracegrad as torch
    import tracegrad.distributed as dist
    dist.init_process_group("mpi")
    t = torch.tensor([1.0 + dist.get_rank()])
    dist.all_reduce(t)
    assert t.item() == 3.0
    print("PASS", flush=True)
    '''
    p, _ = launch(tmp_path, src, 2, launcher="env", timeout=40)
    assert p.returncode == 0 and p.stdout.count("PASS") == 2, p.stderr[-2000:]


# in one process -----------------------------------------------------------------------------

@pytest.mark.parametrize("n,replicas,drop_last,shuffle",
                         [(10, 3, False, True), (10, 3, True, True), (9, 3, False, False),
                          (4, 5, False, True), (11, 4, True, False)])
def test_distributed_sampler_partitions_an_epoch(n, replicas, drop_last, shuffle):
    parts = [list(DistributedSampler(range(n), replicas, r, shuffle=shuffle, seed=7,
                                     drop_last=drop_last)) for r in range(replicas)]
    lengths = {len(p) for p in parts}
    assert len(lengths) == 1
    flat = [i for p in parts for i in p]
    if drop_last:
        assert len(flat) == (n // replicas) * replicas and len(set(flat)) == len(flat)
    else:
        assert set(flat) == set(range(n)) and len(flat) == -(-n // replicas) * replicas
    if not shuffle:
        assert parts[0][:2] == [0, replicas]


def test_distributed_sampler_epochs_and_seed():
    s = DistributedSampler(range(20), 2, 0, seed=1)
    first = list(s)
    assert list(s) == first                     # same epoch, same order
    s.set_epoch(1)
    assert list(s) != first and sorted(list(s) + list(DistributedSampler(range(20), 2, 1, seed=1)
                                                      )) != []
    other = DistributedSampler(range(20), 2, 1, seed=1)
    other.set_epoch(1)
    assert sorted(list(s) + list(other)) == list(range(20))
    with pytest.raises(ValueError):
        DistributedSampler(range(4), 2, 2)


def test_sampler_with_dataloader_and_old_imports():
    from tracegrad.utils.data import DataLoader, TensorDataset
    ds = TensorDataset(torch.arange(10.0))
    loader = DataLoader(ds, batch_size=2, sampler=DistributedSampler(ds, 2, 1, shuffle=False))
    assert [b[0].tolist() for b in loader] == [[1.0, 3.0], [5.0, 7.0], [9.0]]


def test_single_process_group_and_fallbacks():
    """A world of one: collectives are identities, SyncBatchNorm is BatchNorm, DDP trains."""
    if not dist.is_available():
        pytest.skip("mpi4py is not installed")
    dist.init_process_group("gloo")
    try:
        assert dist.is_initialized() and dist.get_world_size() == 1 and dist.get_rank() == 0
        t = torch.arange(4.0)
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
        assert dist.all_reduce(t, async_op=True).wait()
        x = torch.randn(6, 3)
        torch.manual_seed(0)
        bn = torch.nn.BatchNorm1d(3)
        torch.manual_seed(0)
        sbn = torch.nn.SyncBatchNorm(3)
        assert np.allclose(bn(x).detach().numpy(), sbn(x).detach().numpy())
        with pytest.raises(RuntimeError, match="twice"):
            dist.init_process_group("mpi")
    finally:
        dist.destroy_process_group()
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group"):
        dist.get_rank()


def test_without_mpi4py_the_error_says_how_to_install(tmp_path):
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import tracegrad.distributed as dist\n"
            "print(dist.is_available())\n"
            "try:\n    dist.init_process_group('mpi')\n"
            "except RuntimeError as e:\n    print('RuntimeError', e)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=TIMEOUT, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert "tracegrad[distributed]" in p.stdout and "RuntimeError" in p.stdout


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown backend"):
        dist.init_process_group("ucc")


@needs_mpi
def test_sample_trains_on_two_processes():
    cmd = [sys.executable, "-m", "tracegrad.distributed.run", "--nproc-per-node", "2",
           os.path.join(ROOT, "samples", "ddp_train.py"), "--epochs", "4"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, cwd=ROOT,
                       env=dict(os.environ, TRACEGRAD_BACKEND="numpy"))
    assert p.returncode == 0, p.stderr[-3000:]
    losses = [float(line.split()[3]) for line in p.stdout.splitlines()
              if line.startswith("epoch")]
    assert len(losses) == 4 and "(2 processes" in p.stdout      # printed by rank 0 only
    assert losses[-1] < 0.7 * losses[0], p.stdout


def test_engine_queue_callback_runs_after_backward():
    """The engine hook DDP waits in: callbacks queued during backward run once it ends."""
    from tracegrad.autograd.engine import queue_callback
    w = torch.ones(3, requires_grad=True)
    seen = []
    w.register_post_accumulate_grad_hook(
        lambda p: queue_callback(lambda: seen.append(p.grad.tolist())))
    (w * 2).sum().backward()
    assert seen == [[2.0, 2.0, 2.0]]
    with pytest.raises(RuntimeError, match="during the backward"):
        queue_callback(lambda: None)


def test_launcher_rejects_what_it_cannot_do(capsys):
    from tracegrad.distributed.run import main
    with pytest.raises(SystemExit, match="elastic ranges are not supported"):
        main(["--nnodes", "1:4", "job.py"])
    with pytest.raises(SystemExit, match="--node-rank 2 must be below --nnodes 2"):
        main(["--nnodes", "2", "--node-rank", "2", "job.py"])
    if _mpi_ready() is None:
        with pytest.raises(SystemExit, match="--master-addr"):
            main(["--nnodes", "2", "--node-rank", "1", "job.py"])
        with pytest.raises(SystemExit, match="one launcher"):
            main(["--nnodes", "2", "--node-rank", "1", "--hosts", "a,b", "job.py"])


def test_debug_level_is_checked(monkeypatch):
    from tracegrad.distributed._check import debug_level
    monkeypatch.delenv("TRACEGRAD_DISTRIBUTED_DEBUG", raising=False)
    monkeypatch.setenv("TORCH_DISTRIBUTED_DEBUG", "detail")
    assert debug_level() == "DETAIL"
    monkeypatch.setenv("TRACEGRAD_DISTRIBUTED_DEBUG", "OFF")
    assert debug_level() == "OFF"
    monkeypatch.setenv("TRACEGRAD_DISTRIBUTED_DEBUG", "LOUD")
    with pytest.raises(ValueError, match="OFF, INFO or DETAIL"):
        debug_level()
