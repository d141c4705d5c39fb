#!/usr/bin/env bash
# `mpirun -np 4 prog` with nothing set (issue 19): Open MPI's mpirun on one host, no MASTER_ADDR
# or MASTER_PORT; the ranks find their store through the job's session directory. Runs the
# tutorial's hello example as written and the test helper (whose group must sum right).
#   mpirun_test.sh EXAMPLES_DIR HELPER   (exits 77, skipped, where Open MPI's mpirun is missing)
set -uo pipefail
examples=$1
helper=$2
if ! command -v mpirun >/dev/null; then
  echo "SKIP: no mpirun (Debian's openmpi-bin; tools/run_tests.sh installs it when run as root)"
  exit 77
fi
work=$(mktemp -d /tmp/comm-mpirun.XXXXXX)
trap 'rm -rf "$work"' EXIT
# What a user's own shell would have: root allowed (CI runs as root) and more ranks than cores
# (CI has two); neither is a libcomm variable.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK COMM_STORE_EXTERNAL
failures=0

timeout 60 mpirun -np 4 "$examples/hello" >"$work/hello" 2>&1
status=$?
cat "$work/hello"
for rank in 0 1 2 3; do
  if ! grep -q "^hello from rank $rank of 4" "$work/hello"; then
    echo "FAIL: no hello from rank $rank of 4 (mpirun exit status $status)"
    failures=$((failures + 1))
  fi
done

COMM_LOG_LEVEL=info timeout 60 mpirun -np 4 "$helper" init >"$work/init" 2>&1
status=$?
cat "$work/init"
sums=$(grep -c "^sum ok 10$" "$work/init")
if [ "$status" -ne 0 ] || [ "$sums" -ne 4 ]; then
  echo "FAIL: mpirun -np 4 helper init: exit status $status, $sums of 4 ranks summed right"
  failures=$((failures + 1))
fi
if ! grep -q "no MASTER_ADDR or MASTER_PORT: the store from mpirun on one host" "$work/init"; then
  echo "FAIL: the ranks did not say where their store came from"
  failures=$((failures + 1))
fi

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "mpirun -np 4 with no variables: hello from 4 ranks, the group sums right"
