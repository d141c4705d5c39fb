"""Starting a Python program on several ranks the two ways users do, for the torch tests:
torchrun (torch.distributed.run) and a script that spawns its own ranks."""
import os
import re
import socket
import subprocess
import sys

# tee prefixes what it copies from each worker with "[default<rank>]:", at the start of each line
# and, when it catches a worker mid-line, in the middle of one.
_TORCHRUN_PREFIX = re.compile(r"\[default(\d+)\]:")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def open_sockets():
    """The sockets this process holds (to see that a call opened none)."""
    count = 0
    for entry in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink("/proc/self/fd/" + entry).startswith("socket:")
        except OSError:
            pass
    return count


def quiet_environment(**extra):
    """The environment for a child job: Python's stdout buffered (each print is then one write, so
    the ranks' lines do not interleave mid-line), plus extra."""
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    environment.update(extra)
    return environment


def run_torchrun(script, nproc, arguments=(), timeout=240):
    """Runs script under torchrun on this host; returns (exit code, [(rank, line)], stdout, stderr).

    torch 1.13's torchrun spells its flags with underscores; --standalone picks a free port. On
    Python 3.11 its default --redirects/--tee "0" parse to None and torchrun fails before it starts
    a worker, whatever the backend (enum iteration skips the zero flag): name them."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(nproc),
               "--redirects", "1", "--tee", "1", script, *arguments]
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=quiet_environment())
    return run.returncode, ranked_lines(run.stdout), run.stdout, run.stderr


def ranked_lines(stdout):
    """[(rank, line)] from torchrun's tee: each rank's pieces joined in order, then cut into lines
    (a line a worker wrote in two pieces can reach the terminal as two prefixed halves)."""
    texts = {}
    pieces = _TORCHRUN_PREFIX.split(stdout)
    # split() gives [before, rank, text, rank, text, ...]; text up to the next prefix.
    for rank, text in zip(pieces[1::2], pieces[2::2]):
        # A piece that does not end its line runs up to the next prefix; one that does may be
        # followed by torchrun's own lines, which belong to no rank.
        own = text if "\n" not in text else text[:text.index("\n") + 1]
        texts[int(rank)] = texts.get(int(rank), "") + own
    return [(rank, line) for rank in sorted(texts) for line in texts[rank].splitlines()]


def run_env_ranks(script, size, arguments=(), timeout=120, **extra):
    """Runs `script worker ARGUMENTS` as `size` processes joined through env:// (rank 0 hosts
    torch's TCPStore on a free port), with `extra` in their environment; returns [(output, exit
    code or None when it hung and was killed)] in rank order."""
    port = free_port()
    ranks = []
    for rank in range(size):
        env = quiet_environment(RANK=str(rank), WORLD_SIZE=str(size), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                                **extra)
        ranks.append(subprocess.Popen([sys.executable, script, "worker", *arguments], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    results = []
    for process in ranks:
        try:
            out, _ = process.communicate(timeout=timeout)
            results.append((out, process.returncode))
        except subprocess.TimeoutExpired:
            process.kill()
            out, _ = process.communicate()
            results.append((out, None))
    return results


def run_spawning(script, arguments=(), timeout=240):
    """Runs a script that starts its own ranks (mp.spawn) with env:// on a free port; returns
    (exit code, [line], stdout, stderr)."""
    run = subprocess.run([sys.executable, script, *arguments], capture_output=True, text=True, timeout=timeout,
                         env=quiet_environment(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())))
    return run.returncode, run.stdout.splitlines(), run.stdout, run.stderr


def spawn_and_report(worker, size, arguments, label):
    """Runs worker(rank, *arguments, results) on `size` ranks with mp.spawn; each rank puts
    (rank, checks made, [failure]) on `results`. Prints every failure and a line per rank (each
    prefixed with `label`); returns how many checks failed."""
    import torch.multiprocessing as mp

    results = mp.get_context("spawn").Queue()
    mp.spawn(worker, args=(*arguments, results), nprocs=size, join=True)
    failed = 0
    for _ in range(size):
        rank, count, failures = results.get(timeout=10)
        for failure in failures:
            print("FAIL %s %s" % (label, failure))
        failed += len(failures)
        print("%s rank %d: %d checks, %d failed" % (label, rank, count, len(failures)))
    return failed
