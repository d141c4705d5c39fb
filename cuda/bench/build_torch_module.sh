#!/usr/bin/env bash
# build_torch_module.sh PACK OUT: builds torch_libcomm's extension against the torch that
# python3 imports here (on the GPU machine: its torch with CUDA, which this project's pinned
# CPU torch is not), from libcomm's static libraries that pack.sh carried (PACK/static, built
# with CUDA on the development machine) and the shared libraries beside them (PACK/lib). The
# GPU machine has g++ and torch's headers but not libcomm's dependencies' headers: the module
# uses only libcomm's public API, so it compiles from torch_backend/ and libcomm/include alone.
# Then: PYTHONPATH=OUT python3 -c "import torch_libcomm".
set -euo pipefail
pack=$1
out=$2
python=${PYTHON:-python3}
cuda_include=
mapfile -t flags < <("$python" torch_backend/torch_build_flags.py)
includes=()
IFS=';' read -ra directories <<<"${flags[1]}"
for directory in "${directories[@]}"; do includes+=(-isystem "$directory"); done
torch_lib=${flags[2]}
extra=()
if [ -n "${flags[4]:-}" ] && compgen -G "$pack/static/libcomm_cuda.a" >/dev/null; then
  # CUDA's headers from the machine's toolkit, else from the CUDA wheels beside torch; its static
  # runtime from the pack (the one libcomm_cuda.a was built with), else the toolkit's.
  cuda_include=
  wheels=$("$python" -c "import os, nvidia; print(os.path.dirname(list(nvidia.__path__)[0]))" 2>/dev/null || true)
  for directory in "${CUDA_HOME:-/usr/local/cuda}/include" /usr/local/cuda/include ${wheels:+"$wheels"/nvidia/*/include}; do
    if [ -e "$directory/cuda_runtime_api.h" ]; then cuda_include=$directory; break; fi
  done
  [ -n "$cuda_include" ] || { echo "build_torch_module: no cuda_runtime_api.h found" >&2; exit 1; }
  cuda_root=${CUDA_HOME:-/usr/local/cuda}
  cudart=$pack/cuda/libcudart_static.a
  [ -e "$cudart" ] || cudart=$cuda_root/lib64/libcudart_static.a
  [ -e "$cudart" ] || cudart=$cuda_root/targets/x86_64-linux/lib/libcudart_static.a
  extra=("$torch_lib/libc10_cuda.so" "$torch_lib/libtorch_cuda.so" "$cudart" -ldl -lrt)
fi
python_include=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
suffix=$("$python" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
mkdir -p "$out/torch_libcomm"
shared=()
for library in "$pack"/lib/*.so*; do  # libcomm itself comes from the static libraries: one copy
  case "$(basename "$library")" in libcomm.so*) continue ;; esac
  [ -e "$library" ] && shared+=("$library")
done
compile=(-DTORCH_LIBCOMM_CUDA=1)
[ ${#extra[@]} -gt 0 ] || compile=()
mkdir -p "$out/objects"
for source in torch_backend/*.cpp; do  # one compiler per source, side by side
  g++ -std=c++20 -O2 -fPIC -D_GLIBCXX_USE_CXX11_ABI="${flags[3]}" "${compile[@]}" -Ilibcomm/include \
    -isystem "$python_include" "${includes[@]}" ${cuda_include:+-isystem "$cuda_include"} \
    -c "$source" -o "$out/objects/$(basename "$source" .cpp).o" &
done
wait_all=0
for job in $(jobs -p); do wait "$job" || wait_all=1; done
[ "$wait_all" -eq 0 ] || { echo "build_torch_module: a source did not compile" >&2; exit 1; }
g++ -shared -o "$out/torch_libcomm/_C$suffix" "$out"/objects/*.o \
  -Wl,--start-group "$pack"/static/*.a -Wl,--end-group \
  "$torch_lib/libtorch.so" "$torch_lib/libtorch_cpu.so" "$torch_lib/libc10.so" "$torch_lib/libtorch_python.so" \
  "${extra[@]}" "${shared[@]}" -Wl,-rpath,"$(cd "$pack/lib" && pwd)" -lpthread
cp torch_backend/torch_libcomm/__init__.py "$out/torch_libcomm/"
echo "built $out/torch_libcomm/_C$suffix against torch ${flags[0]} (cuda '${flags[4]:-}')"
