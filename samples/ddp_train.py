"""Data-parallel training on several processes: DDP, SyncBatchNorm and DistributedSampler.

    python -m tracegrad.distributed.run --nproc-per-node 2 samples/ddp_train.py

Each process trains a replica of an MLP (Linear + BatchNorm1d, converted to
SyncBatchNorm) on its share of every epoch; gradients are averaged across
processes during backward. Rank 0 prints the progress. Run alone (plain
``python samples/ddp_train.py``) it is a world of one process.
"""
import argparse
import math
import time

import tracegrad as torch
import tracegrad.distributed as dist
from tracegrad import nn
from tracegrad.nn.parallel import DistributedDataParallel as DDP
from tracegrad.utils.data import DataLoader, TensorDataset
from tracegrad.utils.data.distributed import DistributedSampler


def dataset(n=2048, seed=0):
    """Points in the plane labelled by which of three spiral arms they lie on."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=g)
    t = torch.rand(n, generator=g) * 3 + 0.3
    angle = t * 2.5 + labels.float() * (2 * math.pi / 3)
    x = torch.stack([t * torch.cos(angle), t * torch.sin(angle)], 1)
    x = x + 0.05 * torch.randn(n, 2, generator=g)
    return TensorDataset(x, labels)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    args = parser.parse_args()

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 64), nn.BatchNorm1d(64), nn.ReLU(),
                          nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 3))
    model = DDP(nn.SyncBatchNorm.convert_sync_batchnorm(model))
    data = dataset()
    sampler = DistributedSampler(data, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2, dtype=torch.float64)     # loss sum, batches
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}  loss {total[0].item() / total[1].item():.4f}  "
                  f"({world} processes, {time.perf_counter() - start:.1f} s)", flush=True)
    model.eval()
    with torch.no_grad():
        x, y = data.tensors
        accuracy = (model(x).argmax(1) == y).float().mean().item()
    if rank == 0:
        print(f"accuracy {accuracy:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
