#!/usr/bin/env python3
"""Each rank says hi: the tutorials' first program.

    python3 examples/python/hello.py          (4 ranks, spawned here)
    torchrun --nproc_per_node 4 examples/python/hello.py
"""
from launch import launch


def hello_world(rank, size):
    print(f"[{rank}] say hi!", flush=True)


if __name__ == "__main__":
    launch(hello_world)
