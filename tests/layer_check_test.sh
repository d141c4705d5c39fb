#!/usr/bin/env bash
# The layer rules (tools/check_layers.py) hold over the sources, and the check does catch a
# forbidden include: an algorithm reaching into a medium, and a bench into a private header.
#   layer_check_test.sh <source root>
set -euo pipefail
root=$1
checker="$root/tools/check_layers.py"
python=/usr/bin/python3
[ -x "$python" ] || python=python3
"$python" "$checker" "$root"

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/algorithms" "$scratch/transport/tcp" "$scratch/bench" "$scratch/libcomm/include/comm"
touch "$scratch/transport/tcp/socket_stream.hpp" "$scratch/algorithms/tuner.hpp" \
  "$scratch/libcomm/include/comm/comm.hpp"
printf '#include "transport/tcp/socket_stream.hpp"\n' >"$scratch/algorithms/ring.cpp"
printf '#include "comm/comm.hpp"\n#include "algorithms/tuner.hpp"\n' >"$scratch/bench/perf.cpp"
if output=$("$python" "$checker" "$scratch"); then
  echo "FAIL: the check passed a tree with forbidden includes:"; echo "$output"; exit 1
fi
for expected in 'algorithms/ring.cpp:1' 'bench/perf.cpp:2'; do
  grep -q "$expected" <<<"$output" || { echo "FAIL: not reported: $expected"; echo "$output"; exit 1; }
done
if grep -q 'bench/perf.cpp:1' <<<"$output"; then echo "FAIL: a public header was refused"; exit 1; fi
echo "the check refuses forbidden includes:"
echo "$output"
