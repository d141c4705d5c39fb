"""What the compare_*.py scripts share: their arguments, running a command for its output, and
compiling a peer's C benchmark from ../shared/peers into a scratch folder."""
import argparse
import os
import subprocess
import tempfile


def arguments():
    parser = argparse.ArgumentParser()
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
