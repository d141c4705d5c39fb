#!/usr/bin/python3
"""Start-up at many ranks on one host, libcomm beside Open MPI in the same run (issue 31).

For each rank count, alternating libraries round by round: the wall time from launch to the
last process's exit of a program that joins the job, runs one all_reduce (checked) and exits
(bench/startup_probe.cpp under commrun; bench/peers/mpi_startup.c under mpirun); the peak of
/proc/meminfo's Shmem over the run above what it was before (shared memory, counted once
however many processes map it); and per rank the sockets and threads it holds after its first
collective. Medians of the rounds, and the best.

    /usr/bin/python3 bench/scale_startup.py --build build-release --ranks 8,16,32,64,128 --rounds 2 \\
        [--transports auto,tcp,tcp+lazy] [--no-mpi] [--csv docs/results/scale.csv] [--plot docs/results/scale_startup.png]
"""
import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "oob_tcp_if_include", "lo",
          "--mca", "btl_tcp_if_include", "lo"]
PROBE = re.compile(r"probe rank=(\d+) size=(\d+) init_s=([\d.]+) first_collective_s=([\d.]+) sockets=(-?\d+) "
                   r"threads=(-?\d+) correct=(\d)")


def shmem_kib():
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("Shmem:"):
                return int(line.split()[1])
    return 0


class ShmemPeak:
    """Samples Shmem every 10 ms while a run lasts."""

    def __init__(self):
        self.base = shmem_kib()
        self.peak = self.base
        self.running = True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self):
        while self.running:
            self.peak = max(self.peak, shmem_kib())
            time.sleep(0.01)

    def stop(self):
        self.running = False
        self.thread.join()
        return max(0, self.peak - self.base) / 1024.0


def run_once(command, env, ranks, timeout):
    """{'wall_s', 'shm_mib', 'sockets', 'threads', 'init_s'} of one launch; raises on failure."""
    peak = ShmemPeak()
    start = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    finally:
        shm = peak.stop()
    wall = time.monotonic() - start
    lines = [PROBE.search(line) for line in done.stdout.splitlines()]
    lines = [match for match in lines if match]
    if done.returncode != 0 or len(lines) != ranks or not all(match.group(7) == "1" for match in lines):
        raise RuntimeError("{} failed (exit {}, {} of {} ranks reported):\n{}".format(
            " ".join(command[:6]), done.returncode, len(lines), ranks, (done.stdout + done.stderr)[-2000:]))
    return {"wall_s": wall, "shm_mib": shm,
            "sockets": statistics.median(int(match.group(5)) for match in lines),
            "threads": statistics.median(int(match.group(6)) for match in lines),
            "init_s": max(float(match.group(3)) for match in lines)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build", default="build")
    parser.add_argument("--ranks", default="8,16,32,64")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--transports", default="auto",
                        help="libcomm's COMM_TRANSPORT values to run; VALUE+lazy also sets COMM_CONNECT=lazy")
    parser.add_argument("--no-mpi", action="store_true")
    parser.add_argument("--peers", default=os.path.join(os.path.dirname(__file__), "peers"))
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--csv")
    parser.add_argument("--plot")
    args = parser.parse_args()

    commrun = os.path.join(args.build, "rendezvous", "programs", "commrun")
    probe = os.path.join(args.build, "bench", "startup_probe")
    libraries = [("libcomm " + transport, transport) for transport in args.transports.split(",")]
    work = tempfile.mkdtemp(prefix="comm-scale-")
    try:
        if not args.no_mpi and shutil.which("mpicc"):
            mpi_binary = os.path.join(work, "mpi_startup")
            subprocess.run(["mpicc", "-O2", "-o", mpi_binary, os.path.join(args.peers, "mpi_startup.c")], check=True)
            libraries.append(("Open MPI", None))
        rows = []
        for ranks in [int(text) for text in args.ranks.split(",")]:
            results = {name: [] for name, _ in libraries}
            for _ in range(args.rounds):
                for name, transport in libraries:
                    if transport is None:
                        command = MPIRUN + ["-np", str(ranks), mpi_binary]
                        env = dict(os.environ)
                    else:
                        command = [commrun, "--no-prefix", "-n", str(ranks), probe]
                        medium, _, connect = transport.partition("+")
                        env = dict(os.environ, COMM_TRANSPORT=medium, COMM_CONNECT=connect or "eager")
                    try:
                        results[name].append(run_once(command, env, ranks, args.timeout))
                    except (RuntimeError, subprocess.TimeoutExpired) as failure:
                        print("{} at {} ranks: {}".format(name, ranks, failure), file=sys.stderr)
            for name, runs in results.items():
                if not runs:
                    continue
                row = {"library": name, "ranks": ranks, "runs": len(runs),
                       "wall_s": statistics.median(run["wall_s"] for run in runs),
                       "best_wall_s": min(run["wall_s"] for run in runs),
                       "shm_mib": statistics.median(run["shm_mib"] for run in runs),
                       "sockets_per_rank": statistics.median(run["sockets"] for run in runs),
                       "threads_per_rank": statistics.median(run["threads"] for run in runs),
                       "slowest_init_s": statistics.median(run["init_s"] for run in runs)}
                rows.append(row)
                print("{library:>14} {ranks:>4} ranks: start-up {wall_s:7.2f} s (best {best_wall_s:.2f}), "
                      "shm {shm_mib:8.1f} MiB, sockets/rank {sockets_per_rank:5.0f}, threads/rank "
                      "{threads_per_rank:3.0f}, slowest init {slowest_init_s:.2f} s".format(**row), flush=True)
        if args.csv:
            with open(args.csv, "w", newline="") as out:
                writer = csv.DictWriter(out, fieldnames=list(rows[0]))
                writer.writeheader()
                writer.writerows(rows)
        if args.plot:
            plot(rows, args.plot)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name in sorted({row["library"] for row in rows}):
        mine = sorted((row for row in rows if row["library"] == name), key=lambda row: row["ranks"])
        ranks = [row["ranks"] for row in mine]
        style = "^:" if name == "Open MPI" else "o-"
        axes[0].plot(ranks, [row["best_wall_s"] for row in mine], style, label=name)
        axes[1].plot(ranks, [row["shm_mib"] for row in mine], style, label=name)
        axes[2].plot(ranks, [row["sockets_per_rank"] for row in mine], style, label=name)
    titles = ["start-up + first all_reduce (s, best)", "shared memory (MiB, /proc/meminfo Shmem)",
              "sockets per rank"]
    for axis, title in zip(axes, titles):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("ranks on one host")
        axis.set_title(title)
        axis.grid(True, alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=90)


if __name__ == "__main__":
    main()
