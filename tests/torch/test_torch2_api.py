#!/usr/bin/env python3
"""What torch 2.x's Backend interface adds, on libcomm, 4 ranks through mp.spawn, each result
checked against values computed here: all_gather_into_tensor and reduce_scatter_tensor in their
coalesced forms (torch's _coalescing_manager), coalescing through start/end, uneven
all_to_all_single, torch's functional collectives, new_subgroups, a 2 x 2 DeviceMesh (all_reduce
along one dimension, all_gather along the other), splitting (ProcessGroup.split_group, no new
connections), the sequence number, a group's own timeout, monitored_barrier naming a missing
rank, abort (under a mixed "cpu:libcomm,cuda:gloo" backend string), and shutdown.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_torch2_api.py
"""
import datetime
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as functional
from torch.distributed.device_mesh import init_device_mesh

import torch_libcomm
from launchers import free_port, spawn_and_report
from test_backend import Checker, open_sockets

SIZE = 4
CPU = torch.device("cpu")


def backend_of(group):
    return group._get_backend(CPU)


def check_coalesced(rank, check):
    # all_gather_into_tensor and reduce_scatter_tensor, batched: torch calls the backend's
    # *_tensor_coalesced with the whole batch.
    gathered = [torch.empty(SIZE * 3), torch.empty(SIZE * 2, dtype=torch.int64)]
    with dist._coalescing_manager(device=CPU):
        dist.all_gather_into_tensor(gathered[0], torch.full((3,), rank + 0.5))
        dist.all_gather_into_tensor(gathered[1], torch.full((2,), rank * 10, dtype=torch.int64))
    check.equal("coalesced all_gather_into_tensor (float)", gathered[0],
                torch.tensor([r + 0.5 for r in range(SIZE) for _ in range(3)]))
    check.equal("coalesced all_gather_into_tensor (int64)", gathered[1],
                torch.tensor([r * 10 for r in range(SIZE) for _ in range(2)]))
    # (One op for the whole batch: torch's manager applies the first one's to all.)
    scattered = [torch.empty(2), torch.empty(1, dtype=torch.float64)]
    inputs = [torch.arange(2 * SIZE, dtype=torch.float32) * (rank + 1),
              torch.arange(SIZE, dtype=torch.float64) + rank]
    with dist._coalescing_manager(device=CPU):
        dist.reduce_scatter_tensor(scattered[0], inputs[0], op=dist.ReduceOp.MAX)
        dist.reduce_scatter_tensor(scattered[1], inputs[1], op=dist.ReduceOp.MAX)
    check.equal("coalesced reduce_scatter_tensor (first)", scattered[0],
                torch.arange(2 * rank, 2 * rank + 2, dtype=torch.float64) * SIZE)
    check.equal("coalesced reduce_scatter_tensor (second)", scattered[1], torch.tensor([rank + SIZE - 1.0]))
    # all_reduce in a batch, asynchronously: one Work for the batch (allreduce_coalesced).
    tensors = [torch.full((5,), float(rank)), torch.full((3,), rank * 2.0)]
    with dist._coalescing_manager(device=CPU, async_ops=True) as manager:
        for tensor in tensors:
            dist.all_reduce(tensor)
    manager.wait()
    check.equal("coalesced all_reduce (first)", tensors[0], torch.full((5,), float(sum(range(SIZE)))))
    check.equal("coalesced all_reduce (second)", tensors[1], torch.full((3,), 2.0 * sum(range(SIZE))))
    # The backend's own coalescing: operations between start and end come back as one Work.
    backend = backend_of(dist.group.WORLD)
    check.count += 1
    if not backend.supports_coalescing:
        check.failures.append("rank %d: the backend says it cannot coalesce" % rank)


def check_uneven_all_to_all(rank, check):
    # Rank r sends p + 1 elements to rank p, so receives r + 1 from each.
    send_splits = [p + 1 for p in range(SIZE)]
    receive_splits = [rank + 1] * SIZE
    payload = torch.arange(sum(send_splits), dtype=torch.float32) + 100 * rank
    output = torch.empty(sum(receive_splits))
    dist.all_to_all_single(output, payload, receive_splits, send_splits)
    want = []
    offset = sum(range(1, rank + 1))  # where block `rank` starts in every sender's payload
    for sender in range(SIZE):
        want += [100 * sender + offset + i for i in range(rank + 1)]
    check.equal("uneven all_to_all_single", output, torch.tensor(want, dtype=torch.float32))


def check_functional(rank, check):
    group = dist.group.WORLD
    reduced = functional.all_reduce(torch.full((4,), rank + 1.0), "sum", group)
    check.equal("functional all_reduce", reduced, torch.full((4,), float(sum(r + 1 for r in range(SIZE)))))
    gathered = functional.all_gather_tensor(torch.full((2,), float(rank)), 0, group)
    check.equal("functional all_gather_tensor", gathered, torch.tensor([float(r) for r in range(SIZE) for _ in "ab"]))
    scattered = functional.reduce_scatter_tensor(torch.arange(2.0 * SIZE), "sum", 0, group)
    check.equal("functional reduce_scatter_tensor", scattered, torch.arange(2.0 * rank, 2.0 * rank + 2) * SIZE)


