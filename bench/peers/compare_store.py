#!/usr/bin/python3
"""Runs bench/store_perf and torch's TCPStore (torch_store_perf.py) alternately, several rounds
in one go (this machine is noisy: compare only figures taken side by side), and prints a
markdown table of the medians over the rounds.

    /usr/bin/python3 bench/peers/compare_store.py [--rounds 3] [--build build] [-- extra args...]
"""
import argparse
import csv
import io
import os
import resource
import statistics
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))


def run(command):
    output = subprocess.run(command, check=True, capture_output=True, text=True, timeout=600).stdout
    return list(csv.DictReader(io.StringIO(output)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", default="build")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    commands = {
        "libcomm": [os.path.join(args.build, "bench", "store_perf"), "--csv"] + args.extra,
        "torch 1.13 TCPStore": [sys.executable, os.path.join(here, "torch_store_perf.py")] + args.extra,
    }
    results = {name: [] for name in commands}
    for round_number in range(args.rounds):
        for name, command in commands.items():
            print(f"round {round_number + 1}: {name}", file=sys.stderr, flush=True)
            results[name].append(run(command))

    def median(name, test, clients, column):
        values = [float(row[column]) for rows in results[name] for row in rows
                  if row["test"] == test and row["clients"] == clients and row[column]]
        return statistics.median(values) if values else float("nan")

    first = results["libcomm"][0]
    print(f"medians of {args.rounds} alternating rounds\n")
    print("| test | clients | libcomm requests/s | torch requests/s | libcomm p50 / p99 us (set+get) "
          "| torch p50 / p99 us (set+get) |")
    print("|---|---|---|---|---|---|")
    for row in first:
        test, clients = row["test"], row["clients"]
        if test != "set_get":
            continue
        lib = [median("libcomm", test, clients, c) for c in ("requests_per_s", "p50_us", "p99_us")]
        ref = [median("torch 1.13 TCPStore", test, clients, c) for c in ("requests_per_s", "p50_us", "p99_us")]
        print(f"| set+get | {clients} | {lib[0]:.0f} | {ref[0]:.0f} | {lib[1]:.0f} / {lib[2]:.0f} "
              f"| {ref[1]:.0f} / {ref[2]:.0f} |")
    print("\n| test | clients | libcomm ms | torch ms |\n|---|---|---|---|")
    for row in first:
        test, clients = row["test"], row["clients"]
        if test == "set_get":
            continue
        print(f"| {test} | {clients} | {median('libcomm', test, clients, 'total_ms'):.1f} "
              f"| {median('torch 1.13 TCPStore', test, clients, 'total_ms'):.1f} |")


if __name__ == "__main__":
    main()
