#!/usr/bin/env bash
# Issue 27, item 8: a container's /dev/shm (Docker's default is 64 MiB) was too small for the
# segments of 8 ranks (28 pairs x 8 MiB), and the job died of SIGBUS when a page was first
# touched. Segments are reserved when they are made, and a job that cannot have them runs over
# TCP, saying why once. Issue 31: the rings' budget, unless COMM_SHM_BUDGET_MB says otherwise,
# is at most half of each rank's share of what /dev/shm has free, so 8 ranks now fit there.
# In a private mount namespace with a 64 MiB tmpfs on /dev/shm (the machine's is untouched):
# 8 and 4 ranks stay on shared memory; 8 ranks asking for 16 MiB each fall back to TCP, say it
# once with what was needed and what is free; every run finishes with right results and leaves
# nothing in /dev/shm.
#   small_dev_shm.sh COMMRUN HELPER
set -euo pipefail
commrun=$1
helper=$2
if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
  echo "needs root and unshare -m; skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# shellcheck disable=SC2016
unshare -m --propagation private bash -c '
  set -euo pipefail
  mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm
  for run in "8 auto" "4 auto" "8 16"; do
    set -- "$1" "$2" "$3" $run
    ranks=$4 budget=$5
    out="$1/out.$ranks.$budget"
    # The helper checks an all_reduce against its own reference; --bind none keeps the core
    # lock file out of the way.
    if [ "$budget" = auto ]; then unset COMM_SHM_BUDGET_MB; else export COMM_SHM_BUDGET_MB=$budget; fi
    if ! timeout 120 "$2" --bind none -n "$ranks" "$3" init >"$out" 2>&1; then
      echo "FAIL: $ranks ranks (budget $budget) in a 64 MiB /dev/shm:"; cat "$out"; exit 1
    fi
    said=$(grep -c "could not be set up, so they talk over TCP" "$out" || true)
    echo "$ranks ranks, budget $budget: finished; said it fell back to TCP $said time(s)"
    if [ "$budget" = auto ] && [ "$said" != 0 ]; then
      echo "FAIL: $ranks ranks fit in 64 MiB and should stay on shared memory:"; cat "$out"; exit 1
    fi
    if [ "$budget" != auto ]; then
      if [ "$said" != 1 ]; then echo "FAIL: 16 MiB each should not fit, and be said once:"; cat "$out"; exit 1; fi
      grep -q "cannot reserve [0-9]* MiB of shared memory.*free of 64 MiB.*--shm-size" "$out" ||
        { echo "FAIL: the warning does not say what is needed, what is free and how to get more"; cat "$out"; exit 1; }
    fi
    left=$(ls /dev/shm)
    if [ -n "$left" ]; then echo "FAIL: left in /dev/shm: $left"; exit 1; fi
  done
' dev-shm-test "$work" "$commrun" "$helper"
echo "ok: a small /dev/shm holds 8 ranks' rings; a budget it cannot hold falls back to TCP, said once; nothing left behind"
