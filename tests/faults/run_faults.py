#!/usr/bin/env python3
"""The fault-injection suite (issue 15): random cases over shm and tcp, 2 to 8 ranks.

Each case starts the ranks of a job directly (as torchrun would: RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; rank 0 hosts the store; a job secret in COMM_JOB_TOKEN), running
comm-fault-worker, which checks every result against a float64 reference. Then one of:
  kill-mid        SIGKILL a random rank while the job runs collectives
  kill-init       a random rank kills itself at a step of init (before publishing its address,
                  comparing hosts, shm pairs, segment, acknowledging)
  kill-new-group  a random rank kills itself while new_group maps the subgroup's segment
  mismatch        one rank calls something else in one slot (count, dtype, op, root, collective)
  attack          while the job runs: random bytes, huge length prefixes, half-open
                  connections, a client without the secret, a replayed proof and a flood of
                  1000 connections on the store port
  leave-early     no fault: every rank exits right after its last collective, with no barrier,
                  while its last messages may still be on their way
and asserts: no wrong result ever; after a kill every survivor errors within 2 s naming the
dead rank; after a mismatch every rank gets a mismatch error within 1 s of the first; under
attack the job completes and the store's host stays within 64 MiB of the other ranks' memory;
no process and no /dev/shm segment of the job is left.

  run_faults.py WORKER [--cases N] [--seed S] [--only KIND]
N defaults to COMM_FAULTS_CASES or 40 (the long mode: COMM_FAULTS_CASES=1000). A failure prints
the case's seed; --seed S --cases 1 replays it.
"""
import argparse
import hashlib
import hmac
import os
import random
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

KINDS = ["kill-mid", "kill-mid", "kill-mid", "kill-init", "kill-init", "kill-new-group", "mismatch", "mismatch",
         "attack", "leave-early"]
MISMATCH_KINDS = ["count", "dtype", "op", "root", "collective"]
DETECTION_LIMIT_MS = 2000
MISMATCH_SPREAD_MS = 1000


ERROR_LINE = re.compile(r"^ERROR (.+?) peer (-?\d+) at (\d+): (.*)$")


def parse_error(line):
    """(code, peer, ms, message) of a worker's ERROR line, or None."""
    match = ERROR_LINE.match(line or "")
    return (match.group(1), int(match.group(2)), float(match.group(3)), match.group(4)) if match else None


def now_ms():
    return time.time() * 1000.0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def job_id(secret):
    # libcomm/base/job_secret.cpp: HMAC-SHA256(secret, u32 length + "libcomm job id"), 16 hex.
    purpose = b"libcomm job id"
    message = struct.pack("<I", len(purpose)) + purpose
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()[:16]


