#!/usr/bin/env python3
"""The many-core CPU comparison of cuda/bench/run.sh (libcomm's all_reduce_perf against torch's
Gloo, 2-16 ranks on the GPU machine's cores) read out of one or more of its logs: a CSV of every
figure and a plot of 8-byte latency and 16 MiB busbw against ranks, each run's points drawn.

    bench/many_core_report.py RUN_LOG [RUN_LOG ...] --csv docs/results/many_cores.csv \\
        --plot docs/results/many_cores.png

The plot needs matplotlib (Debian's python3-matplotlib), as the other report scripts here do.
"""
import argparse
import csv
import statistics
import sys


def read_log(path, run):
    """Rows (run, library, ranks, bytes, time_us, busbw_gbps) from one gpu-run.log."""
    rows = []
    with open(path) as log:
        for line in log:
            fields = line.strip().split(",")
            # libcomm's all_reduce_perf --csv: collective,transport,algo,ranks,bytes,...,time_us_p50,,,busbw,wrong
            if fields[0] == "all_reduce" and len(fields) == 15 and fields[9] == "1":
                rows.append((run, "libcomm " + fields[2], int(fields[3]), int(fields[4]), float(fields[10]),
                             float(fields[13])))
            # the peers' torch_gloo_bench.py: lib,transport,collective,world_size,bytes,iters,median,...,busbw
            elif len(fields) == 11 and fields[0].startswith("torch") and fields[2] == "all_reduce":
                rows.append((run, "gloo", int(fields[3]), int(fields[4]), float(fields[6]), float(fields[10])))
    return rows


def library(row):
    return "gloo" if row[1] == "gloo" else "libcomm"


def median_of(rows, name, ranks, size, column):
    values = [row[column] for row in rows if library(row) == name and row[2] == ranks and row[3] == size]
    return statistics.median(values) if values else None


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (latency, bandwidth) = plt.subplots(1, 2, figsize=(10, 4))
    ranks = sorted({row[2] for row in rows})
    for name, colour in (("libcomm", "tab:blue"), ("gloo", "tab:orange")):
        for axis, size, column in ((latency, 8, 4), (bandwidth, 16 << 20, 5)):
            for run in sorted({row[0] for row in rows}):
                points = sorted((row[2], row[column]) for row in rows
                                if row[0] == run and library(row) == name and row[3] == size)
                axis.plot([p[0] for p in points], [p[1] for p in points], "o", color=colour, alpha=0.5)
            medians = [median_of(rows, name, r, size, column) for r in ranks]
            axis.plot(ranks, medians, "-", color=colour, label=name + " (median of runs)")
    latency.set(xlabel="ranks", ylabel="µs per call (median)", yscale="log", title="all_reduce, 8 B float32")
    bandwidth.set(xlabel="ranks", ylabel="busbw GB/s", title="all_reduce, 16 MiB float32")
    for axis in (latency, bandwidth):
        axis.set_xticks(ranks)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle("CPU buffers on the GPU machine's 16 cores: libcomm against torch's Gloo")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", nargs="+")
    parser.add_argument("--csv")
    parser.add_argument("--plot")
    arguments = parser.parse_args()
    rows = [row for run, path in enumerate(arguments.logs, 1) for row in read_log(path, run)]
    if not rows:
        print("no all_reduce figures in %s" % ", ".join(arguments.logs), file=sys.stderr)
        return 1
    if arguments.csv:
        with open(arguments.csv, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["run", "library", "ranks", "bytes", "time_us_p50", "busbw_gbps"])
            writer.writerows(rows)
    print("ranks | 8 B libcomm | 8 B gloo | ratio | 16 MiB busbw libcomm | gloo | ratio")
    for ranks in sorted({row[2] for row in rows}):
        small = [median_of(rows, name, ranks, 8, 4) for name in ("libcomm", "gloo")]
        large = [median_of(rows, name, ranks, 16 << 20, 5) for name in ("libcomm", "gloo")]
        if None in small + large:
            continue
        print("%5d | %8.2f µs | %8.1f µs | 1/%.0f | %6.2f GB/s | %5.2f GB/s | %.2fx" %
              (ranks, small[0], small[1], small[1] / small[0], large[0], large[1], large[0] / large[1]))
    if arguments.plot:
        plot(rows, arguments.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
