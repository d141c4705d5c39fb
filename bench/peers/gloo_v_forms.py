#!/usr/bin/env python3
"""torch's Gloo with the skew of libcomm's *_v_perf benches (rank 0 brings 8 blocks' worth, the
others one block), timed back to back on rank 0. Prints one line per total:
"total_bytes,time_us_p50". Run with the project's .venv (torch 2.13).

- all_to_all_v: all_to_all_single with split sizes (rank 0 sends 8 blocks to each rank); the
  total is what all ranks send together.
- all_gather_v: Gloo's all_gather takes equal tensors only, so as a torch user gathers unequal
  shards over it: each rank pads its shard to the largest, all_gather, and the shards are sliced
  out of the padded ones (views, no copy); the total is what every rank ends with.

    .venv/bin/python bench/peers/gloo_v_forms.py --collective all_to_all_v --ranks 4 1048576 16777216
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def all_to_all_v(rank, size, total):
    """The call to time, made ready for one total."""
    block = total // 4 // (size * (size + 7))
    send_splits = [(8 if rank == 0 else 1) * block] * size
    receive_splits = [(8 if r == 0 else 1) * block for r in range(size)]
    source = torch.arange(sum(send_splits), dtype=torch.float32)
    target = torch.empty(sum(receive_splits), dtype=torch.float32)
    return lambda: dist.all_to_all_single(target, source, receive_splits, send_splits)


def all_gather_v(rank, size, total):
    block = total // 4 // (size + 7)
    counts = [(8 if r == 0 else 1) * block for r in range(size)]
    shard = torch.arange(counts[rank], dtype=torch.float32)
    padded = torch.zeros(max(counts), dtype=torch.float32)
    gathered = [torch.empty(max(counts), dtype=torch.float32) for _ in range(size)]

    def call():
        padded[: counts[rank]].copy_(shard)
        dist.all_gather(gathered, padded)
        return [gathered[r][: counts[r]] for r in range(size)]

    return call


COLLECTIVES = {"all_to_all_v": all_to_all_v, "all_gather_v": all_gather_v}


def worker(rank, size, port, collective, totals, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    for total in totals:
        call = COLLECTIVES[collective](rank, size, total)
        iterations = 30 if total >= (8 << 20) else 200
        times = []
        dist.barrier()
        for i in range(5 + iterations):
            start = time.perf_counter()
            call()
            if i >= 5:
                times.append((time.perf_counter() - start) * 1e6)
        if rank == 0:
            queue.put("%d,%.2f" % (total, statistics.median(times)))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--collective", choices=sorted(COLLECTIVES), default="all_to_all_v")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("totals", type=int, nargs="+")
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(args.ranks, port, args.collective, args.totals, queue), nprocs=args.ranks)
    while not queue.empty():
        print(queue.get())


if __name__ == "__main__":
    main()
