#!/usr/bin/env bash
# tuner_log_test.sh COMMRUN ALL_REDUCE_PERF: with COMM_LOG_LEVEL=info the tuner logs its choice
# once per (collective, size class), and COMM_ALGO overrides it.
set -uo pipefail
commrun=$1
bench=$2
failed=0
check() {  # check DESCRIPTION EXPECTED_COUNT PATTERN OUTPUT
  local count
  count=$(grep -cF -- "$3" <<<"$4")
  if [ "$count" != "$2" ]; then
    echo "FAIL: $1: '$3' logged $count times, expected $2, in:"
    echo "$4"
    failed=1
  fi
}
out=$(COMM_LOG_LEVEL=info timeout 60 "$commrun" -n 2 "$bench" -b 8 -e 8M -f 1024 -n 20 -w 2 2>&1)
check "small all_reduce" 2 "all_reduce of 8 bytes on 2 ranks: shared_memory (tuned for one host)" "$out"
check "middle all_reduce" 2 "all_reduce of 8192 bytes on 2 ranks: shared_memory (tuned for one host)" "$out"
check "large all_reduce" 2 "all_reduce of 8388608 bytes on 2 ranks: shared_memory (tuned for one host)" "$out"
out=$(COMM_LOG_LEVEL=info timeout 60 "$commrun" -n 3 "$bench" -b 8M -e 8M -n 5 -w 1 2>&1)
check "large all_reduce, 3 ranks" 3 "all_reduce of 8388608 bytes on 3 ranks: shared_memory (tuned for one host)" "$out"
out=$(COMM_LOG_LEVEL=info timeout 60 "$commrun" -n 2 "$bench" -b 1M -e 1M -n 20 -w 2 2>&1)
check "1 MiB all_reduce" 2 "all_reduce of 1048576 bytes on 2 ranks: ring (tuned for one host)" "$out"
out=$(COMM_TRANSPORT=tcp COMM_LOG_LEVEL=info timeout 60 "$commrun" -n 2 "$bench" -b 2M -e 2M -n 20 -w 2 2>&1)
check "large all_reduce over tcp" 2 "all_reduce of 2097152 bytes on 2 ranks: ring (tuned for one host)" "$out"
out=$(COMM_TRANSPORT=tcp COMM_LOG_LEVEL=info timeout 60 "$commrun" -n 2 "$bench" -b 8 -e 8 -n 20 -w 2 2>&1)
check "small all_reduce over tcp" 2 "all_reduce of 8 bytes on 2 ranks: recursive_doubling (tuned for one host)" "$out"
out=$(COMM_ALGO=tree COMM_LOG_LEVEL=info timeout 60 "$commrun" -n 2 "$bench" -b 8 -e 8 -n 20 -w 2 2>&1)
check "COMM_ALGO" 2 "all_reduce of 8 bytes on 2 ranks: tree (COMM_ALGO)" "$out"
out=$(COMM_ALGO=bogus timeout 60 "$commrun" -n 2 "$bench" -b 8 -e 8 -n 20 -w 2 2>&1)
if ! grep -q "COMM_ALGO is 'bogus'; known algorithms" <<<"$out"; then
  echo "FAIL: an unknown COMM_ALGO is not reported:"
  echo "$out"
  failed=1
fi
[ "$failed" = 0 ] && echo "tuner choices logged once per size class; COMM_ALGO applied and checked"
exit $failed
