#!/usr/bin/env bash
# Multicast discovery (issue 19) between two "hosts": network namespaces joined by a veth pair
# (10.79.0.1 / fd79::1 and 10.79.0.2 / fd79::2), each with a decoy interface. Every job is 2
# processes per host with no ranks given (tcp://MULTICAST:PORT, world size 4), and every
# process must end with its group summing right and its rank unique within its job:
#   ipv4      224.x with COMM_SOCKET_IFNAME, and a second job on the same address and port with
#             another group name at the same time
#   ipv6      the tutorial's own address, tcp://[ff15:1e18:5d4c:4cf0:d02d:b659:53ba:b0a7]:23456,
#             and the example program that makes the tutorial's call
#   route     224.x without COMM_SOCKET_IFNAME, through a route for the group
#   secret    a job with COMM_JOB_TOKEN beside forged announcements and garbage, then beside a
#             stranger announcing the same group name without the secret
#   tcp-auto  automatic ranks through tcp://HOST:PORT (no multicast), the store's host one of them
# and the failures, each with its message within its timeout:
#   no-route  224.x with neither a route nor COMM_SOCKET_IFNAME
#   silent    a group no one else joins
#   mismatch  a process of the job with another world size
#   multicast.sh HELPER [FIND_EACH_OTHER]   (root; exits 77, skipped, if namespaces cannot be made)
set -uo pipefail
helper=$1
example=${2:-}
tag="commmc$$"
work=$(mktemp -d /tmp/comm-multicast.XXXXXX)
source "$(dirname "$0")/veth_hosts.sh"
make_veth_hosts 10.79.0 10.89.0 fd79:

failures=0
fail() {
  echo "FAIL [$1]: $2"
  failures=$((failures + 1))
}

# start LABEL NAMESPACE INDEX URL WORLD GROUP TIMEOUT_MS [VAR=VALUE...]: one helper process.
start() {
  local label=$1 ns=$2 index=$3 url=$4 world=$5 group=$6 timeout_ms=$7
  shift 7
  ip netns exec "$ns" env "$@" COMM_LOG_LEVEL=info timeout 60 "$helper" init "$url" -1 "$world" "$group" \
    "$timeout_ms" >"$work/$label.$index" 2>&1 &
}

# check_job LABEL GROUP: its four processes exited 0, summed 1+2+3+4 and hold ranks 0..3 once each.
check_job() {
  local label=$1 group=$2
  local ranks
  for index in 0 1 2 3; do
    sed "s/^/[$label.$index] /" "$work/$label.$index"
    grep -q "^sum ok 10$" "$work/$label.$index" || fail "$label" "process $index did not sum right"
    grep -q "in group '$group', handed out in arrival order" "$work/$label.$index" ||
      fail "$label" "process $index did not log its rank in group '$group'"
  done
  ranks=$(cat "$work/$label".[0-3] | sed -n 's/^joined \([0-9]*\)\/4 .*/\1/p' | sort | tr -d '\n')
  [ "$ranks" = "0123" ] || fail "$label" "ranks were '$ranks', not 0123 once each"
}

ifname="${tag}v"
v4="tcp://224.1.79.1:23456"

# ipv4: two jobs on one address and port at once, told apart by their group names.
for index in 0 1; do
  start ipv4-a "$a" $index $v4 4 job-a 20000 COMM_SOCKET_IFNAME=$ifname
  start ipv4-b "$a" $index $v4 4 job-b 20000 COMM_SOCKET_IFNAME=$ifname
  start ipv4-a "$b" $((index + 2)) $v4 4 job-a 20000 COMM_SOCKET_IFNAME=$ifname
  start ipv4-b "$b" $((index + 2)) $v4 4 job-b 20000 COMM_SOCKET_IFNAME=$ifname
done
wait
check_job ipv4-a job-a
check_job ipv4-b job-b
grep -q "over tcp (10\.79\.0\.[12]:" "$work/ipv4-a.0" || fail ipv4 "data did not cross on the veth addresses"

