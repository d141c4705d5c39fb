// Bruck's all-to-all for uneven blocks: ceil(log2 n) exchanges instead of n - 1, each block
// forwarded up to log2 n times. For many ranks and small blocks, where the number of messages,
// not the bytes, is the time.
#pragma once

#include <cstddef>
#include <span>

#include "algorithms/collective_context.hpp"

namespace comm::algorithms {

// all_to_all_v as direct_all_to_all_v takes it (counts in elements of `element` bytes, blocks
// packed in rank order, `input` not `output`). In step k every rank sends the blocks whose
// distance to their destination has bit k set to rank + 2^k: first their sizes, then the bytes,
// since a block's size is known only to its two ends. A block that arrives with another size than
// its receiver's output_counts says is a MismatchError there.
void bruck_all_to_all_v(const CollectiveContext& context, void* output, std::span<const std::size_t> output_counts,
                        const void* input, std::span<const std::size_t> input_counts, std::size_t element);

}  // namespace comm::algorithms
