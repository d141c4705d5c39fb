#!/usr/bin/env python3
"""The tutorials' programs in examples/python, on the libcomm backend with 4 ranks, each started
both ways the tutorials and torch's documentation start them: by the script itself with
torch.multiprocessing.spawn, and by torchrun --nproc_per_node 4. Every printed line is checked
against values computed here: the collectives' and point-to-point results from the inputs, the
sub-group sums from the same seeded tensors in float64, and the SGD losses by training the same
model on the same batches in this one process, averaging the ranks' gradients in float64.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/test_examples.py [example ...]
"""
import collections
import math
import os
import sys

import torch
import torch.nn.functional as F

from launchers import run_spawning, run_torchrun

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "python"))
RANKS = 4


def expect_hello():
    return ["[%d] say hi!" % rank for rank in range(RANKS)]


def point_to_point_line(rank, value):
    # print("Rank ", rank, " has data ", tensor[0]) separates its arguments with spaces.
    return "Rank  %d  has data  %s" % (rank, torch.tensor(value))


def expect_send_recv():
    return [point_to_point_line(rank, 1.0 if rank in (0, 1) else 0.0) for rank in range(RANKS)]


def expect_isend_irecv():
    to_all = torch.tensor([0.0, 1.0, 0.0])
    return expect_send_recv() + ["Rank %d has data %s" % (rank, to_all) for rank in range(RANKS)]


def expect_collectives():
    inputs = [float(rank) for rank in range(RANKS)]
    gathered = str([torch.tensor([value]) for value in inputs])
    lines = ["== " + name for name in ("reduce", "all_reduce", "scatter", "gather", "all_gather", "broadcast")]
    ones_sum = float(sum(1.0 for _ in range(RANKS)))
    # reduce: the destination holds the sum; libcomm leaves the others' input (1.0) as it was.
    lines += ["[%d] data = %s" % (rank, ones_sum if rank == 0 else 1.0) for rank in range(RANKS)]
    lines += ["[%d] data = %s" % (rank, ones_sum) for rank in range(RANKS)]  # all_reduce
    lines += ["[%d] data = %s" % (rank, float(rank + 1)) for rank in range(RANKS)]  # scatter
    lines += ["[0] data = %s" % gathered]  # gather
    lines += ["[%d] data = %s" % (rank, gathered) for rank in range(RANKS)]  # all_gather
    lines += ["[%d] data = %s" % (rank, torch.tensor([inputs[0]])) for rank in range(RANKS)]  # broadcast
    return lines


def subgroup_sums():
    """What each rank's random tensor sums to after the all_reduce on the group {0, 1}."""
    tensors = []
    for rank in range(RANKS):
        torch.manual_seed(rank)
        tensors.append(torch.randn(4, 4).double())
    group_sum = (tensors[0] + tensors[1]).sum().item()
    return [group_sum, group_sum] + [tensor.sum().item() for tensor in tensors[2:]]


def check_subgroup(lines):
    ones = [line for line in lines if line.startswith("Rank ")]
    problems = compare_lines(ones, [point_to_point_line(rank, 2.0 if rank < 2 else 1.0) for rank in range(RANKS)])
    printed = sorted(float(line[len("tensor("):-1]) for line in lines if line.startswith("tensor("))
    expected = sorted(subgroup_sums())
    # The program prints 4 decimals of a float32 sum.
    if len(printed) != RANKS or any(abs(p - e) > 2e-4 for p, e in zip(printed, expected)):
        problems.append("sums printed %s, expected %s" % (printed, ["%.4f" % value for value in expected]))
    return problems


def sgd_reference():
    """{(rank, epoch): mean loss} from training in this process what sgd.py trains on RANKS ranks."""
    sys.path.insert(0, EXAMPLES)
    import sgd  # the example's model, data and partition: the problem, not the distributed part

    torch.manual_seed(1234)
    loaders = [sgd.partition_dataset(rank, RANKS)[0] for rank in range(RANKS)]
    model = sgd.Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    losses = {}
    for epoch in range(sgd.EPOCHS):
        sums = [0.0] * RANKS
        # Each loader is read to its end, as each rank does: its sampler draws from its generator
        # once more there, which zip() alone would leave out for all but the first.
        for batches in zip(*[list(loader) for loader in loaders]):
            gradients = [torch.zeros_like(param, dtype=torch.float64) for param in model.parameters()]
            for rank, (data, target) in enumerate(batches):
                model.zero_grad()
                loss = F.nll_loss(model(data), target)
                sums[rank] += loss.item()
                loss.backward()
                for total, param in zip(gradients, model.parameters()):
                    total += param.grad.double()
            for total, param in zip(gradients, model.parameters()):
                param.grad = (total / RANKS).to(param.dtype)
            optimizer.step()
        batches_per_epoch = math.ceil(len(loaders[0].dataset) / float(loaders[0].batch_size))
        for rank in range(RANKS):
            losses[(rank, epoch)] = sums[rank] / batches_per_epoch
    return losses


def check_sgd(lines):
    expected = sgd_reference()
    problems, seen = [], set()
    for line in lines:
        # "Rank  0 , epoch  3 :  0.52..."
        words = line.replace(",", " ").replace(":", " ").split()
        if len(words) != 5 or words[0] != "Rank" or words[2] != "epoch":
            continue
        key = (int(words[1]), int(words[3]))
        seen.add(key)
        loss = float(words[4])
        if key not in expected or not math.isclose(loss, expected[key], rel_tol=1e-4):
            problems.append("rank %d epoch %d: loss %s, expected %s" % (key[0], key[1], loss, expected.get(key)))
    if seen != set(expected):
        problems.append("printed %d of %d (rank, epoch) losses" % (len(seen), len(expected)))
    return problems


def compare_lines(printed, expected):
    missing = collections.Counter(expected) - collections.Counter(printed)
    extra = collections.Counter(printed) - collections.Counter(expected)
    problems = ["missing: %r" % line for line in missing.elements()]
    problems += ["unexpected: %r" % line for line in extra.elements()]
    return problems


def exact(expect):
    return lambda lines: compare_lines(lines, expect())


CHECKS = {
    "hello": exact(expect_hello),
    "send_recv": exact(expect_send_recv),
    "isend_irecv": exact(expect_isend_irecv),
    "collectives": exact(expect_collectives),
    "subgroup": check_subgroup,
    "sgd": check_sgd,
}


def main(names):
    failed = 0
    for name in names or CHECKS:
        script = os.path.join(EXAMPLES, name + ".py")
        for how in ("mp.spawn", "torchrun"):
            if how == "torchrun":
                code, ranked, stdout, stderr = run_torchrun(script, RANKS)
                lines = [line for _, line in ranked]
            else:
                code, lines, stdout, stderr = run_spawning(script)
            # Rank 0's heading lines in collectives.py come only from rank 0; the rest are compared
            # as a multiset, since the ranks print in any order.
            problems = CHECKS[name]([line.strip() for line in lines if line.strip()])
            if code != 0:
                problems.insert(0, "exit code %d" % code)
            failed += bool(problems)
            print("%-12s under %-8s %s" % (name, how, "ok" if not problems else "WRONG"), flush=True)
            for problem in problems[:20]:
                print("    " + problem)
            if problems:
                print("    stdout tail:\n" + stdout[-1500:] + "\n    stderr tail:\n" + stderr[-3000:])
    print("%d of %d example runs wrong" % (failed, 2 * len(names or CHECKS)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
