#!/usr/bin/env python3
"""The training example survives a SIGKILL (issue 32): examples/train_through_failure under
commrun on 4 ranks, one rank (any, rank 0 included) killed with SIGKILL at a random moment of
its training, over shm and tcp; half the runs with --restart 1, where a replacement grows back
in. Each run must end with every live rank at the last step with the same model (bitwise: the
same hash), on 3 ranks (4 with the replacement), trained (a small loss).

  example_test.py COMMRUN EXAMPLE [--runs N]      (N per transport; COMM_EXAMPLE_RUNS, default 4)
"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time


def one_run(commrun, example, transport, restart, rng):
    command = [commrun, "--no-prefix", "-n", "4"] + (["--restart", "1"] if restart else
                                                     ["--on-failure", "continue"]) + [example]
    env = dict(os.environ, COMM_TRANSPORT=transport, COMM_HANG_REPORT="0")
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, pids = [], {}
    ready = threading.Event()

    def read():
        for line in process.stdout:
            lines.append(line)
            found = re.match(r"rank (\d+) \(pid (\d+)\) training", line)
            if found:
                pids[int(found.group(1))] = int(found.group(2))
                if len(pids) == 4:
                    ready.set()

    reader = threading.Thread(target=read)
    reader.start()
    problems = []
    victim = rng.randrange(4)
    if not ready.wait(30):
        problems.append("the ranks did not all start")
    else:
        time.sleep(rng.uniform(0.05, 0.6))  # somewhere in its 150 steps of ~5 ms
        os.kill(pids[victim], signal.SIGKILL)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        problems.append("HANG: the job still ran after 60 s")
    reader.join()
    output = "".join(lines)
    finals = re.findall(r"final: step (\d+), (\d+) ranks, loss (\S+), model (\w+)", output)
    expected_ranks = 4 if restart else 3
    if process.returncode != 0:
        problems.append("commrun exited with %s" % process.returncode)
    if len(finals) != expected_ranks:
        problems.append("%d final lines, expected %d" % (len(finals), expected_ranks))
    if len({final[3] for final in finals}) > 1:
        problems.append("DISAGREEMENT: the ranks' models differ: %s" % [final[3] for final in finals])
    for step, ranks, loss, _ in finals:
        if step != "150" or int(ranks) != expected_ranks or float(loss) > 0.05:
            problems.append("a rank ended at step %s on %s ranks with loss %s" % (step, ranks, loss))
    if problems:
        problems.append("output:\n" + output[-3000:])
    return victim, problems


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("commrun")
    parser.add_argument("example")
    parser.add_argument("--runs", type=int, default=int(os.environ.get("COMM_EXAMPLE_RUNS", "4")))
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print("training through a SIGKILL: %d runs per transport, seed %d" % (args.runs, seed))
    failed = 0
    for transport in ("shm", "tcp"):
        for run in range(args.runs):
            restart = run % 2 == 1
            victim, problems = one_run(args.commrun, args.example, transport, restart, rng)
            what = "%s, rank %d killed%s" % (transport, victim, ", --restart 1" if restart else "")
            if problems:
                failed += 1
                print("FAIL " + what)
                for problem in problems:
                    print("    " + problem.replace("\n", "\n      "))
            else:
                print("ok   " + what)
            sys.stdout.flush()
    print("%d of %d runs failed" % (failed, 2 * args.runs))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
