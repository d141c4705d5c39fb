#!/usr/bin/python3
"""all_to_all_v side by side (issue 47, deliverable 5): the skewed exchange of all_to_all_v_perf
(rank 0 sends 8 blocks' worth to each rank, the others one block) at 2, 4 and 8 ranks and 1 MiB
and 16 MiB totals (bytes all ranks send together), as libcomm's all_to_all_v (shared memory),
Open MPI 4.1's MPI_Alltoallv (bench/peers/mpi_alltoallv.c) and torch's Gloo all_to_all_single
with the same splits (bench/peers/gloo_all_to_all_v.py), alternating rounds in one run. Times are
rank 0's p50 of back-to-back calls; medians and bests of the rounds; the issue's targets (at
least 3x Gloo, no slower than Open MPI) judged on both.

    apt-get install -y openmpi-bin libopenmpi-dev
    /usr/bin/python3 bench/peers/compare_all_to_all_v.py [--rounds 2] [--build build-release]
    (Gloo runs under .venv/bin/python, which has torch 2.13)
"""
import os
import sys

from compare_collectives import MPIRUN
from side_by_side import arguments, compile_peer, output, print_targets, summarise

TOTALS = (1 << 20, 16 << 20)
RANKS = (2, 4, 8)
HERE = os.path.dirname(os.path.abspath(__file__))
VENV_PYTHON = os.path.join(HERE, "..", "..", ".venv", "bin", "python")


def parse(text):
    """{total: time_us} from "total,time_us" lines."""
    return {int(line.split(",")[0]): float(line.split(",")[1]) for line in text.splitlines() if line.count(",") == 1}


def libcomm(build, ranks):
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    bench = os.path.join(build, "bench", "all_to_all_v_perf")
    result = {}
    for total in TOTALS:
        per_rank = total // (ranks + 7)  # a light rank's input; the whole exchange sends `total`
        text = output([commrun, "--no-prefix", "-n", str(ranks), bench, "-b", str(per_rank), "-e", str(per_rank),
                       "-c", "0", "-n", "30" if total >= (8 << 20) else "200", "-w", "5", "--csv"],
                      dict(os.environ, COMM_TRANSPORT="shm"))
        result[total] = float(text.splitlines()[1].split(",")[10])
    return result


def main():
    args = arguments()
    mpi_binary = compile_peer(HERE, "mpi_alltoallv")
    names = [f"{library}, {ranks} ranks" for ranks in RANKS for library in ("libcomm", "Open MPI", "Gloo")]
    runs = {name: [] for name in names}
    for round_number in range(args.rounds):
        for ranks in RANKS:
            print(f"round {round_number + 1}, {ranks} ranks", file=sys.stderr, flush=True)
            runs[f"libcomm, {ranks} ranks"].append(libcomm(args.build, ranks))
            runs[f"Open MPI, {ranks} ranks"].append(
                parse(output(MPIRUN + ["-np", str(ranks), mpi_binary] + [str(t) for t in TOTALS])))
            runs[f"Gloo, {ranks} ranks"].append(
                parse(output([VENV_PYTHON, os.path.join(HERE, "gloo_all_to_all_v.py"), "--ranks", str(ranks)] +
                             [str(t) for t in TOTALS])))

    def figure(name, total):
        return summarise([run[total] for run in runs[name] if total in run], higher_is_better=False)

    for which, title in ((0, "medians"), (1, "bests")):
        print(f"\n{title} of {args.rounds} alternating rounds, rank 0's p50 in microseconds\n")
        print("| | " + " | ".join(f"{t >> 20} MiB" for t in TOTALS) + " |\n|---|" + "---:|" * len(TOTALS))
        for name in names:
            print(f"| {name} | " + " | ".join(f"{figure(name, t)[which]:.1f}" for t in TOTALS) + " |")
    targets = []
    for ranks in RANKS:
        for total in TOTALS:
            ours = figure(f"libcomm, {ranks} ranks", total)
            targets.append((f"{ranks} ranks {total >> 20} MiB: <= 1/3 of Gloo's time", ours,
                            figure(f"Gloo, {ranks} ranks", total), 1 / 3, False))
            targets.append((f"{ranks} ranks {total >> 20} MiB: <= Open MPI's time", ours,
                            figure(f"Open MPI, {ranks} ranks", total), 1.0, False))
    print_targets(targets)


if __name__ == "__main__":
    main()
