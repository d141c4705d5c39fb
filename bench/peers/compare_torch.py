#!/usr/bin/env python3
"""libcomm against Gloo through torch.distributed's own API, side by side in one run, 2 and 4
ranks on this host: all_reduce (float32) at 4 KiB, 1 MiB, 16 MiB and 256 MiB, broadcast,
all_gather_into_tensor and reduce_scatter_tensor at 16 MiB (p50 of blocking calls, busbw as
nccl-tests defines it), and the p50 time of one training step of a small MLP under
DistributedDataParallel and under FSDP2 (fully_shard). Rounds alternate the backends; medians
and bests of the rounds are printed with issue 28's targets.

    PYTHONPATH=build/torch_backend .venv/bin/python bench/peers/compare_torch.py [--rounds 2] [--ranks 2,4]
"""
import argparse
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

import torch_libcomm  # noqa: F401  registers "libcomm"

CASES = [("all_reduce", 4 << 10), ("all_reduce", 1 << 20), ("all_reduce", 16 << 20), ("all_reduce", 256 << 20),
         ("broadcast", 16 << 20), ("all_gather_into_tensor", 16 << 20), ("reduce_scatter_tensor", 16 << 20)]
STEPS = ["ddp_step", "fsdp_step"]


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def iterations(nbytes):
    return max(5, min(2000, (256 << 20) // max(nbytes, 1) // 4))


def time_case(name, nbytes, size):
    # nbytes: the per-rank block of all_gather_into_tensor and reduce_scatter_tensor (the output
    # of the one, the input's share of the other), the whole buffer of the others.
    tensor = torch.ones(nbytes // 4)
    whole = torch.ones(size * (nbytes // 4))
    call = {"all_reduce": lambda: dist.all_reduce(tensor), "broadcast": lambda: dist.broadcast(tensor, 0),
            "all_gather_into_tensor": lambda: dist.all_gather_into_tensor(whole, tensor),
            "reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(tensor, whole)}[name]
    for _ in range(3):
        call()
    times = []
    for _ in range(iterations(nbytes)):
        dist.barrier()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def time_step(name):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    if name == "fsdp_step":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("cpu", (dist.get_world_size(),))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        ddp = fully_shard(model, mesh=mesh)
    else:
        ddp = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    inputs, targets = torch.randn(64, 256), torch.randint(0, 10, (64,))
    times = []
    for step in range(30):
        dist.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        nn.functional.cross_entropy(ddp(inputs), targets).backward()
        optimizer.step()
        if step >= 5:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker(rank, size, backend, port, results):
    torch.set_num_threads(1)
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=size)
    figures = {(name, nbytes): time_case(name, nbytes, size) for name, nbytes in CASES}
    for step in STEPS:
        figures[(step, 0)] = time_step(step)
    if rank == 0:
        results.put(figures)
    dist.destroy_process_group()


def busbw(name, nbytes, seconds, size):
    factor = {"all_reduce": 2 * (size - 1) / size, "broadcast": 1.0, "all_gather_into_tensor": (size - 1) / size,
              "reduce_scatter_tensor": (size - 1) / size}[name]
    moved = nbytes * (1 if name in ("all_reduce", "broadcast") else size)
    return moved * factor / seconds / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ranks", default="2,4")
    options = parser.parse_args()
    for size in [int(value) for value in options.ranks.split(",")]:
        rounds = {"gloo": [], "libcomm": []}
        for round_number in range(options.rounds):
            for backend in ("gloo", "libcomm") if round_number % 2 == 0 else ("libcomm", "gloo"):
                results = mp.get_context("spawn").Queue()
                mp.spawn(worker, args=(size, backend, free_port(), results), nprocs=size, join=True)
                rounds[backend].append(results.get(timeout=60))
        print("\n%d ranks, %d rounds (median of rounds; best in brackets)\n" % (size, options.rounds))
        print("| case | Gloo | libcomm | ratio |")
        print("|---|---:|---:|---:|")
        for name, nbytes in CASES + [(step, 0) for step in STEPS]:
            gloo = [figures[(name, nbytes)] for figures in rounds["gloo"]]
            ours = [figures[(name, nbytes)] for figures in rounds["libcomm"]]
            if name in STEPS or nbytes <= 1 << 20:
                label = name if name in STEPS else "%s %d KiB p50" % (name, nbytes >> 10)
                print("| %s | %.1f (%.1f) us | %.1f (%.1f) us | %.3f |" % (
                    label, statistics.median(gloo) * 1e6, min(gloo) * 1e6, statistics.median(ours) * 1e6,
                    min(ours) * 1e6, statistics.median(ours) / statistics.median(gloo)))
            else:
                gloo_bw = [busbw(name, nbytes, seconds, size) for seconds in gloo]
                ours_bw = [busbw(name, nbytes, seconds, size) for seconds in ours]
                print("| %s %d MiB busbw | %.2f (%.2f) GB/s | %.2f (%.2f) GB/s | %.2fx |" % (
                    name, nbytes >> 20, statistics.median(gloo_bw), max(gloo_bw), statistics.median(ours_bw),
                    max(ours_bw), statistics.median(ours_bw) / statistics.median(gloo_bw)))
        print("\ntargets: 4 KiB latency <= 1/10 of Gloo's, 16 MiB busbw >= 3x Gloo's, DDP and FSDP steps no slower "
              "than Gloo's")


if __name__ == "__main__":
    main()
