// The ring family: ranks pass data to rank + 1 and take it from rank - 1, so every link carries
// the same load and the bandwidth term is optimal (2(n-1)/n of the data per rank for an
// all-reduce). Large buffers are cut into chunks that flow through the ring independently: a
// chunk is forwarded as soon as it has been received (and reduced), so sending, receiving and
// reducing overlap.
//
// all_reduce, reduce_scatter and all_gather are one pipeline (ring_pipeline) run over different
// step ranges: steps 0..n-2 reduce-scatter, steps n-1..2n-3 all-gather. Segment p of the buffer
// is owned (fully reduced first) by rank p, which is what reduce_scatter and all_gather need.
// broadcast and reduce are chains root -> root+1 -> ... (and back for reduce), pipelined by chunk.
#pragma once

#include <cstddef>

#include "algorithms/collective_context.hpp"
#include "comm/types.hpp"

namespace comm::algorithms {

// In place on data (count elements). Every rank ends with the owner's bytes of each segment:
// bitwise identical everywhere.
void ring_all_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op,
                     std::size_t chunk_bytes);
// data holds size * block_count elements on entry; on return block `rank` of it is reduced
// (other blocks hold partial sums).
void ring_reduce_scatter(const CollectiveContext& context, void* data, std::size_t block_count, DType dtype,
                         ReduceOp op, std::size_t chunk_bytes);
// data holds size blocks of block_bytes; block `rank` is this rank's; on return all are filled.
void ring_all_gather(const CollectiveContext& context, void* data, std::size_t block_bytes, std::size_t chunk_bytes);
// Pipelined chain from root.
void ring_broadcast(const CollectiveContext& context, void* data, std::size_t bytes, int root, std::size_t chunk_bytes);
// Pipelined chain towards root: data is this rank's input, and on root the result. Non-roots
// keep their input (partial results go through scratch).
void ring_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype, ReduceOp op, int root,
                 std::size_t chunk_bytes);

}  // namespace comm::algorithms
