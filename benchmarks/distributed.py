"""All-reduce bandwidth and a DDP step, on this machine's loopback MPI.

    python benchmarks/distributed.py            # starts the jobs itself, prints two tables

Table 1: ``dist.all_reduce`` of a float32 tensor against mpi4py's ``Allreduce`` on
a NumPy array of the same size (2 processes), median time and bus bandwidth
(``2 (n-1)/n * bytes / time``, NCCL-tests' definition). Table 2: one training step
of WORKLOADS.md's W3 MLP (x 256x1024 per process, 1024-2048-1024, gelu_tanh, MSE)
under DDP at 1 and 2 processes: median step time, and the share of it that is
communication (1 - the step time under ``no_sync()`` / the step time).
BLAS runs one thread per process, so 2 processes use 2 cores.
"""
import os
import subprocess
import sys
import time

import numpy as np

SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def _median_time(fn, reps):
    """Median of ``reps`` timed calls after one warm-up call. The count is fixed (not a time
    budget) so that every rank makes the same number of collective calls."""
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def allreduce_role():
    import tracegrad as torch
    import tracegrad.distributed as dist
    from mpi4py import MPI
    dist.init_process_group("mpi")
    comm, n = MPI.COMM_WORLD, dist.get_world_size()
    rows = []
    for size in SIZES:
        t = torch.ones(size // 4, dtype=torch.float32)
        a = np.ones(size // 4, np.float32)
        comm.Barrier()
        reps = max(5, min(200, (256 << 20) // size // 4))
        ours = _median_time(lambda: dist.all_reduce(t), reps)
        comm.Barrier()
        raw = _median_time(lambda: comm.Allreduce(MPI.IN_PLACE, a, MPI.SUM), reps)
        ours, raw = comm.allreduce(ours, MPI.MAX), comm.allreduce(raw, MPI.MAX)
        bus = 2 * (n - 1) / n * size
        rows.append((size, ours, bus / ours / 1e9, raw, bus / raw / 1e9))
    if dist.get_rank() == 0:
        print(f"all_reduce, {n} processes (float32, in place)")
        print(f"{'size':>8} {'tracegrad us':>13} {'busbw GB/s':>11} {'mpi4py us':>10} "
              f"{'busbw GB/s':>11}")
        for size, o, ob, r, rb in rows:
            label = f"{size >> 20}M" if size >= 1 << 20 else f"{size >> 10}K"
            print(f"{label:>8} {o * 1e6:13.1f} {ob:11.2f} {r * 1e6:10.1f} {rb:11.2f}")
    dist.destroy_process_group()


def ddp_role():
    import tracegrad as torch
    import tracegrad.distributed as dist
    from tracegrad import nn
    dist.init_process_group("mpi")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(approximate="tanh"),
                          nn.Linear(2048, 1024))
    ddp = nn.parallel.DistributedDataParallel(model)
    x, t = torch.randn(256, 1024), torch.randn(256, 1024)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad()
        ((ddp(x) - t) ** 2).mean().backward()
        opt.step()

    def local_step():
        with ddp.no_sync():
            step()
    dist.barrier()
    full = _median_time(step, 15)
    dist.barrier()
    local = _median_time(local_step, 15)
    from mpi4py import MPI
    full = MPI.COMM_WORLD.allreduce(full, MPI.MAX)
    local = MPI.COMM_WORLD.allreduce(local, MPI.MAX)
    if dist.get_rank() == 0:
        share = max(0.0, 1 - local / full) if dist.get_world_size() > 1 else 0.0
        print(f"{dist.get_world_size():>9} {full * 1e3:12.1f} {local * 1e3:16.1f} "
              f"{share * 100:12.0f}%")
    dist.destroy_process_group()


def _launch(n, role):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "tracegrad.distributed.run", "--nproc-per-node", str(n),
           os.path.abspath(__file__), "--role", role]
    subprocess.run(cmd, check=True, env=env)


def main():
    if "--role" in sys.argv:
        {"allreduce": allreduce_role, "ddp": ddp_role}[sys.argv[sys.argv.index("--role") + 1]]()
        return
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}"
          f" on {os.cpu_count()} cores", flush=True)
    _launch(2, "allreduce")
    print("\nDDP step, W3 MLP (256x1024 per process)", flush=True)
    print(f"{'processes':>9} {'step ms':>12} {'no_sync step ms':>16} {'comm share':>13}",
          flush=True)
    for n in (1, 2):
        _launch(n, "ddp")


if __name__ == "__main__":
    main()
