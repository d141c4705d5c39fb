#!/usr/bin/env python3
"""Blocking point-to-point: rank 0 adds one to a zero tensor and sends it to rank 1, which
receives it; every rank then prints what it holds (rank 0 and 1: 1, the others: 0).

    python3 examples/python/send_recv.py
"""
import torch
import torch.distributed as dist

from launch import launch


def run(rank, size):
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        dist.send(tensor=tensor, dst=1)
    elif rank == 1:
        dist.recv(tensor=tensor, src=0)
    print("Rank ", rank, " has data ", tensor[0], flush=True)


if __name__ == "__main__":
    launch(run)
