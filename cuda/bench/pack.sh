#!/usr/bin/env bash
# pack.sh [builddir] [pack dir]: gathers what the GPU machine needs to run the GPU tests and
# benches into one folder (default .device-carry/gpu): the stripped test and bench binaries,
# which link the CUDA runtime statically, and the shared libraries they need beyond glibc and
# libstdc++ (e.g. Debian's spdlog and fmt, which that machine lacks). Then, there:
#   bash cuda/bench/run.sh [pack dir] [results dir]
set -euo pipefail
builddir=${1:-build}
pack=${2:-.device-carry/gpu}
ninja -C "$builddir" >/dev/null
rm -rf "$pack"
mkdir -p "$pack/bin" "$pack/lib"
programs=(tests/test_cuda_device tests/test_cuda_reduce tests/test_cuda_buffers tests/gpu_collectives
          cuda/bench/reduce_kernel_perf cuda/bench/ipc_pingpong cuda/bench/device_all_reduce_perf bench/all_reduce_perf
          rendezvous/programs/commrun)
for program in "${programs[@]}"; do
  cp "$builddir/$program" "$pack/bin/"
  strip "$pack/bin/$(basename "$program")"
  # Libraries outside the C/C++ runtime travel too.
  ldd "$builddir/$program" | awk '/=> \// {print $3}' | while read -r library; do
    case "$(basename "$library")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*) ;;
      libcomm.so*) cp -L "$library" "$pack/lib/" && strip --strip-unneeded "$pack/lib/$(basename "$library")" ;;
      *) cp -L "$library" "$pack/lib/" ;;
    esac
  done
done
du -sh "$pack"
