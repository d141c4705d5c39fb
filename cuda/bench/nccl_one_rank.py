#!/usr/bin/env python3
"""torch's all_reduce on one rank over ProcessGroupNCCL: latency at 8 B-4 KiB and bandwidth at
1 MiB-1 GiB (float32, CUDA events, median of the timed calls). Run once as torch loads it
(NVIDIA's NCCL from the wheel) and once with LD_PRELOAD naming the drop-in: what a one-rank call
and its local copy cost in each (issue 33).

    python3 cuda/bench/nccl_one_rank.py LABEL
prints CSV: label,bytes,time_us_p50,algbw_gbps
"""
import os
import socket
import statistics
import sys

import torch
import torch.distributed as dist


def main():
    label = sys.argv[1] if len(sys.argv) > 1 else "nccl"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    print("label,bytes,time_us_p50,algbw_gbps")
    sizes = [8 << (2 * k) for k in range(6)] + [1 << 20, 16 << 20, 256 << 20, 1 << 30]
    for size in sizes:
        tensor = torch.ones(max(1, size // 4), dtype=torch.float32, device="cuda")
        iterations = 200 if size <= 4096 else 50 if size <= (16 << 20) else 10
        for _ in range(5):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        times = []
        for _ in range(iterations):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            dist.all_reduce(tensor)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000)
        median = statistics.median(times)
        print("%s,%d,%.2f,%.2f" % (label, size, median, size / median / 1e3), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
