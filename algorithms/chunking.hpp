// How the pipelined algorithms cut a run of elements into chunks that travel independently.
#pragma once

#include <algorithm>
#include <cstddef>

#include "collective_context.hpp"

namespace comm::algorithms {

// `count` elements cut into `chunks` nearly equal chunks.
struct Chunking {
  std::size_t count;
  std::size_t chunks;
  std::size_t begin(std::size_t chunk) const { return count * chunk / chunks; }
  std::size_t length(std::size_t chunk) const { return begin(chunk + 1) - begin(chunk); }
};

// Chunks per run: enough that each is at most chunk_bytes, never more than the tag space of one
// call allows for `steps` steps.
inline std::size_t chunks_for(std::size_t bytes, std::size_t chunk_bytes, std::size_t steps) {
  std::size_t wanted = std::max<std::size_t>(1, (bytes + chunk_bytes - 1) / std::max<std::size_t>(chunk_bytes, 1));
  std::size_t limit = std::max<std::size_t>(1, (kStepsPerCall - 1) / std::max<std::size_t>(steps, 1));
  return std::min(wanted, limit);
}

}  // namespace comm::algorithms
