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
programs=(tests/test_cuda_device tests/test_cuda_reduce tests/test_cuda_buffers tests/gpu_collectives tests/gpu_c_api_stream
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
# libcomm's static libraries, to build torch_libcomm there against its torch
# (build_torch_module.sh), and the drop-in libnccl.so.2 for torch's ProcessGroupNCCL.
mkdir -p "$pack/static" "$pack/nccl"
for library in "$builddir"/libcomm/src/libcomm_c_api.a "$builddir"/libcomm/src/libcomm_api.a \
               "$builddir"/libcomm/base/libcomm_base.a "$builddir"/transport/libcomm_transport*.a \
               "$builddir"/rendezvous/libcomm_rendezvous.a "$builddir"/algorithms/libcomm_*.a "$builddir"/cuda/libcomm_cuda.a; do
  [ -e "$library" ] || continue
  if [ "$(head -c 7 "$library")" = '!<thin>' ]; then
    # A thin archive names objects in the build tree: a real one travels.
    # shellcheck disable=SC2046  # (ar names them from here, one a line, without spaces)
    ar qcs "$pack/static/$(basename "$library")" $(ar t "$library")
  else
    cp "$library" "$pack/static/"
  fi
  strip --strip-debug "$pack/static/$(basename "$library")"
done
# The static CUDA runtime libcomm_cuda.a was built with, for the module's link there.
cudart=${CUDA_HOME:-/usr/local/cuda}/lib64/libcudart_static.a
if [ -e "$pack/static/libcomm_cuda.a" ] && [ -e "$cudart" ]; then
  mkdir -p "$pack/cuda"
  cp "$cudart" "$pack/cuda/"
fi
for library in libcrypto.so.3; do  # the module's own needs beyond the binaries'
  path=$(ldconfig -p | awk -v name="$library" '$1 == name {print $NF; exit}')
  [ -n "$path" ] && cp -L "$path" "$pack/lib/"
done
if [ -e "$builddir/nccl_abi/libnccl.so.2" ]; then
  cp -L "$builddir/nccl_abi/libnccl.so.2" "$pack/nccl/libnccl.so.2"
  strip --strip-unneeded "$pack/nccl/libnccl.so.2"
fi
# The Gloo side of the many-core comparison (the peers' script, shared beside the checkout).
# and the peers' memcpy bench, for the memory bandwidth those 16 ranks share.
peers="$(dirname "$0")/../../../shared/peers"
for script in torch_gloo_bench.py memcpy_bench.c; do
  [ -e "$peers/$script" ] && cp "$peers/$script" "$pack/"
done
du -sh "$pack"
