#!/usr/bin/env python3
"""The agreement fault suite (issue 44): shrink's agreement under lists that differ, live ranks
excluded by some, ranks that never call, freeze or die before or during it, checked from outside.

Each case starts 3 to 6 ranks of comm-recovery-worker in mode agree over shm or tcp, with a store
hosted here (comm-store) and COMM_TIMEOUT=2. After a barrier each rank calls shrink with its own
exclude list (the same list for every caller in half the cases; in the rest, lists drawn per
rank, live ranks included), unless it skips the call, freezes (SIGSTOP) or dies (SIGKILL) before
or during it. Each rank that returns prints the membership of its new group as world ranks, or
its error. The invariant, from ULFM's and NCCL's shrink: every rank that returns a group holds
the same membership, and no rank that returned an error is in it. Also: every process that was
not frozen ends within the case's limit (no hang), and nothing of the job stays in /dev/shm.

  run_agreement_faults.py WORKER STORE [--cases N] [--seed S]
N defaults to COMM_AGREEMENT_CASES or 20 (the long mode: 1000). A violation prints the case's
seed and each rank's line; --seed S --cases 1 replays it. Exit status 1 on any violation.
"""
import argparse
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time

from job_store import hosted_store

TIMEOUT_S = 2  # the group's timeout: how long a wait for a silent rank lasts
LIMIT_S = 20   # a case's processes must all end within this (frozen ones are killed after)


def draw_case(rng):
    size = rng.randint(3, 6)
    transport = rng.choice(["shm", "tcp"])
    actions = ["call"] * size
    excludes = [[] for _ in range(size)]
    same_lists = rng.random() < 0.5
    common = sorted(rng.sample(range(size), rng.randint(0, size - 2))) if same_lists else []
    for rank in range(size):
        if same_lists:
            excludes[rank] = [r for r in common if r != rank]
            if rank in common and rng.random() < 0.5:
                actions[rank] = "skip"  # NCCL's rule: an excluded rank does not call
        else:
            others = [r for r in range(size) if r != rank]
            excludes[rank] = sorted(rng.sample(others, rng.randint(0, min(2, len(others)))))
    for _ in range(rng.choice([0, 0, 1, 1, 2])):  # faults on top
        rank = rng.randrange(size)
        actions[rank] = rng.choice(["freeze", "die-before", "die-during:%d" % rng.randint(0, 40)])
    return size, transport, excludes, actions


def run_case(worker, store_program, seed):
    rng = random.Random(seed)
    size, transport, excludes, actions = draw_case(rng)
    description = "%d ranks, %s, %s" % (size, transport, " ".join(
        "%d:%s/%s" % (rank, ",".join(map(str, excludes[rank])) or "-", actions[rank]) for rank in range(size)))
    store = contextlib.ExitStack()
    port = store.enter_context(hosted_store(store_program))
    processes = []
    problems = []
    lines = {}
    try:
        for rank in range(size):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), COMM_TRANSPORT=transport, COMM_HANG_REPORT="0",
                       COMM_TIMEOUT=str(TIMEOUT_S))
            handle, output = tempfile.mkstemp(prefix="comm-agreement-")
            with os.fdopen(handle, "w") as sink:
                process = subprocess.Popen([worker, "agree", ",".join(map(str, excludes[rank])) or "-",
                                            actions[rank]], env=env, stdout=sink, stderr=subprocess.STDOUT,
                                           start_new_session=True)
            processes.append((rank, process, output))
        end = time.monotonic() + LIMIT_S
        for rank, process, _ in processes:
            if actions[rank] == "freeze":
                continue
            try:
                process.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                problems.append("rank %d (%s) still running after %d s: a hang" % (rank, actions[rank], LIMIT_S))
        for rank, process, output in processes:
            with open(output) as text:
                everything = [line.rstrip() for line in text]
            lines[rank] = [line for line in everything if "agree " in line]
            if actions[rank] == "call" and not lines[rank] and process.poll() is not None:
                problems.append("rank %d called shrink and printed no result (exit status %s): %s" %
                                (rank, process.returncode, " | ".join(everything[-3:])[:400]))
    finally:
        for _, process, output in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            os.unlink(output)
        store.close()
    memberships = {}
    errors = set()
    for rank, found in lines.items():
        for line in found:
            match = re.search(r"agree members=([\d,]+)", line)
            if match:
                memberships[rank] = tuple(int(r) for r in match.group(1).split(","))
            elif "agree error" in line:
                errors.add(rank)
    if len(set(memberships.values())) > 1:
        problems.append("two memberships returned: %s" % sorted(set(memberships.values())))
    for rank, members in memberships.items():
        if rank not in members:
            problems.append("rank %d returned a group without itself: %s" % (rank, members))
        wrongly = sorted(set(members) & errors)
        if wrongly:
            problems.append("rank %d's group %s holds ranks that returned an error: %s" % (rank, members, wrongly))
    for pid_prefix in [str(process.pid) for _, process, _ in processes]:
        left = [name for name in os.listdir("/dev/shm") if "-%s-" % pid_prefix in name]
        if left:
            problems.append("left in /dev/shm: %s" % left)
    outcome = " ".join("%d=%s" % (rank, "members " + ",".join(map(str, memberships[rank])) if rank in memberships
                                  else "error" if rank in errors else "-") for rank in sorted(lines))
    return description, outcome, problems, lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("worker")
    parser.add_argument("store")
    parser.add_argument("--cases", type=int, default=int(os.environ.get("COMM_AGREEMENT_CASES", "20")))
    parser.add_argument("--seed", type=int, default=None)
    arguments = parser.parse_args()
    first = arguments.seed if arguments.seed is not None else random.SystemRandom().randrange(1 << 30)
    violations = 0
    started = time.monotonic()
    for case in range(arguments.cases):
        seed = first + case
        description, outcome, problems, lines = run_case(arguments.worker, arguments.store, seed)
        if problems:
            violations += 1
            print("VIOLATION seed %d: %s\n  outcome: %s" % (seed, description, outcome))
            for problem in problems:
                print("  " + problem)
            for rank in sorted(lines):
                for line in lines[rank]:
                    print("  [%d] %s" % (rank, line[:300]))
        else:
            print("ok   seed %d: %s -> %s" % (seed, description, outcome), flush=True)
    print("%d of %d cases violated the agreement in %.0f s" % (violations, arguments.cases,
                                                              time.monotonic() - started))
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
