#!/usr/bin/python3
"""Instructions per call on the calling thread, outside the waits: what an 8-byte ping-pong,
all_reduce and barrier cost in libcomm's own code, counted by callgrind, which is exact where
wall-clock time on a shared 2-core machine is not. A change that adds work to the hot path shows
here in its author's own run; the figures are compared with the checked-in baseline.

    bench/hot_path_instructions.py [--build build-release] [--baseline bench/hot_path_baseline.json]
                                   [--update] [--transports shm,tcp] [--breakdown] [--cases a,b]

How it counts: two ranks under `valgrind --tool=callgrind`, collection switched on inside the
public call (ProcessGroup::send/recv, all_reduce, barrier) and off again inside the waits
(Completion::wait_for, the shared-memory algorithms' wait_for_peer), so polls that find nothing
are not counted; in the ping-pong, the arrival's matching and completion inside the wait are. Two runs of different lengths per case; their difference over the difference
in iterations is the cost of one iteration (a ping-pong: one send and one receive on rank 0),
free of set-up and warm-up. --breakdown prints each case's cost function by function (self
instructions per iteration, from callgrind_annotate on the same two runs). Needs valgrind
(Debian's `valgrind`); a release build measures what users run
(`meson setup build-release --buildtype=release`).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

WAITS = ["comm::detail::Completion::wait_for*", "comm::algorithms::*wait_for_peer*"]
# Inside a wait, what a message's arrival does once its bytes are read (matching it, completing
# the receive): the polls that found nothing stay uncounted. Only in the ping-pong: there every
# arrival is handled inside a wait (a collective's poll() can also meet one outside, where the
# toggle would switch collection off instead).
ARRIVAL = ["comm::transport::FrameReceiver::on_message*",
           "comm::transport::FrameReceiver::on_header*",
           "comm::transport::FrameReceiver::on_payload*"]
CASES = {  # name: (bench, extra flags, entry functions)
    "pingpong": ("sendrecv_perf", ["--mode", "pingpong"],
                 ["comm::ProcessGroup::send*", "comm::ProcessGroup::recv*"] + ARRIVAL),
    "all_reduce": ("all_reduce_perf", ["--mode", "in-place"], ["comm::ProcessGroup::all_reduce*"]),
    "barrier": ("barrier_perf", [], ["comm::ProcessGroup::barrier*"]),
    # The same calls prepared once (ProcessGroup::prepare) and run each iteration.
    "all_reduce persistent": ("all_reduce_perf", ["--mode", "persistent"], ["comm::PreparedCall::run*"]),
    "barrier persistent": ("barrier_perf", ["--mode", "persistent"], ["comm::PreparedCall::run*"]),
}
SHORT, LONG = 400, 1400


def instructions(build, transport, case, iterations, scratch):
    bench, flags, entries = CASES[case]
    out = os.path.join(scratch, f"{case}-{transport}-{iterations}")
    command = [os.path.join(build, "rendezvous", "programs", "commrun"), "--no-prefix", "-n", "2",
               "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}.%q{{RANK}}"]
    command += [f"--toggle-collect={function}" for function in entries + WAITS]
    command += [os.path.join(build, "bench", bench), "-b", "8", "-e", "8", "-c", "0", "-w", "10",
                "-n", str(iterations)] + flags
    env = dict(os.environ, COMM_TRANSPORT=transport)
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=600)
    with open(out + ".0") as profile:
        return int(re.search(r"^summary: (\d+)", profile.read(), re.M).group(1)), out + ".0"


def self_costs(profile):
    """{function: self instructions} of one callgrind profile."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100", profile],
                          capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+)\s+(?:\([\s\d.]+%\)\s+)?(\S.*?)(?:\s\[.*\])?$", line)
        if match and "PROGRAM TOTALS" not in line:
            name = match.group(2).replace("???:", "")
            costs[name] = costs.get(name, 0) + int(match.group(1).replace(",", ""))
    return costs


def print_breakdown(name, short_profile, long_profile):
    short, long = self_costs(short_profile), self_costs(long_profile)
    rows = sorted(((long.get(f, 0) - short.get(f, 0)) / (LONG - SHORT), f) for f in set(short) | set(long))
    print(f"\n{name}: instructions per iteration, by function (self)")
    for cost, function in reversed(rows):
        if cost >= 3:
            print(f"{cost:8.0f}  {function[:150]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default="build")
    parser.add_argument("--baseline", default=os.path.join(os.path.dirname(__file__), "hot_path_baseline.json"))
    parser.add_argument("--update", action="store_true", help="write this run's figures as the baseline")
    parser.add_argument("--transports", default="shm,tcp")
    parser.add_argument("--breakdown", action="store_true", help="each case's cost by function")
    parser.add_argument("--cases", default=",".join(CASES), help="which cases (default: all)")
    args = parser.parse_args()
    baseline = {}
    if os.path.exists(args.baseline):
        with open(args.baseline) as file:
            baseline = json.load(file).get("instructions", {})
    now = {}
    with tempfile.TemporaryDirectory(prefix="comm-hot-path-") as scratch:
        for transport in args.transports.split(","):
            for case in args.cases.split(","):
                short, short_profile = instructions(args.build, transport, case, SHORT, scratch)
                long, long_profile = instructions(args.build, transport, case, LONG, scratch)
                now[f"{case} {transport}"] = round((long - short) / (LONG - SHORT))
                if args.breakdown:
                    print_breakdown(f"{case} {transport}", short_profile, long_profile)
    print("| 8 bytes, 2 ranks, per call on rank 0 | baseline | now | change |\n|---|---:|---:|---:|")
    grown = []
    for name, count in now.items():
        before = baseline.get(name)
        change = f"{(count - before) / before:+.1%}" if before else ""
        print(f"| {name} | {before if before else ''} | {count} | {change} |")
        if before and count > before * 1.05:
            grown.append(name)
    if grown:
        print("\nmore than 5% above the baseline: " + ", ".join(grown) +
              " (callgrind_annotate on the profiles says where; see docs/design/latency.md)")
    if args.update:
        with open(args.baseline, "w") as file:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
            json.dump({"measured": f"{args.build} at {commit}; valgrind's callgrind, instructions per call",
                       "instructions": now}, file, indent=2)
            file.write("\n")
        print(f"\nbaseline written: {args.baseline}")


if __name__ == "__main__":
    sys.exit(main())
