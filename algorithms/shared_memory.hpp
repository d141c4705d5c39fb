// Collectives through a SharedArena, for groups whose ranks all share one host: every rank
// copies its input into its own slot once, then reads its peers' slots directly. A ring moves
// each byte through 2(n-1)/n hops, each a copy into and a copy out of a pair's ring; here each
// rank reads and writes every byte a fixed number of times whatever n is, which is what keeps
// oversubscribed ranks (more ranks than cores) from collapsing. Ranks synchronise by polling
// one flag line per peer, so a small all_reduce costs one cache-line transfer per peer rather
// than a message through the transport.
#pragma once

#include <cstddef>

#include "algorithms/collective_context.hpp"
#include "comm/types.hpp"

namespace comm::algorithms {

// In place. Pieces of up to kSlotBytes go through the arena's two buffers in turn. Up to 16 KiB
// (and always on two ranks) a piece is reduced whole by every rank (one synchronisation); larger
// ones are reduced by segment, each rank owning one, then copied out by all (two synchronisations).
// Either way the result is bitwise identical on every rank (one order of operations).
void shared_memory_all_reduce(const CollectiveContext& context, transport::SharedArena& arena, void* data,
                              std::size_t count, DType dtype, ReduceOp op);

// Waits at the arena until every rank of the group arrived (a barrier).
void shared_memory_barrier(const CollectiveContext& context, transport::SharedArena& arena);

// The synchronisation these are built of, for other users of an arena (the GPU staging of
// algorithms/device/staged_collectives.cpp). A rank publishes a flag at an epoch (claimed with
// arena.next_epoch(), the same sequence on every rank) and waits until every rank has: Arrived
// (its slot of the epoch's buffer is filled; also checks that every rank is in the same call)
// or Reduced (its part of the result area is written). Dead peers, aborted groups, peers in
// another call and timeouts end the wait with an error.
enum class Flag { Arrived, Reduced };
void publish_and_wait(const CollectiveContext& context, transport::SharedArena& arena, Flag which, std::uint64_t epoch);
void wait_all(const CollectiveContext& context, transport::SharedArena& arena, Flag which, std::uint64_t epoch);

}  // namespace comm::algorithms
