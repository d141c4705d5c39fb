#!/usr/bin/python3
"""What losing a rank costs: time from a SIGKILL to a shrunk group ready on every survivor,
beside the time to start the same job afresh (what tearing down and re-initialising costs at
the least: the restart alone, without reloading anything), in the same run.

Each kill is one job: `commrun --on-failure continue -n N recovery_probe VICTIM`, the victim
drawn at random (rank 0 included); every rank all_reduces in a loop, the victim kills itself
20-80 ms in, the survivors shrink and check an all_reduce on the new group
(bench/recovery_probe.cpp). Recovery = the last survivor's shrink done - the kill; detection =
the last survivor's failure - the kill (one clock: every rank is on this host). The other way,
in the same run: tear-down = from the kill to the end of the same job under commrun's default
(--on-failure teardown: the others are stopped), and restart = the wall time of
`commrun -n N-1 recovery_probe none` (start, init, one all_reduce, exit): a lower bound of
starting again, which reloads nothing. Grown back: under `commrun --restart 1`, the survivors
shrink and then grow by one; the replacement commrun starts joins (COMM_JOIN); from the kill to
the grown group's first all_reduce done on every rank (the replacement's start included).

    bench/recovery.py --build build-release [--ranks 4,8] [--transports shm,tcp] [--kills 100]
"""
import argparse
import os
import random
import re
import statistics
import subprocess
import sys
import time

KILLED = re.compile(r"killed_at=(\d+)")
READY = re.compile(r"failed_at=(\d+) ready_at=(\d+) size=(\d+) correct=(\d)")
GROWN = re.compile(r"grown_at=(\d+) size=(\d+) correct=(\d)")


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def one_kill(build, ranks, transport, victim):
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    probe = os.path.join(build, "bench", "recovery_probe")
    env = dict(os.environ, COMM_TRANSPORT=transport, COMM_HANG_REPORT="0")
    done = subprocess.run([commrun, "--on-failure", "continue", "--no-prefix", "-n", str(ranks), probe, str(victim)],
                          env=env, capture_output=True, text=True, timeout=120)
    killed = KILLED.search(done.stdout)
    survivors = READY.findall(done.stdout)
    if done.returncode != 0 or not killed or len(survivors) != ranks - 1:
        raise RuntimeError("a kill went wrong (exit %d):\n%s%s" % (done.returncode, done.stdout, done.stderr))
    if any(size != str(ranks - 1) or correct != "1" for _, _, size, correct in survivors):
        raise RuntimeError("a survivor's group or sum is wrong:\n" + done.stdout)
    killed_at = int(killed.group(1))
    detection = max(int(failed) for failed, _, _, _ in survivors) - killed_at
    recovery = max(int(ready) for _, ready, _, _ in survivors) - killed_at
    return detection / 1e6, recovery / 1e6


def one_growth(build, ranks, transport, victim):
    """commrun --restart 1: after the shrink the survivors grow by one; the replacement joins.
    From the kill to the grown group's first all_reduce done on every rank."""
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    probe = os.path.join(build, "bench", "recovery_probe")
    env = dict(os.environ, COMM_TRANSPORT=transport, COMM_HANG_REPORT="0")
    done = subprocess.run([commrun, "--restart", "1", "--no-prefix", "-n", str(ranks), probe, str(victim), "grow"],
                          env=env, capture_output=True, text=True, timeout=120)
    killed = KILLED.search(done.stdout)
    grown = GROWN.findall(done.stdout)
    if done.returncode != 0 or not killed or len(grown) != ranks:
        raise RuntimeError("a growth went wrong (exit %d):\n%s%s" % (done.returncode, done.stdout, done.stderr))
    if any(size != str(ranks) or correct != "1" for _, size, correct in grown):
        raise RuntimeError("a grown group's size or sum is wrong:\n" + done.stdout)
    return (max(int(at) for at, _, _ in grown) - int(killed.group(1))) / 1e6


def one_teardown(build, ranks, transport, victim):
    """commrun's default: the kill stops the job; from the kill to commrun's exit."""
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    probe = os.path.join(build, "bench", "recovery_probe")
    env = dict(os.environ, COMM_TRANSPORT=transport, COMM_HANG_REPORT="0")
    done = subprocess.run([commrun, "--no-prefix", "-n", str(ranks), probe, str(victim)], env=env,
                          capture_output=True, text=True, timeout=120)
    ended = time.time_ns()
    killed = KILLED.search(done.stdout)
    if done.returncode == 0 or not killed:
        raise RuntimeError("a torn-down job did not end as expected:\n" + done.stdout + done.stderr)
    return (ended - int(killed.group(1))) / 1e6


def one_restart(build, ranks, transport):
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    probe = os.path.join(build, "bench", "recovery_probe")
    env = dict(os.environ, COMM_TRANSPORT=transport, COMM_HANG_REPORT="0")
    start = time.monotonic()
    done = subprocess.run([commrun, "--no-prefix", "-n", str(ranks), probe, "none"], env=env, capture_output=True,
                          text=True, timeout=120)
    if done.returncode != 0:
        raise RuntimeError("a restart failed:\n" + done.stdout + done.stderr)
    return (time.monotonic() - start) * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build-release")
    parser.add_argument("--ranks", default="4,8")
    parser.add_argument("--transports", default="shm,tcp")
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--restarts", type=int, default=20)
    args = parser.parse_args()
    print("| transport | ranks | kills | detection p50 / p99 / max | recovery p50 / p99 / max | tear-down p50 | "
          "restart of N-1 ranks p50 | (tear-down + restart) / recovery | kill to grown back (a replacement) p50 / max |")
    print("|---|---:|---:|---|---|---:|---:|---:|---|")
    for transport in args.transports.split(","):
        for ranks in (int(r) for r in args.ranks.split(",")):
            detections, recoveries, teardowns, restarts, growths = [], [], [], [], []
            for kill in range(args.kills):
                detection, recovery = one_kill(args.build, ranks, transport, random.randrange(ranks))
                detections.append(detection)
                recoveries.append(recovery)
                # Alternated, so that both see the machine in the same state.
                if kill % max(1, args.kills // args.restarts) == 0:
                    teardowns.append(one_teardown(args.build, ranks, transport, random.randrange(ranks)))
                    growths.append(one_growth(args.build, ranks, transport, random.randrange(ranks)))
                    restarts.append(one_restart(args.build, ranks - 1, transport))
            row = (transport, ranks, len(recoveries), statistics.median(detections), percentile(detections, 0.99),
                   max(detections), statistics.median(recoveries), percentile(recoveries, 0.99), max(recoveries),
                   statistics.median(teardowns), statistics.median(restarts),
                   (statistics.median(teardowns) + statistics.median(restarts)) / statistics.median(recoveries),
                   statistics.median(growths), max(growths))
            print("| %s | %d | %d | %.1f / %.1f / %.1f ms | %.1f / %.1f / %.1f ms | %.0f ms | %.0f ms | %.0fx | "
                  "%.0f / %.0f ms |" % row)
            sys.stdout.flush()


if __name__ == "__main__":
    main()
