// Ring all-reduce: a reduce-scatter then an all-gather around the ring rank -> rank + 1.
// Each rank ends up with the bytes of the segment's owner, so every rank holds bitwise the
// same result.
#pragma once

#include <cstddef>

#include "collective_context.hpp"
#include "comm/types.hpp"

namespace comm::algorithms {

void ring_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op);

}  // namespace comm::algorithms
