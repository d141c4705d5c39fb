#!/usr/bin/env bash
# run.sh [pack dir] [results dir]: on the GPU machine, runs the GPU checks and benches packed by
# pack.sh, most important first, inside one time budget, so that one lent machine's ~15 minutes
# (its start included) give the answers that matter even when the run is cut short:
#   (a) the nccl* symbols torch imports against the drop-in's exports; (b) torch's own
#   ProcessGroupNCCL on the preloaded drop-in, world 1 and 2; (c) torch_libcomm built there, on
#   CUDA tensors, world 1 and 2; (d) the GPU tests and device collectives at 1-4 ranks (IPC,
#   staged, over TCP); (e) NVIDIA's NCCL beside the drop-in at world 1; (f) libcomm against
#   torch's Gloo on CPU tensors at 2-16 ranks; then the benches, while time is left.
# Each step has its own limit, cut to what is left of RUN_BUDGET (seconds, default 450); a step
# that no longer fits is listed as skipped. The log and summary.txt in the results dir (default
# $OUT, else ./gpu-results) are written as each step ends.
# ONLY=REGEX runs the steps whose names match. Exit status: non-zero when a step failed or was
# skipped. Skips (exit 77) count as failures here: this script only runs where a GPU is expected.
set -uo pipefail
pack=${1:-.device-carry/gpu}
results=${2:-${OUT:-gpu-results}}
mkdir -p "$results"
pack=$(cd "$pack" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export COMM_TIMEOUT=${COMM_TIMEOUT:-20}  # a hang ends as an error well inside a step's limit
budget=${RUN_BUDGET:-450}
deadline=$((SECONDS + budget))
failed=0
log="$results/gpu-run.log"
summary="$results/summary.txt"
: >"$log"
: >"$summary"
note() { echo "$*" | tee -a "$log" >>"$summary"; }
wanted() { [ -z "${ONLY:-}" ] || [[ $1 =~ $ONLY ]]; }
# step NAME LIMIT COMMAND...: output to the terminal and the log; the exit line, the checks'
# totals and missing symbols to the summary at once.
step() {
  local name=$1 limit=$2
  shift 2
  wanted "$name" || return 0
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 10 ]; then
    note "== $name: skipped, ${budget} s budget spent"
    failed=1
    return 0
  fi
  [ "$limit" -le "$left" ] || limit=$left
  local start=$SECONDS
  echo "== $name (limit ${limit} s): $*" | tee -a "$log"
  # timeout signals the step's whole process group: ranks that commrun or a launcher started too.
  timeout -k 5 "$limit" "$@" 2>&1 | tee "$results/step.out" >>"$log"
  local rc=${PIPESTATUS[0]}
  cat "$results/step.out"
  grep -E "^torch .* passed|^nccl symbols:|MISSING|^built " "$results/step.out" >>"$summary"
  rm -f "$results/step.out"
  note "== $name: exit $rc ($((SECONDS - start)) s)"
  [ "$rc" -eq 0 ] || failed=1
}

{ date -u +"run at %Y-%m-%dT%H:%M:%SZ"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; } \
  2>&1 | tee "$results/gpu.txt" >>"$summary"
dropin=$pack/nccl/libnccl.so.2
module=${TMPDIR:-/tmp}/torch_libcomm_module
# The module's compile (about a minute on many cores) runs while (a) and (b) do.
build_rc=${TMPDIR:-/tmp}/build_torch_module.rc
rm -f "$build_rc"
if wanted build_torch_module; then
  (cd "$here/../.." && bash "$here/build_torch_module.sh" "$pack" "$module"; echo $? >"$build_rc") \
    >"$results/build_torch_module.log" 2>&1 &
fi

# (a) and (b): torch's ProcessGroupNCCL on the drop-in (preloaded: torch's libraries then find
# their nccl* symbols in it).
step nccl_symbols 40 "$python" "$here/nccl_symbols.py" "$dropin"
for ranks in 1 2; do
  step torch_nccl_dropin_$ranks 90 env LD_PRELOAD="$dropin" "$python" "$here/torch_collectives_check.py" \
    --backend nccl --world-size $ranks --timeout 80
done
# The same with the calls made on a side stream of the program's (not torch's default stream).
step torch_nccl_dropin_side_2 90 env LD_PRELOAD="$dropin" "$python" "$here/torch_collectives_check.py" \
  --backend nccl --world-size 2 --timeout 80 --stream side
# (c) torch_libcomm on CUDA tensors, built here against this machine's torch.
step build_torch_module 150 bash -c 'while [ ! -s "$1" ]; do sleep 1; done; cat "$2"; exit "$(cat "$1")"' wait \
  "$build_rc" "$results/build_torch_module.log"
for ranks in 1 2; do
  step torch_libcomm_cuda_$ranks 90 env PYTHONPATH="$module" "$python" "$here/torch_collectives_check.py" \
    --backend libcomm --world-size $ranks --timeout 80
