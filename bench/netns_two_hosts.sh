#!/usr/bin/env bash
# Two "hosts" on one machine: network namespaces joined by one veth pair, each direction limited
# to RATE with tc's token bucket, RANKS ranks in each (one commrun per namespace); runs
# all_reduce_perf with each ALGORITHM side by side and prints rank 0's rows. Traffic stays inside
# the namespaces it makes, and they are removed whatever happens. Needs root and iproute2.
#   bench/netns_two_hosts.sh BUILD_DIR RATE [RANKS] [ALGORITHMS...]
#   bench/netns_two_hosts.sh build 1gbit 2 ring hierarchical
#   COLLECTIVE=all_gather bench/netns_two_hosts.sh build 1gbit 2 ring hierarchical  (another *_perf)
#   bench/netns_two_hosts.sh build 1gbit 2 ring gloo     ("gloo": torch.distributed's Gloo, all_reduce
#                                                          only, through bench/peers/torch_across_hosts.py)
# (A first step towards issue 18's cluster bench: Gloo, Open MPI, CSV and plots are not here yet.)
set -uo pipefail
build=$1
rate=$2
ranks=${3:-2}
shift $(($# < 3 ? $# : 3))
algorithms=("$@")
[ ${#algorithms[@]} -eq 0 ] && algorithms=(ring hierarchical)
a="cbA$$"
b="cbB$$"
cleanup() {
  for ns in "$a" "$b"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
}
trap cleanup EXIT
ip netns add "$a" && ip netns add "$b" || { echo "cannot make network namespaces (root and iproute2 needed)"; exit 1; }
ip link add "${a}v" type veth peer name "${b}v" || exit 1
ip link set "${a}v" netns "$a"
ip link set "${b}v" netns "$b"
address=(10.78.0.1 10.78.0.2)
index=0
for ns in "$a" "$b"; do
  device="${ns}v"
  ip -n "$ns" link set lo up
  ip -n "$ns" addr add "${address[$index]}/24" dev "$device"
  ip -n "$ns" link set "$device" mtu 9000 up
  ip netns exec "$ns" tc qdisc add dev "$device" root tbf rate "$rate" burst 1mbit latency 50ms
  index=$((index + 1))
done
token="netns-bench-$$-$(date +%s%N)"
here=$(cd "$(dirname "$0")" && pwd)
for algorithm in "${algorithms[@]}"; do
  port=$((29700 + RANDOM % 200))
  for node in 0 1; do
    ns=$([ $node -eq 0 ] && echo "$a" || echo "$b")
    if [ "$algorithm" = gloo ]; then
      ip netns exec "$ns" env GLOO_SOCKET_IFNAME="${ns}v" timeout 600 /usr/bin/python3 \
        "$here/peers/torch_across_hosts.py" --backend gloo --node $node --nodes 2 --ranks "$ranks" \
        --master "${address[0]}:$port" >"/tmp/netns-bench.$$.$node" 2>&1 &
    else
      ip netns exec "$ns" env COMM_JOB_TOKEN="$token" timeout 600 "$build/rendezvous/programs/commrun" \
        --nnodes 2 --node-rank $node --master-addr "${address[0]}" --master-port $port -n "$ranks" \
        "$build/bench/${COLLECTIVE:-all_reduce}_perf" -b ${MIN_BYTES:-4M} -e ${MAX_BYTES:-64M} -f 4 -a "$algorithm" ${ITERS:--n 5 -w 2} \
        >"/tmp/netns-bench.$$.$node" 2>&1 &
    fi
  done
  wait
  echo "== $algorithm, 2 hosts x $ranks ranks, $rate each way"
  grep "^\[0\]" "/tmp/netns-bench.$$.0" | grep -v "^\[0\] #"
  rm -f "/tmp/netns-bench.$$.0" "/tmp/netns-bench.$$.1"
done
