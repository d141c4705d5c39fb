#!/usr/bin/env python3
"""Collectives on a sub-group: ranks 0 and 1 form a group and all_reduce on it; the other ranks
are not in it and keep their own tensors. Two forms from the tutorials: ones (ranks 0 and 1 then
hold 2, the others 1) and a random 4x4 tensor per rank, whose sum is printed (ranks 0 and 1
print the same sum, the others their own). The random tensors are seeded by rank here, so that
a test can recompute them.

    python3 examples/python/subgroup.py
"""
import torch
import torch.distributed as dist

from launch import launch


def run(rank, size):
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)  # does nothing outside the group
    print("Rank ", rank, " has data ", tensor[0], flush=True)

    torch.manual_seed(rank)
    tensor = torch.randn(4, 4)
    dist.all_reduce(tensor, group=group, op=dist.ReduceOp.SUM)
    print(tensor.sum(), flush=True)


if __name__ == "__main__":
    launch(run)
