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

In about half the cases the members of the new group then grow it by 1 or 2, and as many
newcomers (mode agree-join, started with the ranks; sometimes one more than there are places)
join it; a newcomer may die while joining, a member may freeze or die during the growth. The
same invariant holds for the grown group: every rank (member or newcomer) that returns one holds
the same membership, and none that returned an error is in it. Newcomers are named by the RANK
they were started with, from the job's size up.

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
NEWCOMER_GRACE_S = 3  # then newcomers still waiting for a growth are stopped


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
    grow = rng.choice([0, 1, 2]) if rng.random() < 0.5 else 0
    newcomers = []
    if grow:
        newcomers = ["call"] * (grow + (1 if rng.random() < 0.2 else 0))
        if rng.random() < 0.3:
            newcomers[rng.randrange(len(newcomers))] = "die-during:%d" % rng.randint(0, 300)
        callers = [rank for rank in range(size) if actions[rank] == "call"]
        if callers and rng.random() < 0.3:
            actions[rng.choice(callers)] = rng.choice(["freeze-in-grow", "die-in-grow:%d" % rng.randint(0, 100)])
    return size, transport, excludes, actions, grow, newcomers


def printed(output):
    with open(output) as text:
        return [line.rstrip() for line in text]


def frozen(action):
    return action in ("freeze", "freeze-in-grow")


def run_case(worker, store_program, seed):
    rng = random.Random(seed)
    size, transport, excludes, actions, grow, newcomers = draw_case(rng)
    description = "%d ranks, %s, %s" % (size, transport, " ".join(
        "%d:%s/%s" % (rank, ",".join(map(str, excludes[rank])) or "-", actions[rank]) for rank in range(size)))
    if grow:
        description += ", grow %d, newcomers %s" % (grow, " ".join(
            "%d:%s" % (size + index, action) for index, action in enumerate(newcomers)))
    store = contextlib.ExitStack()
    port = store.enter_context(hosted_store(store_program))
    processes = []
    problems = []
    lines = {}
    try:
        every = [(rank, ["agree", ",".join(map(str, excludes[rank])) or "-", actions[rank], str(grow)])
                 for rank in range(size)]
        every += [(size + index, ["agree-join", action]) for index, action in enumerate(newcomers)]
        for rank, arguments in every:
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), COMM_TRANSPORT=transport, COMM_HANG_REPORT="0",
                       COMM_TIMEOUT=str(TIMEOUT_S))
            handle, output = tempfile.mkstemp(prefix="comm-agreement-")
            with os.fdopen(handle, "w") as sink:
                process = subprocess.Popen([worker] + arguments, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                           start_new_session=True)
            processes.append((rank, process, output))
        action_of = actions + newcomers
        end = time.monotonic() + LIMIT_S
        for rank, process, _ in processes[:size]:
            if frozen(actions[rank]):
                continue
            try:
                process.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                problems.append("rank %d (%s) still running after %d s: a hang" % (rank, actions[rank], LIMIT_S))
        # Newcomers wait for a growth until the store's timeout; once the members are done none
        # can open, so a newcomer still waiting then is stopped, unless a growth went through.
        end = time.monotonic() + NEWCOMER_GRACE_S
        for rank, process, output in processes[size:]:
            try:
                process.wait(timeout=max(0.1, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                if any("agree grown members=" in line for _, _, other in processes for line in printed(other)):
                    problems.append("newcomer %d (%s) still running after the growth went through: a hang" %
                                    (rank, action_of[rank]))
        for rank, process, output in processes:
            everything = printed(output)
            lines[rank] = [line for line in everything if "agree " in line]
            finished = process.poll() is not None
            if action_of[rank] == "call" and finished and not any("agree" in line for line in everything):
                problems.append("rank %d (%s) printed no result (exit status %s): %s" %
                                (rank, "newcomer" if rank >= size else "member", process.returncode,
                                 " | ".join(everything[-3:])[:400]))
    finally:
        for _, process, output in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            os.unlink(output)
        store.close()
    outcomes = []
    for stage, label in (("agree", "shrink"), ("agree grown", "grow")):
        memberships = {}
        errors = set()
        for rank, found in lines.items():
            for line in found:
                match = re.search(r"%s members=([\d,]+)" % stage, line)
                if match:
                    memberships[rank] = tuple(int(r) for r in match.group(1).split(","))
                elif "%s error" % stage in line:
                    errors.add(rank)
        if len(set(memberships.values())) > 1:
            problems.append("%s: two memberships returned: %s" % (label, sorted(set(memberships.values()))))
        for rank, members in memberships.items():
            if rank not in members:
                problems.append("%s: rank %d returned a group without itself: %s" % (label, rank, members))
            wrongly = sorted(set(members) & errors)
            if wrongly:
                problems.append("%s: rank %d's group %s holds ranks that returned an error: %s" %
                                (label, rank, members, wrongly))
        if stage == "agree" or grow:
            outcomes.append(label + " " + " ".join(
                "%d=%s" % (rank, "members " + ",".join(map(str, memberships[rank])) if rank in memberships
                           else "error" if rank in errors else "-") for rank in sorted(lines)))
    for pid_prefix in [str(process.pid) for _, process, _ in processes]:
        left = [name for name in os.listdir("/dev/shm") if "-%s-" % pid_prefix in name]
        if left:
            problems.append("left in /dev/shm: %s" % left)
    return description, "; ".join(outcomes), problems, lines


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
