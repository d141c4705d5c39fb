#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces joined by a veth pair (10.77.0.1 and
# 10.77.0.2), each also holding a decoy interface no peer can reach. One commrun per namespace
# (--nnodes 2) starts two ranks each; every rank exchanges with every other. Checks that peers
# in the same namespace use shared memory, peers across use TCP over the veth addresses, and
# that COMM_SOCKET_IFNAME picks the interface, and that COMM_SOCKET_STREAMS stripes each pair
# across the hosts over several connections; then the hierarchical all_reduce across the two
# (hierarchical_check with the hosts the namespaces make). Traffic stays inside these namespaces.
#   two_hosts.sh COMMRUN HELPER HIERARCHICAL_CHECK   (root; exits 77, skipped, if namespaces cannot be made)
set -uo pipefail
commrun=$1
helper=$2
hierarchical_check=$3
tag="commtest$$"
work=$(mktemp -d /tmp/comm-netns.XXXXXX)
before_cleanup() { pkill -9 -f "$work/marker" 2>/dev/null; }
source "$(dirname "$0")/veth_hosts.sh"
make_veth_hosts 10.77.0 10.88.0

failures=0
# A job secret of our own names this test's shared-memory segments (comm-<job id>-..., the id an
# HMAC of the secret, see libcomm/base/job_secret.cpp), so the leftover check below ignores
# segments of tests running beside this one.
token="twohosts$(printf '%08d' $$)xx"
job_id=$(python3 -c 'import hashlib, hmac, struct, sys
purpose = b"libcomm job id"
print(hmac.new(sys.argv[1].encode(), struct.pack("<I", len(purpose)) + purpose, hashlib.sha256).hexdigest()[:16])' "$token")
run_job() {  # $1: label, then environment assignments for the ranks
  local label=$1
  shift
  local port=29611
  ip netns exec "$a" env "$@" COMM_JOB_TOKEN="$token" COMM_LOG_LEVEL=info timeout 60 \
    "$commrun" --nnodes 2 --node-rank 0 --master-addr 10.77.0.1 --master-port $port -n 2 \
    "$helper" p2p-exchange >"$work/$label.a" 2>&1 &
  local first=$!
  ip netns exec "$b" env "$@" COMM_JOB_TOKEN="$token" COMM_LOG_LEVEL=info timeout 60 \
    "$commrun" --nnodes 2 --node-rank 1 --master-addr 10.77.0.1 --master-port $port -n 2 \
    "$helper" p2p-exchange >"$work/$label.b" 2>&1
  local second=$?
  wait $first
  local first_status=$?
  cat "$work/$label.a" "$work/$label.b" | sed "s/^/[$label] /"
  if [ $first_status -ne 0 ] || [ $second -ne 0 ]; then
    echo "FAIL [$label]: commrun exit statuses $first_status and $second"
    failures=$((failures + 1))
    return
  fi
  expect() {  # file, pattern, what
    if ! grep -Eq "$2" "$1"; then
      echo "FAIL [$label]: $3 (no line matching '$2')"
      failures=$((failures + 1))
    fi
  }
  for rank in 0 1 2 3; do
    expect "$work/$label.a" "p2p ok rank [01] over shm\+tcp" "ranks on host a did not report shm+tcp"
    expect "$work/$label.b" "p2p ok rank [23] over shm\+tcp" "ranks on host b did not report shm+tcp"
  done
  expect "$work/$label.a" "\[0\] .*peers over shared memory: 1; over tcp \(10\.77\.0\.1:[0-9]+\): 2,3" \
    "rank 0 should reach rank 1 by shared memory and ranks 2,3 by TCP on 10.77.0.1"
  expect "$work/$label.a" "\[1\] .*peers over shared memory: 0; over tcp \(10\.77\.0\.1:[0-9]+\): 2,3" \
    "rank 1 should reach rank 0 by shared memory and ranks 2,3 by TCP on 10.77.0.1"
  expect "$work/$label.b" "\[2\] .*peers over shared memory: 3; over tcp \(10\.77\.0\.2:[0-9]+\): 0,1" \
    "rank 2 should reach rank 3 by shared memory and ranks 0,1 by TCP on 10.77.0.2"
  expect "$work/$label.b" "\[3\] .*peers over shared memory: 2; over tcp \(10\.77\.0\.2:[0-9]+\): 0,1" \
    "rank 3 should reach rank 2 by shared memory and ranks 0,1 by TCP on 10.77.0.2"
}

run_job default                                   # the route towards the store picks the veth
run_job ifname COMM_SOCKET_IFNAME="${tag}v"       # a name prefix
run_job exclude COMM_SOCKET_IFNAME="^lo,decoy"    # everything but loopback and the decoy
run_job streams COMM_SOCKET_STREAMS=4             # four connections striped per pair across hosts

# Across hosts the connecting rank says how many connections it opens and why; inside a host, one.
check_streams() {  # label, file, pattern, what
  if ! grep -Eq "$3" "$2"; then
    echo "FAIL [$1]: $4 (no line matching '$3')"
    failures=$((failures + 1))
  fi
}
check_streams default "$work/default.b" \
  "^\[2\] .*1 connection to rank 0 on another host: round trip [0-9]+ us x 1\.25 GB/s \(${tag}vb's speed\)" \
  "rank 2 did not log its choice of one connection from the round trip and the veth's speed"
check_streams streams "$work/streams.b" "^\[3\] .*4 connections to rank 1 on another host: COMM_SOCKET_STREAMS" \
  "rank 3 did not open the four connections asked for"
check_streams streams "$work/streams.a" "^\[0\] .*\(several connections: 2 x4, 3 x4\)" \
  "rank 0 did not stripe over four connections to each rank of the other host"
if grep -q "connections\? to rank [01] on another host" "$work/streams.a"; then
  echo "FAIL [streams]: a rank opened connections to a peer on its own host"
  failures=$((failures + 1))
fi

# The hierarchical all_reduce over the hosts the namespaces make (no COMM_HOST_ID).
port=29612
ip netns exec "$a" env COMM_JOB_TOKEN="$token" COMM_TEST_REAL_HOSTS=1 COMM_LOG_LEVEL=info timeout 120 \
  "$commrun" --nnodes 2 --node-rank 0 --master-addr 10.77.0.1 --master-port $port -n 2 \
  "$hierarchical_check" >"$work/hierarchical.a" 2>&1 &
first=$!
ip netns exec "$b" env COMM_JOB_TOKEN="$token" COMM_TEST_REAL_HOSTS=1 timeout 120 \
  "$commrun" --nnodes 2 --node-rank 1 --master-addr 10.77.0.1 --master-port $port -n 2 \
  "$hierarchical_check" >"$work/hierarchical.b" 2>&1
second=$?
wait $first
first_status=$?
cat "$work/hierarchical.a" "$work/hierarchical.b" | sed "s/^/[hierarchical] /"
if [ $first_status -ne 0 ] || [ $second -ne 0 ]; then
  echo "FAIL [hierarchical]: commrun exit statuses $first_status and $second"
  failures=$((failures + 1))
fi
# The link was measured once and the tuner says what it chose and why.
if ! grep -Eq "^\[0\] .*link between hosts \(2 hosts\): [0-9.e+-]+ GB/s each way, [0-9.e+-]+ us per message \(probe\)" \
  "$work/hierarchical.a"; then
  echo "FAIL [hierarchical]: rank 0 did not log the link it measured"
  failures=$((failures + 1))
fi
if ! grep -Eq "^\[0\] .*all_reduce of [0-9]+ bytes on 4 ranks: [a-z_]+ \(2 hosts x 2 ranks, link ~[0-9.e+-]+ GB/s .*\(probe\); predicted [0-9.e+-]+ s against ring [0-9.e+-]+ s" \
  "$work/hierarchical.a"; then
  echo "FAIL [hierarchical]: rank 0 did not log the tuner's choice with its predictions"
  failures=$((failures + 1))
fi

leftover=$(ls /dev/shm | grep -c "^comm-${job_id}-" || true)
if [ "$leftover" -ne 0 ]; then
  echo "FAIL: $leftover shared-memory segment(s) left in /dev/shm"
  failures=$((failures + 1))
fi
if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "two hosts in namespaces: shm inside each, TCP across on the veth addresses, COMM_SOCKET_IFNAME and" \
  "COMM_SOCKET_STREAMS honoured, hierarchical all_reduce right"
