#!/usr/bin/env bash
# Runs an NCCL program, unchanged, on another build of libcomm's libnccl.so.2: the loader is
# pointed at DIRECTORY, and the check that it really loads the library there comes first.
# Usage: abi_swap.sh PROGRAM DIRECTORY
set -euo pipefail
program=$1
directory=$2
libraries=$(LD_LIBRARY_PATH="$directory" ldd "$program")
if ! grep -q "$directory/libnccl.so.2" <<<"$libraries"; then
  echo "$program does not load $directory/libnccl.so.2 with LD_LIBRARY_PATH set:" >&2
  echo "$libraries" >&2
  exit 1
fi
LD_LIBRARY_PATH="$directory" "$program"
