#!/usr/bin/env python3
"""DistributedDataParallel on CPU trains the same on libcomm as on Gloo: a small MLP, the same
seed and data, 2 and 4 ranks; the losses of every step must agree to rounding, and one
communication hook that chains futures (averaging by hand through all_reduce's future) must give
the same loss as DDP's own averaging.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_ddp.py
"""
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel

import torch_libcomm  # noqa: F401  registers "libcomm"
from launchers import free_port

STEPS = 25


def average_hook(state, bucket):
    """A hook as DDP's documentation writes them: all_reduce the bucket, then divide in then()."""
    size = dist.get_world_size()
    future = dist.all_reduce(bucket.buffer(), async_op=True).get_future()
    return future.then(lambda done: done.value()[0] / size)


def train(rank, size, backend, port, hook, results):
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)  # several buckets in flight at once
    if hook:
        ddp.register_comm_hook(None, average_hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(99 + rank)
    losses = []
    for _ in range(STEPS):
        inputs = torch.randn(32, 20, generator=data)
        targets = inputs.sum(1, keepdim=True).sin()
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(ddp(inputs), targets)
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / size)
    results.put((backend, hook, rank, losses))
    dist.destroy_process_group()


def run(size, backend, hook):
    context = mp.get_context("spawn")
    results = context.Queue()
    mp.spawn(train, args=(size, backend, free_port(), hook, results), nprocs=size, join=True)
    losses = [results.get(timeout=10) for _ in range(size)]
    return losses[0][3]


def main():
    failed = 0
    for size in (2, 4):
        gloo = run(size, "gloo", False)
        for hook in (False, True):
            ours = run(size, "libcomm", hook)
            worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, gloo))
            ok = worst < 1e-5 and ours[-1] < ours[0]
            failed += not ok
            print("%d ranks, libcomm%s vs gloo: loss %.6f -> %.6f vs %.6f -> %.6f, largest relative difference "
                  "%.2e: %s" % (size, " with a future-chaining hook" if hook else "", ours[0], ours[-1], gloo[0],
                                gloo[-1], worst, "ok" if ok else "FAIL"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
