// How the pipelined algorithms cut a run of elements into chunks that travel independently.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "algorithms/collective_context.hpp"

namespace comm::algorithms {

// `count` elements cut into `chunks` nearly equal chunks.
struct Chunking {
  std::size_t count;
  std::size_t chunks;
  std::size_t begin(std::size_t chunk) const { return count * chunk / chunks; }
  std::size_t length(std::size_t chunk) const { return begin(chunk + 1) - begin(chunk); }
};

// Chunks per run: enough that each is at most chunk_bytes, never more than the algorithm's part
// of the call's tag space (CollectiveContext::step_space) allows for `steps` steps.
inline std::size_t chunks_for(std::size_t bytes, std::size_t chunk_bytes, std::size_t steps,
                              std::uint64_t step_space = kStepsPerCall) {
  std::size_t wanted = std::max<std::size_t>(1, (bytes + chunk_bytes - 1) / std::max<std::size_t>(chunk_bytes, 1));
  std::size_t limit = std::max<std::size_t>(1, (step_space - 1) / std::max<std::size_t>(steps, 1));
  return std::min(wanted, limit);
}

// The ring's numbering (ring.hpp), shared by the host ring and the staged GPU ring: `count`
// elements in `size` segments (segment p = elements [count*p/size, count*(p+1)/size), owned by
// rank p), each cut into `chunks` chunks; at step s rank r sends segment r-s-1 and receives
// segment r-s-2. `steps` is how many steps one call runs (it bounds the chunks by the tag space).
struct RingLayout {
  RingLayout(const CollectiveContext& context, std::size_t count, std::size_t element, std::size_t chunk_bytes,
             std::size_t steps)
      : context(context), count(count), element(element) {
    auto n = static_cast<std::size_t>(context.size);
    std::size_t longest = (count + n - 1) / n;
    chunks = chunks_for(longest * element, chunk_bytes, steps, context.step_space);
    slot_bytes = ((longest + chunks - 1) / chunks) * element;
  }
  int send_segment(int step) const { return context.wrap(context.rank - step - 1); }
  int receive_segment(int step) const { return context.wrap(context.rank - step - 2); }
  // (byte offset in the buffer, bytes) of one chunk of one segment.
  std::pair<std::size_t, std::size_t> chunk_of(int segment, std::size_t chunk) const {
    std::size_t begin = segment_begin(segment);
    Chunking cut{segment_begin(segment + 1) - begin, chunks};
    return {(begin + cut.begin(chunk)) * element, cut.length(chunk) * element};
  }
  // Tag step of a chunk at the call's `index`-th step.
  std::uint64_t tag(int index, std::size_t chunk) const { return static_cast<std::uint64_t>(index) * chunks + chunk; }

  const CollectiveContext& context;
  std::size_t count, element;
  std::size_t chunks = 1;
  std::size_t slot_bytes = 0;  // the largest chunk of any segment (segments differ by one element)

 private:
  std::size_t segment_begin(int segment) const {
    return count * static_cast<std::size_t>(segment) / static_cast<std::size_t>(context.size);
  }
};

}  // namespace comm::algorithms