# ipv6: the tutorial's call as written (its address, port and no rank).
tutorial="tcp://[ff15:1e18:5d4c:4cf0:d02d:b659:53ba:b0a7]:23456"
for index in 0 1; do
  start ipv6 "$a" $index "$tutorial" 4 default_pg 20000 COMM_SOCKET_IFNAME=$ifname
  start ipv6 "$b" $((index + 2)) "$tutorial" 4 default_pg 20000 COMM_SOCKET_IFNAME=$ifname
done
wait
check_job ipv6 default_pg
grep -q "TcpStore at \[\?fd79::[12]" "$work/ipv6.0" || fail ipv6 "the store was not found at a veth IPv6 address"

# The tutorial's program for it (examples/find_each_other), as a user would start it.
if [ -n "$example" ]; then
  for index in 0 1 2 3; do
    ns=$([ $index -lt 2 ] && echo "$a" || echo "$b")
    ip netns exec "$ns" env COMM_SOCKET_IFNAME=$ifname timeout 60 "$example" "$tutorial" >"$work/example.$index" 2>&1 &
  done
  wait
  sed "s/^/[example] /" "$work"/example.*
  ranks=$(cat "$work"/example.* | sed -n 's/^rank \([0-9]\) of 4 through tcp:.*; sum of ranks 6$/\1/p' | sort | tr -d '\n')
  [ "$ranks" = "0123" ] || fail example "find_each_other's ranks were '$ranks', not 0..3 once each summing to 6"
fi

# Automatic ranks over tcp://HOST:PORT across the hosts too: on host a whichever process binds
# first serves the store, the other fails to bind and becomes a client; on host b the address is
# not local at all, and both are clients.
for index in 0 1; do
  start tcp-auto "$a" $index tcp://10.79.0.1:29613 4 default_pg 20000
  start tcp-auto "$b" $((index + 2)) tcp://10.79.0.1:29613 4 default_pg 20000
done
wait
check_job tcp-auto default_pg

# route: no COMM_SOCKET_IFNAME; the routing table sends the group to the veth.
ip -n "$a" route add 224.0.0.0/4 dev "${tag}va"
ip -n "$b" route add 224.0.0.0/4 dev "${tag}vb"
for index in 0 1; do
  start route "$a" $index $v4 4 default_pg 20000
  start route "$b" $((index + 2)) $v4 4 default_pg 20000
done
wait
check_job route default_pg

# secret: the job proves COMM_JOB_TOKEN; a stranger with the same group name and none is never
# counted (the job completes) and hears nobody.
token="multicast-test-token-$$"
for index in 0 1; do
  start secret "$a" $index $v4 4 shared 20000 COMM_JOB_TOKEN=$token
  start secret "$b" $((index + 2)) $v4 4 shared 20000 COMM_JOB_TOKEN=$token
done
# A hostile sender: garbage, and announcements in the right form for the group that prove
# nothing (none, or random bytes), each from a new id: counted as members, any of them would
# break the job.
ip netns exec "$b" timeout 20 python3 - 224.1.79.1 23456 <<'PY' &
import os, socket, sys, time
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
target = (sys.argv[1], int(sys.argv[2]))
group = b"shared".hex()
for round in range(40):
    identity = os.urandom(8).hex()
    for packet in (os.urandom(64), b"libcomm-discovery 1", b"libcomm-discovery 1 " + identity.encode() + b" 4 0 " +
                   group.encode() + b" -", b"libcomm-discovery 1 " + identity.encode() + b" 4 1 " + group.encode() +
                   b" " + os.urandom(32).hex().encode(), b"libcomm-discovery 1 " + identity.upper().encode() +
                   b" 4 0 " + group.encode() + b" " + b"0" * 64):
        sender.sendto(packet, target)
    time.sleep(0.02)
PY
wait
check_job secret shared
# Again, beside a stranger that has no secret: it takes nobody's proof for its own.
for index in 0 1; do
  start secret-again "$a" $index $v4 4 shared 20000 COMM_JOB_TOKEN=$token
  start secret-again "$b" $((index + 2)) $v4 4 shared 20000 COMM_JOB_TOKEN=$token
