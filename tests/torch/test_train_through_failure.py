#!/usr/bin/env python3
"""examples/python/train_through_failure.py as written (issue 32): 4 ranks, a random rank killed
with SIGKILL at a random step, over shm and over tcp, without and with a replacement
(--restart 1). Every live rank must end at the last step with the same model hash, on 3 ranks or
on 4 with the replacement, and with the loss a reference computed here in float64 (plain
gradient descent on the same data, no ranks, no failure) ends with. COMM_EXAMPLE_RUNS=N runs N
rounds (default 1); COMM_EXAMPLE_SEED picks the draws.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_train_through_failure.py
"""
import importlib.util
import os
import random
import re
import subprocess
import sys

import torch

from launchers import quiet_environment

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "python", "train_through_failure.py")
FINAL = re.compile(r"^final: step (\d+), (\d+) ranks, loss ([0-9.]+), model ([0-9a-f]+)$")


def example_module():
    spec = importlib.util.spec_from_file_location("train_through_failure", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_loss(example):
    """The last step's loss of full-batch-per-step gradient descent, the closed-form gradient of
    half the squared error, in float64: what the ranks compute together, whoever dies."""
    x, y = example.make_data_set()
    weights = torch.zeros(example.FEATURES, dtype=torch.float64)
    bias = torch.zeros((), dtype=torch.float64)
    loss = 0.0
    for step in range(example.STEPS):
        rows = [(step * example.BATCH + k) % example.SAMPLES for k in range(example.BATCH)]
        error = x[rows] @ weights + bias - y[rows]
        loss = (error ** 2).sum().item() / len(rows)
        weights = weights - example.LEARNING_RATE * (x[rows].T @ error) / len(rows)
        bias = bias - example.LEARNING_RATE * error.sum() / len(rows)
    return loss


def run(transport, restart, kill_rank, kill_step, example, expected_loss):
    label = "%s, restart %d, rank %d killed at step %d" % (transport, restart, kill_rank, kill_step)
    command = [sys.executable, EXAMPLE, "--ranks", "4", "--restart", str(restart), "--kill-rank", str(kill_rank),
               "--kill-step", str(kill_step), "--timeout", "150"]
    environment = quiet_environment(COMM_TRANSPORT=transport, COMM_HANG_REPORT="0")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=200, env=environment)
    except subprocess.TimeoutExpired:
        return ["%s: the launcher hung" % label]
    finals = [FINAL.match(line) for line in done.stdout.splitlines()]
    finals = [match for match in finals if match]
    ranks = 4 if restart else 3
    failures = []
    if done.returncode != 0:
        failures.append("%s: exit %d" % (label, done.returncode))
    if len(finals) != ranks:
        failures.append("%s: %d final lines, %d expected" % (label, len(finals), ranks))
    for match in finals:
        step, size, loss = int(match.group(1)), int(match.group(2)), float(match.group(3))
        if step != example.STEPS or size != ranks:
            failures.append("%s: a rank ended at step %d on %d ranks" % (label, step, size))
        if abs(loss - expected_loss) > 2e-6:
            failures.append("%s: final loss %.6f, the reference's %.6f" % (label, loss, expected_loss))
    if len({match.group(4) for match in finals}) > 1:
        failures.append("%s: the ranks' models differ: %s" % (label, sorted(match.group(4) for match in finals)))
    if "failed:" not in done.stdout:
        failures.append("%s: no survivor saw the step fail" % label)
    if failures:
        print(done.stdout[-4000:])
        print(done.stderr[-4000:])
    else:
        print("ok: %s: %d ranks end alike, loss %s" % (label, ranks, finals[0].group(3)), flush=True)
    return failures


def main():
    example = example_module()
    expected_loss = reference_loss(example)
    seed = int(os.environ.get("COMM_EXAMPLE_SEED", random.randrange(1 << 30)))
    rounds = int(os.environ.get("COMM_EXAMPLE_RUNS", "1"))
    print("seed %d (COMM_EXAMPLE_SEED), reference loss %.6f" % (seed, expected_loss), flush=True)
    draw = random.Random(seed)
    failures = []
    for _ in range(rounds):
        for transport in ("shm", "tcp"):
            for restart in (0, 1):
                failures += run(transport, restart, draw.randrange(4), draw.randrange(1, example.STEPS - 1), example,
                                expected_loss)
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
