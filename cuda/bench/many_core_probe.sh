#!/usr/bin/env bash
# many_core_probe.sh CARRY [results dir]: what stands between libcomm's 16-rank shared-memory
# all_reduce and 3x Gloo's busbw at 16 MiB, measured on the lent many-core machine (which has no
# perf: the profile is by variants and differences). CARRY holds packs of all_reduce_perf and
# commrun (base/ and new/, each bin/ and lib/), the peers' memcpy_bench.c and torch_gloo_bench.py.
# In order of what matters, each step bounded, in two rounds (best of two): the machine's caches
# and cores; memcpy by 1 and by 16 copiers at once; each pack at 16 ranks, the new one also
# with other piece sizes (COMM_SHM_SLOT_BYTES); Gloo at 16 ranks; then 4 and 8 ranks of both.
set -uo pipefail
carry=${1:?usage: many_core_probe.sh CARRY [results dir]}
results=${2:-${OUT:-./probe-results}}
mkdir -p "$results"
log="$results/probe.log"
budget=${PROBE_BUDGET:-420}
python=${PYTHON:-python3}
export COMM_TIMEOUT=20
step() {  # step NAME LIMIT COMMAND...
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if ((left < 10)); then echo "== $name: skipped (budget)" | tee -a "$log"; return; fi
  ((limit > left)) && limit=$left
  echo "== $name" >>"$log"
  local start=$SECONDS
  timeout -k 5 "$limit" bash -c '"$@"' step "$@" >>"$log" 2>&1
  echo "== $name: exit $? in $((SECONDS - start)) s" | tee -a "$log"
}
libcomm_perf() {  # libcomm_perf PACK RANKS [env...]: all_reduce_perf, float32 sum in place, 1-16 MiB
  local pack=$carry/$1 ranks=$2
  shift 2
  env LD_LIBRARY_PATH="$pack/lib" "$@" "$pack/bin/commrun" --no-prefix -n "$ranks" "$pack/bin/all_reduce_perf" \
    ${SIZES:--b 1M -e 16M -f 4} --csv --mode in-place
}
export -f libcomm_perf
export carry
{
  nproc
  grep -m1 "model name" /proc/cpuinfo
  for index in 0 1 2 3; do
    dir=/sys/devices/system/cpu/cpu0/cache/index$index
    [ -d "$dir" ] && echo "L$(cat $dir/level) $(cat $dir/type) $(cat $dir/size) shared by cpus $(cat $dir/shared_cpu_list)"
  done
  cat /sys/devices/system/node/node*/cpulist 2>/dev/null | sed 's/^/numa node cpus: /'
  uname -r
} >"$results/machine.txt" 2>&1
cat "$results/machine.txt"
gcc -O3 -march=native -o /tmp/memcpy_bench "$carry/memcpy_bench.c" || exit 1
for round in 1 2; do
  step "memcpy_1 round $round" 30 /tmp/memcpy_bench 268435456
  step "memcpy_16 round $round" 40 bash -c 'for i in $(seq 16); do "$1" 268435456 | sed "s/^/[$i] /" & done; wait' copy \
    /tmp/memcpy_bench
  step "base_16 round $round" 40 libcomm_perf base 16
  step "new_16 round $round" 40 libcomm_perf new 16
  step "new_16_8B round $round" 20 env SIZES="-b 8 -e 8" bash -c 'libcomm_perf new 16'
  step "new_16_slot64K round $round" 40 libcomm_perf new 16 COMM_SHM_SLOT_BYTES=65536
  step "new_16_slot1M round $round" 40 libcomm_perf new 16 COMM_SHM_SLOT_BYTES=1048576
  step "gloo_16 round $round" 60 "$python" "$carry/torch_gloo_bench.py" --world-size 16 --colls all_reduce \
    --budget 0.2 --max-bytes 16777216
done
for ranks in 4 8; do
  step "base_$ranks" 30 libcomm_perf base "$ranks"
  step "new_$ranks" 30 libcomm_perf new "$ranks"
  step "gloo_$ranks" 50 "$python" "$carry/torch_gloo_bench.py" --world-size "$ranks" --colls all_reduce --budget 0.2 \
    --max-bytes 16777216
done
step "new_16_slot4M" 40 libcomm_perf new 16 COMM_SHM_SLOT_BYTES=4194304
# The short table: every 16 MiB row (libcomm's CSV, Gloo's lines) with its step.
awk '/^== / && !/: exit|: skipped/ {name=$2" "$3" "$4} /^all_reduce,.*,(16777216|8),[0-9]+,float32|gloo,.*,all_reduce,[0-9]+,(16777216|8),/ {print name": "$0}' "$log" |
  tee "$results/summary.txt"
echo "$SECONDS s"