done
step torch_libcomm_cuda_side_2 90 env PYTHONPATH="$module" "$python" "$here/torch_collectives_check.py" \
  --backend libcomm --world-size 2 --timeout 80 --stream side
# (d) the GPU tests and device collectives: IPC, forced staging over shared memory, staging in
# many small pieces (64 KiB slots: piece boundaries), staging because peers are reached over TCP.
step test_cuda_device 40 "$pack/bin/test_cuda_device"
step test_cuda_reduce 40 "$pack/bin/test_cuda_reduce"
step test_cuda_buffers 40 "$pack/bin/test_cuda_buffers"
for ranks in 1 2 3; do step gpu_c_api_stream_$ranks 45 "$pack/bin/commrun" -n $ranks "$pack/bin/gpu_c_api_stream"; done
for ranks in 1 2 3 4; do step gpu_collectives_$ranks 45 "$pack/bin/commrun" -n $ranks "$pack/bin/gpu_collectives"; done
for ranks in 2 4; do
  step gpu_collectives_staged_$ranks 45 env COMM_CUDA_PATH=staging "$pack/bin/commrun" -n $ranks \
    "$pack/bin/gpu_collectives"
done
step gpu_collectives_staged_small_slots_3 45 env COMM_CUDA_PATH=staging COMM_CUDA_STAGING_SLOT=65536 \
  "$pack/bin/commrun" -n 3 "$pack/bin/gpu_collectives"
for ranks in 2 3; do
  step gpu_collectives_tcp_$ranks 45 env COMM_TRANSPORT=tcp "$pack/bin/commrun" -n $ranks "$pack/bin/gpu_collectives"
done
# (e) NVIDIA's NCCL (torch's own) beside the drop-in, one rank.
step torch_nccl_nvidia_1 60 "$python" "$here/torch_collectives_check.py" --backend nccl --world-size 1 --timeout 50
step nccl_one_rank_nvidia 45 "$python" "$here/nccl_one_rank.py" nvidia
step nccl_one_rank_dropin 45 env LD_PRELOAD="$dropin" "$python" "$here/nccl_one_rank.py" dropin
# (f) CPU tensors on the machine's cores: libcomm's all_reduce against torch's Gloo, 2-16 ranks,
# at 8 B and 1 and 16 MiB.
for ranks in 16 2 4 8; do
  step cpu_libcomm_small_$ranks 30 "$pack/bin/commrun" --no-prefix -n $ranks "$pack/bin/all_reduce_perf" -b 8 -e 8 --csv
  step cpu_libcomm_large_$ranks 40 "$pack/bin/commrun" --no-prefix -n $ranks "$pack/bin/all_reduce_perf" -b 1M -e 16M \
    -f 16 -n 20 --csv
  step cpu_gloo_$ranks 60 "$python" "$pack/torch_gloo_bench.py" --world-size $ranks --colls all_reduce --budget 0.2 \
    --max-bytes 16777216
done
# The benches, while time is left.
step ipc_pingpong 30 "$pack/bin/ipc_pingpong" --rounds 2000 --bytes 4096
step ipc_pingpong_large 30 "$pack/bin/ipc_pingpong" --rounds 200 --bytes 268435456
step reduce_kernel_perf 40 "$pack/bin/reduce_kernel_perf"
for ranks in 2 4; do
  step device_all_reduce_perf_$ranks 40 "$pack/bin/commrun" -n $ranks "$pack/bin/device_all_reduce_perf"
done
step device_all_reduce_perf_staged_2 40 env COMM_CUDA_PATH=staging "$pack/bin/commrun" -n 2 \
  "$pack/bin/device_all_reduce_perf"
step gpu_collectives_staged_small_slots_2 45 env COMM_CUDA_PATH=staging COMM_CUDA_STAGING_SLOT=65536 \
  "$pack/bin/commrun" -n 2 "$pack/bin/gpu_collectives"
step gpu_collectives_staged_3 45 env COMM_CUDA_PATH=staging "$pack/bin/commrun" -n 3 "$pack/bin/gpu_collectives"
# What 16 ranks' shared-memory all_reduce is up against: memcpy bandwidth of one copier, and of
# 16 at once (each prints its own; their sum is the machine's).
if [ -e "$pack/memcpy_bench.c" ] && wanted memcpy; then
  gcc -O3 -march=native -o "${TMPDIR:-/tmp}/memcpy_bench" "$pack/memcpy_bench.c"
fi
step memcpy_1 30 "${TMPDIR:-/tmp}/memcpy_bench" 268435456
step memcpy_16 60 bash -c 'for i in $(seq 16); do "$1" 268435456 | sed "s/^/[$i] /" & done; wait' copy \
  "${TMPDIR:-/tmp}/memcpy_bench"
echo "failed steps: $(grep -cE '^== .*: (exit [1-9]|skipped)' "$summary"); $((SECONDS)) s of a ${budget} s budget" |
  tee -a "$summary"
exit $failed
