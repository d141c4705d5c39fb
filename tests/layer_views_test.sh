#!/usr/bin/env bash
# The build enforces the layers: each layer compiles against its include view (meson.build,
# tools/include_view.py), and through it the compiler finds what the layer may include and
# nothing else. Each case compiles one include line against one view: the allowed ones must
# compile, the forbidden ones must fail with "No such file", though every header named exists.
#   layer_views_test.sh <source root> <build root> <compiler command...>
set -euo pipefail
root=$(cd "$1" && pwd) views=$(cd "$2" && pwd)/include-views
shift 2
compiler=("$@")
failures=0
# From an empty folder: a quoted include is looked for beside the including file (here, standard
# input: the working folder) before the include path.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
check() {  # check VIEW ok|refused HEADER
  local view=$1 expected=$2 header=$3 output
  [ -f "$root/$header" ] || [ -f "$root/libcomm/include/$header" ] || {
    echo "FAIL: $header does not exist: the case proves nothing"; failures=$((failures + 1)); return; }
  if output=$(printf '#include "%s"\n' "$header" |
      "${compiler[@]}" -std=c++20 -fsyntax-only -DASIO_STANDALONE -I"$views/$view" -x c++ - 2>&1); then
    outcome=ok
  elif grep -q "<stdin>:1:.*$header: No such file" <<<"$output"; then
    outcome=refused
  else
    echo "FAIL: $view + $header: neither compiled nor refused:"; echo "$output" | head -5
    failures=$((failures + 1)); return
  fi
  if [ "$outcome" != "$expected" ]; then
    echo "FAIL: the $view view: $header $outcome, expected $expected"; failures=$((failures + 1))
  else
    echo "ok   the $view view: $header $outcome"
  fi
}
check base refused rendezvous/join.hpp
check base refused comm/process_group.hpp
check rendezvous ok rendezvous/join.hpp
check rendezvous refused transport/transport.hpp
check transport ok transport/connect.hpp
check transport ok comm/store_interface.hpp
check transport refused comm/store.hpp            # the stores themselves: rendezvous's
check transport refused rendezvous/join.hpp
check transport refused algorithms/ring.hpp
check transport_tcp ok transport/tcp/tcp_mesh.hpp
check transport_tcp refused transport/connect.hpp  # a medium never reaches up into the mesh
check transport_tcp refused transport/shm/shm_stream.hpp
check transport_shm ok transport/shm/shm_stream.hpp
check transport_shm refused transport/tcp/socket_stream.hpp
check transport_shm refused transport/message/stream_connection.hpp  # a medium sees medium.hpp, not the layer above
check transport_tcp ok transport/medium.hpp
check transport_memory ok transport/memory/memory_stream.hpp
check transport_memory refused transport/tcp/socket_stream.hpp
check transport_memory refused transport/message/mesh_transport.hpp
check transport_message refused transport/memory/memory_stream.hpp
check transport_tcp refused transport/media.hpp  # the list of media is the set-up's
# The message layer sees the media's seam (medium.hpp), never a medium (issue 45).
check transport_message ok transport/message/mesh_transport.hpp
check transport_message ok transport/medium.hpp
check transport_message refused transport/tcp/lazy_connector.hpp
check transport_message refused transport/tcp/socket_stream.hpp
check transport_message refused transport/shm/shm_stream.hpp
check transport_message refused transport/shm/shared_arena.hpp
check transport_message refused transport/connect.hpp
check algorithms ok algorithms/ring.hpp
check algorithms ok transport/transport.hpp
check algorithms refused transport/tcp/socket_stream.hpp
check algorithms refused transport/message/mesh_transport.hpp
check algorithms refused libcomm/src/group.hpp
check api ok libcomm/src/group.hpp
check c_api ok comm/comm.hpp
check c_api refused libcomm/src/group.hpp
check c_api refused transport/transport.hpp
echo "$failures case(s) failed"
[ "$failures" -eq 0 ]
