#!/usr/bin/python3
"""One node's part of a torch.distributed job across hosts (bench/netns_two_hosts.sh runs one per
network namespace): RANKS processes with global ranks NODE*RANKS.., rendezvous over tcp:// at
MASTER, then all_reduce (float32, in place) at each size; rank 0 prints nccl-tests-like rows
(p50 of blocking calls after warm-up, busbw = algbw * 2(n-1)/n).

    /usr/bin/python3 bench/peers/torch_across_hosts.py --backend gloo --node 0 --nodes 2 --ranks 2 \\
        --master 10.78.0.1:29600 [--sizes 4M,16M,64M] [--iterations 5]
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def worker(local, arguments):
    if arguments.backend == "libcomm":
        import torch_libcomm  # noqa: F401  registers "libcomm"
    size = arguments.nodes * arguments.ranks
    rank = arguments.node * arguments.ranks + local
    dist.init_process_group(arguments.backend, init_method="tcp://" + arguments.master, rank=rank, world_size=size)
    for nbytes in [parse_size(text) for text in arguments.sizes.split(",")]:
        tensor = torch.ones(nbytes // 4)
        for _ in range(2):
            dist.all_reduce(tensor)
        times = []
        # Small messages are over in a millisecond: more of them for a steady median.
        for _ in range(arguments.iterations if nbytes > 65536 else max(arguments.iterations, 50)):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        if rank == 0:
            busbw = nbytes / seconds / 1e9 * 2 * (size - 1) / size
            print("[0] %14d %12d   float32    sum    -1   in-place %12.2f %10s %10.3f %10.3f       -  %s" %
                  (nbytes, nbytes // 4, seconds * 1e6, "-", nbytes / seconds / 1e9, busbw, arguments.backend),
                  flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["gloo", "libcomm"], default="gloo")
    parser.add_argument("--node", type=int, required=True)
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--master", required=True, help="host:port of the store (node 0 hosts it)")
    parser.add_argument("--sizes", default="4M,16M,64M")
    parser.add_argument("--iterations", type=int, default=5)
    arguments = parser.parse_args()
    mp.spawn(worker, args=(arguments,), nprocs=arguments.ranks, join=True)


if __name__ == "__main__":
    main()