done
start stranger "$b" 0 $v4 4 shared 3000
wait
check_job secret-again shared
cat "$work/stranger.0" | sed "s/^/[stranger] /"
grep -q "heard 1 of 4 processes of group 'shared'" "$work/stranger.0" ||
  fail secret "the stranger without the secret should have heard only itself"
grep -Eq "[1-9][0-9]* proving a secret this process was not given" "$work/stranger.0" ||
  fail secret "the stranger's timeout did not count the job's proven announcements"
# Without a secret, discovery says loudly that anyone on the network can join (issue 27).
grep -q "warning: multicast discovery on .* without a job secret: any host that can send to the group" \
  "$work/ipv4-a.0" || fail ipv4 "no warning that discovery runs without a secret"

# replay (issue 27): announcements recorded from a job that has ended, played again to a new
# process of a job with the same secret and group name, never count as members: the new process
# waits alone and times out counting them as not fresh. Before, it failed at once with "heard 3
# processes". COMM_DISCOVERY_WINDOW=1 stands in for the minutes that would pass between jobs.
ip netns exec "$b" timeout 20 python3 - record 224.1.79.1 23456 10.79.0.2 "$work/recorded" <<'PY' &
import socket, sys, time
mode, group, port, interface, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("", port))
listener.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, socket.inet_aton(group) + socket.inet_aton(interface))
listener.settimeout(0.2)
recorded, until = [], time.time() + 6
while time.time() < until:
    try:
        recorded.append(listener.recv(4096))
    except socket.timeout:
        pass
with open(path, "wb") as out:
    for packet in recorded:
        if packet.startswith(b"libcomm-discovery"):
            out.write(packet.hex().encode() + b"\n")
PY
recorder=$!
sleep 1  # the recorder listens before the job starts
start recorded "$a" 0 $v4 2 replayed 20000 COMM_JOB_TOKEN=$token COMM_SOCKET_IFNAME=$ifname
start recorded "$b" 1 $v4 2 replayed 20000 COMM_JOB_TOKEN=$token COMM_SOCKET_IFNAME=$ifname
wait "$recorder"
sleep 2
start replayed "$a" 0 $v4 2 replayed 4000 COMM_JOB_TOKEN=$token COMM_SOCKET_IFNAME=$ifname COMM_DISCOVERY_WINDOW=1
ip netns exec "$b" timeout 20 python3 - 224.1.79.1 23456 10.79.0.2 "$work/recorded" <<'PY' &
import socket, sys, time
group, port, interface, path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(interface))
packets = [bytes.fromhex(line) for line in open(path).read().split()]
until = time.time() + 5
while time.time() < until:
    for packet in packets:
        sender.sendto(packet, (group, port))
    time.sleep(0.05)
PY
wait
echo "replay: $(wc -l <"$work/recorded") announcements recorded"
sed "s/^/[replayed] /" "$work/replayed.0"
[ "$(wc -l <"$work/recorded")" -gt 2 ] || fail replay "too few announcements were recorded to replay"
grep -q "heard 1 of 2 processes of group 'replayed'" "$work/replayed.0" ||
  fail replay "the new process counted replayed announcements as processes"
grep -Eq "ignored [1-9][0-9]* announcement\(s\) that were not fresh" "$work/replayed.0" ||
  fail replay "the replayed announcements were not counted as not fresh"

# Every one of the four processes of case $1 (two jobs under one name) got the mismatch.
expect_twin_mismatch() {
  for index in 0 1 2 3; do
    sed "s/^/[$1.$index] /" "$work/$1.$index"
    grep -q "ERROR mismatch.*another job uses the same address, port and group name" "$work/$1.$index" ||
      fail "$1" "process $index did not get the mismatch"
  done
}

# same-name (issue 27): two jobs of 2 processes with one group name and world size, started
# together: every one of the four processes gets the mismatch, none waits out its timeout.
started=$(date +%s)
for index in 0 1; do
  start same-name "$a" $index $v4 2 twin 20000 COMM_SOCKET_IFNAME=$ifname
  start same-name "$b" $((index + 2)) $v4 2 twin 20000 COMM_SOCKET_IFNAME=$ifname
