#!/usr/bin/python3
"""The flight recorder's dumps against the calls the program made (issue 46).

    check_trace.py COMMRUN WORKER COMM_TRACE [PYTHON]

For shm and tcp, 4 ranks of comm-trace-worker (tests/trace_worker.cpp):
  calls: every rank's dump (comm::dump_trace) holds exactly the calls that rank says it made, in
         order, with their group, shape and peer; each completed, its times in order, the
         collectives numbered 0, 1, 2, ... in each group; the groups named with their ranks. The
         dump each rank writes on SIGUSR2 (into $TMPDIR) holds the same calls.
  skip:  under commrun --trace DIR, the last rank never calls the final all_reduce. Every rank
         dumps on the hang verdict; the waiting ranks' final dumps hold that all_reduce as failed
         with the verdict's text (or running, waiting on a peer, when commrun stopped them
         first), and the skipping rank's holds no such call. commrun merged the dumps with
         comm-trace: the trace-event JSON parses, every event carries name, ph, ts, pid and tid,
         every flow starts once and ends once, each rank's slices are the calls it made; the
         summary names rank 3 as behind in the world's all_reduce #5; with PYTHON (one with
         matplotlib, as commrun finds it through VIRTUAL_ENV) the picture is there too.
  The calls job's dumps merged by comm-trace run by hand pass the same checks of the trace.
  straggler: rank 2 computes 10 times as long each step: the summary names it the straggler.
  two hosts: ranks 0-1 and 2-3 made two hosts with COMM_HOST_ID: the clock offset measured at
         init is in the dumps, within its error bound (one clock in truth).
  kill: rank 2 is SIGKILLed mid-job (--on-failure continue), the others shrink and finish: the
         summary says rank 2 left no dump, the others' all_reduce #10 failed, the shrunk group
         finished.
Exits non-zero, saying what differs, on any mismatch.
"""
import json
import os
import subprocess
import sys
import tempfile

RANKS = 4
FAILURES = []


def fail(what):
    FAILURES.append(what)
    print("FAIL: " + what)


def run(commrun, worker, mode, directory, transport, extra_env=None, timeout=90, launcher_flags=()):
    env = dict(os.environ, COMM_TRANSPORT=transport)
    env.update(extra_env or {})
    command = [commrun, *launcher_flags, "-n", str(RANKS), worker, mode, directory]
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout + result.stderr


def load(directory, rank):
    with open(os.path.join(directory, f"comm_trace_rank{rank}.json")) as file:
        dump = json.load(file)
    with open(os.path.join(directory, f"calls_rank{rank}.json")) as file:
        calls = json.load(file)
    return dump, calls


def described(dump, entry):
    """An entry as the worker lists its calls."""
    group = dump["groups"][entry["group"]]["name"]
    peer = entry.get("peer", entry.get("root", -1))
    return {"op": entry["op"], "group": group, "count": entry.get("count", -1), "dtype": entry.get("dtype", ""),
            "peer": peer}


def check_dump_header(dump, rank, label):
    for key in ("job", "host", "pid", "groups", "entries", "clock", "capacity"):
        if key not in dump:
            fail(f"{label}: rank {rank}'s dump has no '{key}'")
    if dump.get("format") != "libcomm-trace" or dump.get("rank") != rank or dump.get("world_size") != RANKS:
        fail(f"{label}: rank {rank}'s dump names format {dump.get('format')}, rank {dump.get('rank')}, "
             f"world size {dump.get('world_size')}")
    world = dump["groups"][0]
    if world["ranks"] != list(range(RANKS)) or world["rank"] != rank:
        fail(f"{label}: rank {rank}'s world group reads {world}")


