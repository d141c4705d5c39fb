#!/usr/bin/python3
"""Small-message latency of two or more libcomm builds, A/B in alternating rounds: the 8-byte
send/recv round trip (sendrecv_perf --mode pingpong), all_reduce and barrier over 2 ranks (p50 of each run; the faster of in-place and out-of-place).
What says whether a change costs anything on the hot path, where the machine's drift between
runs is larger than the effect: each round runs every build, in alternating order.

    bench/ab_builds.py [--rounds 40] [--transports shm,tcp] NAME=BUILD[:VAR=VALUE,...] ...

for example `bench/ab_builds.py before=/tmp/old/build after=build off=build:COMM_HANG_REPORT=0`.
Prints, per case and build, the median of the rounds' p50 and the best round, in microseconds.
"""
import argparse
import os
import statistics
import subprocess

COLLECTIVES = ("pingpong", "all_reduce", "barrier")
# The bench and its flags of a case that is not "<name>_perf".
BENCHES = {"pingpong": ("sendrecv_perf", ["--mode", "pingpong"])}


def run_once(build, collective, transport, extra_env, iterations):
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    name, flags = BENCHES.get(collective, (collective + "_perf", []))
    bench = os.path.join(build, "bench", name)
    command = [commrun, "--no-prefix", "-n", "2", bench, "-b", "8", "-e", "8", "-c", "0", "--csv",
               "-n", str(iterations)] + flags
    env = dict(os.environ, COMM_TRANSPORT=transport, **extra_env)
    text = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [line.split(",") for line in text.splitlines()[1:] if line and line[0].isalpha()]
    return min(float(row[10]) for row in rows)  # column 10: p50 in microseconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("builds", nargs="+", help="NAME=BUILD[:VAR=VALUE,...]")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--transports", default="shm")
    parser.add_argument("--iterations", type=int, default=50000)
    options = parser.parse_args()
    variants = {}
    for spec in options.builds:
        name, rest = spec.split("=", 1)
        build, _, settings = rest.partition(":")
        variants[name] = (build, dict(item.split("=", 1) for item in settings.split(",") if item))
    cases = [(collective, transport) for transport in options.transports.split(",") for collective in COLLECTIVES]
    results = {}
    names = list(variants)
    for round_number in range(options.rounds):
        for name in names if round_number % 2 == 0 else names[::-1]:
            build, extra_env = variants[name]
            for collective, transport in cases:
                p50 = run_once(build, collective, transport, extra_env, options.iterations)
                results.setdefault((collective, transport, name), []).append(p50)
    print("| case | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for collective, transport in cases:
        cells = []
        for name in names:
            values = results[(collective, transport, name)]
            cells.append("%.3f (%.2f)" % (statistics.median(values), min(values)))
        print("| %s %s 2 ranks 8 B | %s |" % (collective, transport, " | ".join(cells)))


if __name__ == "__main__":
    main()
