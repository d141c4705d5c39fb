#!/usr/bin/env python3
"""torch's own Flight Recorder analyzer on libcomm's dumps (issue 46): a 4-rank torch job on
backend "libcomm" in which rank 3 never calls the third all_reduce (it sleeps in user code) hangs
(an uneven all_to_all_single and an all_gather of unequal tensors before it, whose sizes differ
by rank);
the ranks dump on the hang verdict (COMM_TRACE_DIR); `python -m torch_libcomm.fr_convert` turns
the dumps into torch's format; torch 2.13's analyzer (`python -m
torch.distributed.flight_recorder.fr_trace`) must then name rank 3 as the missing rank of that
all_reduce. Also: torch_libcomm.dump_trace writes a dump that holds this rank's calls.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_flight_recorder.py
"""
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist

from launchers import run_env_ranks

SIZE = 4


def worker(directory):
    import torch_libcomm
    rank = int(os.environ["RANK"])
    dist.init_process_group("libcomm")
    value = torch.ones(8)
    dist.all_reduce(value)
    dist.all_reduce(value)
    # Called by hand, into a folder of its own: this rank's calls so far.
    path = torch_libcomm.dump_trace(os.path.join(directory, "by_hand"))
    with open(path) as file:
        ops = [entry["op"] for entry in json.load(file)["entries"]]
    print("rank %d dumped by hand: %s" % (rank, ",".join(ops)), flush=True)
    # An uneven all_to_all_single (libcomm's all_to_all_v): its sizes differ by rank, which the
    # analyzer must take as an all-to-all's, not as a mismatch ahead of the hang.
    send_splits = [rank + peer + 1 for peer in range(SIZE)]
    receive_splits = [peer + rank + 1 for peer in range(SIZE)]
    received = torch.zeros(sum(receive_splits))
    dist.all_to_all_single(received, torch.ones(sum(send_splits)), receive_splits, send_splits)
    # An all_gather of unequal tensors (libcomm's all_gather_v, whose entries count each rank's own
    # block): the analysis must go past it to the hang.
    gathered = [torch.zeros(r + 1) for r in range(SIZE)]
    dist.all_gather(gathered, torch.ones(rank + 1))
    if rank == 3:
        time.sleep(9)  # never calls the third all_reduce; the others time out meanwhile
        return 0
    try:
        dist.all_reduce(value)
    except RuntimeError as error:
        print("rank %d failed: %s" % (rank, str(error).splitlines()[0][:200]), flush=True)
        return 0
    print("rank %d: the all_reduce without rank 3 went through" % rank, flush=True)
    return 1


def main():
    failures = []
    with tempfile.TemporaryDirectory(prefix="comm-fr-") as directory:
        os.makedirs(os.path.join(directory, "by_hand"))
        results = run_env_ranks(__file__, SIZE, [directory], COMM_TRACE_DIR=directory, COMM_HANG_REPORT="2",
                                COMM_TIMEOUT="5")
        for rank, (out, code) in enumerate(results):
            if code is None:
                failures.append("rank %d hung" % rank)
            print(out, end="")
            if "rank %d dumped by hand: all_reduce,all_reduce" % rank not in out:
                failures.append("rank %d: the dump by hand does not hold its two all_reduces" % rank)
            if rank != 3 and "rank %d failed:" % rank not in out:
                failures.append("rank %d: the all_reduce did not fail" % rank)
            if "flight recorder written to %s/comm_trace_rank%d.json (hang)" % (directory, rank) not in out:
                failures.append("rank %d did not dump on the hang verdict" % rank)
        dumps = sorted(glob.glob(os.path.join(directory, "comm_trace_rank*.json")))
        if len(dumps) != SIZE:
            failures.append("dumps: %s" % dumps)
        converted = os.path.join(directory, "torch")
        subprocess.run([sys.executable, "-m", "torch_libcomm.fr_convert", directory, converted], check=True)
        analysis = subprocess.run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", converted],
                                  capture_output=True, text=True, timeout=120)
        report = analysis.stdout + analysis.stderr
        print(report)
        if "all_reduce" not in report or "{3}" not in report:
            failures.append("torch's analyzer does not name rank 3 as missing from the all_reduce")
    for failure in failures:
        print("FAIL: " + failure)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        sys.exit(worker(sys.argv[2]))
    sys.exit(main())
