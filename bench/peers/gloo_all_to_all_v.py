#!/usr/bin/env python3
"""torch's Gloo all_to_all_single with split sizes, the skew of libcomm's all_to_all_v_perf (rank 0
sends 8 blocks' worth to each rank, the others one block), timed back to back on rank 0. Prints
one line per total: "total_bytes,time_us_p50". Run with the project's .venv (torch 2.13).

    .venv/bin/python bench/peers/gloo_all_to_all_v.py --ranks 4 1048576 16777216
"""
import argparse
import os
import socket
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, size, port, totals, queue):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    for total in totals:
        block = total // 4 // (size * (size + 7))
        send_splits = [(8 if rank == 0 else 1) * block] * size
        receive_splits = [(8 if r == 0 else 1) * block for r in range(size)]
        source = torch.arange(sum(send_splits), dtype=torch.float32)
        target = torch.empty(sum(receive_splits), dtype=torch.float32)
        iterations = 30 if total >= (8 << 20) else 200
        times = []
        dist.barrier()
        for i in range(5 + iterations):
            start = time.perf_counter()
            dist.all_to_all_single(target, source, receive_splits, send_splits)
            if i >= 5:
                times.append((time.perf_counter() - start) * 1e6)
        if rank == 0:
            queue.put("%d,%.2f" % (total, statistics.median(times)))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("totals", type=int, nargs="+")
    args = parser.parse_args()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    queue = mp.get_context("spawn").SimpleQueue()
    mp.spawn(worker, args=(args.ranks, port, args.totals, queue), nprocs=args.ranks)
    while not queue.empty():
        print(queue.get())


if __name__ == "__main__":
    main()
