// Making a SharedArena (transport/shared_arena.hpp) in POSIX shared memory, for the transport
// to hand out (MeshTransport::map_shared_arena).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "comm/store_interface.hpp"
#include "transport/shared_arena.hpp"

namespace comm::transport {

// Collective over the group's ranks (every one calls it, in the same order). `key` tells the
// group's arenas apart in the store. Null on every rank when one of them could not make or map
// the segment (logged). `slot_bytes` counts on rank 0 only: the others take the size it publishes.
std::unique_ptr<SharedArena> create_shared_arena(Store& store, const std::string& key, int rank, int size,
                                                 std::chrono::milliseconds timeout, std::size_t slot_bytes);

}  // namespace comm::transport
