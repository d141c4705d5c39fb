"""How the tutorials start their ranks, shared by the examples here: under torchrun (which sets
RANK and WORLD_SIZE) each process joins the job torchrun made; run directly, a script starts its
own ranks on this host with torch.multiprocessing.spawn. Either way each rank initialises the
process group over env:// (MASTER_ADDR and MASTER_PORT, 127.0.0.1:29500 unless set) on the
backend "libcomm" (the tutorials say "gloo": the only change a Gloo program needs, besides
importing torch_libcomm) and then runs the example's function."""
import os

import torch.distributed as dist
import torch.multiprocessing as mp

import torch_libcomm  # noqa: F401  registers the backend "libcomm" in every process

BACKEND = "libcomm"


def init_process(rank, size, fn, backend=BACKEND):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)
    # torch 1.13 hosts the env:// store in rank 0's process and ends init with a barrier that
    # polls it every 10 ms: a rank 0 that finishes first and exits can take the store away from
    # ranks still polling ("Broken pipe" in _store_based_barrier). Gloo's slower teardown mostly
    # hides the race; a barrier before leaving closes it.
    dist.barrier()
    dist.destroy_process_group()


def _spawned(rank, size, fn):
    init_process(rank, size, fn)


def launch(fn, size=4):
    """Runs fn(rank, size) on every rank: torchrun's ranks if torchrun started us, else `size`
    processes spawned here."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        init_process(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), fn)
    else:
        mp.spawn(_spawned, args=(size, fn), nprocs=size, join=True)
