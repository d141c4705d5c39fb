#!/bin/sh
# Open MPI's rsh agent for bench/cluster_bench.py: instead of ssh to HOST, runs the command in the
# network namespace COMM_NETNS_HOSTS maps HOST to ("10.79.0.2=ns1 10.79.0.3=ns2"). Open MPI calls
# it as an ssh: options first, then the host, then the remote command line as words for a shell.
while [ $# -gt 0 ]; do
  case "$1" in
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
for pair in $COMM_NETNS_HOSTS; do
  if [ "${pair%%=*}" = "$host" ]; then
    # A host name of its own too (a UTS namespace), as cluster_bench.py gives each namespace.
    exec ip netns exec "${pair#*=}" unshare --uts /bin/sh -c "hostname ${pair#*=} && $*"
  fi
done
echo "netns_rsh.sh: no namespace for host $host in COMM_NETNS_HOSTS" >&2
exit 1
