"""The store a fault-suite case's ranks join through, hosted by the suite (comm-store on a free
loopback port), so that any rank may die: shared by run_recovery_faults.py and
run_agreement_faults.py."""
import contextlib
import socket
import subprocess
import time


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def hosted_store(store_program):
    """Yields the port of a comm-store that accepts connections; stops it afterwards."""
    port = free_port()
    store = subprocess.Popen([store_program, "--port", str(port)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.02)
        yield port
    finally:
        store.kill()
        store.wait()
