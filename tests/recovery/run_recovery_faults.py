#!/usr/bin/env python3
"""The recovery fault suite (issue 32): random SIGKILLs in a training job that goes on.

Each case starts 3 to 6 ranks of comm-recovery-worker's data-parallel training (train mode:
an all_reduce of 1 MiB of exact integer gradients per step; a failed step is redone on the group
shrink() returns, after the survivors agree on the step) over shm, tcp or tcp with connections
on first use (COMM_RECOVERY_TRANSPORT=tcp+lazy draws only those), with a store hosted by this
script (comm-store), and kills one or two ranks with SIGKILL: before a step's all_reduce, during it, or during the shrink that follows another's
death (so several ranks at once, and deaths during the agreement). It asserts: no hang (every
process ends within the case's timeout); every rank that was not killed finishes, all in a group
of the same size, with bitwise identical parameters; their sum is one the step's rule allows (a
dead rank's gradient counts up to the step it died in, one step either way: see
test_recovery.cpp's reference_sums); nothing of the job is left in /dev/shm.

  run_recovery_faults.py WORKER STORE [--cases N] [--seed S]
N defaults to COMM_RECOVERY_CASES or 40 (the long mode: COMM_RECOVERY_CASES=1000). A failure
prints the case's seed; --seed S --cases 1 replays it.
"""
import argparse
import os
import random
import re
import socket
import subprocess
import sys
import time

STEPS = 6
COUNT = 1 << 17  # the worker's parameters


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def per_rank_step_sums(size):
    """sums[rank][step]: what rank's gradient at step takes off the parameters' sum."""
    pattern = [(i % 7) + 1 for i in range(7)]
    repeats, rest = divmod(COUNT, 7)
    sums = []
    for rank in range(size):
        row = []
        for step in range(STEPS):
            total = 0
            for position, value in enumerate(pattern):
                occurrences = repeats + (1 if position < rest else 0)
                total -= occurrences * (((rank + 1) * value * (step + 1)) % 1000)
            row.append(float(total))
        sums.append(row)
    return sums


def allowed_sums(size, deaths):
    """deaths: {rank: the step it died at}; each may count one step less or more."""
    sums = per_rank_step_sums(size)
    options = {0.0}
    for rank in range(size):
        if rank in deaths:
            untils = {max(0, min(STEPS, deaths[rank] + shift)) for shift in (-1, 0, 1)}
        else:
            untils = {STEPS}
        options = {total + sum(sums[rank][:until]) for total in options for until in untils}
    return options


def draw_case(rng):
    size = rng.choice([3, 4, 4, 5, 6])
    transport = rng.choice(["shm", "tcp", "tcp+lazy"])
    transport = os.environ.get("COMM_RECOVERY_TRANSPORT", transport)  # to repeat one kind
    victims = rng.sample(range(size), rng.choice([1, 1, 2]))
    kills = []
    for victim in victims:
        kills.append((victim, rng.randrange(STEPS), rng.choice(["before", "during", "shrink"])))
    return size, transport, kills


def run_case(worker, store_program, seed, timeout):
    rng = random.Random(seed)
    size, transport, kills = draw_case(rng)
    description = "%d ranks, %s, kills %s" % (size, transport, ",".join("%d@%d:%s" % kill for kill in kills))
    port = free_port()
    store = subprocess.Popen([store_program, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    problems = []
    ranks = []
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.02)
        medium, _, connect = transport.partition("+")
        spec = ",".join("%d@%d:%s" % kill for kill in kills)
        for rank in range(size):
            env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                       COMM_TRANSPORT=medium, COMM_CONNECT=connect or "eager", COMM_HANG_REPORT="0")
            ranks.append(subprocess.Popen([worker, "train", str(STEPS), spec], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, start_new_session=True))
        outputs, codes = [], []
        finish_by = time.monotonic() + timeout
        for process in ranks:
            try:
                out, _ = process.communicate(timeout=max(1, finish_by - time.monotonic()))
            except subprocess.TimeoutExpired:
                problems.append("HANG: a rank still runs after %d s" % timeout)
                break
            outputs.append(out)
            codes.append(process.returncode)
        if not problems:
            check(size, kills, outputs, codes, problems)
    finally:
        for process in ranks:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
        store.kill()
        store.wait()
    for entry in os.listdir("/dev/shm"):
        for process in ranks:
            if "-%d-" % process.pid in entry:
                problems.append("left in /dev/shm: " + entry)
    return description, problems, size


def check(size, kills, outputs, codes, problems):
    deaths = {}
    finals = {}
    for rank, (out, code) in enumerate(zip(outputs, codes)):
        if code == 128 + 9 or code == -9:
            # Its step of death: a shrink-time kill died after failing a step, which it printed.
            failed = re.findall(r"step (\d+) failed", out)
            nominal = [step for victim, step, when in kills if victim == rank]
            deaths[rank] = int(failed[-1]) if failed and not any(
                when != "shrink" for victim, _, when in kills if victim == rank) else nominal[0]
            continue
        match = re.search(r"final (\d+) (\d+) sum (\S+)", out)
        if code != 0 or not match:
            problems.append("rank %d ended with %s:\n%s" % (rank, code, out[-int(os.environ.get("COMM_RECOVERY_SHOW", "1500")):]))
            continue
        finals[rank] = (int(match.group(1)), match.group(2), float(match.group(3)))
    if problems:
        return
    if len({final[0] for final in finals.values()}) > 1 or len({final[1] for final in finals.values()}) > 1:
        problems.append("DISAGREEMENT: survivors end in groups or with parameters that differ: %s" % finals)
        return
    if finals:
        group_size, _, total = next(iter(finals.values()))
        # A rank killed during the last step may have given every survivor its part first: it is
        # then still in their group, which never needed to shrink again.
        if not size - len(deaths) <= group_size <= size:
            problems.append("the survivors' group has %d ranks; %d of %d died" % (group_size, len(deaths), size))
        if total not in allowed_sums(size, deaths):
            problems.append("WRONG RESULT: parameters' sum %r is none the deaths %s allow" % (total, deaths))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("worker")
    parser.add_argument("store")
    parser.add_argument("--cases", type=int, default=int(os.environ.get("COMM_RECOVERY_CASES", "40")))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    first = args.seed if args.seed is not None else random.randrange(1 << 30)
    print("recovery fault suite: %d cases from seed %d (replay one: --seed S --cases 1)" % (args.cases, first))
    failed = 0
    started = time.monotonic()
    kinds = {}
    for case in range(args.cases):
        seed = first + case
        description, problems, _ = run_case(args.worker, args.store, seed, args.timeout)
        for kill in re.findall(r":(\w+)", description):
            kinds[kill] = kinds.get(kill, 0) + 1
        if problems:
            failed += 1
            print("FAIL seed %d: %s" % (seed, description))
            for problem in problems:
                print("    " + problem.replace("\n", "\n      "))
        else:
            print("ok   seed %d: %s" % (seed, description))
        sys.stdout.flush()
    print("kills by moment: %s" % ", ".join("%s %d" % item for item in sorted(kinds.items())))
    print("%d of %d cases failed in %.0f s" % (failed, args.cases, time.monotonic() - started))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