def check_calls(commrun, worker, transport):
    label = f"calls/{transport}"
    with tempfile.TemporaryDirectory(prefix="comm-trace-") as directory:
        signalled = os.path.join(directory, "signal")
        os.makedirs(signalled)
        code, output = run(commrun, worker, "calls", directory, transport, {"TMPDIR": signalled})
        if code != 0:
            fail(f"{label}: the job exited {code}:\n{output}")
            return
        for rank in range(RANKS):
            dump, calls = load(directory, rank)
            try:
                with open(os.path.join(signalled, f"comm_trace_rank{rank}.json")) as file:
                    on_signal = json.load(file)
                if on_signal["reason"] != "signal" or [described(on_signal, e) for e in on_signal["entries"]] != calls:
                    fail(f"{label}: rank {rank}'s dump on SIGUSR2 reads {on_signal}")
            except (OSError, ValueError) as error:
                fail(f"{label}: rank {rank} wrote no dump on SIGUSR2 ({error}):\n{output}")
            check_dump_header(dump, rank, label)
            entries = dump["entries"]
            got = [described(dump, entry) for entry in entries]
            if got != calls:
                fail(f"{label}: rank {rank} recorded\n  {got}\nbut called\n  {calls}")
            sequences = {}
            for entry in entries:
                name = f"{label}: rank {rank} entry {entry['id']} ({entry['op']})"
                if entry["state"] != "completed":
                    fail(f"{name} is {entry['state']}")
                if not entry["queued_ns"] <= entry["started_ns"] <= entry["completed_ns"]:
                    fail(f"{name}: times out of order {entry['queued_ns']} {entry['started_ns']} "
                         f"{entry['completed_ns']}")
                if "dtype" in entry and entry["bytes"] != entry["count"] * {"float32": 4, "float64": 8, "int32": 4,
                                                                              "int64": 8}[entry["dtype"]]:
                    fail(f"{name}: {entry['bytes']} bytes for {entry['count']} {entry['dtype']}")
                if entry["op"] in ("all_reduce", "broadcast", "barrier"):
                    if not entry.get("algorithm"):
                        fail(f"{name} names no algorithm")
                    expected = sequences.get(entry["group"], 0)
                    if entry["sequence"] != expected:
                        fail(f"{name}: sequence {entry['sequence']}, expected {expected}")
                    sequences[entry["group"]] = expected + 1
            ids = [entry["id"] for entry in entries]
            if ids != sorted(ids) or len(set(ids)) != len(ids):
                fail(f"{label}: rank {rank}'s entries are not in call order: {ids}")
        merged = subprocess.run([PYTHON, COMM_TRACE, directory, "--no-png"], capture_output=True, text=True, timeout=120)
        if merged.returncode != 0:
            fail(f"{label}: comm-trace exited {merged.returncode}: {merged.stdout}{merged.stderr}")
        else:
            check_merge(directory, label, behind=False)


def check_skip(commrun, worker, transport):
    label = f"skip/{transport}"
    with tempfile.TemporaryDirectory(prefix="comm-trace-") as directory:
        environment = {"COMM_HANG_REPORT": "2", "COMM_TIMEOUT": "5"}
        if PYTHON_HAS_PLOTS:
            environment["VIRTUAL_ENV"] = os.path.dirname(os.path.dirname(PYTHON))
        code, output = run(commrun, worker, "skip", directory, transport, environment,
                           launcher_flags=["--trace", directory])
        if code == 0:
            fail(f"{label}: the job exited 0 though three ranks timed out:\n{output}")
        for rank in range(RANKS):
            if f"flight recorder written to {directory}/comm_trace_rank{rank}.json (hang)" not in output:
                fail(f"{label}: rank {rank} did not dump on the hang verdict:\n{output}")
        skipper = RANKS - 1
        verdicts = 0
        for rank in range(RANKS):
            dump, calls = load(directory, rank)
            check_dump_header(dump, rank, label)
            world_all_reduces = [entry for entry in dump["entries"]
                                 if entry["op"] == "all_reduce" and entry["group"] == 0]
            last = world_all_reduces[-1]
            if rank == skipper:
                if len(world_all_reduces) != 3 or any(entry["state"] != "completed" for entry in world_all_reduces):
                    fail(f"{label}: the skipping rank recorded {world_all_reduces}")
                continue
            if len(world_all_reduces) != 4 or last["sequence"] != 5:
                fail(f"{label}: rank {rank}'s world all_reduces: {world_all_reduces}")
                continue
            # Failed by its timeout (whose text is the verdict), or still waiting on a peer when
            # commrun ended the job after the first rank's timeout.
            if last["state"] == "failed" and "has waited" in last.get("error", ""):
                verdicts += 1
            elif last["state"] != "running" or last.get("waiting_on", -1) < 0:
                fail(f"{label}: rank {rank}'s unfinished all_reduce reads {last}")
        if verdicts == 0:
            fail(f"{label}: no rank's dump holds the all_reduce failed with the verdict")
        if not os.path.exists(os.path.join(directory, "trace.json")):
            fail(f"{label}: commrun --trace merged nothing:\n{output}")
            return
        check_merge(directory, label, behind=True)


