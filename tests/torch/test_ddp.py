#!/usr/bin/env python3
"""Training on CPU is the same on libcomm as on Gloo: a small MLP, the same seed and data, 2 and 4
ranks, under DistributedDataParallel (with and without a communication hook that chains futures,
averaging by hand through all_reduce's future) and under FSDP2 (fully_shard: parameters gathered
with all_gather_into_tensor, gradients reduced with reduce_scatter_tensor); the losses of every
step must agree with Gloo's to rounding.

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


def wrap(model, mode):
    """The model as `mode` trains it: "ddp", "ddp+hook" or "fsdp"."""
    if mode == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    ddp = DistributedDataParallel(model, bucket_cap_mb=0.01)  # several buckets in flight at once
    if mode == "ddp+hook":
        ddp.register_comm_hook(None, average_hook)
    return ddp


def train(rank, size, backend, port, mode, results):
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    torch.manual_seed(1234)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
    ddp = wrap(model, mode)
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
    results.put((backend, mode, rank, losses))
    dist.destroy_process_group()


def spawn_and_collect(size, backend, mode):
    context = mp.get_context("spawn")
    results = context.Queue()
    mp.spawn(train, args=(size, backend, free_port(), mode, results), nprocs=size, join=True)
    return [results.get(timeout=10) for _ in range(size)][0][3]


def run(size, backend, mode):
    try:
        return spawn_and_collect(size, backend, mode)
    except mp.ProcessExitedException as crash:
        # The reference only: torch's own Gloo aborted a process now and then on the 2-core CI
        # machine ("terminate called without an active exception", 2 of 5 fresh-clone runs on
        # 2026-12-04, never in a libcomm run). The reference is deterministic: a second run gives
        # the same losses. A libcomm run is never retried.
        if backend != "gloo":
            raise
        print("the gloo reference (%d ranks, %s) crashed: %s; running it again" % (size, mode, crash),
              file=sys.stderr)
        return spawn_and_collect(size, backend, mode)


def main():
    failed = 0
    described = {"ddp": "DDP", "ddp+hook": "DDP with a future-chaining hook", "fsdp": "FSDP2 (fully_shard)"}
    for size in (2, 4):
        gloo = {"ddp": run(size, "gloo", "ddp"), "fsdp": run(size, "gloo", "fsdp")}
        for mode in ("ddp", "ddp+hook", "fsdp"):
            theirs = gloo["fsdp" if mode == "fsdp" else "ddp"]
            ours = run(size, "libcomm", mode)
            worst = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(ours, theirs))
            ok = worst < 1e-5 and ours[-1] < ours[0]
            failed += not ok
            print("%d ranks, %s, libcomm vs gloo: loss %.6f -> %.6f vs %.6f -> %.6f, largest relative difference "
                  "%.2e: %s" % (size, described[mode], ours[0], ours[-1], theirs[0], theirs[-1], worst,
                                "ok" if ok else "FAIL"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
