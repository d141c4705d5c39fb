#!/usr/bin/python3
"""The uneven collectives side by side (issue 47, deliverable 5), with the skew of libcomm's
*_v_perf benches (rank 0 brings 8 blocks' worth, the others one block) at 2, 4 and 8 ranks and
1 MiB and 16 MiB totals, as libcomm (shared memory), Open MPI 4.1 and torch's Gloo, alternating
rounds in one run. Times are rank 0's p50 of back-to-back calls; medians and bests of the rounds;
the issue's targets (at least 3x Gloo, no slower than Open MPI) judged on both.

- all_to_all_v: rank 0 sends 8 blocks to each rank, the others one; the total is what all ranks
  send together. Open MPI's MPI_Alltoallv, Gloo's all_to_all_single with the same splits.
- all_gather_v: rank 0 brings 8 blocks, the others one; the total is what every rank ends with.
  Open MPI's MPI_Allgatherv; Gloo's all_gather takes equal tensors only, so as its users do:
  shards padded to the largest, gathered, sliced.
The peers' programs: mpi_v_forms.c and gloo_v_forms.py beside this script.

    apt-get install -y openmpi-bin libopenmpi-dev
    /usr/bin/python3 bench/peers/compare_v_forms.py --collective all_to_all_v [--rounds 2] [--build build-release]
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


# collective: (libcomm's -b in bytes for a total at n ranks, mpi_v_forms.c's name for it)
COLLECTIVES = {
    # -b is a light rank's input: n blocks, one per destination; the exchange sends (n + 7) of it.
    "all_to_all_v": (lambda total, n: total // (n + 7), "alltoallv"),
    # -b is n blocks (the bench's block is its count / n); every rank ends with n + 7 blocks.
    "all_gather_v": (lambda total, n: 4 * n * (total // 4 // (n + 7)), "allgatherv"),
}


def libcomm(build, collective, ranks):
    commrun = os.path.join(build, "rendezvous", "programs", "commrun")
    bench = os.path.join(build, "bench", collective + "_perf")
    size_of = COLLECTIVES[collective][0]
    result = {}
    for total in TOTALS:
        size = size_of(total, ranks)
        text = output([commrun, "--no-prefix", "-n", str(ranks), bench, "-b", str(size), "-e", str(size),
                       "-c", "0", "-n", "30" if total >= (8 << 20) else "200", "-w", "5", "--csv"],
                      dict(os.environ, COMM_TRANSPORT="shm"))
        result[total] = float(text.splitlines()[1].split(",")[10])
    return result


def main():
    def own_options(parser):
        parser.add_argument("--collective", choices=sorted(COLLECTIVES), default="all_to_all_v")
        parser.add_argument("--plot", help="a PNG of the medians (needs matplotlib)")

    args = arguments(own_options)
    mpi_name = COLLECTIVES[args.collective][1]
    mpi_binary = compile_peer(HERE, "mpi_v_forms")
    names = [f"{library}, {ranks} ranks" for ranks in RANKS for library in ("libcomm", "Open MPI", "Gloo")]
    runs = {name: [] for name in names}
    for round_number in range(args.rounds):
        for ranks in RANKS:
            print(f"round {round_number + 1}, {ranks} ranks", file=sys.stderr, flush=True)
            runs[f"libcomm, {ranks} ranks"].append(libcomm(args.build, args.collective, ranks))
            runs[f"Open MPI, {ranks} ranks"].append(
                parse(output(MPIRUN + ["-np", str(ranks), mpi_binary, mpi_name] + [str(t) for t in TOTALS])))
            runs[f"Gloo, {ranks} ranks"].append(
                parse(output([VENV_PYTHON, os.path.join(HERE, "gloo_v_forms.py"), "--collective", args.collective,
                              "--ranks", str(ranks)] +
                             [str(t) for t in TOTALS])))

    def figure(name, total):
        return summarise([run[total] for run in runs[name] if total in run], higher_is_better=False)

    for which, title in ((0, "medians"), (1, "bests")):
        print(f"\n{args.collective}: {title} of {args.rounds} alternating rounds, rank 0's p50 in microseconds\n")
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
    if args.plot:
        plot(args.plot, args.collective, args.rounds, {name: [figure(name, t)[0] for t in TOTALS] for name in names})


def plot(path, collective, rounds, medians):
    """Grouped bars: for each total and rank count, the three libraries' median times (log scale)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    libraries = (("libcomm", "tab:blue"), ("Open MPI", "tab:orange"), ("Gloo", "tab:gray"))
    figure, axes = plt.subplots(1, len(TOTALS), figsize=(10, 4))
    for axis, (column, total) in zip(axes, enumerate(TOTALS)):
        for offset, (library, colour) in enumerate(libraries):
            xs = [index + (offset - 1) * 0.27 for index in range(len(RANKS))]
            ys = [medians[f"{library}, {ranks} ranks"][column] for ranks in RANKS]
            axis.bar(xs, ys, width=0.27, color=colour, label=library)
        axis.set_xticks(range(len(RANKS)), [f"{ranks} ranks" for ranks in RANKS])
        axis.set_yscale("log")
        axis.set_title(f"{total >> 20} MiB")
        axis.set_ylabel("rank 0's p50, us (lower is better)")
    axes[0].legend()
    figure.suptitle(f"{collective}, skewed (rank 0 brings 8x), shared memory, medians of {rounds} rounds")
    figure.tight_layout()
    figure.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
