#!/usr/bin/env bash
# run.sh [pack dir] [results dir]: on the GPU machine, runs the GPU tests and benches packed by
# pack.sh and writes their output to the results dir (default $OUT, else ./gpu-results): one log
# and summary.txt. Pack from a build with CUDA and the drop-in (-Dcuda=enabled -Dnccl_abi=true).
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
# Issue 33. PyTorch's own ProcessGroupNCCL on the drop-in libnccl.so.2 (preloaded: torch's
# libraries then find their nccl* symbols in it), after listing the symbols torch imports.
python=${PYTHON:-python3}
here=$(cd "$(dirname "$0")" && pwd)
if [ -e "$pack/nccl/libnccl.so.2" ]; then
  dropin=$(cd "$pack/nccl" && pwd)/libnccl.so.2
  run nccl_symbols "$python" "$here/nccl_symbols.py" "$dropin"
  for ranks in 1 2; do
    run torch_nccl_dropin_$ranks env LD_PRELOAD="$dropin" "$python" "$here/torch_collectives_check.py" --backend nccl \
      --world-size $ranks
  done
  run torch_nccl_nvidia_1 "$python" "$here/torch_collectives_check.py" --backend nccl --world-size 1
  run nccl_one_rank_nvidia "$python" "$here/nccl_one_rank.py" nvidia
  run nccl_one_rank_dropin env LD_PRELOAD="$dropin" "$python" "$here/nccl_one_rank.py" dropin
fi
# torch_libcomm on CUDA tensors, built here against this machine's torch.
module=${TMPDIR:-/tmp}/torch_libcomm_module
run build_torch_module bash "$here/build_torch_module.sh" "$pack" "$module"
for ranks in 1 2; do
  run torch_libcomm_cuda_$ranks env PYTHONPATH="$module" "$python" "$here/torch_collectives_check.py" \
    --backend libcomm --world-size $ranks
done
# CPU tensors on the machine's cores: libcomm's all_reduce against torch's Gloo, 2-16 ranks.
for ranks in 2 4 8 16; do
  run cpu_libcomm_small_$ranks "$pack/bin/commrun" --no-prefix -n $ranks "$pack/bin/all_reduce_perf" -b 8 -e 8 --csv
  run cpu_libcomm_large_$ranks "$pack/bin/commrun" --no-prefix -n $ranks "$pack/bin/all_reduce_perf" -b 1M -e 256M -f 16 \
    -n 5 --csv
  if [ -e "$pack/torch_gloo_bench.py" ]; then
    run cpu_gloo_$ranks "$python" "$pack/torch_gloo_bench.py" --world-size $ranks --colls all_reduce --budget 0.2 \
      --max-bytes 268435456
  fi
done
# One file to read first: every step's exit, the checks' totals and the symbol count.
grep -E "^== .*: exit |^torch .* passed|^nccl symbols:|MISSING" "$log" >"$results/summary.txt" || true
echo "failed steps: $(grep -cE '^== .*: exit [1-9]' "$log")" >>"$results/summary.txt"
exit $failed