done
wait
expect_twin_mismatch same-name
[ $(($(date +%s) - started)) -le 10 ] || fail same-name "took longer than 10 s"

# late-twin: the same, but the fourth process starts 1.5 s after the others (as on a loaded
# machine), when the other three have already found the group broken: their last words reach it.
started=$(date +%s)
start late-twin "$a" 0 $v4 2 late 20000 COMM_SOCKET_IFNAME=$ifname
start late-twin "$b" 2 $v4 2 late 20000 COMM_SOCKET_IFNAME=$ifname
start late-twin "$b" 3 $v4 2 late 20000 COMM_SOCKET_IFNAME=$ifname
sleep 1.5
start late-twin "$a" 1 $v4 2 late 20000 COMM_SOCKET_IFNAME=$ifname
wait
expect_twin_mismatch late-twin
[ $(($(date +%s) - started)) -le 10 ] || fail late-twin "took longer than 10 s"

ip -n "$a" route del 224.0.0.0/4 dev "${tag}va"
ip -n "$b" route del 224.0.0.0/4 dev "${tag}vb"

# no-route: nothing says where the group goes: an error at once, saying what to set.
started=$(date +%s)
start no-route "$a" 0 $v4 2 default_pg 20000
wait
sed "s/^/[no-route] /" "$work/no-route.0"
grep -q "ERROR.*multicast group 224.1.79.1:23456.*ip route add 224.0.0.0/4 dev IFACE" "$work/no-route.0" ||
  fail no-route "no error naming the group and the route to add"
[ $(($(date +%s) - started)) -le 10 ] || fail no-route "took longer than 10 s"

# silent: nobody else in the group: a timeout that says what was heard and what to check.
started=$(date +%s)
start silent "$a" 0 $v4 2 lonely 2000 COMM_SOCKET_IFNAME=$ifname
start silent-other "$b" 0 $v4 2 chatty 2000 COMM_SOCKET_IFNAME=$ifname
wait
sed "s/^/[silent] /" "$work/silent.0"
grep -q "ERROR timeout.*timed out after 2 s on multicast group 224.1.79.1:23456 on ${ifname}a: heard 1 of 2 processes of group 'lonely'" \
  "$work/silent.0" || fail silent "no timeout naming the group, the interface and the one process heard"
grep -Eq "ignored [1-9][0-9]* announcement\(s\) of other jobs \([1-9][0-9]* for other group names" "$work/silent.0" ||
  fail silent "the other job's announcements were not counted as ignored"
grep -q "COMM_MULTICAST_TTL" "$work/silent.0" || fail silent "the timeout did not mention the TTL"
[ $(($(date +%s) - started)) -le 10 ] || fail silent "took longer than 10 s"

# mismatch: one process of the job says another world size.
start mismatch "$a" 0 $v4 2 sized 20000 COMM_SOCKET_IFNAME=$ifname
start mismatch "$b" 1 $v4 3 sized 20000 COMM_SOCKET_IFNAME=$ifname
wait
cat "$work/mismatch.0" "$work/mismatch.1" | sed "s/^/[mismatch] /"
# Both: the one that notices first announces once more before it leaves, so the other (which
# may have started after its earlier announcements) fails with the cause too, not a timeout.
grep -q "ERROR mismatch.*at 10.79.0.2 announces group 'sized' .* with world size 3, this one with 2" \
  "$work/mismatch.0" || fail mismatch "the process with world size 2 did not name the other's 3"
grep -q "ERROR mismatch.*at 10.79.0.1 announces group 'sized' .* with world size 2, this one with 3" \
  "$work/mismatch.1" || fail mismatch "the process with world size 3 did not name the other's 2"

leftover=$(ip netns pids "$a" 2>/dev/null; ip netns pids "$b" 2>/dev/null)
[ -z "$leftover" ] || fail cleanup "processes left in the namespaces: $leftover"
if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "multicast discovery between namespaced hosts: IPv4 and IPv6, two jobs on one group, a route or" \
  "COMM_SOCKET_IFNAME, a job secret; no-route, silent and mismatched jobs told why"
