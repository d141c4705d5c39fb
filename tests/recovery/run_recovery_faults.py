#!/usr/bin/env python3
"""The recovery fault suite (issue 32): random SIGKILLs in a training job that goes on.

Each case starts 3 to 6 ranks of comm-recovery-worker's data-parallel training (train mode:
an all_reduce of 1 MiB of exact integer gradients per step; a failed step is redone on the group
shrink() returns, after the survivors agree on the step) over shm, tcp or tcp with connections
on first use (COMM_RECOVERY_TRANSPORT=tcp+lazy draws only those), with a store hosted by this
script (comm-store), and kills one or two ranks with SIGKILL: before a step's all_reduce, during
it, during the shrink that follows another's death (so several ranks at once, and deaths during
the agreement), or during a grow. Half the cases allow replacements (COMM_RESTARTS=1 or 2): this
script starts a newcomer for each rank that dies or fails, as commrun --restart does, and the
survivors grow back; a newcomer may be killed too (as it joins, or in a step). It asserts: no
hang (every process ends within the case's timeout); every rank that was not killed finishes
(newcomers that never joined aside), all in a group of the same size, with bitwise identical
parameters; their sum is one the deaths allow (each rank's gradient counts from the step it
joined at to the step it died in, one step either way: see test_recovery.cpp's reference_sums);
nothing of the job is left in /dev/shm.

  run_recovery_faults.py WORKER STORE [--cases N] [--seed S]
N defaults to COMM_RECOVERY_CASES or 40 (the long mode: COMM_RECOVERY_CASES=1000). A failure
prints the case's seed; --seed S --cases 1 replays it.
"""
import argparse
import contextlib
import os
import random
import re
import subprocess
import sys
import tempfile
import time

from job_store import hosted_store

STEPS = 6
COUNT = 1 << 17  # the worker's parameters


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


def allowed_sums(contributions):
    """contributions: {identity: (first step, {steps it may count up to})}: each identity's
    gradient counts at steps first..until-1, for one of its untils."""
    identities = max(contributions) + 1 if contributions else 0
    sums = per_rank_step_sums(identities)
    options = {0.0}
    for identity, (first, untils) in contributions.items():
        options = {total + sum(sums[identity][first:max(first, until)]) for total in options for until in untils}
    return options


def draw_case(rng):
    size = rng.choice([3, 4, 4, 5, 6])
    transport = rng.choice(["shm", "tcp", "tcp+lazy"])
    transport = os.environ.get("COMM_RECOVERY_TRANSPORT", transport)  # to repeat one kind
    # Replacements: the survivors grow back by the ranks lost, up to this many in all.
    restarts = rng.choice([0, 0, 1, 2])
    victims = rng.sample(range(size), rng.choice([1, 1, 2]))
    moments = ["before", "during", "shrink"] + (["grow", "grow"] if restarts else [])
    kills = []
    for victim in victims:
        kills.append((victim, rng.randrange(STEPS), rng.choice(moments)))
    if restarts and rng.random() < 0.4:  # a newcomer dies too: as it joins, or in a step
        kills.append((size + rng.randrange(restarts), rng.randrange(STEPS), rng.choice(["join", "before", "during"])))
    return size, transport, restarts, kills


