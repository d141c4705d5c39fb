#!/usr/bin/env bash
# examples_test.sh COMMRUN EXAMPLES_DIR: runs each example under commrun on 4 ranks and checks
# the lines the tutorials promise.
set -euo pipefail
commrun=$1
examples=$2
failed=0
expect() {  # expect NAME PATTERN...: every pattern occurs in the output of NAME
  local name=$1
  shift
  local output
  if ! output=$(timeout 60 "$commrun" -n 4 "$examples/$name" 2>&1); then
    echo "FAIL: $name exited non-zero:"
    echo "$output"
    failed=1
    return
  fi
  for pattern in "$@"; do
    if ! grep -qF -- "$pattern" <<<"$output"; then
      echo "FAIL: $name: missing '$pattern' in:"
      echo "$output"
      failed=1
    fi
  done
}
expect hello "hello from rank 0 of 4" "hello from rank 3 of 4"
expect send_recv "rank 0 has data [1]" "rank 1 has data [1]" "rank 2 has data [0]"
expect isend_irecv "rank 0 has data [0, 1, 0]" "rank 3 has data [0, 1, 0]" "rank 1 has data [0, 0, 0]"
expect collectives "[0] reduce: [4]" "[3] all_reduce: [4]" "[2] scatter: [3]" "[0] gather: [0, 1, 2, 3]" \
  "[1] all_gather: [0, 1, 2, 3]" "[3] broadcast: [0]"
expect subgroup "rank 0 has data [2, 2, 2]" "rank 1 has data [2, 2, 2]" "rank 2 has data [1, 1, 1]"
# SGD: every rank prints the same loss each epoch, and the loss falls to the noise level.
sgd=$(timeout 60 "$commrun" --no-prefix -n 4 "$examples/sgd")
for epoch in 0 9; do
  losses=$(grep "epoch $epoch:" <<<"$sgd" | sed 's/.*loss //' | sort -u)
  if [ "$(wc -l <<<"$losses")" != 1 ]; then echo "FAIL: sgd: ranks disagree on epoch $epoch: $losses"; failed=1; fi
done
final=$(grep "rank 0, epoch 9:" <<<"$sgd" | sed 's/.*loss //')
if ! awk -v loss="$final" 'BEGIN { exit !(loss < 0.02) }'; then
  echo "FAIL: sgd did not converge (loss $final)"
  failed=1
fi
# find_each_other: four processes started by hand with no rank, through a file (the tutorial's
# file:// call): ranks 0..3 once each, and they sum right.
shared=$(mktemp -d /tmp/comm-example.XXXXXX)
for i in 1 2 3 4; do
  timeout 60 "$examples/find_each_other" "file://$shared/sharedfile" >"$shared/out.$i" 2>&1 &
done
wait
ranks=$(cat "$shared"/out.* | sed -n 's/^rank \([0-9]\) of 4 through file:.*; sum of ranks 6$/\1/p' | sort | tr -d '\n')
if [ "$ranks" != "0123" ]; then
  echo "FAIL: find_each_other: ranks '$ranks' (not 0..3 once each, summing to 6):"
  cat "$shared"/out.*
  failed=1
fi
rm -rf "$shared"
# The C example's id file holds the job's secret (issue 27): a symlink another user planted at
# its temporary name is not followed (the run refuses, creating nothing where the link points),
# and under umask 0 the id is still readable by its owner only (the other ranks check).
if [ -x "$examples/c/all_reduce" ]; then
  work=$(mktemp -d /tmp/comm-c-example.XXXXXX)
  ln -s "$work/target" "$work/id.partial"
  if timeout 60 "$commrun" -n 2 "$examples/c/all_reduce" "$work/id" >"$work/out" 2>&1; then
    echo "FAIL: the C example wrote its id through a planted symlink:"
    cat "$work/out"
    failed=1
  fi
  if [ -e "$work/target" ]; then
    echo "FAIL: the C example created $work/target through a planted symlink"
    failed=1
  fi
  rm -f "$work/id.partial"
  if ! (umask 0 && timeout 60 "$commrun" -n 2 "$examples/c/all_reduce" "$work/id" >"$work/out" 2>&1) ||
    ! grep -q "rank 1 of 2: all_reduce of 1048576 floats: right" "$work/out"; then
    echo "FAIL: the C example under umask 0:"
    cat "$work/out"
    failed=1
  fi
  rm -rf "$work"
fi
[ "$failed" = 0 ] && echo "all examples behaved as the tutorials say"
exit $failed
