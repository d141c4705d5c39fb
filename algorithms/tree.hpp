// Binomial trees: log2(n) rounds, each rank sending or receiving whole buffers. The latency
// term is optimal, the bandwidth term is not (the root's link carries the data log2(n) times),
// so the tuner uses trees for small messages.
//
// Ranks are renumbered relative to the root (virtual rank = rank - root): in the broadcast,
// virtual rank v receives from v - lowbit(v) and sends to v + 2^k for 2^k < lowbit(v).
// The reduce is the same tree run backwards. tree_all_reduce = reduce to rank 0 + broadcast, so
// every rank holds rank 0's bytes.
#pragma once

#include <cstddef>

#include "algorithms/collective_context.hpp"
#include "comm/types.hpp"

namespace comm::algorithms {

void tree_broadcast(const CollectiveContext& context, void* data, std::size_t bytes, int root);
// data: this rank's input; on root the result. Non-roots keep their input.
void tree_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op, int root);
void tree_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op);

}  // namespace comm::algorithms
