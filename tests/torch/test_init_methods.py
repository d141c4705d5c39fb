#!/usr/bin/env python3
"""The backend bootstraps over whatever store torch made: env:// under torchrun (torch's TCPStore
hosted by the agent's rank 0), file:// and an explicit store= (a FileStore) under mp.spawn. Each
job checks an all_reduce and a new_group against values computed here.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_init_methods.py
"""
import os
import sys
import tempfile
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torch_libcomm  # noqa: F401  registers "libcomm"
from launchers import free_port, run_torchrun


def exercise(rank, size):
    """An all_reduce over the world and one over a group of the ranks but the last; True when right."""
    tensor = torch.arange(5, dtype=torch.float64) + rank
    dist.all_reduce(tensor)
    right = torch.equal(tensor, size * torch.arange(5, dtype=torch.float64) + size * (size - 1) / 2)
    group = dist.new_group(list(range(size - 1)))
    if rank < size - 1:
        one = torch.ones(3, dtype=torch.int64)
        dist.all_reduce(one, group=group)
        right = right and torch.equal(one, torch.full((3,), size - 1, dtype=torch.int64))
    dist.barrier()
    return right


def spawned(rank, size, how, path, results):
    if how == "file":
        dist.init_process_group("libcomm", init_method="file://" + path, rank=rank, world_size=size)
    else:
        store = dist.FileStore(path, size)
        dist.init_process_group("libcomm", store=store, rank=rank, world_size=size, timeout=timedelta(seconds=60))
    results.put((rank, exercise(rank, size)))
    dist.destroy_process_group()


def outlives_store_host(rank, port):
    """Rank 0, whose process hosts torch's TCPStore, leaves at once; rank 1 stays on while
    libcomm's hang watch looks at the store (once a second), then leaves normally."""
    dist.init_process_group("libcomm", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=2)
    dist.barrier()
    if rank == 1:
        time.sleep(2.5)


def under_torchrun():
    """This file run by torchrun: env:// from the variables torchrun sets."""
    dist.init_process_group("libcomm")
    rank, size = dist.get_rank(), dist.get_world_size()
    print("rank %d of %d: %s" % (rank, size, "right" if exercise(rank, size) else "WRONG"), flush=True)
    dist.destroy_process_group()


def main():
    failed = 0
    for how in ("file", "store"):
        with tempfile.TemporaryDirectory() as scratch:
            results = mp.get_context("spawn").Queue()
            mp.spawn(spawned, args=(3, how, os.path.join(scratch, "rendezvous"), results), nprocs=3, join=True)
            outcomes = sorted(results.get(timeout=10) for _ in range(3))
        right = all(outcome for _, outcome in outcomes)
        failed += not right
        print("%s under mp.spawn, 3 ranks: %s" % ("file://" if how == "file" else "store=FileStore",
                                                  "ok" if right else "WRONG %s" % outcomes))
    # torch's store failing under libcomm's own threads was an uncaught std::system_error
    # ("Broken pipe"): the surviving rank aborted.
    try:
        mp.spawn(outlives_store_host, args=(free_port(),), nprocs=2, join=True)
        outcome = "ok"
    except Exception as error:  # ProcessExitedException: a rank died of a signal
        outcome = "WRONG: %s" % error
    failed += outcome != "ok"
    print("a rank outliving the process that hosts torch's store exits cleanly: " + outcome)
    code, ranked_lines, stdout, stderr = run_torchrun(os.path.abspath(__file__), 4, ["--worker"])
    lines = [line for _, line in ranked_lines if line.startswith("rank ")]
    right = code == 0 and len(lines) == 4 and all(line.endswith("right") for line in lines)
    failed += not right
    print("env:// under torchrun --nproc_per_node 4: %s" % ("ok" if right else "WRONG (exit %d)\n%s\n%s" % (
        code, stdout[-2000:], stderr[-3000:])))
    return 1 if failed else 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        under_torchrun()
    else:
        sys.exit(main())
