"""What the compare_*.py scripts share: their arguments, running a command for its output,
compiling a peer's C benchmark from ../shared/peers into a scratch folder, and summing up rounds
(median and best) and judging targets."""
import argparse
import os
import statistics
import subprocess
import tempfile


def arguments(add=None):
    """The shared options; `add(parser)` adds a script's own."""
    parser = argparse.ArgumentParser()
    if add:
        add(parser)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", default="build")
    parser.add_argument("--peers", default=os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared", "peers"))
    return parser.parse_args()


def output(command, env=None, timeout=900):
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=timeout, env=env).stdout


_work = None


def compile_peer(peers, name, compiler="mpicc"):
    """Builds peers/NAME.c with -O2 and returns the binary's path."""
    global _work
    _work = _work or tempfile.mkdtemp(prefix="comm-peers-")
    binary = os.path.join(_work, name)
    subprocess.run([compiler, "-O2", "-o", binary, os.path.join(peers, name + ".c")], check=True)
    return binary


def summarise(values, higher_is_better):
    """(median, best) of one figure over the rounds; NaN when no round measured it."""
    values = [v for v in values if v == v]
    if not values:
        return float("nan"), float("nan")
    return statistics.median(values), (max(values) if higher_is_better else min(values))


def print_targets(targets):
    """targets: [(text, ours (median, best), bound (median, best), factor, higher_is_better)].
    The issues ask for best of at least two rounds (the machine is noisy); the median is shown
    beside it, so a target met only in a lucky round is visible as such."""
    print("\n| target | median: ours vs bound | met | best: ours vs bound | met |\n|---|---|---|---|---|")
    for text, ours, bound, factor, higher in targets:
        cells = []
        for index in (0, 1):
            limit = bound[index] * factor
            met = ours[index] >= limit if higher else ours[index] <= limit
            cells += [f"{ours[index]:.2f} vs {limit:.2f}", "yes" if met else "**no**"]
        print(f"| {text} | " + " | ".join(cells) + " |")
