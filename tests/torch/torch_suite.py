#!/usr/bin/env python3
"""Runs torch's own distributed test suite (DistributedTest._DistTestBase from the installed
torch's distributed_test.py) on the libcomm backend, or on Gloo to compare, the way torch's
test_distributed_spawn.py runs it (the wheel ships the suite but not that file): every test
starts WORLD_SIZE fresh processes with the spawn method, which rendezvous over file://.

    PYTHONPATH=build/torch_backend .venv/bin/python tests/torch/torch_suite.py --world-size 3
    ... torch_suite.py --backend gloo --json gloo.json     (the same suite on Gloo)
    ... torch_suite.py --subset ci                         (the part CI runs)
    ... torch_suite.py test_all_reduce_sum test_barrier    (chosen tests)
    ... torch_suite.py --compare gloo-2.json libcomm-2.json


A plugin backend is in no feature set of the suite (DistTestCases.backend_feature), so most tests
would skip it; libcomm is added to "plugin", "subgroup" and "ddp" (CPU features) before the suite
is imported, since its skip decorators are evaluated when its classes are defined. Tests that
torch restricts to gloo or nccl by name still skip, with torch's reason.
"""
import argparse
import json
import os
import sys
import time
import unittest

# Tests CI runs (world size 2, then 3): one or two of each kind the suite has for a CPU backend:
# collectives and their group forms, point-to-point, any-source, groups, DDP, and the API checks.
# (Each test starts its ranks afresh, and importing torch 2.13 costs seconds: kept short.)
CI_SUBSET = [
    "test_all_reduce_sum",
    "test_all_reduce_sum_async",
    "test_all_reduce_group_product",
    "test_all_reduce_full_group_min",
    "test_all_reduce_complex_unsupported_ops",
    "test_reduce_sum",
    "test_broadcast",
    "test_all_gather",
    "test_all_gather_coalesced_simple",
    "test_gather",
    "test_scatter",
    "test_barrier",
    "test_send_recv",
    "test_send_recv_any_source",
    "test_irecv",
    "test_destroy_group",
    "test_get_rank_size_group",
    "test_DistributedDataParallelCPU",
    "test_ddp_create_graph",
    # DDP's logging data names the backend as dist.get_backend() does (torch_libcomm's
    # LibcommProcessGroup; torch alone says "custom" for every plugin).
    "test_ddp_logging_data_cpu",
]


def parse_own_arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="libcomm", help="libcomm (default) or gloo")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--subset", choices=["ci"], help="run only the tests CI runs")
    parser.add_argument("--json", help="write each test's outcome to this file")
    parser.add_argument("--unlock", action="store_true",
                        help="define the suite as for gloo, so that tests torch locks to gloo by name "
                             "are not skipped, and run them on libcomm (an experiment: some check "
                             "gloo's own messages)")
    parser.add_argument("--compare", nargs=2, metavar=("GLOO_JSON", "LIBCOMM_JSON"),
                        help="compare two --json files and print the table for docs/torch.md")
    parser.add_argument("tests", nargs="*", help="test names (test_x); all of them when none")
    own = parser.parse_args()
    # torch's test utilities parse sys.argv when imported: leave them only the program's name.
    # The spawned children inherit the environment, not these arguments.
    sys.argv = sys.argv[:1]
    os.environ["BACKEND"] = own.backend
    os.environ["WORLD_SIZE"] = str(own.world_size)
    if own.unlock:
        os.environ["TORCH_SUITE_UNLOCK"] = "1"
    return own


if __name__ == "__main__":
    ARGUMENTS = parse_own_arguments()
    if ARGUMENTS.compare:
        from compare_torch_suite import print_comparison  # noqa: E402 (no torch needed)
        sys.exit(print_comparison(*ARGUMENTS.compare))

# Everything below runs again in every spawned child, which imports this file as __mp_main__.
os.environ.setdefault("BACKEND", "libcomm")
os.environ.setdefault("WORLD_SIZE", "2")
BACKEND = os.environ["BACKEND"]


from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if BACKEND == "libcomm":
    import torch_libcomm  # noqa: F401,E402  registers the backend in this process

    for feature in ("plugin", "subgroup", "ddp"):
        DistTestCases.backend_feature[feature].add(BACKEND)

UNLOCK = BACKEND == "libcomm" and os.environ.get("TORCH_SUITE_UNLOCK") == "1"
if UNLOCK:
    os.environ["BACKEND"] = "gloo"  # what the skip decorators see while the classes are defined
from torch.testing._internal.distributed import distributed_test  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)

if UNLOCK:
    os.environ["BACKEND"] = BACKEND
    distributed_test.BACKEND = BACKEND  # what init_process_group and the tests' bodies use


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


class OutcomeRecorder(unittest.TextTestResult):
    """Keeps each test's outcome, skip reason and time for --json."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.outcomes = {}
        self._started = {}

    def _record(self, test, outcome, detail=""):
        name = test.id().rsplit(".", 1)[-1]
        seconds = time.monotonic() - self._started.get(name, time.monotonic())
        self.outcomes[name] = {"outcome": outcome, "detail": detail, "seconds": round(seconds, 2)}

    def startTest(self, test):
        self._started[test.id().rsplit(".", 1)[-1]] = time.monotonic()
        super().startTest(test)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "ok")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test)[-2000:])

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", self._exc_info_to_string(err, test)[-2000:])

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._record(test, "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._record(test, "unexpected success")


def main(arguments):
    loader = unittest.TestLoader()
    names = arguments.tests or (CI_SUBSET if arguments.subset == "ci" else None)
    if names:
        suite = unittest.TestSuite(TestDistBackendWithSpawn(name) for name in names)
    else:
        suite = loader.loadTestsFromTestCase(TestDistBackendWithSpawn)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=OutcomeRecorder, stream=sys.stdout)
    started = time.monotonic()
    result = runner.run(suite)
    outcomes = result.outcomes
    if arguments.json:
        with open(arguments.json, "w") as out:
            json.dump({"backend": BACKEND, "world_size": int(os.environ["WORLD_SIZE"]),
                       "seconds": round(time.monotonic() - started, 1), "tests": outcomes},
                      out, indent=1, sort_keys=True)
    counts = {}
    for entry in outcomes.values():
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    print("%s, world size %s: %d run, %s" % (BACKEND, os.environ["WORLD_SIZE"], len(outcomes),
          ", ".join("%d %s" % (n, outcome) for outcome, n in sorted(counts.items()))))
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(ARGUMENTS))
