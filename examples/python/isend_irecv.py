#!/usr/bin/env python3
"""Non-blocking point-to-point: rank 0 starts sending its tensor to rank 1 with isend, rank 1
starts receiving with irecv, and each waits on its request before touching the tensor. Then the
second form from the tutorials: rank 0 sends [0, 1, 0] to every other rank at once, each of
which receives it.

    python3 examples/python/isend_irecv.py
"""
import torch
import torch.distributed as dist

from launch import launch


def one_to_one(rank):
    tensor = torch.zeros(1)
    request = None
    if rank == 0:
        tensor += 1
        request = dist.isend(tensor=tensor, dst=1)
    elif rank == 1:
        request = dist.irecv(tensor=tensor, src=0)
    if request is not None:
        request.wait()  # only now may the tensor be read or changed
    print("Rank ", rank, " has data ", tensor[0], flush=True)


def one_to_all(rank, size):
    tensor = torch.zeros(3)
    requests = []
    if rank == 0:
        tensor[1] = 1
        requests = [dist.isend(tensor, dst=peer) for peer in range(1, size)]
    else:
        requests.append(dist.irecv(tensor, src=0))
    for request in requests:
        request.wait()
    print(f"Rank {rank} has data {tensor}", flush=True)


def run(rank, size):
    one_to_one(rank)
    one_to_all(rank, size)


if __name__ == "__main__":
    launch(run)
