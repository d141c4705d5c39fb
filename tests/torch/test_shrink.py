#!/usr/bin/env python3
"""torch.distributed.shrink_group on libcomm (issue 32): 4 ranks (processes started here, env://,
rank 0's TCPStore), rank 2 killed with SIGKILL after a first all_reduce; the survivors' next
all_reduce fails with an error naming rank 2, they call dist.shrink_group([2]) and the shrunk
group (the new default group) all_reduces right, and so does a new_group made after it (in the
shrunk group's numbers, over the shrunk group's connections: no new socket over tcp), over shm
and over tcp. Also: the backend says it
supports shrinking, and a rank that is not dead but listed is left out all the same.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_shrink.py
"""
import os
import re
import signal
import subprocess
import sys

import torch
import torch.distributed as dist

from launchers import free_port, open_sockets, quiet_environment

SIZE = 4


def worker():
    import torch_libcomm  # noqa: F401  (registers the backend)
    rank = int(os.environ["RANK"])
    dist.init_process_group("libcomm")
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    print("rank %d supports_shrinking=%s" % (rank, backend.supports_shrinking), flush=True)
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    assert value.item() == 10.0, value
    if rank == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        dist.all_reduce(torch.tensor([1.0]))
        print("rank %d: the all_reduce without rank 2 went through" % rank, flush=True)
        return 1
    except RuntimeError as error:
        print("rank %d failed: %s" % (rank, str(error).splitlines()[0][:300]), flush=True)
    shrunk = dist.shrink_group([2])
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)  # the default group is the shrunk one now
    mine = torch.tensor([float(rank + 1)])
    dist.all_reduce(mine, group=shrunk)
    print("rank %d shrunk: rank %d of %d, sums %g %g" % (rank, dist.get_rank(), dist.get_world_size(), value.item(),
                                                         mine.item()), flush=True)
    # Groups made after the shrink number their ranks from the shrunk default group: new ranks 1
    # and 2 are old ranks 1 and 3 (made from the old world, they would be 1 and the dead 2).
    sockets_before = open_sockets()
    pair = dist.new_group([1, 2])
    if os.environ["COMM_TRANSPORT"] == "tcp":  # a group of the shrunk world's, on its connections
        print("rank %d pair: %d new sockets" % (rank, open_sockets() - sockets_before), flush=True)
    if dist.get_rank() in (1, 2):
        mine = torch.tensor([float(dist.get_rank() + 1)])
        dist.all_reduce(mine, group=pair)
        print("rank %d pair: sum %g" % (rank, mine.item()), flush=True)
    dist.barrier()  # rank 0 hosts the store the pair's members still use
    dist.destroy_process_group()
    return 0


def run(transport):
    port = free_port()
    ranks = []
    for rank in range(SIZE):
        env = quiet_environment(RANK=str(rank), WORLD_SIZE=str(SIZE), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                COMM_TRANSPORT=transport, COMM_HANG_REPORT="0")
        ranks.append(subprocess.Popen([sys.executable, __file__, "worker"], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    failures = []
    outputs = []
    for rank, process in enumerate(ranks):
        try:
            out, _ = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
            failures.append("rank %d hung" % rank)
        outputs.append(out)
        if rank == 2:
            if process.returncode != -signal.SIGKILL:
                failures.append("rank 2 ended with %s, not SIGKILL" % process.returncode)
            continue
        new_rank = rank if rank < 2 else rank - 1
        expected = [
            "rank %d supports_shrinking=True" % rank,
            "rank %d failed:" % rank,
            "rank %d shrunk: rank %d of 3, sums 7 7" % (rank, new_rank),  # 1 + 2 + 4
        ] + (["rank %d pair: sum 5" % rank] if new_rank in (1, 2) else [])
        if transport == "tcp":
            expected.append("rank %d pair: 0 new sockets" % rank)
        if process.returncode != 0:
            failures.append("rank %d exited with %s" % (rank, process.returncode))
        for line in expected:
            if line not in out:
                failures.append("rank %d: no '%s'" % (rank, line))
        failure = re.search(r"^rank %d failed: (.*)$" % rank, out, re.M)
        if not failure or "rank 2" not in failure.group(1):
            failures.append("rank %d: the failure does not name rank 2" % rank)
    for failure in failures:
        print("FAIL %s: %s" % (transport, failure))
    if failures:
        for rank, out in enumerate(outputs):
            print("--- rank %d:\n%s" % (rank, out[-2000:]))
    else:
        print("ok   %s: rank 2 killed, the three shrank and all_reduced" % transport)
    return len(failures)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker())
    sys.exit(1 if sum(run(transport) for transport in ("shm", "tcp")) else 0)
