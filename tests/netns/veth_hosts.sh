# Sourced by the two-host namespace tests: two "hosts" as network namespaces $a and $b
# ("${tag}a", "${tag}b") joined by a veth pair ("${tag}va" in a, "${tag}vb" in b), each also
# holding a decoy interface no peer can reach; on exit everything running in them is killed and
# they and $work are removed. Exits 77 (skipped), saying why, where namespaces cannot be made.
#   tag=...; work=$(mktemp -d ...); source veth_hosts.sh; make_veth_hosts 10.77.0 10.88.0 [fd77:]
# gives host a 10.77.0.1/24 (decoy 10.88.0.1/24, and fd77::1/64 when asked), host b .2.
a="${tag}a"
b="${tag}b"

cleanup() {
  if declare -F before_cleanup >/dev/null; then before_cleanup; fi
  ip netns pids "$a" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns pids "$b" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

make_veth_hosts() {  # NETWORK DECOY_NETWORK [IPV6_PREFIX]
  local network=$1 decoy=$2 v6=${3:-}
  if ! ip netns add "$a" 2>"$work/err"; then
    echo "SKIP: cannot create network namespaces here ($(cat "$work/err")); needs root and iproute2"
    exit 77
  fi
  ip netns add "$b" || exit 1
  ip link add "${tag}va" type veth peer name "${tag}vb" || { echo "SKIP: no veth support"; exit 77; }
  local number=1 ns side
  for side in va vb; do
    ns=$([ $side = va ] && echo "$a" || echo "$b")
    ip link set "${tag}$side" netns "$ns"
    ip -n "$ns" link set lo up
    ip -n "$ns" link add decoy0 type dummy 2>/dev/null && ip -n "$ns" link set decoy0 up
    ip -n "$ns" addr add "$network.$number/24" dev "${tag}$side"
    [ -z "$v6" ] || ip -n "$ns" addr add "${v6}:$number/64" dev "${tag}$side" nodad 2>/dev/null
    ip -n "$ns" addr add "$decoy.$number/24" dev decoy0 2>/dev/null
    ip -n "$ns" link set "${tag}$side" up
    number=$((number + 1))
  done
}
