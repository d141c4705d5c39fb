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

// ring_all_reduce goes round in rounds of at most this much per segment. Measured over TCP, 2
// ranks, 256 MiB all_reduce, alternating rounds: 4 MiB segments per round 1.84-2.45 GB/s busbw
// against 1.51-1.78 for the whole buffer at once (7 of 7 faster), 16 MiB unchanged; 2 and 8 MiB
// per round came out alike.
constexpr std::size_t kRingRoundSegmentBytes = 4 * 1024 * 1024;

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
