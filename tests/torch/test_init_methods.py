#!/usr/bin/python3
"""The backend bootstraps over whatever store torch made: env:// under torchrun (torch's TCPStore
hosted by the agent's rank 0), file:// and an explicit store= (a FileStore) under mp.spawn. Each
job checks an all_reduce and a new_group against values computed here.

    PYTHONPATH=build/torch_backend /usr/bin/python3 tests/torch/test_init_methods.py
"""
import os
import subprocess
import sys
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import torch_libcomm  # noqa: F401  registers "libcomm"


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
    # torch 1.13's torchrun spells its flags with underscores; --standalone picks a free port. On
    # Python 3.11 its default --redirects/--tee "0" parse to None and torchrun fails before it
    # starts a worker, whatever the backend (enum iteration skips the zero flag): name them.
    command = ["/usr/bin/python3", "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "4",
               "--redirects", "1", "--tee", "1", os.path.abspath(__file__), "--worker"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=240)
    # tee prefixes each worker's line with "[default<rank>]:".
    lines = [line.split("]:", 1)[-1] for line in run.stdout.splitlines() if "]:rank " in line]
    right = run.returncode == 0 and len(lines) == 4 and all(line.endswith("right") for line in lines)
    failed += not right
    print("env:// under torchrun --nproc_per_node 4: %s" % ("ok" if right else "WRONG (exit %d)\n%s\n%s" % (
        run.returncode, run.stdout[-2000:], run.stderr[-3000:])))
    return 1 if failed else 0


if __name__ == "__main__":
    if "--worker" in sys.argv:
        under_torchrun()
    else:
        sys.exit(main())
