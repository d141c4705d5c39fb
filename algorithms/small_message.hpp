// Algorithms for small messages, where the number of rounds matters and the bytes do not:
// recursive doubling for all-reduce (log2(n) exchanges of the whole buffer), the dissemination
// barrier (log2(n) rounds of empty messages), and the dissemination broadcast (the barrier's
// rounds, the data riding on the messages of the ranks that have it).
//
// In each of them every rank hears, directly or through the peers it heard from, from every
// rank before it returns; since every message carries its call's fingerprint, a rank that
// returns knows every rank made the same call. confirm_call gives that to the algorithms
// where some ranks only send (a tree broadcast's root): it is the barrier, run on steps of the
// call that no algorithm numbers.
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
// reduce: the all-reduce's rounds; ranks other than root keep their input, as the tree's do.
void recursive_doubling_reduce(const CollectiveContext& context, void* data, std::size_t count, DType dtype,
                               ReduceOp op, int root);
void dissemination_barrier(const CollectiveContext& context);
// Round k: each rank sends to rank + 2^k and hears from rank - 2^k (counted from root); a
// message carries the data where its sender has it and its receiver does not yet, else nothing.
// Every rank has it after ceil(log2(n)) rounds, the depth of the binomial tree.
void dissemination_broadcast(const CollectiveContext& context, void* data, std::size_t bytes, int root);

// On the steps algorithms leave alone (kConfirmSteps). After an algorithm some of whose ranks return having heard from
// only some others: returns once every rank has finished its part of the same call, or throws the MismatchError of a
// rank whose call differs. Through the group's shared segment where it has one (`arena`: the
// shared-memory barrier, which compares the calls' fingerprints there), else over messages.
void confirm_call(const CollectiveContext& context, transport::SharedArena* arena);

}  // namespace comm::algorithms
