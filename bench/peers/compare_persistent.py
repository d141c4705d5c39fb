#!/usr/bin/python3
"""Persistent calls side by side (issue 47): the 8-byte all_reduce and the barrier over shared
memory on 2 ranks, as libcomm's ordinary call, as the same call prepared once
(ProcessGroup::prepare, run each iteration) and as Open MPI 4.1's (shared memory), alternating
rounds in one run. Medians and bests of the per-round p50s, and the issue's targets
(persistent all_reduce <= 0.2 us, barrier <= 0.12 us) judged on both.

    apt-get install -y openmpi-bin libopenmpi-dev
    /usr/bin/python3 bench/peers/compare_persistent.py [--rounds 5] [--build build-release] [--peers ../shared/peers]
"""
import os
import sys

from compare_collectives import mpi
from side_by_side import arguments, compile_peer, output, print_targets, summarise


def libcomm(build, mode):
    """{'all_reduce': p50 us, 'barrier': p50 us} of one run of each bench in `mode`."""
    env = dict(os.environ, COMM_TRANSPORT="shm")
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    result = {}
    for collective, row_mode in (("all_reduce", "in-place"), ("barrier", "out-place")):
        bench = os.path.join(build, "bench", collective + "_perf")
        text = output([commrun, "--no-prefix", "-n", "2", bench, "-b", "8", "-e", "8", "-c", "0", "-n", "100000",
                       "-w", "2000", "--csv", "--mode", mode if mode == "persistent" else row_mode], env)
        result[collective] = float(text.splitlines()[1].split(",")[10])
    return result


def main():
    args = arguments()
    mpi_binary = compile_peer(args.peers, "mpi_coll_bench")
    runs = {"libcomm, ordinary call": [], "libcomm, persistent call": [], "Open MPI shm": []}
    for round_number in range(args.rounds):
        print(f"round {round_number + 1}", file=sys.stderr, flush=True)
        runs["libcomm, ordinary call"].append(libcomm(args.build, "ordinary"))
        runs["libcomm, persistent call"].append(libcomm(args.build, "persistent"))
        peer = mpi(mpi_binary, False)
        runs["Open MPI shm"].append({"all_reduce": peer[("all_reduce", 8)][0], "barrier": peer[("barrier", 0)][0]})

    def figure(name, key):
        return summarise([run[key] for run in runs[name]], higher_is_better=False)

    for which, title in ((0, "medians"), (1, "bests")):
        print(f"\n{title} of {args.rounds} alternating rounds (p50 of each round, microseconds), 2 ranks, shm\n")
        print("| | 8 B all_reduce | barrier |\n|---|---:|---:|")
        for name in runs:
            print(f"| {name} | {figure(name, 'all_reduce')[which]:.3f} | {figure(name, 'barrier')[which]:.3f} |")
    fixed = lambda value: (value, value)  # an absolute target
    print_targets([
        ("persistent 8 B all_reduce <= 0.2 us", figure("libcomm, persistent call", "all_reduce"), fixed(0.2), 1.0,
         False),
        ("persistent barrier <= 0.12 us", figure("libcomm, persistent call", "barrier"), fixed(0.12), 1.0, False),
        ("persistent 8 B all_reduce <= Open MPI", figure("libcomm, persistent call", "all_reduce"),
         figure("Open MPI shm", "all_reduce"), 1.0, False),
        ("persistent barrier <= Open MPI", figure("libcomm, persistent call", "barrier"),
         figure("Open MPI shm", "barrier"), 1.0, False),
    ])


if __name__ == "__main__":
    main()
