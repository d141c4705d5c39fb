// Recursive halving-doubling all_reduce (Rabenseifner's): a reduce-scatter by recursive halving,
// then an all-gather by recursive doubling, in 2 log2(p) steps that together move the ring's
// 2n(p-1)/p bytes per rank. Partners are paired at distance 1 first, so on hosts of contiguous
// ranks the large early exchanges stay inside a host and only the later, smaller ones cross: a
// hierarchy by construction, without the ring's 2(p-1) steps of latency. Ranks beyond the largest
// power of two fold their data into a partner first and get the result back at the end.
#pragma once

#include <cstddef>

#include "algorithms/collective_context.hpp"
#include "comm/types.hpp"

namespace comm::algorithms {

// In place on data (count elements); each element's sum is made by one rank in one order, so the
// result is bitwise identical on every rank. The halvings travel in chunks of about chunk_bytes,
// each reduced while the next arrive.
void halving_doubling_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype,
                                 ReduceOp op, std::size_t chunk_bytes);

}  // namespace comm::algorithms