def check_merge(directory, label, behind):
    """The merged trace (and with `behind`, the summary and picture of the skip job)."""
    with open(os.path.join(directory, "trace.json")) as file:
        events = json.load(file)["traceEvents"]
    flows = {}
    slices = {}
    for event in events:
        missing = [key for key in ("name", "ph", "ts", "pid", "tid") if key not in event and event.get("ph") != "M"]
        if missing or ("pid" not in event or "tid" not in event):
            fail(f"{label}: a trace event lacks {missing}: {event}")
        if event["ph"] in ("s", "f"):
            flows.setdefault(event["id"], []).append(event["ph"])
        if event["ph"] == "X":
            slices.setdefault(event["tid"], []).append(event)
    for flow, phases in flows.items():
        if sorted(phases) != ["f", "s"]:
            fail(f"{label}: flow {flow} has phases {phases}")
    if not flows:
        fail(f"{label}: the merged trace links nothing")
    for rank in range(RANKS):
        with open(os.path.join(directory, f"calls_rank{rank}.json")) as file:
            calls = json.load(file)
        made = sorted(call["op"] for call in calls)
        shown = sorted(event["name"].split(" ")[0] for event in slices.get(rank, []))
        if made != shown:
            fail(f"{label}: rank {rank}'s slices {shown} are not its calls {made}")
    if not behind:
        return
    with open(os.path.join(directory, "summary.txt")) as file:
        summary = file.read()
    if "rank 3 is behind: its last call there is barrier #4" not in summary or "in all_reduce #5" not in summary:
        fail(f"{label}: the summary does not name rank 3 behind the all_reduce:\n{summary}")
    if PYTHON_HAS_PLOTS and not os.path.getsize(os.path.join(directory, "timeline.png")):
        fail(f"{label}: no picture")


COMM_TRACE = None
PYTHON = sys.executable
PYTHON_HAS_PLOTS = False


def check_steps(commrun, worker, mode, transport, expected):
    """The straggler and kill jobs under commrun --trace: the summary says `expected`."""
    label = f"{mode}/{transport}"
    with tempfile.TemporaryDirectory(prefix="comm-trace-") as directory:
        code, output = run(commrun, worker, mode, directory, transport,
                           launcher_flags=["--trace", directory, "--on-failure", "continue"])
        if code != 0:
            fail(f"{label}: the job exited {code}:\n{output}")
        try:
            with open(os.path.join(directory, "summary.txt")) as file:
                summary = file.read()
        except OSError:
            fail(f"{label}: no summary:\n{output}")
            return
        for words in expected:
            if words not in summary:
                fail(f"{label}: the summary does not say '{words}':\n{summary}")


def check_two_hosts(commrun, worker):
    """Ranks 0-1 and 2-3 as two hosts (COMM_HOST_ID): the dumps of ranks 2-3 carry the offset of
    their clock from rank 0's, measured at init; the same clock here, so it must lie within its
    error bound (which a loopback round trip keeps under a millisecond)."""
    label = "two hosts"
    with tempfile.TemporaryDirectory(prefix="comm-trace-") as directory:
        script = f'COMM_HOST_ID=h$((RANK/2)) exec "{worker}" calls "{directory}"'
        result = subprocess.run([commrun, "-n", str(RANKS), "sh", "-c", script], capture_output=True, text=True,
                                timeout=90, env=dict(os.environ, COMM_TRANSPORT="auto"))
        if result.returncode != 0:
            fail(f"{label}: the job exited {result.returncode}:\n{result.stdout}{result.stderr}")
            return
        for rank in range(RANKS):
            clock = load(directory, rank)[0]["clock"]
            offset, error = clock.get("offset_to_rank0_ns"), clock.get("offset_error_ns")
            if offset is None or error is None:
                fail(f"{label}: rank {rank}'s dump has no clock offset: {clock}")
            elif rank < 2 and (offset, error) != (0, 0):
                fail(f"{label}: rank {rank}, on rank 0's host, has offset {offset} +- {error} ns")
            elif rank >= 2 and not (abs(offset) <= error < 1_000_000):
                fail(f"{label}: rank {rank}'s offset {offset} +- {error} ns: one clock, so it must be within")


def main():
    global COMM_TRACE, PYTHON, PYTHON_HAS_PLOTS
    commrun, worker, COMM_TRACE = sys.argv[1], sys.argv[2], sys.argv[3]
    if len(sys.argv) > 4 and subprocess.run([sys.argv[4], "-c", "import matplotlib"], capture_output=True).returncode == 0:
        PYTHON, PYTHON_HAS_PLOTS = sys.argv[4], True
    for transport in ("shm", "tcp"):
        check_calls(commrun, worker, transport)
        check_skip(commrun, worker, transport)
    check_two_hosts(commrun, worker)
    check_steps(commrun, worker, "straggler", "shm", ["rank 2 is the straggler: it starts"])
    check_steps(commrun, worker, "kill", "tcp", ["no dump from rank 2", "all_reduce #10 (failed)",
                                                 "rank 2 left no dump", "group default_pg/shrink1: every rank finished"])
    print(f"{len(FAILURES)} failures")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
