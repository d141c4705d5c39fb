"""Compares two runs of torch's DistributedTest (torch_suite.py --json), Gloo's and libcomm's at
one world size, and prints the table docs/torch.md keeps: the counts, and every test that passed
on Gloo but not on libcomm with the reason. Such a test is accounted for only when torch itself
locks it to other backends by name (its skip reason names gloo, nccl or mpi); anything else, and
any failure or error on libcomm, makes the comparison fail (exit status 1).

    .venv/bin/python tests/torch/torch_suite.py --compare gloo-2.json libcomm-2.json
"""
import collections
import json
import re

_LOCKED_BY_NAME = re.compile(r"\b(gloo|nccl|mpi)\b", re.IGNORECASE)


def _load(path):
    with open(path) as source:
        return json.load(source)


def _counts(run):
    counts = collections.Counter(entry["outcome"] for entry in run["tests"].values())
    broken = sum(n for outcome, n in counts.items() if outcome not in ("ok", "skipped"))
    return len(run["tests"]), counts["ok"], counts["skipped"], broken


def print_comparison(gloo_path, libcomm_path):
    gloo, libcomm = _load(gloo_path), _load(libcomm_path)
    world_size = libcomm["world_size"]
    print("World size %d\n" % world_size)
    print("| backend | run | passed | skipped | failed or error | seconds |")
    print("|---|---|---|---|---|---|")
    for run in (gloo, libcomm):
        print("| %s | %d | %d | %d | %d | %s |" % ((run["backend"],) + _counts(run) + (run["seconds"],)))

    unexplained = 0
    only_gloo = collections.defaultdict(list)
    for name, entry in sorted(gloo["tests"].items()):
        mine = libcomm["tests"].get(name, {"outcome": "not run", "detail": ""})
        if entry["outcome"] != "ok" or mine["outcome"] == "ok":
            continue
        locked = mine["outcome"] == "skipped" and _LOCKED_BY_NAME.search(mine["detail"])
        unexplained += not locked
        reason = mine["detail"].strip().splitlines()[-1] if mine["detail"].strip() else mine["outcome"]
        label = "locked by name: " if locked else "NOT ACCOUNTED FOR (%s): " % mine["outcome"]
        only_gloo[label + reason].append(name)
    print("\nPassed on Gloo, not run on libcomm (%d):\n" % sum(len(names) for names in only_gloo.values()))
    print("| why (torch's skip reason) | tests |")
    print("|---|---|")
    for reason, names in sorted(only_gloo.items()):
        print("| %s | %d: %s |" % (reason, len(names), ", ".join(name[len("test_"):] for name in names)))

    broken = [(name, entry) for name, entry in sorted(libcomm["tests"].items())
              if entry["outcome"] not in ("ok", "skipped")]
    for name, entry in broken:
        print("\nlibcomm %s: %s\n%s" % (entry["outcome"], name, entry["detail"]))
    only_libcomm = [name for name, entry in sorted(libcomm["tests"].items())
                    if entry["outcome"] == "ok" and gloo["tests"].get(name, {}).get("outcome") != "ok"]
    if only_libcomm:
        print("\nPassed on libcomm, not on Gloo: " + ", ".join(only_libcomm))
    print("\n%d failed or errors on libcomm, %d passed on Gloo only without a lock by name"
          % (len(broken), unexplained))
    return 1 if broken or unexplained else 0