def run_case(worker, store_program, seed, timeout):
    rng = random.Random(seed)
    size, transport, restarts, kills = draw_case(rng)
    description = "%d ranks, %s, %d restarts, kills %s" % (size, transport, restarts,
                                                           ",".join("%d@%d:%s" % kill for kill in kills))
    store = contextlib.ExitStack()
    port = store.enter_context(hosted_store(store_program))
    problems = []
    processes = []  # (identity, Popen, output file)
    try:
        medium, _, connect = transport.partition("+")
        spec = ",".join("%d@%d:%s" % kill for kill in kills)

        def start(identity, mode):
            env = dict(os.environ, RANK=str(identity), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port), COMM_TRANSPORT=medium, COMM_CONNECT=connect or "eager",
                       COMM_HANG_REPORT="0", COMM_RESTARTS=str(restarts))
            # The child appends (its own open file): reading here never moves where it writes.
            handle, output = tempfile.mkstemp(prefix="comm-recovery-")
            os.close(handle)
            with open(output, "a") as sink:
                process = subprocess.Popen([worker, mode, str(STEPS), spec], env=env, stdout=sink,
                                           stderr=subprocess.STDOUT, text=True, start_new_session=True)
            processes.append((identity, process, output))

        for rank in range(size):
            start(rank, "train")
        # As commrun --restart does: a newcomer for each rank that dies or fails, up to `restarts`.
        replaced, ended = 0, set()
        finish_by = time.monotonic() + timeout
        while True:
            for identity, process, _ in list(processes):
                if identity in ended or process.poll() is None:
                    continue
                ended.add(identity)
                if process.returncode != 0 and replaced < restarts:
                    start(size + replaced, "train-join")
                    replaced += 1
            members_running = [process for identity, process, output in processes
                               if process.poll() is None and (identity < size or "joined at" in read(output))]
            if not members_running:
                break  # newcomers still waiting for a growth will get none
            if time.monotonic() > finish_by:
                problems.append("HANG: a rank still runs after %d s" % timeout)
                break
            time.sleep(0.01)
        cleaned = set()
        for identity, process, _ in processes:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
                cleaned.add(identity)
        ended = [(identity, read(output), process.returncode, identity in cleaned)
                 for identity, process, output in processes]
        if os.environ.get("COMM_RECOVERY_VERBOSE"):
            for identity, out, code, cleaned_up in ended:
                print("--- %d (exit %s%s):\n%s" % (identity, code, ", cleaned up" if cleaned_up else "", out))
        if not problems:
            check(size, kills, ended, problems)
    finally:
        for _, process, output in processes:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
            os.unlink(output)
        store.close()
    for entry in os.listdir("/dev/shm"):
        for _, process, _ in processes:
            if "-%d-" % process.pid in entry:
                problems.append("left in /dev/shm: " + entry)
    return description, problems, size


def read(output):
    with open(output) as text:
        return text.read()


def check(size, kills, ended, problems):
    """ended: (identity, output, exit code, cleaned up here) of every process, newcomers included
    (identities size and up)."""
    contributions = {}
    finals = {}
    deaths = 0
    show = int(os.environ.get("COMM_RECOVERY_SHOW", "1500"))
    for identity, out, code, cleaned in ended:
        newcomer = identity >= size
        joined = re.search(r"joined at step (\d+)", out)
        first = int(joined.group(1)) if joined else 0
        if newcomer and not joined:
            # It never took part: killed as it joined, left without the state, or waited for a
            # growth that never came (cleaned up).
            if not cleaned and code not in (-9, 128 + 9, 3):
                problems.append("newcomer %d ended with %s:\n%s" % (identity, code, out[-show:]))
            continue
        if code in (-9, 128 + 9):
            deaths += 1
            # Its step of death: a kill at a shrink or grow struck after a step failed, which it
            # printed; a kill in a step struck in that step.
            failed = re.findall(r"step (\d+) failed", out)
            moments = [when for victim, _, when in kills if victim == identity]
            nominal = [step for victim, step, _ in kills if victim == identity]
            if failed and all(when in ("shrink", "grow") for when in moments):
                died = int(failed[-1])
            else:
                died = nominal[0] if nominal else first
            contributions[identity] = (first, {max(first, min(STEPS, died + shift)) for shift in (-1, 0, 1)})
            continue
        match = re.search(r"final (\d+) (\d+) sum (\S+)", out)
        if cleaned or code != 0 or not match:
            problems.append("rank %d ended with %s:\n%s" % (identity, "a hang" if cleaned else code, out[-show:]))
            continue
        finals[identity] = (int(match.group(1)), match.group(2), float(match.group(3)))
        contributions[identity] = (first, {STEPS})
    if problems:
        return
    if len({final[0] for final in finals.values()}) > 1 or len({final[1] for final in finals.values()}) > 1:
        problems.append("DISAGREEMENT: survivors end in groups or with parameters that differ: %s" % finals)
        return
    if finals:
        group_size, _, total = next(iter(finals.values()))
        # A rank killed during the last step may have given every survivor its part first: it is
        # then still in their group, which never needed to shrink again.
        if not len(finals) <= group_size <= len(finals) + deaths:
            problems.append("the survivors' group has %d ranks; %d finished, %d died" % (group_size, len(finals),
                                                                                      deaths))
        if total not in allowed_sums(contributions):
            problems.append("WRONG RESULT: parameters' sum %r is none the contributions %s allow" %
                            (total, contributions))


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