def check_groups(rank, check):
    sockets = open_sockets()
    mine, _ = dist.new_subgroups(group_size=2)
    tensor = torch.full((2,), float(rank))
    dist.all_reduce(tensor, group=mine)
    pair = [rank - rank % 2, rank - rank % 2 + 1]
    check.equal("new_subgroups all_reduce", tensor, torch.full((2,), float(sum(pair))))
    # A 2 x 2 mesh: "dp" groups ranks {0, 2} and {1, 3}, "tp" groups {0, 1} and {2, 3}.
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    summed = torch.full((3,), rank + 1.0)
    dist.all_reduce(summed, group=mesh.get_group("dp"))
    check.equal("DeviceMesh dp all_reduce", summed, torch.full((3,), float(rank % 2 + 1 + rank % 2 + 3)))
    gathered = torch.empty(2)
    dist.all_gather_into_tensor(gathered, torch.tensor([rank * 1.0]), group=mesh.get_group("tp"))
    check.equal("DeviceMesh tp all_gather", gathered, torch.tensor(pair, dtype=torch.float32))
    dist.barrier()  # (no rank has begun to split yet)
    check.count += 1
    if open_sockets() > sockets:
        check.failures.append("rank %d: groups opened %d sockets" % (rank, open_sockets() - sockets))
    dist.barrier()
    # ProcessGroup.split_group (what torch's split_group calls once a device is bound, which a
    # CPU-only default group never has): the backend splits its own group. (torch itself clones
    # its store for the split, a new connection to it: not counted.)
    part = dist.group.WORLD.split_group([0, 2], timeout=datetime.timedelta(seconds=60))
    check.count += 1
    if (part is None) != (rank not in (0, 2)):
        check.failures.append("rank %d: split_group gave %s" % (rank, part))
    if part is not None:
        tensor = torch.full((2,), rank + 1.0)
        part.allreduce([tensor]).wait()
        check.equal("all_reduce in a split group", tensor, torch.full((2,), 4.0))
    dist.barrier()


def check_sequence_numbers(rank, check):
    backend = backend_of(dist.group.WORLD)
    backend._set_sequence_number_for_group()
    first = torch_libcomm._C._sequence_number(backend)
    for _ in range(3):
        dist.all_reduce(torch.ones(1))
    dist.broadcast(torch.ones(1), 0)
    check.count += 1
    if (first, torch_libcomm._C._sequence_number(backend)) != (0, 4):
        check.failures.append("rank %d: sequence numbers %d -> %d, want 0 -> 4" %
                              (rank, first, torch_libcomm._C._sequence_number(backend)))


def check_monitored_barrier(rank, check):
    # monitored_barrier: torch's Python lets only Gloo call it, the ProcessGroup's own method
    # reaches the backend. All arrive: it passes; rank 2 stays away: rank 0 names it.
    world = dist.group.WORLD
    world.monitored_barrier(datetime.timedelta(seconds=20), wait_all_ranks=True)
    check.count += 1
    if rank == 0:
        check.raises("monitored_barrier with rank 2 away",
                     lambda: world.monitored_barrier(datetime.timedelta(seconds=1), wait_all_ranks=True),
                     "Rank 2 failed to pass monitoredBarrier")
    elif rank != 2:  # rank 0 gives up, so it releases nobody (as with Gloo)
        check.raises("monitored_barrier that rank 0 gave up",
                     lambda: world.monitored_barrier(datetime.timedelta(seconds=3), wait_all_ranks=True),
                     "rank 0 did not release monitoredBarrier")
    dist.barrier()


def check_group_timeout(rank, check):
    # A group with a 2 s timeout: rank 3 never calls, the others hear of it within seconds. (A
    # timeout stops the group's connections, which its groups share: this comes last.)
    quick = dist.new_group(list(range(SIZE)), timeout=datetime.timedelta(seconds=2))
    if rank != SIZE - 1:
        started = time.monotonic()
        check.raises("all_reduce in a group whose rank 3 never calls",
                     lambda: dist.all_reduce(torch.ones(1), group=quick), "within 2 s")
        check.count += 1
        if time.monotonic() - started > 30:
            check.failures.append("rank %d: the group's 2 s timeout took %.0f s" % (rank, time.monotonic() - started))
    else:
        time.sleep(5)


def check_abort(rank, check):
    # A receive nobody will match, then its group is aborted: the wait fails at once.
    doomed = dist.new_group(list(range(SIZE)))
    work = dist.irecv(torch.empty(1), src=(rank + 1) % SIZE, group=doomed, tag=77)
    backend_of(doomed).abort()
    started = time.monotonic()
    check.raises("a receive on an aborted group", lambda: work.wait(), "abort")
    check.count += 1
    if time.monotonic() - started > 5:
        check.failures.append("rank %d: the aborted receive took %.1f s to fail" % (rank, time.monotonic() - started))


def worker(rank, port, job, results):
    # The abort job also runs under a mixed backend string (CUDA tensors would go to Gloo).
    backend = "libcomm" if job == "main" else "cpu:libcomm,cuda:gloo"
    dist.init_process_group(backend, init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=SIZE)
    check = Checker(rank)
    try:
        if job == "abort":
            check.count += 1
            if dist.get_backend() != backend:
                check.failures.append("rank %d: backend %s" % (rank, dist.get_backend()))
            check_abort(rank, check)
        else:
            check.count += 1
            if dist.get_backend() != backend:
                check.failures.append("rank %d: backend %s" % (rank, dist.get_backend()))
            check_coalesced(rank, check)
            check_uneven_all_to_all(rank, check)
            check_functional(rank, check)
            check_groups(rank, check)
            check_sequence_numbers(rank, check)
            check_monitored_barrier(rank, check)
            check_group_timeout(rank, check)
    except Exception:
        check.failures.append("rank %d: %s" % (rank, traceback.format_exc()))
    results.put((rank, check.count, check.failures))
    dist.destroy_process_group()


def main():
    failed = sum(spawn_and_report(worker, SIZE, (free_port(), job), "%s job," % job) for job in ("main", "abort"))
    print("torch 2.x interface: %s" % ("FAILED" if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
