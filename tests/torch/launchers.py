"""Starting a Python program on several ranks the two ways users do, for the torch tests:
torchrun (torch.distributed.run) and a script that spawns its own ranks."""
import os
import re
import socket
import subprocess
import sys

# tee prefixes each worker's line with "[default<rank>]:".
_TORCHRUN_PREFIX = re.compile(r"^\[default(\d+)\]:(.*)$")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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
    lines = []
    for line in run.stdout.splitlines():
        match = _TORCHRUN_PREFIX.match(line)
        if match:
            lines.append((int(match.group(1)), match.group(2)))
    return run.returncode, lines, run.stdout, run.stderr


def run_spawning(script, arguments=(), timeout=240):
    """Runs a script that starts its own ranks (mp.spawn) with env:// on a free port; returns
    (exit code, [line], stdout, stderr)."""
    run = subprocess.run([sys.executable, script, *arguments], capture_output=True, text=True, timeout=timeout,
                         env=quiet_environment(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())))
    return run.returncode, run.stdout.splitlines(), run.stdout, run.stderr
