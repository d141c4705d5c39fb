#!/usr/bin/python3
"""broadcast and reduce on 2 network-namespace hosts holding alternating ranks (0 and 2 on one, 1 and
3 on the other), where the flat chain 0 -> 1 -> 2 -> 3 crosses the link three times: ring against
hierarchical against what the tuner picks, side by side on one tc-limited link (cluster_bench.py's
Cluster), rank 0's --csv rows and the tuner's log line. Needs root and iproute2.

    /usr/bin/python3 bench/alternating_hosts.py --build build --rate 1gbit --runs 2
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cluster_bench  # noqa: E402


def run(cluster, build, collective, algorithm):
    port = 29700 + random.randrange(200)
    processes = []
    for rank in range(4):
        environment = {"RANK": str(rank), "WORLD_SIZE": "4", "MASTER_ADDR": cluster.addresses[0],
                       "MASTER_PORT": str(port), "COMM_JOB_TOKEN": "alternating-hosts-%d-%d" % (os.getpid(), port),
                       "COMM_LOG_LEVEL": "info" if rank == 0 else "warn"}
        processes.append(cluster.exec(rank % 2, [os.path.join(build, "bench", collective + "_perf"), "-b", "4M", "-e",
                                                 "64M", "-f", "4", "-n", "5", "-w", "2", "--csv", "-a", algorithm],
                                      environment))
    outputs = cluster_bench.wait_all(processes, 600)
    if any(code != 0 for code, _ in outputs):
        print("%s %s failed:\n%s" % (collective, algorithm, "".join(out[-1500:] for _, out in outputs)),
              file=sys.stderr)
    for line in outputs[0][1].splitlines():
        fields = line.split(",")
        if len(fields) >= 14 and fields[0] == collective:
            print("%-9s %-12s %10s B %12s us  ran %s" % (collective, algorithm, fields[4], fields[10], fields[2]),
                  flush=True)
        elif "comm.algo info" in line and "67108864 bytes" in line:
            print("    " + line.strip(), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--rate", default="1gbit", help="each host's link each way, tc's units")
    parser.add_argument("--runs", type=int, default=2, help="rounds; the algorithms alternate order")
    arguments = parser.parse_args()
    cluster_bench.parse_rate(arguments.rate)
    algorithms = ["ring", "hierarchical", "auto"]
    with cluster_bench.Cluster(2, arguments.rate) as cluster:
        for round_number in range(arguments.runs):
            for collective in ("broadcast", "reduce"):
                for algorithm in algorithms if round_number % 2 == 0 else list(reversed(algorithms)):
                    run(cluster, os.path.abspath(arguments.build), collective, algorithm)


if __name__ == "__main__":
    main()
