#!/usr/bin/python3
"""A job of thousands of ranks on one machine: PROCESSES processes of THREADS ranks each
(bench/many_ranks.cpp), every rank over TCP, joined through rank 0's store. Prints the wall time
from launch to the last exit, the slowest join, the first all_reduce (checked on every rank),
and the sockets per rank once all have joined (before any collective): a listener, a store
client and the connections. COMM_CONNECT=lazy (connections on first use) unless --eager.

    /usr/bin/python3 bench/many_ranks.py --build build-release --processes 8 --threads 128
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import time

LINE = re.compile(r"many_ranks first=(\d+) threads=(\d+) joined_s=([\d.]+) first_collective_s=([\d.]+) "
                  r"sockets=(-?\d+) wrong=(\d+) failed=(\d+)")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--threads", type=int, default=128)
    parser.add_argument("--eager", action="store_true", help="every connection at init (COMM_CONNECT=eager)")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    world = args.processes * args.threads
    port = free_port()
    binary = os.path.join(args.build, "bench", "many_ranks")
    env = dict(os.environ, COMM_CONNECT="eager" if args.eager else "lazy", COMM_HANG_REPORT="0")
    start = time.monotonic()
    processes = [subprocess.Popen([binary, str(port), str(world), str(p * args.threads), str(args.threads)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for p in range(args.processes)]
    results, failures = [], []
    for process in processes:
        try:
            out, err = process.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            sys.exit("timed out after %.0f s" % args.timeout)
        match = LINE.search(out)
        if process.returncode != 0 or not match:
            failures.append((process.returncode, (out + err)[-1500:]))
        if match:
            results.append(match)
    wall = time.monotonic() - start
    for code, text in failures:
        print("a process failed (exit %s):\n%s" % (code, text), file=sys.stderr)
    if not results:
        sys.exit(1)
    joined = max(float(m.group(3)) for m in results)
    collective = max(float(m.group(4)) for m in results)
    sockets = sum(int(m.group(5)) for m in results) / float(sum(int(m.group(2)) for m in results))
    wrong = sum(int(m.group(6)) for m in results)
    print("%d ranks (%d processes x %d threads, %s): wall %.2f s, slowest join %.2f s, first all_reduce done "
          "%.2f s, %.1f sockets per rank after join (a listener, a store client, connections), %d wrong" %
          (world, args.processes, args.threads, "eager" if args.eager else "lazy", wall, joined, collective,
           sockets, wrong))
    sys.exit(1 if failures or wrong else 0)


if __name__ == "__main__":
    main()
