#!/usr/bin/env python3
"""The six collectives with the tutorials' inputs, each on a group of every rank, printing what
the tutorials print (4 ranks):

    reduce      ones to rank 0 with SUM:        [0] data = 4.0 (the others: their input)
    all_reduce  ones with SUM:                  [r] data = 4.0 on every rank
    scatter     rank 0's [1], [2], [3], [4]:    [r] data = r + 1
    gather      [r] from each rank to rank 0:   [0] data = [tensor([0.]), ..., tensor([3.])]
    all_gather  [r] from each rank to all:      the same list on every rank
    broadcast   rank 0's [0]:                   [r] data = tensor([0.]) on every rank

    python3 examples/python/collectives.py [reduce all_reduce scatter gather all_gather broadcast]
"""
import sys

import torch
import torch.distributed as dist

from launch import launch


def do_reduce(rank, size):
    group = dist.new_group(list(range(size)))
    tensor = torch.ones(1)
    dist.reduce(tensor, dst=0, op=dist.ReduceOp.SUM, group=group)
    # Only the destination's result is defined (torch's documentation). Gloo leaves partial sums
    # on the others (the tutorial shows 3.0, 2.0, 1.0); libcomm leaves their input as it was.
    print(f"[{rank}] data = {tensor[0]}", flush=True)


def do_all_reduce(rank, size):
    group = dist.new_group(list(range(size)))
    tensor = torch.ones(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    print(f"[{rank}] data = {tensor[0]}", flush=True)


def do_scatter(rank, size):
    group = dist.new_group(list(range(size)))
    tensor = torch.empty(1)
    pieces = [torch.tensor([i + 1], dtype=torch.float32) for i in range(size)] if rank == 0 else []
    dist.scatter(tensor, scatter_list=pieces, src=0, group=group)
    print(f"[{rank}] data = {tensor[0]}", flush=True)


def do_gather(rank, size):
    group = dist.new_group(list(range(size)))
    tensor = torch.tensor([rank], dtype=torch.float32)
    gathered = [torch.empty(1) for _ in range(size)] if rank == 0 else []
    dist.gather(tensor, gather_list=gathered, dst=0, group=group)
    if rank == 0:
        print(f"[{rank}] data = {gathered}", flush=True)


def do_all_gather(rank, size):
    group = dist.new_group(list(range(size)))
    tensor = torch.tensor([rank], dtype=torch.float32)
    gathered = [torch.empty(1) for _ in range(size)]
    dist.all_gather(gathered, tensor, group=group)
    print(f"[{rank}] data = {gathered}", flush=True)


def do_broadcast(rank, size):
    group = dist.new_group(list(range(size)))
    tensor = torch.tensor([rank], dtype=torch.float32) if rank == 0 else torch.empty(1)
    dist.broadcast(tensor, src=0, group=group)
    print(f"[{rank}] data = {tensor}", flush=True)


COLLECTIVES = {"reduce": do_reduce, "all_reduce": do_all_reduce, "scatter": do_scatter,
               "gather": do_gather, "all_gather": do_all_gather, "broadcast": do_broadcast}


def run(rank, size):
    for name in sys.argv[1:] or COLLECTIVES:
        if rank == 0:
            print(f"== {name}", flush=True)
        dist.barrier()  # keeps one collective's lines before the next one's heading
        COLLECTIVES[name](rank, size)
        dist.barrier()


if __name__ == "__main__":
    unknown = set(sys.argv[1:]) - set(COLLECTIVES)
    if unknown:
        sys.exit("unknown collective %s; choose from %s" % (", ".join(sorted(unknown)), " ".join(COLLECTIVES)))
    launch(run)
