#!/usr/bin/env bash
# Issue 27, item 8: a container's /dev/shm (Docker's default is 64 MiB) is too small for the
# segments of 8 ranks (28 pairs x 8 MiB). The job died of SIGBUS when a page was first touched.
# Now the segments are reserved when they are made, and a job that cannot have them runs over
# TCP, saying why once. In a private mount namespace with a 64 MiB tmpfs on /dev/shm (the
# machine's is untouched): 8 ranks must finish with right results, say it once, and leave
# nothing in /dev/shm; 4 ranks, which fit, stay on shared memory.
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
  for ranks in 8 4; do
    # The helper checks an all_reduce against its own reference; --bind none keeps the core
    # lock file out of the way.
    if ! timeout 120 "$2" --bind none -n $ranks "$3" init >"$1/out.$ranks" 2>&1; then
      echo "FAIL: $ranks ranks in a 64 MiB /dev/shm:"; cat "$1/out.$ranks"; exit 1
    fi
    said=$(grep -c "could not be set up, so they talk over TCP" "$1/out.$ranks" || true)
    echo "$ranks ranks: finished; said it fell back to TCP $said time(s)"
    if [ $ranks = 8 ] && [ "$said" != 1 ]; then
      echo "FAIL: 8 ranks should say once that they fell back:"; cat "$1/out.$ranks"; exit 1
    fi
    if [ $ranks = 4 ] && [ "$said" != 0 ]; then
      echo "FAIL: 4 ranks fit in 64 MiB and should stay on shared memory:"; cat "$1/out.$ranks"; exit 1
    fi
    grep -q "cannot reserve [0-9]* MiB of shared memory.*free of 64 MiB.*--shm-size" "$1/out.8" ||
      { echo "FAIL: the warning does not say what is needed, what is free and how to get more"; cat "$1/out.8"; exit 1; }
    left=$(ls /dev/shm)
    if [ -n "$left" ]; then echo "FAIL: left in /dev/shm: $left"; exit 1; fi
  done
' dev-shm-test "$work" "$commrun" "$helper"
echo "ok: a small /dev/shm is an error at set-up, handled by falling back to TCP; nothing left behind"
