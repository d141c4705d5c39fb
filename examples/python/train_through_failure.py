#!/usr/bin/env python3
"""Data-parallel training on libcomm that survives a rank killed with SIGKILL: the Python twin of
examples/train_through_failure.cpp. A linear model (torch.nn.Linear, float64) learns from a
synthetic data set split across the ranks; each step the ranks sum their gradients with
all_reduce. When a rank dies, the step fails on the survivors: they shrink the default group
(torch_libcomm.shrink: no list of the dead needed), agree on the step to redo, re-split the data
among themselves and go on. With --restart a replacement process joins: the survivors grow the
group back (torch_libcomm.grow) and it receives the model and the step by broadcast.

    python examples/python/train_through_failure.py                  # 4 ranks, rank 2 killed at step 40
    python examples/python/train_through_failure.py --restart 1      # and a replacement joins
    python examples/python/train_through_failure.py --kill-rank -1   # nobody killed

Run so, the script is its own launcher: it hosts the job's store (torch's TCPStore, outside the
ranks, so that rank 0's death does not take it away: torchrun's agent store) and starts the
ranks; like `commrun --on-failure continue` it lets the survivors run on when one dies, and like
`commrun --restart N` starts replacements with COMM_JOIN set. (torchrun cannot: it stops every
worker when one fails.) Every rank ends with a line "final: step S, R ranks, loss L, model H"
(H: a hash of the weights' bytes, the same on every rank)."""
import argparse
import hashlib
import os
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist

FEATURES = 8
SAMPLES = 2048
BATCH = 64  # per step, split among the ranks
STEPS = 150
LEARNING_RATE = 0.05


