// Algorithms for small messages, where the number of rounds matters and the bytes do not:
// recursive doubling for all-reduce (log2(n) exchanges of the whole buffer), and the
// dissemination barrier (log2(n) rounds of empty messages).
//
// Non-power-of-two sizes fold first: with p the largest power of two <= n, ranks p..n-1 hand
// their data to ranks 0..n-p-1, the first p ranks run the doubling, and the extra ranks get the
// result back. In every exchange both partners compute (lower rank's data) op (higher rank's),
// so all ranks compute the same expression tree and hold bitwise-identical bytes.
#pragma once

#include <cstddef>

#include "algorithms/collective_context.hpp"
#include "comm/types.hpp"

namespace comm::algorithms {

void recursive_doubling_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype,
                                   ReduceOp op);
void dissemination_barrier(const CollectiveContext& context);

}  // namespace comm::algorithms
