"""The "nccl" backend on a real GPU: collectives on CUDA tensors and DDP training on cuda,
in jobs of one process and of two processes sharing the GPU (skipped without a GPU or MPI;
the two-process job is skipped, saying so, where NCCL refuses two ranks on one device)."""
import pytest

import tracegrad as torch

from test_distributed import launch, needs_mpi

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                               reason="needs CuPy and an NVIDIA GPU")

NCCL_JOB = r'''
import numpy as np
import tracegrad as torch
import tracegrad.distributed as dist
from tracegrad import nn

dist.init_process_group("nccl")
R, W = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", 0)
NP = {torch.float32: np.float32, torch.float64: np.float64, torch.int64: np.int64}


def data(rank, shape, dt):
    return (np.arange(np.prod(shape)).reshape(shape) % 5 + 1 + rank).astype(NP[dt])


def on_gpu(a):
    return torch.tensor(a, device=dev)


def check(got, want, what, tol=1e-6):
    assert got.device.type == "cuda", (what, got.device)
    got = got.detach().cpu().numpy()
    assert got.shape == np.shape(want), (what, got.shape, np.shape(want))
    assert np.allclose(got, want, rtol=tol, atol=tol), (what, got, want)


OPS = {"SUM": lambda a: a.sum(0), "PRODUCT": lambda a: a.prod(0), "MAX": lambda a: a.max(0),
       "MIN": lambda a: a.min(0), "AVG": lambda a: a.mean(0)}
for dt in (torch.float32, torch.float64, torch.int64):
    for shape in ((5,), (2, 3)):
        everyone = np.stack([data(r, shape, dt) for r in range(W)])
        for name, ref in OPS.items():
            if name == "AVG" and dt is torch.int64:
                continue
            for async_op in (False, True):
                t = on_gpu(data(R, shape, dt))
                v = t._version
                work = dist.all_reduce(t, op=getattr(dist.ReduceOp, name), async_op=async_op)
                if async_op:
                    work.wait()
                    assert work.is_completed()
                check(t, ref(everyone).astype(NP[dt]), f"all_reduce {name} {dt} {shape}")
                assert t._version > v
        for async_op in (False, True):
            t = on_gpu(data(R, shape, dt))
            w = dist.broadcast(t, src=W - 1, async_op=async_op)
            w and w.wait()
            check(t, everyone[W - 1], "broadcast")
            outs = [torch.zeros(shape, dtype=dt, device=dev) for _ in range(W)]
            w = dist.all_gather(outs, on_gpu(data(R, shape, dt)), async_op=async_op)
            w and w.wait()
            for r in range(W):
                check(outs[r], everyone[r], "all_gather")
            out = torch.zeros((W * shape[0],) + shape[1:], dtype=dt, device=dev)
            w = dist.all_gather_into_tensor(out, on_gpu(data(R, shape, dt)), async_op=async_op)
            w and w.wait()
            check(out, np.concatenate(list(everyone)), "all_gather_into_tensor")
            big = np.stack([data(r, (W,) + shape, dt) for r in range(W)])
            out = torch.zeros(shape, dtype=dt, device=dev)
            flat = on_gpu(big[R].reshape((W * shape[0],) + shape[1:]))
            w = dist.reduce_scatter_tensor(out, flat, async_op=async_op)
            w and w.wait()
            check(out, big.sum(0)[R], "reduce_scatter_tensor")
# a strided view goes through a staging copy and back
t = on_gpu(np.arange(12.0).reshape(3, 4) + R)
dist.all_reduce(t[:, 1])
check(t[:, 1], sum(np.arange(12.0).reshape(3, 4)[:, 1] + r for r in range(W)), "strided")


# DDP on cuda against one process on the CPU on the concatenated batch
def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3)).double()


B = 6
rng = np.random.default_rng(0)
X = rng.standard_normal((4, W * B, 4))
Y = rng.standard_normal((4, W * B, 3))
mine = slice(R * B, (R + 1) * B)


def train(model, xs, ys):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in zip(xs, ys):
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()


ref = make_model(1)
train(ref, [torch.tensor(x) for x in X], [torch.tensor(y) for y in Y])
for name, wrap in {"eager": lambda m: m, "compiled": torch.compile}.items():
    model = make_model(1 + R).to(dev)       # different on each rank: DDP broadcasts rank 0's
    ddp = wrap(nn.parallel.DistributedDataParallel(model))
    train(ddp, [on_gpu(x[mine]) for x in X], [on_gpu(y[mine]) for y in Y])
    for (k, p), q in zip(model.named_parameters(), ref.parameters()):
        check(p.detach(), q.detach().numpy(), f"DDP {name} {k}", tol=1e-9)
dist.barrier()
dist.destroy_process_group()
print(f"PASS rank {R} of {W}", flush=True)
'''

REFUSED = ("Duplicate GPU", "ncclInvalidUsage", "NCCL_ERROR_INVALID_USAGE")


@needs_gpu
@needs_mpi
@pytest.mark.parametrize("n", [1, 2])
def test_nccl_job(tmp_path, n, monkeypatch):
    monkeypatch.setenv("NCCL_DEBUG", "WARN")        # NCCL says why it refuses a job
    p, _ = launch(tmp_path, NCCL_JOB, n, timeout=240)
    if n > 1 and p.returncode != 0 and any(s in p.stdout + p.stderr for s in REFUSED):
        said = [line for line in (p.stdout + p.stderr).splitlines()
                if any(s in line for s in REFUSED)]
        pytest.skip("NCCL refuses two ranks on one GPU: " + " | ".join(said[:2])[:400])
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    assert p.stdout.count("PASS rank") == n, p.stdout