def say(line):
    """One line in one write: the ranks share the launcher's output."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def make_data_set():
    generator = torch.Generator().manual_seed(2026)
    x = torch.randn(SAMPLES, FEATURES, generator=generator, dtype=torch.float64)
    truth = torch.tensor([0.5 * (j + 1) * (-1 if j % 2 else 1) for j in range(FEATURES)], dtype=torch.float64)
    y = x @ truth + 1.5 + 0.1 * torch.randn(SAMPLES, generator=generator, dtype=torch.float64)
    return x, y


def parameters_of(model):
    return torch.cat([parameter.detach().flatten() for parameter in model.parameters()])


def load_parameters(model, flat):
    with torch.no_grad():
        offset = 0
        for parameter in model.parameters():
            parameter.copy_(flat[offset:offset + parameter.numel()].view_as(parameter))
            offset += parameter.numel()


def local_sums(model, x, y, step, rank, size):
    """This rank's share of step `step`'s batch: the gradient of half its squared error, then the
    squared error and the sample count, in one tensor to all_reduce."""
    rows = [(step * BATCH + k) % SAMPLES for k in range(rank, BATCH, size)]
    model.zero_grad()
    error = model(x[rows]).squeeze(1) - y[rows]
    (0.5 * (error ** 2).sum()).backward()
    gradient = torch.cat([parameter.grad.flatten() for parameter in model.parameters()])
    extra = torch.tensor([(error.detach() ** 2).sum().item(), float(len(rows))], dtype=torch.float64)
    return torch.cat([gradient, extra])


def train(kill_rank, kill_step):
    import torch_libcomm  # registers the backend "libcomm"; shrink and grow

    # A replacement (COMM_JOIN set) joins the running job here: init returns once the survivors
    # have called grow().
    replacement = "COMM_JOIN" in os.environ
    dist.init_process_group("libcomm")
    restarts_left = int(os.environ.get("COMM_RESTARTS", "0")) - int(os.environ.get("COMM_REPLACEMENT", "0"))
    first_rank = dist.get_rank()
    x, y = make_data_set()
    model = torch.nn.Linear(FEATURES, 1, dtype=torch.float64)
    load_parameters(model, torch.zeros(FEATURES + 1, dtype=torch.float64))
    step = 0
    if replacement:  # the model and the step, from the survivors
        flat, agreed = torch.zeros(FEATURES + 1, dtype=torch.float64), torch.zeros(1, dtype=torch.int64)
        dist.broadcast(flat, 0)
        dist.broadcast(agreed, 0)
        load_parameters(model, flat)
        step = int(agreed.item())
        say("rank %d (pid %d) joined at step %d" % (dist.get_rank(), os.getpid(), step))
    else:
        say("rank %d (pid %d) training" % (first_rank, os.getpid()))
    before_step = parameters_of(model).clone()
    loss = 0.0
    while step < STEPS:
        time.sleep(0.005)  # the rest of the forward and backward passes
        sums = local_sums(model, x, y, step, dist.get_rank(), dist.get_world_size())
        if not replacement and first_rank == kill_rank and step == kill_step:
            os.kill(os.getpid(), signal.SIGKILL)  # mid-step: its gradient computed, never sent
        try:
            dist.all_reduce(sums)
        except RuntimeError as error:
            say("rank %d: step %d failed: %s" % (dist.get_rank(), step, str(error).splitlines()[0][:200]))
            before = dist.get_world_size()
            torch_libcomm.shrink()  # every survivor calls it; they agree on who is left
            # A survivor may have finished the step the others failed: all redo the earliest.
            agreed = torch.tensor([step], dtype=torch.int64)
            dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
            if agreed.item() < step:
                load_parameters(model, before_step)
            step = int(agreed.item())
            lost = before - dist.get_world_size()
            if restarts_left > 0 and lost > 0:  # replacements are coming: let them in
                coming = min(lost, restarts_left)
                restarts_left -= coming
                torch_libcomm.grow(coming)
                dist.broadcast(parameters_of(model), 0)
                dist.broadcast(torch.tensor([step], dtype=torch.int64), 0)
            say("rank %d: going on from step %d with %d ranks" % (dist.get_rank(), step, dist.get_world_size()))
            continue
        before_step = parameters_of(model).clone()
        count = sums[-1].item()
        with torch.no_grad():
            load_parameters(model, parameters_of(model) - LEARNING_RATE * sums[:FEATURES + 1] / count)
        loss = sums[-2].item() / count
        if step % 50 == 0:
            say("rank %d: step %d loss %.6f" % (dist.get_rank(), step, loss))
        step += 1
    model_hash = hashlib.sha256(parameters_of(model).numpy().tobytes()).hexdigest()[:16]
    say("final: step %d, %d ranks, loss %.6f, model %s" % (step, dist.get_world_size(), loss, model_hash))
    dist.destroy_process_group()


def launch(ranks, restarts, kill_rank, kill_step, timeout):
    """Hosts the store and runs the ranks, replacing one that dies `restarts` times at most;
    returns the first non-zero exit status of a rank not killed by a signal, else 0."""
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    common = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port), WORLD_SIZE=str(ranks),
                  TORCHELASTIC_USE_AGENT_STORE="True", COMM_RESTARTS=str(restarts))
    arguments = [sys.executable, os.path.abspath(__file__), "--worker", "--kill-rank", str(kill_rank),
                 "--kill-step", str(kill_step)]
    running = {subprocess.Popen(arguments, env=dict(common, RANK=str(rank))) for rank in range(ranks)}
    replacements, status = 0, 0
    deadline = time.monotonic() + timeout
    while running:
        if time.monotonic() > deadline:
            print("train_through_failure: the job ran past %d s; stopping it" % timeout, file=sys.stderr, flush=True)
            for process in running:
                process.kill()
            for process in running:
                process.wait()
            return 1
        for process in [process for process in running if process.poll() is not None]:
            running.remove(process)
            code = process.returncode
            if code == 0:
                continue
            say("train_through_failure: a rank (pid %d) ended with %s" %
                (process.pid, "signal %d" % -code if code < 0 else "status %d" % code))
            if code > 0 and status == 0:
                status = code
            if replacements < restarts:
                replacements += 1
                # The survivors renumber densely and grow by one: the newcomer is the last rank.
                running.add(subprocess.Popen(arguments, env=dict(common, RANK=str(ranks - 1), COMM_JOIN="default_pg",
                                                                 COMM_REPLACEMENT=str(replacements))))
        time.sleep(0.01)
    return status


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--restart", type=int, default=0, help="replacements to start, at most")
    parser.add_argument("--kill-rank", type=int, default=2, help="the rank that kills itself (-1: none)")
    parser.add_argument("--kill-step", type=int, default=40, help="the step it dies in, after its backward pass")
    parser.add_argument("--timeout", type=int, default=120, help="seconds the whole job may take")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        train(args.kill_rank, args.kill_step)
        return 0
    return launch(args.ranks, args.restart, args.kill_rank, args.kill_step, args.timeout)


if __name__ == "__main__":
    sys.exit(main())
