#!/usr/bin/env bash
# The drop-in libnccl.so.2 exports every nccl* symbol PyTorch's CUDA builds import
# (torch_nccl_imports.txt); each missing one is named. Usage: nccl_exports_test.sh LIBNCCL LIST
set -euo pipefail
library=$1
list=$2
exported=$(nm -D --defined-only "$library" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
missing=0
while read -r symbol; do
  case "$symbol" in '#'* | '') continue ;; esac
  if ! grep -qx "$symbol" <<<"$exported"; then
    echo "MISSING $symbol: torch links it, $library does not export it" >&2
    missing=$((missing + 1))
  fi
done <"$list"
count=$(grep -cv '^#' "$list")
echo "$((count - missing)) of $count symbols torch imports are exported by $library"
[ "$missing" -eq 0 ]
