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
