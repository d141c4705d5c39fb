#!/usr/bin/env bash
# Stages `meson install` into a scratch directory, builds an outside program against the staged
# headers and library through pkg-config (as a user would after a real install), and runs it
# under the staged commrun. Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
stage=$(mktemp -d /tmp/comm-install-test.XXXXXX)
trap 'rm -rf "$stage"' EXIT
DESTDIR="$stage" meson install -C "$build" --no-rebuild --quiet >/dev/null
pcdir=$(dirname "$(find "$stage" -name comm.pc | head -n 1)")
libdir=$(dirname "$(find "$stage" -name 'libcomm.so' | head -n 1)")
bindir=$(dirname "$(find "$stage" -name commrun -type f | head -n 1)")
export PKG_CONFIG_PATH="$pcdir" PKG_CONFIG_SYSROOT_DIR="$stage"
c++ -std=c++20 "$source/examples/hello.cpp" $(pkg-config --cflags --libs comm) -o "$stage/outside"
LD_LIBRARY_PATH="$libdir" "$bindir/commrun" -n 3 "$stage/outside" > "$stage/output"
cat "$stage/output"
for rank in 0 1 2; do
  grep -q "^\[$rank\] hello from rank $rank of 3" "$stage/output"
done
echo "installed headers, library, pkg-config file and commrun work for an outside program"

# A C program, through the same pkg-config file and the C compiler (comm/comm.h is C99).
cc -std=c99 -pedantic -Werror "$source/examples/c/all_reduce.c" $(pkg-config --cflags --libs comm) -o "$stage/outside_c"
LD_LIBRARY_PATH="$libdir" "$bindir/commrun" -n 3 "$stage/outside_c" "$stage/id" > "$stage/output_c"
cat "$stage/output_c"
for rank in 0 1 2; do
  grep -q "^\[$rank\] rank $rank of 3: all_reduce of 1048576 floats: right" "$stage/output_c"
done
echo "a C program builds with cc \$(pkg-config --cflags --libs comm) and runs"

# The drop-in libnccl, when built: a program written for NCCL, compiled against the installed
# nccl.h and linked with -lnccl, runs on libcomm with the loader pointed at libcomm-nccl/.
ncclheader=$(find "$stage" -path '*libcomm-nccl/nccl.h' | head -n 1)
if [ -n "$ncclheader" ]; then
  nccllib=$(dirname "$(find "$stage" -name 'libnccl.so.2' | head -n 1)")
  cc -std=c99 -D_POSIX_C_SOURCE=200809L "$source/tests/c/test_nccl_abi.c" "$source/tests/c/c_check.c" \
    -I"$(dirname "$ncclheader")" $(pkg-config --cflags comm) -L"$nccllib" -lnccl -lm -o "$stage/outside_nccl"
  LD_LIBRARY_PATH="$nccllib" "$stage/outside_nccl" | tee "$stage/output_nccl"
  grep -q "0 failed" "$stage/output_nccl"
  # Captured first: grep -q stops reading at its match, and under pipefail the SIGPIPE that can
  # then end ldd failed this test once.
  libraries=$(LD_LIBRARY_PATH="$nccllib" ldd "$stage/outside_nccl")
  grep -q "$nccllib/libnccl.so.2" <<<"$libraries"
  echo "an NCCL program built against the installed nccl.h runs on libcomm's libnccl.so.2"
fi

# The torch backend, when built: installed where /usr/bin/python3 looks, and importable there.
module=$(find "$stage" -name 'torch_libcomm*.so' | head -n 1)
if [ -n "$module" ]; then
  moduledir=$(dirname "$module")
  /usr/bin/python3 -c "import sys; sys.exit(0 if sys.argv[1] in sys.path else 1)" "${moduledir#"$stage"}" || {
    echo "torch_libcomm installed in ${moduledir#"$stage"}, which /usr/bin/python3 does not search" >&2
    exit 1
  }
  PYTHONPATH="$moduledir" LD_LIBRARY_PATH="$libdir" /usr/bin/python3 -c \
    "import torch_libcomm, torch.distributed as dist; assert dist.Backend('libcomm') == 'libcomm'"
  echo "the installed torch_libcomm registers the libcomm backend"
fi
