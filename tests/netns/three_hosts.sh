#!/usr/bin/env bash
# Three "hosts" on one machine: network namespaces on a bridge of their own (10.76.0.1-3). hierarchical_check runs on 3 hosts x 2 ranks (the hierarchy, halving-
# doubling and the tuner's picks against a reference, bitwise identical on every rank) and on
# uneven hosts of 1, 2 and 3 ranks (the hierarchy refused, every other algorithm right), with
# the link measured at init. Traffic stays inside these namespaces; they go whatever happens.
#   three_hosts.sh HIERARCHICAL_CHECK   (root; exits 77, skipped, if namespaces cannot be made)
set -uo pipefail
hierarchical_check=$1
tag="ct3$$"
switch="${tag}s"
hosts=("${tag}a" "${tag}b" "${tag}c")
work=$(mktemp -d /tmp/comm-netns3.XXXXXX)

cleanup() {
  for ns in "${hosts[@]}" "$switch"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT

if ! ip netns add "$switch" 2>"$work/err"; then
  echo "SKIP: cannot create network namespaces here ($(cat "$work/err")); needs root and iproute2"
  exit 77
fi
ip -n "$switch" link add br0 type bridge || { echo "SKIP: no bridge support"; exit 77; }
ip -n "$switch" link set br0 up
for i in 0 1 2; do
  ns=${hosts[$i]}
  ip netns add "$ns" || exit 1
  ip link add "${tag}v$i" type veth peer name "${tag}p$i" || { echo "SKIP: no veth support"; exit 77; }
  ip link set "${tag}v$i" netns "$ns"
  ip link set "${tag}p$i" netns "$switch"
  ip -n "$switch" link set "${tag}p$i" master br0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "10.76.0.$((i + 1))/24" dev "${tag}v$i"
  ip -n "$ns" link set "${tag}v$i" up
done

failures=0
token="threehosts$(printf '%08d' $$)xx"
run_job() {  # $1: label, $2: ranks on each host ("2 2 2"), then environment assignments
  # Ranks start straight from env:// (commrun wants as many on every node; these need not).
  local label=$1
  local -a counts=($2)
  shift 2
  local port=$((29620 + RANDOM % 50))
  local world=$((counts[0] + counts[1] + counts[2]))
  local -a pids=()
  local rank=0
  for i in 0 1 2; do
    for ((local_rank = 0; local_rank < counts[i]; local_rank++)); do
      ip netns exec "${hosts[$i]}" env "$@" COMM_JOB_TOKEN="$token" COMM_TEST_REAL_HOSTS=1 COMM_LOG_LEVEL=info \
        RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$local_rank LOCAL_WORLD_SIZE="${counts[$i]}" \
        MASTER_ADDR=10.76.0.1 MASTER_PORT=$port timeout 180 "$hierarchical_check" >"$work/$label.$rank" 2>&1 &
      pids+=($!)
      rank=$((rank + 1))
    done
  done
  local status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  for ((r = 0; r < world; r++)); do
    grep -v " comm\.\(rdzv\|transport\) " "$work/$label.$r" | sed "s/^/[$label] [$r] /"
  done
  if [ $status -ne 0 ]; then
    echo "FAIL [$label]: a rank failed"
    failures=$((failures + 1))
  fi
  if ! grep -q "link between hosts (3 hosts): .* (probe)" "$work/$label.0"; then
    echo "FAIL [$label]: rank 0 did not log the link it measured"
    failures=$((failures + 1))
  fi
}

run_job even "2 2 2"
run_job uneven "1 2 3" COMM_TEST_UNEVEN_HOSTS=1
if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "three hosts in namespaces: 3 x 2 ranks and 1 + 2 + 3 ranks, every all_reduce right and identical"
