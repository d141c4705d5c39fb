#!/usr/bin/env bash
# Builds libcomm's fuzz targets (fuzz/) with clang, AddressSanitizer and UBSan in build-fuzz/,
# and runs each for SECONDS (default 600: the longer run docs/security.md describes) over its
# corpus: first the inputs kept in fuzz/corpus/TARGET/ (seeds, and every input that once found
# something), then what the fuzzer finds. Installs clang-14 and its runtime (libclang-rt-14-dev)
# from Debian's archive where missing. Exit 0: nothing found; 1: a finding, kept under
# build-fuzz/findings/ with the command to replay it; 77: clang cannot be had here.
#   bash tools/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(store_server mesh_hello multicast_announcement unique_id)
builddir=${COMM_FUZZ_BUILD:-build-fuzz}

if ! command -v clang++-14 >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "fuzz: clang-14 and libclang-rt-14-dev are needed (apt-get install clang-14 libclang-rt-14-dev)"
    exit 77
  fi
  echo "fuzz: installing clang-14 and libclang-rt-14-dev"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >/dev/null 2>&1 ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev >/dev/null; } ||
    { echo "fuzz: could not install clang-14"; exit 77; }
fi

if [ ! -f "$builddir/build.ninja" ]; then
  CC=clang-14 CXX=clang++-14 meson setup "$builddir" -Dfuzz=true -Dtests=false -Dbench=false -Dexamples=false \
    -Dnccl_abi=false -Dcuda=disabled -Dtorch=disabled -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
# shellcheck disable=SC2046
if ! ninja -C "$builddir" $(printf "fuzz/fuzz_%s " "${targets[@]}") >"$builddir/fuzz-build.log" 2>&1; then
  tail -n 40 "$builddir/fuzz-build.log"
  echo "fuzz: the targets did not build"
  exit 1
fi

export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
found=0
for target in "${targets[@]}"; do
  mkdir -p "$builddir/corpus/$target" "$builddir/findings"
  echo "fuzz: $target for $seconds s"
  if ! "$builddir/fuzz/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$builddir/findings/$target-" "$builddir/corpus/$target" "fuzz/corpus/$target" \
    >"$builddir/findings/$target.log" 2>&1; then
    found=1
    tail -n 60 "$builddir/findings/$target.log"
    echo "fuzz: $target found something; replay: $builddir/fuzz/fuzz_$target $builddir/findings/$target-*"
  else
    grep -E "^stat::number_of_executed_units|^stat::new_units_added" "$builddir/findings/$target.log" |
      sed "s/^/fuzz: $target: /"
  fi
done
[ $found = 0 ] && echo "fuzz: nothing found in ${#targets[@]} target(s), $seconds s each"
exit $found