class Rank:
    def __init__(self, rank, argv, env):
        self.rank = rank
        self.lines = []
        self.times = []  # when each line arrived (ms)
        self.process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.exit_ms = None

    def _read(self):
        for raw in self.process.stdout:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self.times.append(now_ms())

    def has(self, prefix):
        return any(line.startswith(prefix) for line in self.lines)

    def line(self, prefix):
        return next((line for line in self.lines if line.startswith(prefix)), None)

    def poll(self):
        if self.exit_ms is None and self.process.poll() is not None:
            self.exit_ms = now_ms()
        return self.process.returncode if self.exit_ms is not None else None

    def kill(self):
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Case:
    def __init__(self, seed, worker, only):
        self.seed = seed
        self.worker = worker
        rng = random.Random(seed)
        self.kind = only or rng.choice(KINDS)
        self.transport = rng.choice(["shm", "tcp"])
        self.size = rng.randint(2, 8)
        if self.kind == "kill-new-group":
            self.size = max(self.size, 3)  # the even ranks {0, 2, ...} make a real subgroup
        self.victim = rng.randrange(self.size)
        if self.kind == "kill-new-group":
            # Only shared memory has set-up in new_group (the subgroup's segment), and rank 0
            # of the subgroup creates it: the victim is another even rank.
            self.transport = "shm"
            self.victim = rng.randrange(2, self.size, 2)
        self.delay_ms = rng.randint(0, 400)
        self.mismatch_kind = rng.choice(MISMATCH_KINDS)
        self.mismatch_at = rng.randint(0, 30)
        self.init_step = rng.choice(["address", "host", "pair", "segment", "acknowledge"])
        self.secret = "faults-%016x-secret" % rng.getrandbits(64)
        self.stop_file = "/tmp/comm-faults-stop-%d-%d" % (os.getpid(), seed)
        # Issue 31: TCP cases also connect on first use, half of them (from a generator of its
        # own, so that every seed still draws the case it drew before).
        # Not for mismatches: a rank that connects lazily to a peer already stopped over a
        # mismatch and gone hears only that it ended, not the mismatch (the known limit of lazy
        # connections, docs/bootstrap.md; one case of 40 failed so in CI).
        self.connect = "eager"
        if self.transport == "tcp" and self.kind != "mismatch" and random.Random(seed * 7919 + 1).random() < 0.5:
            self.connect = "lazy"
        self.failures = []
        self.detections = []

    def describe(self):
        text = "seed %d: %s, %s%s, %d ranks" % (self.seed, self.kind, self.transport,
                                                 " (lazy)" if self.connect == "lazy" else "", self.size)
        if self.kind.startswith("kill"):
            text += ", rank %d dies" % self.victim
            if self.kind == "kill-init":
                text += " (%s)" % self.init_step
        if self.kind == "mismatch":
            text += ", rank %d changes the %s of call %d" % (self.victim, self.mismatch_kind, self.mismatch_at)
        return text

    def worker_arguments(self):
        ops = {"mismatch": 300, "leave-early": 40}.get(self.kind, 100000)
        if self.kind == "kill-init":
            ops = 50
        arguments = [self.worker, str(self.seed), str(ops)]
        if self.kind == "kill-init":
            # Steps of init after the join: over tcp only the first and the last have keys of their own.
            victim = self.victim
            step = self.init_step if self.transport == "shm" or self.init_step == "address" else "acknowledge"
            if step == "segment" and victim == 0:
                step = "acknowledge"
            key = {"address": "/tcp/%d" % victim, "host": "/host/%d" % victim, "pair": "shm/segment/%d" % victim,
                   "segment": "arena/0/mapped/%d" % victim, "acknowledge": "/acked/%d" % victim}[step]
            self.init_step = step
            arguments += ["--die-at-key", key, "--die-rank", str(victim)]
        if self.kind == "kill-new-group":
            # The victim's rank in the subgroup of even ranks is half its world rank.
            arguments += ["--die-at-key", "/mapped/%d" % (self.victim // 2), "--die-rank", str(self.victim)]
        if self.kind == "attack":
            arguments += ["--stop-file", self.stop_file]
        if self.kind == "leave-early":
            arguments += ["--no-final-barrier", "1"]
        if self.kind == "mismatch":
            arguments += ["--mismatch-at", str(self.mismatch_at), "--mismatch-rank", str(self.victim),
                          "--mismatch-kind", self.mismatch_kind]
        return arguments

    def fail(self, message):
        self.failures.append(message)

    def run(self):
        port = free_port()
        base = dict(os.environ)
        for name in ("COMM_HANG_REPORT", "COMM_TIMEOUT"):
            base.pop(name, None)
        base.update({"WORLD_SIZE": str(self.size), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                     "COMM_TRANSPORT": self.transport, "COMM_JOB_TOKEN": self.secret, "COMM_LOG_LEVEL": "error",
                     "COMM_CONNECT": self.connect})
        before = set(os.listdir("/dev/shm"))
        ranks = []
        for rank in range(self.size):
            env = dict(base)
            env["RANK"] = str(rank)
            ranks.append(Rank(rank, self.worker_arguments(), env))
        death_ms = None
        attack = None
        try:
            if self.kind in ("kill-mid", "attack"):
                if not self.wait_all(ranks, "ready", 30):
                    return
                if self.kind == "kill-mid":
                    time.sleep(self.delay_ms / 1000.0)
                    death_ms = now_ms()
                    ranks[self.victim].kill()
                else:
                    attack = threading.Thread(target=attack_store, args=(port, self.secret, self), daemon=True)
                    attack.start()
            self.wait_exits(ranks, 60)
            if attack:
                attack.join(30)
            if self.kind in ("kill-init", "kill-new-group"):
                line = ranks[self.victim].line("dying at ")
                if line is None:
                    self.fail("rank %d never reached its point of death" % self.victim)
                    return
                death_ms = float(line.split()[2])
            self.check(ranks, death_ms)
        finally:
            for rank in ranks:
                if rank.poll() is None:
                    self.fail("rank %d was still running at the end" % rank.rank)
                    rank.kill()
                    rank.process.wait()
            prefix = "comm-" + job_id(self.secret) + "-"
            pids = ["-%d-" % rank.process.pid for rank in ranks]
            left = [name for name in set(os.listdir("/dev/shm")) - before
                    if name.startswith(prefix) or (name.startswith("comm-") and any(pid in name for pid in pids))]
            if left:
                self.fail("left in /dev/shm: " + ", ".join(sorted(left)))
                for name in left:
                    try:
                        os.unlink("/dev/shm/" + name)
                    except OSError:
                        pass
            if os.path.exists(self.stop_file):
                os.unlink(self.stop_file)
            if self.failures:
                for rank in ranks:
                    for line in rank.lines[-6:]:
                        self.failures.append("  [%d] %s" % (rank.rank, line))

    def wait_all(self, ranks, prefix, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            if all(rank.has(prefix) for rank in ranks):
                return True
            if any(rank.poll() is not None for rank in ranks):
                break
            time.sleep(0.005)
        self.fail("not every rank said '%s'" % prefix)
        return False

    def wait_exits(self, ranks, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline and any(rank.poll() is None for rank in ranks):
            time.sleep(0.005)
        for rank in ranks:
            rank.reader.join(2)

    def check(self, ranks, death_ms):
        for rank in ranks:
            for line in rank.lines:
                if line.startswith("WRONG"):
                    self.fail("rank %d: %s" % (rank.rank, line))
        if self.kind == "leave-early":
            for rank in ranks:
                if rank.poll() != 0 or not rank.has("DONE "):
                    self.fail("rank %d did not finish (exit %s)" % (rank.rank, rank.poll()))
            return
        if self.kind == "attack":
            peaks = []
            for rank in ranks:
                done = rank.line("DONE ")
                if rank.poll() != 0 or done is None:
                    self.fail("rank %d did not finish its job under attack (exit %s)" % (rank.rank, rank.poll()))
                else:
                    peaks.append(int(done.split()[3]))
            if len(peaks) == len(ranks) and peaks[0] > max(peaks[1:] or [0]) + 64 * 1024:
                self.fail("the store's host peaked at %d KiB, the others at most %d KiB" % (peaks[0], max(peaks[1:])))
            return
        if self.kind == "mismatch":
            stamps = []
            for rank in ranks:
                line = rank.line("ERROR ")
                error = parse_error(line)
                if rank.poll() != 10 or error is None or error[0] != "mismatch":
                    self.fail("rank %d did not get a mismatch error: %s" % (rank.rank, line))
                else:
                    stamps.append(error[2])
            if stamps and max(stamps) - min(stamps) > MISMATCH_SPREAD_MS:
                self.fail("mismatch errors spread over %.0f ms" % (max(stamps) - min(stamps)))
            return
        for rank in ranks:
            if rank.rank == self.victim:
                continue
            line = rank.line("ERROR ")
            if rank.poll() != 10 or line is None:
                self.fail("survivor %d did not fail (exit %s): %s" % (rank.rank, rank.poll(), line))
                continue
            error = parse_error(line)
            if error is None:
                self.fail("survivor %d: unreadable error line %s" % (rank.rank, line))
                continue
            detected = error[2] - death_ms
            self.detections.append(detected)
            if detected > DETECTION_LIMIT_MS:
                self.fail("survivor %d erred %.0f ms after the death" % (rank.rank, detected))
            if "rank %d" % self.victim not in line:
                self.fail("survivor %d does not name rank %d: %s" % (rank.rank, self.victim, line))


def store_hello(nonce):
    body = struct.pack("<BII", 1, 0x4D4D4F43, 3) + struct.pack("<I", len(nonce)) + nonce
    return struct.pack("<I", len(body)) + body


def read_frame(connection):
    header = b""
    while len(header) < 4:
        chunk = connection.recv(4 - len(header))
        if not chunk:
            return None
        header += chunk
    (length,) = struct.unpack("<I", header)
    body = b""
    while len(body) < length:
        chunk = connection.recv(length - len(body))
        if not chunk:
            return None
        body += chunk
    return body


def closed_by_server(connection, seconds=8.0):
    connection.settimeout(seconds)
    try:
        while True:
            if not connection.recv(4096):
                return True
    except ConnectionResetError:
        return True
    except OSError:
        return False


def proof(secret, purpose, *parts):
    message = b"".join(struct.pack("<I", len(part)) + part for part in (purpose,) + parts)
    return hmac.new(secret.encode(), message, hashlib.sha256).digest()


def attack_store(port, secret, case):
    """Every kind of stranger the store must survive while the job runs."""
    rng = random.Random(case.seed)

    def connect():
        return socket.create_connection(("127.0.0.1", port), timeout=5)

    try:
        held = []
        for _ in range(10):  # random bytes
            with connect() as connection:
                connection.sendall(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 300))))
        for _ in range(10):  # a huge length prefix, then a trickle
            connection = connect()
            connection.sendall(struct.pack("<I", 0x7FFFFFF0) + b"\x02abc")
            held.append(connection)
        for _ in range(10):  # half-open: a partial frame, then silence
            connection = connect()
            connection.sendall(b"\x10\x00")
            held.append(connection)
        # A client without the secret: says hello, then asks for a key without proving anything.
        with connect() as connection:
            connection.sendall(store_hello(os.urandom(32)))
            reply = read_frame(connection)
            if reply is None or reply[0] != 0 or struct.unpack("<I", reply[1:5])[0] != 1:
                case.fail("the store did not demand the secret: %r" % (reply,))
            key = b"default_pg/job_token"
            body = struct.pack("<B", 3) + struct.pack("<I", len(key)) + key + struct.pack("<q", 100)
            connection.sendall(struct.pack("<I", len(body)) + body)
            if not closed_by_server(connection):
                case.fail("a client without the secret was not dropped")
        # A replayed proof: valid for one connection's nonces, sent on another's.
        client_nonce = os.urandom(32)
        with connect() as first:
            first.sendall(store_hello(client_nonce))
            reply = read_frame(first)
            server_nonce = reply[9:41] if reply else b""
            recorded = proof(secret, b"libcomm store client", client_nonce, server_nonce)
        with connect() as replay:
            replay.sendall(store_hello(client_nonce))
            read_frame(replay)
            body = struct.pack("<B", 10) + struct.pack("<I", len(recorded)) + recorded
            replay.sendall(struct.pack("<I", len(body)) + body)
            answer = read_frame(replay)
            if answer is None or answer[0] != 4:
                case.fail("a replayed proof was not refused: %r" % (answer,))
        flood = []
        for _ in range(1000):
            try:
                flood.append(connect())
            except OSError:
                break
        for connection in flood + held:
            connection.close()
    except OSError as error:
        case.fail("the attack could not reach the store: %s" % error)
    finally:
        # The job runs until the attack is over (the worker's --stop-file).
        open(case.stop_file, "w").close()


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# Seeds whose cases once failed, run on every run beside the random ones (unless a seed is
# given): their races are timing-dependent, so each was seen to fail most runs without its fix.
REPLAYED_SEEDS = [
    # kill-init over shm, 3 ranks, rank 2 dies while pairs are set up: rank 0 (the store's host)
    # reports it and exits; rank 1 read that cause, then looked again and blamed rank 0.
    827748281,
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("worker")
    parser.add_argument("--cases", type=int, default=int(os.environ.get("COMM_FAULTS_CASES", "40")))
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--only", choices=sorted(set(KINDS)), default=None)
    options = parser.parse_args()
    first_seed = options.seed if options.seed is not None else random.SystemRandom().randrange(1, 10**9)
    print("fault suite: %d cases from seed %d (replay one: --seed S --cases 1)" % (options.cases, first_seed))
    failed = 0
    detections = {"shm": [], "tcp": []}
    counts = {}
    started = time.time()
    seeds = [first_seed + index for index in range(options.cases)]
    if options.seed is None and options.only is None:
        seeds = REPLAYED_SEEDS + seeds
        print("and %d replayed: %s" % (len(REPLAYED_SEEDS), ", ".join(map(str, REPLAYED_SEEDS))))
    for seed in seeds:
        case = Case(seed, options.worker, options.only)
        case.run()
        counts[case.kind] = counts.get(case.kind, 0) + 1
        detections[case.transport] += case.detections
        if case.failures:
            failed += 1
            print("FAIL " + case.describe())
            for failure in case.failures:
                print("    " + failure)
        else:
            print("ok   " + case.describe() +
                  ("" if not case.detections else ", detected in %.0f ms at most" % max(case.detections)))
        sys.stdout.flush()
    print("kinds: " + ", ".join("%s %d" % item for item in sorted(counts.items())))
    for transport, values in detections.items():
        if values:
            print("detection over %s: %d survivors, p50 %.0f ms, p99 %.0f ms, max %.0f ms" %
                  (transport, len(values), percentile(values, 0.5), percentile(values, 0.99), max(values)))
    print("%d of %d cases failed in %.0f s" % (failed, len(seeds), time.time() - started))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
