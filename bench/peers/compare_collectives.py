#!/usr/bin/python3
"""Collectives side by side with Open MPI 4.1 (shared memory and TCP-only) and Gloo through
torch.distributed 1.13, alternating rounds in one run: all_reduce (float32 sum) busbw at
1 MiB, 16 MiB and 256 MiB, 8-byte all_reduce and barrier latency, on 2 ranks; plus libcomm's
4-rank all_reduce at 16 MiB against its own 2-rank figure. Medians and bests of the per-round
medians, and issue 4's targets judged on both.

    apt-get install -y openmpi-bin libopenmpi-dev python3-torch
    /usr/bin/python3 bench/peers/compare_collectives.py [--rounds 3] [--build build] [--peers ../shared/peers]
    (Gloo runs under the Python that runs this: the project's .venv/bin/python has torch)
"""
import os
import sys

from side_by_side import arguments, compile_peer, output, print_targets, summarise

SIZES = (8, 1 << 20, 16 << 20, 256 << 20)
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "oob_tcp_if_include", "lo",
          "--mca", "btl_tcp_if_include", "lo"]
MPI_TCP = ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"]


def libcomm(build, transport, ranks=2):
    """{('all_reduce', bytes): (time_us, busbw), ('barrier', 0): (time_us, 0)}"""
    env = dict(os.environ, COMM_TRANSPORT=transport)
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    result = {}
    for size in SIZES if ranks == 2 else (16 << 20,):
        bench = os.path.join(build, "bench", "all_reduce_perf")
        text = output([commrun, "--no-prefix", "-n", str(ranks), bench, "-b", str(size), "-e", str(size), "-c", "0",
                       "--csv"], env)
        for line in text.splitlines()[1:]:
            fields = line.split(",")
            result[("all_reduce", int(fields[4]))] = (float(fields[10]), float(fields[13]))
    if ranks == 2:
        text = output([commrun, "--no-prefix", "-n", "2", os.path.join(build, "bench", "barrier_perf"), "-b", "8",
                       "-e", "8", "-n", "2000", "--csv"], env)
        fields = text.splitlines()[1].split(",")
        result[("barrier", 0)] = (float(fields[10]), 0.0)
    return result


def peer_csv(text):
    result = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 11 or fields[0] == "lib":
            continue
        collective, size = fields[2], int(fields[4])
        if collective == "all_reduce" and size in SIZES:
            result[("all_reduce", size)] = (float(fields[6]), float(fields[10]))
        elif collective == "barrier":
            result[("barrier", 0)] = (float(fields[6]), 0.0)
    return result


def mpi(binary, tcp):
    env = dict(os.environ, BENCH_COLLS="all_reduce,barrier", BENCH_BUDGET_S="0.3")
    return peer_csv(output(MPIRUN + (MPI_TCP if tcp else []) + ["-np", "2", binary], env))


def gloo(peers):
    return peer_csv(output([sys.executable, os.path.join(peers, "torch_gloo_bench.py"), "--world-size", "2",
                            "--colls", "all_reduce,barrier", "--budget", "0.3"]))


def main():
    args = arguments()
    mpi_binary = compile_peer(args.peers, "mpi_coll_bench")
    runs = {name: [] for name in ("libcomm shm", "Open MPI shm", "libcomm tcp", "Open MPI tcp", "Gloo",
                                  "libcomm shm, 4 ranks")}
    for round_number in range(args.rounds):
        print(f"round {round_number + 1}", file=sys.stderr, flush=True)
        runs["libcomm shm"].append(libcomm(args.build, "shm"))
        runs["Open MPI shm"].append(mpi(mpi_binary, False))
        runs["libcomm tcp"].append(libcomm(args.build, "tcp"))
        runs["Open MPI tcp"].append(mpi(mpi_binary, True))
        runs["Gloo"].append(gloo(args.peers))
        runs["libcomm shm, 4 ranks"].append(libcomm(args.build, "shm", ranks=4))

    def figure(name, key, column):
        """(median, best) over the rounds; busbw (column 1) is better higher, times lower."""
        return summarise([run[key][column] for run in runs[name] if key in run], higher_is_better=column == 1)

    def cell(value):
        return f"{value:.2f}" if value == value else ""  # NaN: not measured for that row

    for which, title in ((0, "medians"), (1, "bests")):
        print(f"\n{title} of {args.rounds} alternating rounds, 2 ranks unless said\n")
        print("| library | all_reduce busbw 1 MiB | 16 MiB | 256 MiB (GB/s) | 8 B all_reduce (us) | barrier (us) |")
        print("|---|---|---|---|---|---|")
        for name in runs:
            cells = [cell(figure(name, ("all_reduce", size), 1)[which]) for size in SIZES[1:]]
            cells += [cell(figure(name, ("all_reduce", 8), 0)[which]), cell(figure(name, ("barrier", 0), 0)[which])]
            print(f"| {name} | " + " | ".join(cells) + " |")

    targets = []
    for size in SIZES[1:]:
        key, label = ("all_reduce", size), f"{size >> 20} MiB"
        targets += [(f"shm busbw {label} >= 1.5x Open MPI shm", figure("libcomm shm", key, 1),
                     figure("Open MPI shm", key, 1), 1.5, True),
                    (f"shm busbw {label} >= 3x Gloo", figure("libcomm shm", key, 1), figure("Gloo", key, 1), 3.0, True),
                    (f"tcp busbw {label} >= 1.5x Gloo", figure("libcomm tcp", key, 1), figure("Gloo", key, 1), 1.5,
                     True),
                    (f"tcp busbw {label} >= Open MPI tcp", figure("libcomm tcp", key, 1),
                     figure("Open MPI tcp", key, 1), 1.0, True)]
    targets += [("8 B all_reduce over shm <= Open MPI shm", figure("libcomm shm", ("all_reduce", 8), 0),
                 figure("Open MPI shm", ("all_reduce", 8), 0), 1.0, False),
                ("barrier over shm <= Open MPI shm", figure("libcomm shm", ("barrier", 0), 0),
                 figure("Open MPI shm", ("barrier", 0), 0), 1.0, False),
                ("4 ranks 16 MiB >= 50% of 2 ranks", figure("libcomm shm, 4 ranks", ("all_reduce", 16 << 20), 1),
                 figure("libcomm shm", ("all_reduce", 16 << 20), 1), 0.5, True)]
    print_targets(targets)


if __name__ == "__main__":
    main()
