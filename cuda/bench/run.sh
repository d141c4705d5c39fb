#!/usr/bin/env bash
# run.sh [pack dir] [results dir]: on the GPU machine, runs the GPU tests and benches packed by
# pack.sh and writes their output to the results dir (default $OUT, else ./gpu-results).
# ONLY=REGEX runs the steps whose names match. Exit status: non-zero when a test failed. Skips
# (exit 77) count as failures here, since this
# script only runs where a GPU is expected.
set -uo pipefail
pack=${1:-.device-carry/gpu}
results=${2:-${OUT:-gpu-results}}
mkdir -p "$results"
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export COMM_TIMEOUT=${COMM_TIMEOUT:-60}  # a hang ends as an error before run()'s timeout
failed=0
log="$results/gpu-run.log"
: >"$log"
run() {  # run NAME COMMAND...: output to the terminal and to one log (few files travel back)
  local name=$1
  shift
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi  # ONLY=regex: a subset
  echo "== $name: $*" | tee -a "$log"
  timeout 150 "$@" 2>&1 | tee -a "$log"
  local rc=${PIPESTATUS[0]}
  echo "== $name: exit $rc" | tee -a "$log"
  [ "$rc" -eq 0 ] || failed=1
}
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null |
  tee "$results/gpu.txt" || true
run test_cuda_device "$pack/bin/test_cuda_device"
run test_cuda_reduce "$pack/bin/test_cuda_reduce"
run test_cuda_buffers "$pack/bin/test_cuda_buffers"
for ranks in 1 2 3 4; do run gpu_collectives_$ranks "$pack/bin/commrun" -n $ranks "$pack/bin/gpu_collectives"; done
# Forced staging over shared memory, and staging because peers are reached over TCP.
for ranks in 1 2 3 4; do
  run gpu_collectives_staged_$ranks env COMM_CUDA_PATH=staging "$pack/bin/commrun" -n $ranks "$pack/bin/gpu_collectives"
done
# Staged through the shared segment in many small pieces (64 KiB slots): piece boundaries.
for ranks in 2 3 4; do
  run gpu_collectives_staged_small_slots_$ranks env COMM_CUDA_PATH=staging COMM_CUDA_STAGING_SLOT=65536 \
    "$pack/bin/commrun" -n $ranks "$pack/bin/gpu_collectives"
done
for ranks in 2 3; do
  run gpu_collectives_tcp_$ranks env COMM_TRANSPORT=tcp "$pack/bin/commrun" -n $ranks "$pack/bin/gpu_collectives"
done
run ipc_pingpong "$pack/bin/ipc_pingpong" --rounds 2000 --bytes 4096
run ipc_pingpong_large "$pack/bin/ipc_pingpong" --rounds 200 --bytes 268435456
run ipc_pingpong_host "$pack/bin/ipc_pingpong" --rounds 2000 --bytes 4096 --wait host
run ipc_pingpong_large_host "$pack/bin/ipc_pingpong" --rounds 200 --bytes 268435456 --wait host
run reduce_kernel_perf "$pack/bin/reduce_kernel_perf"
for ranks in 2 4; do
  run device_all_reduce_perf_$ranks "$pack/bin/commrun" -n $ranks "$pack/bin/device_all_reduce_perf"
done
for ranks in 2 4; do
  run device_all_reduce_perf_staged_$ranks env COMM_CUDA_PATH=staging \
    "$pack/bin/commrun" -n $ranks "$pack/bin/device_all_reduce_perf"
done
run device_all_reduce_perf_tcp_2 env COMM_TRANSPORT=tcp "$pack/bin/commrun" -n 2 "$pack/bin/device_all_reduce_perf"
# The same all_reduce of host buffers on this machine: what the staged path adds to the transport.
run host_all_reduce_perf_2 "$pack/bin/commrun" -n 2 "$pack/bin/all_reduce_perf" -b 1M -e 256M -f 4
run host_all_reduce_perf_tcp_2 env COMM_TRANSPORT=tcp \
  "$pack/bin/commrun" -n 2 "$pack/bin/all_reduce_perf" -b 1M -e 256M -f 4
exit $failed
